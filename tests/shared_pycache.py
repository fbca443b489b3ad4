"""The Pythons the suite starts share one bytecode cache for the run.

With ``PYTHONDONTWRITEBYTECODE`` set (as where this suite is timed), every Python the suite starts
(pytester subprocess runs, example runs, ``serve``, stdio servers, exporters) compiled the package and
assertion-rewrote its test files from source again, and each example run (plugin autoload on: pytest
rewrites every plugin's distribution) rewrote Hypothesis and anyio too: about 0.2 s of CPU per child,
2 s per example run. For the session the children instead write and read their bytecode under one
directory of this run's temporary directory (``PYTHONPYCACHEPREFIX``, shared by the xdist workers):
still nothing written beside any source. Without ``PYTHONDONTWRITEBYTECODE``, or with a
``PYTHONPYCACHEPREFIX`` of the user's, nothing changes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def shared_pycache(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        yield
        return
    base = tmp_path_factory.getbasetemp()
    if hasattr(config, "workerinput"):  # an xdist worker: its basetemp is <the run's>/popen-gwN
        base = base.parent
    prefix = base / "pycache"
    prefix.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PYTHONDONTWRITEBYTECODE")
        mp.setenv("PYTHONPYCACHEPREFIX", str(prefix))
        yield


def warm_for_workers(root: Path) -> None:
    """(The controller of the whole suite's xdist run, before it starts the workers.) Under
    ``PYTHONDONTWRITEBYTECODE`` every worker compiled, and assertion-rewrote, every test module and the
    plugins' packages again to collect the suite: about 9 s of CPU each, 6 s of it rewriting, five
    times over, and the workers start together, so no cache made during the run helped them. Here the
    workers (and every Python they start: :func:`shared_pycache` then keeps this prefix) share one
    ``PYTHONPYCACHEPREFIX`` in a temporary directory, removed at exit, which one child pytest fills
    first by collecting the suite as a worker does: a worker then collects in about 3.5 s. Still
    nothing written beside any source; without ``PYTHONDONTWRITEBYTECODE``, or with a
    ``PYTHONPYCACHEPREFIX`` of the user's, nothing changes. If the warming run fails or overruns it
    costs only its time: the workers compile what it did not."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = tempfile.mkdtemp(prefix="mcpfaults-pycache-")
    atexit.register(shutil.rmtree, prefix, ignore_errors=True)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    # -p no:xdist: it collects in its own process (tests/conftest.py distributes only with xdist)
    warm = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist"]
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(warm, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
