"""A pytest plugin (``-p suite_timer``, with ``benchmarks/`` on ``sys.path``) that writes each test's wall
and CPU time to ``$MCPFAULTS_SUITE_TIME_DIR/<pid>.jsonl``, one JSON object a line: the test's node id,
its file, its area (the area marker tests/conftest.py gives it from tests/areas.py), its seconds, and
when it started on which xdist worker.

CPU is this process's user + system time over the test's setup, call and teardown, threads included,
plus that of the child processes it waited for meanwhile (a child pytest, a Node run, a sidecar's
``serve``): ``os.times()``. Under pytest-xdist each worker writes its own file; ``suite_time.py`` adds
them up by area. Without the variable the plugin does nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "MCPFAULTS_SUITE_TIME_DIR"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _area(item: pytest.Item) -> str:
    areas: dict[str, object] = getattr(sys.modules.get("areas"), "AREAS", {})  # tests/conftest.py imports it
    names = {m.name for m in item.iter_markers()}
    return next((area for area in areas if area in names), "-")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    where = os.environ.get(ENV)
    if not where:
        yield
        return
    start, wall0, cpu0 = time.time(), time.perf_counter(), _cpu()
    yield
    record = {
        "nodeid": item.nodeid,
        "file": item.nodeid.split("::", 1)[0],
        "area": _area(item),
        "slow": item.get_closest_marker("slow") is not None,
        "wall": time.perf_counter() - wall0,
        "cpu": _cpu() - cpu0,
        "start": start,  # the epoch second it started, and on which xdist worker: the run's timeline
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
    }
    with (Path(where) / f"{os.getpid()}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
