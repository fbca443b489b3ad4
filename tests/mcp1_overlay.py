"""The mcp 1.x client for a child Python of the suite, beside the suite's own mcp 2.x.

Real harnesses pin mcp 1.x; the suite's environment has mcp 2.x (the two cannot be installed
together). :func:`mcp1_overlay` installs ``mcp>=1.26,<2`` with its dependencies into a directory of
its own (``pip install --target``, about 5 s from pip's cache) that a child process puts first on its
``PYTHONPATH``: there ``import mcp`` is mcp 1.x, and the plugin and everything else come from the
suite's environment as usual. pip gets the environment as the suite found it (``REGISTRY_ENV``), and the
lock of the mcp 1.x client (``requirements/mcp1.txt``) unless ``MCPFAULTS_UNLOCKED`` is set (``tox -e
latest``), so the versions measured are the same on every machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from no_ca import REGISTRY_ENV

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements"
MCP1 = "mcp>=1.26,<2"


def _lock() -> list[str]:
    """pip's constraint arguments for the mcp 1.x overlay: the committed lock, or none when unlocked."""
    return [] if os.environ.get("MCPFAULTS_UNLOCKED") else ["-c", str(REQUIREMENTS / "mcp1.txt")]


def install_mcp1(target: Path) -> Path:
    """Install :data:`MCP1` into ``target`` and return it; fails (never skips) when pip cannot."""
    done = target / ".installed"
    if not done.exists():
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
        proc = subprocess.run(
            [*cmd, *_lock(), "--target", str(target), MCP1],
            env=REGISTRY_ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"pip could not install {MCP1}:\n{proc.stdout}\n{proc.stderr}"
        done.write_text(MCP1)
    return target


def shared_mcp1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`install_mcp1` once per test session: under pytest-xdist the workers share one overlay in
    the session's temporary directory (the parent of each worker's own), the first to take the lock
    installs it and the others wait for it and use it. Without a file lock (no ``fcntl``) or xdist,
    each process installs its own, as before."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-N/, beside the workers' popen-gwK/
    try:
        import fcntl
    except ImportError:  # not POSIX
        return install_mcp1(tmp_path_factory.mktemp("mcp1"))
    target = base / "mcp1-overlay"
    with (base / "mcp1-overlay.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return install_mcp1(target)
