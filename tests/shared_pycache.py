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

import os
from collections.abc import Iterator

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
