"""Shared by the framework modules that run a real affected release against a real fixed one: the
tox env installs the fixed release, and the affected one goes into a directory of its own, which the
case, the harness or the server then puts first on its ``PYTHONPATH``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


def install_beside(factory: pytest.TempPathFactory, requirement: str, *, deps: bool = False) -> Path:
    """``requirement`` (``name==version``) installed on its own with ``pip install --target`` (with its
    dependencies when ``deps``: a release whose dependencies differ from the env's), in a new
    directory of ``factory``'s; a failed install fails the test, with pip's error."""
    target = factory.mktemp(re.sub(r"[^\w.]+", "-", requirement))
    cmd = [sys.executable, "-m", "pip", "install", "-q", *(() if deps else ("--no-deps",)), "--target"]
    proc = subprocess.run([*cmd, str(target), requirement], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"pip could not install {requirement}:\n{proc.stderr}"
    return target


def run_case(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, case: Path, path: Path | None, *args: str
) -> pytest.RunResult:
    """The ``case`` file in a pytest of its own, with the plugin loaded as users load it and ``path``
    (an :func:`install_beside` directory) first on its ``PYTHONPATH``; ``args``: more pytest arguments."""
    if path is not None:
        monkeypatch.setenv("PYTHONPATH", str(path))
    pytester.makepyfile(test_case=case.read_text())
    return pytester.runpytest_subprocess(
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-s", *args, timeout=120
    )
