"""docs/quickstart.md's "What to install" stays true: the plugin needs no mcp (so it installs beside a
harness whose lock pins mcp 1.x), the extras a user installs are the ones the package declares, and
each brings what its modules import."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quickstart.md"
USER_EXTRAS = {"hypothesis": "pytest_mcpfaults.strategies", "inprocess": "pytest_mcpfaults.inprocess"}
PROJECT_EXTRAS = {"test", "dev", "docs"}  # this repository's own development environments


def _requires(extra: str | None) -> list[str]:
    """The requirement names the package declares for ``extra`` (``None``: the base install)."""
    names = []
    for req in metadata.requires("pytest-mcpfaults") or []:
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if (marker[1] if marker else None) == extra:
            names.append(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower())
    return names


def test_the_extras_are_the_users_and_the_projects() -> None:
    declared = set(metadata.metadata("pytest-mcpfaults").get_all("Provides-Extra") or [])
    assert declared == set(USER_EXTRAS) | PROJECT_EXTRAS


@pytest.mark.parametrize("extra", [None, *USER_EXTRAS])
def test_no_user_install_brings_mcp(extra: str | None) -> None:
    assert not {"mcp", "fastmcp"} & set(_requires(extra)), _requires(extra)


def test_the_package_imports_no_mcp() -> None:
    """Every module of the package imports with ``mcp`` made unimportable (strategies, stateful and
    inprocess included: their extras are installed here)."""
    code = """
import pkgutil, sys
sys.modules["mcp"] = None  # `import mcp` (and any mcp.*) now raises ImportError
import pytest_mcpfaults
names = [m.name for m in pkgutil.walk_packages(pytest_mcpfaults.__path__, "pytest_mcpfaults.")]
for name in names:
    __import__(name)
for name in pytest_mcpfaults.__all__:
    getattr(pytest_mcpfaults, name)
mcp = [m for m, mod in sys.modules.items() if (m == "mcp" or m.startswith("mcp.")) and mod is not None]
assert not mcp, f"mcp was imported: {mcp}"
print(len(names), "modules")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[0]) > 20


def test_the_page_names_each_user_extra_with_what_it_is_for_and_not_the_test_extra() -> None:
    text = PAGE.read_text()
    named = set()
    for group in re.findall(r"pytest-mcpfaults\[([a-z,]+)\]", text):
        named |= set(group.split(","))
    assert named == set(USER_EXTRAS), named
    for module in USER_EXTRAS.values():
        assert f"`{module}`" in text, module
    assert "needs no `mcp`" in text
    assert "pytest-mcpfaults[test]" not in text


def test_the_page_lists_what_the_base_install_brings() -> None:
    row = next(line for line in PAGE.read_text().splitlines() if line.startswith("| (none) |"))
    brings = {name.strip() for name in row.split("|")[2].split(",")}
    assert brings == set(_requires(None)), (brings, _requires(None))
