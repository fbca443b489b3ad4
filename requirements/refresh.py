"""Refresh the lock: resolve today's newest releases in fresh virtual environments and write them down.

    python3 requirements/refresh.py

writes ``requirements/constraints.txt`` (every distribution ``pip install -e '.[dev]'`` resolves: the test
and docs extras and the tox, lint and benchmark tools) and ``requirements/mcp1.txt`` (the mcp 1.x client
and what it needs, for the suite's mcp 1.x overlay and ``tox -e mcp1``). Both are pip *constraints*
files: the README's commands install with ``-c requirements/constraints.txt``, so a fresh machine gets
these versions, and pip still resolves only what the extras ask for. ``tox -e latest`` runs the suite
on the newest releases instead, so drift is seen on purpose; when it passes, run this script, run the
suite, and commit the two files. Nothing here is edited by hand.
"""

from __future__ import annotations

import datetime
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The mcp 1.x range of tests/mcp1_overlay.py and tox -e mcp1 (tests/test_lock.py keeps them equal).
MCP1_RANGE = "mcp>=1.26,<2"


def _freeze(requirements: list[str], *, editable: bool) -> list[str]:
    """Install ``requirements`` into a new venv (no constraints) and return its sorted ``pip freeze``."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
        args = ["-e", *requirements] if editable else requirements
        subprocess.run([*pip, "install", "-q", *args], check=True, cwd=ROOT)
        out = subprocess.run(
            [*pip, "freeze", "--exclude-editable", "--all"], check=True, capture_output=True, text=True
        ).stdout
    # pip is kept (the test extra asks for a current one); the venv's own build tools are not: the
    # project's build requirements (setuptools>=69) resolve in pip's isolated build environment.
    skip = ("#", "setuptools==", "wheel==")
    pins = [line for line in out.splitlines() if line and not line.startswith(skip)]
    return sorted(pins, key=str.lower)


def _write(name: str, what: str, pins: list[str]) -> None:
    header = [
        f"# {what}",
        f"# Resolved {datetime.date.today().isoformat()} on Python {platform.python_version()} by"
        " requirements/refresh.py; do not edit by hand.",
    ]
    (HERE / name).write_text("\n".join([*header, *pins]) + "\n")
    print(f"requirements/{name}: {len(pins)} pins")


def main() -> None:
    _write(
        "constraints.txt",
        "pip constraints for pip install -e '.[test]' (and [dev], [docs]): the README's commands use them.",
        _freeze([".[dev]"], editable=True),
    )
    _write(
        "mcp1.txt",
        f"pip constraints for the mcp 1.x client ({MCP1_RANGE}): tests/mcp1_overlay.py and tox -e mcp1.",
        _freeze([MCP1_RANGE], editable=False),
    )


if __name__ == "__main__":
    main()
