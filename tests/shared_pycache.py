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
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Names the prefix :func:`warm_for_workers` made for the run (the workers inherit it), so that
#: :func:`shared_pycache` tells it from a ``PYTHONPYCACHEPREFIX`` of the user's.
SUITE_PREFIX = "MCPFAULTS_SUITE_PYCACHE"


def shared_pycache(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    ours = os.environ.get(SUITE_PREFIX)
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or (os.environ.get("PYTHONPYCACHEPREFIX") and not ours):
        yield
        return
    if ours:  # the whole suite's run: the prefix the controller filled before the workers started
        prefix = Path(ours)
    else:
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
    plugins' packages again to collect the suite: about 8.5 s of CPU each, 6 s of it rewriting, five
    times over, and the workers start together, so no cache made during the run helped them. Here the
    controller makes the run's ``PYTHONPYCACHEPREFIX`` in a temporary directory, removed at exit, with
    links to the installs' own bytecode (:func:`_link_installed_bytecode`), and child pytests fill it
    first by collecting the suite's files as a worker does (:data:`WARM_SHARDS` of them side by side,
    each collecting its share of the files). The workers read it (a worker then collects in
    about 3 s) and, ``PYTHONDONTWRITEBYTECODE`` still set for them, write nothing, as before: their
    in-process pytester runs, which may rewrite a file between two runs, read no bytecode of theirs.
    The Pythons they start write to it and read it (:func:`shared_pycache`). Still nothing written
    beside any source; without ``PYTHONDONTWRITEBYTECODE``, or with a ``PYTHONPYCACHEPREFIX`` of the
    user's, nothing changes. If a warming run fails or overruns (bounded: 120 s) it costs only its
    time: the workers compile what it did not."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = tempfile.mkdtemp(prefix="mcpfaults-pycache-")
    atexit.register(shutil.rmtree, prefix, ignore_errors=True)
    os.environ["PYTHONPYCACHEPREFIX"] = os.environ[SUITE_PREFIX] = prefix
    # Linking (thousands of symlinks: 1-4 s on this machine, by how busy its disk is) goes on beside
    # the warming runs; a module one of them imports before its link is made is compiled and written
    # there instead (the link is then not made): the same bytecode either way.
    linker = threading.Thread(target=_link_installed_bytecode, args=(Path(prefix),), daemon=True)
    linker.start()
    # -p no:xdist: each collects in its own process (tests/conftest.py distributes only with xdist)
    warm = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    quiet = subprocess.DEVNULL
    shards = _shards(root / "tests", WARM_SHARDS)
    procs = [subprocess.Popen([*warm, *s], cwd=root, env=env, stdout=quiet, stderr=quiet) for s in shards]
    deadline = time.monotonic() + 120
    for proc in procs:
        try:
            proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    linker.join(max(deadline - time.monotonic(), 0.1))


#: Two warming runs side by side, each collecting half the test files: one alone kept a core idle for
#: its whole 9 s (the workers start only after it); the two import the package and the plugins each,
#: about 2 s of CPU more, on the core that was idle.
WARM_SHARDS = 2


def _shards(tests: Path, count: int) -> list[list[str]]:
    """The test files the whole suite collects, dealt into ``count`` lists of about the same size in
    bytes (the cost of assertion-rewriting them), largest first. ``test_*_mcp1.py`` are left out: the
    suite does not collect them where mcp is 2.x (tests/conftest.py), and named here they would be."""
    sizes = {p: p.stat().st_size for p in tests.glob("test_*.py") if not p.name.endswith("_mcp1.py")}
    shards: list[tuple[int, list[str]]] = [(0, []) for _ in range(count)]
    for path in sorted(sizes, key=sizes.__getitem__, reverse=True):
        i = min(range(count), key=lambda i: shards[i][0])
        shards[i] = (shards[i][0] + sizes[path], [*shards[i][1], str(path)])
    return [files for _, files in shards if files]


#: Standard-library folders no test imports from (their bytecode is not linked).
_UNUSED = frozenset(
    {"test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "site-packages"}
)


def _link_installed_bytecode(prefix: Path) -> None:
    """Under a ``PYTHONPYCACHEPREFIX`` Python reads bytecode from the prefix only, so every Python
    the suite starts compiled again, once per run, each standard-library and installed module it
    imports (the warming run about 2 s of CPU; the children importing what collection does not, pip
    and mkdocs among them, seconds more), though the installs have their ``__pycache__``. The prefix
    gets a symbolic link to each of those ``.pyc`` files where Python looks for it, which it checks
    against its source as any cached bytecode (a stale one is compiled again and written over the
    link, not through it)."""
    tag = f".{sys.implementation.cache_tag}.pyc"
    paths = sysconfig.get_paths()
    for root in {paths["stdlib"], paths["purelib"], paths["platlib"]}:
        for folder, dirs, files in os.walk(root):
            if folder == paths["stdlib"]:
                dirs[:] = [d for d in dirs if d not in _UNUSED]
            if os.path.basename(folder) != "__pycache__":
                continue
            source_dir = prefix / os.path.dirname(folder).lstrip(os.sep)
            source_dir.mkdir(parents=True, exist_ok=True)
            for name in files:
                if name.endswith(tag) and name.count(".") == 2:  # not the -O / -OO or pytest's ones
                    with contextlib.suppress(FileExistsError):
                        os.symlink(os.path.join(folder, name), source_dir / name)
