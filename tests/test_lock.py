"""The lock: the README's commands install through it, it covers what they install, and it is one lock.

``requirements/constraints.txt`` pins every distribution the test extra resolves; a requirement of the
project's extras that the lock does not name would float, and the suite's result would again depend on
the day it was installed. ``requirements/mcp1.txt`` does the same for the mcp 1.x overlay.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11, as CI and the lock's resolution

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "constraints.txt"
MCP1_LOCK = ROOT / "requirements" / "mcp1.txt"


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not a name==version pin"
            pins[canonicalize_name(name)] = version
    return pins


def _extra(name: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["optional-dependencies"][name]]


def test_readme_commands_install_through_the_lock() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv && ")]
    assert len(commands) == 2
    for command in commands:
        assert ".venv/bin/pip install -c requirements/constraints.txt -e '.[test]'" in command


def test_the_lock_pins_every_requirement_of_the_installed_extras() -> None:
    pins = _pins(LOCK)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in ("test", "docs", "dev"):
        wanted += [r for r in _extra(extra) if canonicalize_name(r.name) != "pytest-mcpfaults"]
    missing = sorted({r.name for r in wanted if canonicalize_name(r.name) not in pins})
    assert not missing, f"the lock names no version of {missing}: run python3 requirements/refresh.py"
    outside = sorted(
        f"{r.name}=={pins[canonicalize_name(r.name)]} (wants {r.specifier})"
        for r in wanted
        if pins[canonicalize_name(r.name)] not in r.specifier
    )
    assert not outside, f"the lock's pins fall outside pyproject's ranges: {outside}"


def test_the_mcp1_lock_matches_the_overlay_and_tox_range() -> None:
    from mcp1_overlay import MCP1

    spec = Requirement(MCP1).specifier
    assert _pins(MCP1_LOCK)["mcp"] in spec
    refresh = (ROOT / "requirements" / "refresh.py").read_text()
    assert f'MCP1_RANGE = "{MCP1}"' in refresh
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    assert MCP1 in tox["testenv:mcp1"]["deps"].split()
    assert "-c {toxinidir}/requirements/mcp1.txt" in tox["testenv:mcp1"]["install_command"]


def test_tox_runs_locked_by_default_and_latest_unlocked() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    assert "-c {toxinidir}/requirements/constraints.txt" in tox["testenv"]["install_command"]
    latest = tox["testenv:latest"]
    assert "-c " not in latest["install_command"] and "--upgrade" in latest["install_command"]
    # every env that pins its own versions opts out of the lock, or pip refuses the conflicting pins
    for section in tox.sections():
        deps = tox[section].get("deps", "")
        if re.search(r"==", deps) and section != "testenv:mcp1":
            assert "-c " not in tox[section].get("install_command", "{[fw]install_command}"), section


def test_the_lock_says_when_and_where_it_was_resolved() -> None:
    header = LOCK.read_text().splitlines()[:2]
    assert re.search(r"Resolved \d{4}-\d{2}-\d{2} on Python 3\.\d+", header[1])
    assert SpecifierSet(">=3.10").contains(re.search(r"Python (3\.\d+)", header[1])[1])  # type: ignore[index]
