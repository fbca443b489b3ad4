"""The quick start runs as written: a fresh virtual environment built from docs/quickstart.md's own
install line, then the page's example run with the page's own command.

The liberties taken: ``pytest-mcpfaults`` on the install line is installed from this checkout (a copy
of its package files), every other requirement from the package index as a user gets it; pip is told
``--no-compile`` (the same packages and files, without byte-compiling every installed module up
front: about half of the install's time here; Python compiles what the run imports, as it would for
any module without a cached .pyc); and the venv is made without a pip of its own, the suite's pip
(a current one: the ``test`` extra asks for it) installing into it with ``--python``: the same
resolution and files as that pip run inside the venv, without bootstrapping the interpreter's bundled
pip first (4.5 s of CPU), whose resolver also took 21 s of CPU on this line where a current one takes
12 (it checked each of the index's 60,000 file links against every supported wheel tag).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from no_ca import REGISTRY_ENV

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quickstart.md"
EXAMPLE = ROOT / "docs" / "examples" / "quickstart_test.py"


def _commands() -> tuple[list[str], list[str]]:
    """The page's first bash block: exactly one ``pip install`` line and one ``pytest`` line."""
    block = re.search(r"^```bash\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    assert block, "docs/quickstart.md lost its bash block"
    lines = [line for line in block[1].splitlines() if line.strip()]
    installs = [shlex.split(line) for line in lines if line.startswith("pip install ")]
    runs = [shlex.split(line) for line in lines if line.startswith("pytest ")]
    assert len(installs) == 1 and len(runs) == 1, lines
    return installs[0][2:], runs[0]


def _checkout_copy(dest: Path) -> Path:
    """The package's own files, so that building it writes nothing into the checkout."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "pytest_mcpfaults", dest / "pytest_mcpfaults", ignore=shutil.ignore_patterns("__pycache__")
    )
    return dest


def test_the_page_installs_the_plugin_and_an_async_plugin() -> None:
    requirements, command = _commands()
    assert "pytest-mcpfaults" in requirements
    assert any(r.startswith("pytest-asyncio") for r in requirements)
    assert "--asyncio-mode=auto" in command and command[:3] == ["pytest", "-p", "mcpfaults"]
    assert "async def" in EXAMPLE.read_text()  # so the async plugin is needed, and said why


@pytest.mark.timeout(600)
def test_quick_start_runs_as_written_in_a_fresh_venv(tmp_path: Path) -> None:
    requirements, command = _commands()
    started = time.monotonic()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (tmp_path / "src").mkdir()
    src = _checkout_copy(tmp_path / "src")
    args = [str(src) if r == "pytest-mcpfaults" else r for r in requirements]
    pip_install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    pip = subprocess.run(
        [*pip_install, "--disable-pip-version-check", "--no-compile", *args],
        capture_output=True, text=True, timeout=480, env=REGISTRY_ENV,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-4000:]
    harness = tmp_path / "harness"
    harness.mkdir()
    shutil.copy(EXAMPLE, harness / EXAMPLE.name)
    env = {k: v for k, v in REGISTRY_ENV.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
    run = subprocess.run(command, cwd=harness, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\b3 passed\b", run.stdout), run.stdout[-2000:]
    print(f"fresh venv + quick start: {elapsed:.0f} s")
