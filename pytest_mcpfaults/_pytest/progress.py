"""What the running test has done so far, kept where a crash or an interrupt cannot take it away.

A test's :class:`~pytest_mcpfaults._pytest.records.TestRecord` is filled at teardown, and under
pytest-xdist it reaches the controller only on the teardown report. A test whose worker dies (an OOM
kill, a segfault, ``os._exit``) never gets there, nor does a test interrupted by SIGINT. So, beside the
record, the plugin keeps a running tally per test: which test started, the sidecars (journals) it made,
each fault as it fires (:mod:`pytest_mcpfaults.core.events`), and that it finished.

It is kept in memory in every process, and on an xdist worker each event is also appended, as one
JSON line written with one unbuffered ``write()`` on an ``O_APPEND`` file, to ``<run dir>/<worker
id>.jsonl``: the kernel has the line as soon as the call returns, so it survives the process dying.
The controller makes the run directory, and reads a crashed worker's file when xdist reports the crash
(every file when the run is interrupted).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpfaults._pytest.records import matrix_fault
from pytest_mcpfaults.core import events

#: The ``workerinput`` key carrying the run directory to xdist workers.
WORKERINPUT_KEY = "mcpfaults_progress_dir"


@dataclass
class Running:
    """A test that started and has not finished (yet, or ever): what it did so far."""

    nodeid: str
    matrix: str | None = None
    started: float = field(default_factory=time.time)
    sidecars: int = 0
    fired: dict[str, int] = field(default_factory=dict)

    @property
    def used(self) -> bool:
        """Whether the plugin took part in it (the report lists only such tests)."""
        return bool(self.sidecars or self.fired or self.matrix)

    def apply(self, event: str, value: str | None) -> None:
        if event == "fired" and value is not None:
            self.fired[value] = self.fired.get(value, 0) + 1
        elif event == "sidecar":
            self.sidecars += 1


class Progress:
    """The running tally of one process; with ``path``, also appended to that file line by line."""

    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self.current: Running | None = None
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if path else None
        self.write_error: OSError | None = None  # the file went unwritable: the tally stays in memory

    def _write(self, line: dict[str, Any]) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, (json.dumps(line) + "\n").encode())
        except OSError as exc:  # a full disk must not become a sidecar error (this runs on its loop thread)
            self.write_error = exc
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def start(self, nodeid: str, matrix: str | None) -> None:
        with self._lock:
            self.current = Running(nodeid, matrix)
            self._write({"start": nodeid, "matrix": matrix, "t": self.current.started})

    def event(self, event: events.Event, value: str | None = None) -> None:
        """A sidecar made (``'sidecar'``) or a fault fired (``'fired'``, the kind) by the running test;
        ignored between tests. Called on the sidecar's loop thread."""
        with self._lock:
            if self.current is None:
                return
            self.current.apply(event, value)
            self._write({"event": event, "value": value, "nodeid": self.current.nodeid})

    def finish(self, nodeid: str) -> None:
        with self._lock:
            if self.current is not None and self.current.nodeid == nodeid:
                self.current = None
            self._write({"done": nodeid})

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read_unfinished(path: Path) -> dict[str, Running]:
    """The tests a progress file shows as started and never finished, with what they did. A torn last
    line (the process died inside ``write()``) is ignored."""
    out: dict[str, Running] = {}
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return out
    for raw in lines:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        if "start" in line:
            out[str(line["start"])] = Running(
                str(line["start"]), line.get("matrix"), float(line.get("t", time.time()))
            )
        elif "done" in line:
            out.pop(str(line["done"]), None)
        elif str(line.get("nodeid")) in out:
            out[str(line["nodeid"])].apply(str(line.get("event")), line.get("value"))
    return out


class ProgressPlugin:
    """The pytest side: one :class:`Progress` per process, fed by the test protocol and the sidecars'
    events; on the xdist controller, the run directory the workers write into."""

    def __init__(self, config: pytest.Config) -> None:
        workerinput = getattr(config, "workerinput", None)
        run_dir = workerinput.get(WORKERINPUT_KEY) if isinstance(workerinput, dict) else None
        path = Path(run_dir) / f"{workerinput['workerid']}.jsonl" if run_dir and workerinput else None
        self.run_dir: Path | None = None  # the controller's, made when xdist configures a worker
        self.progress = Progress(path)
        self._unlisten = events.on_event(self.progress.event)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self.progress.start(item.nodeid, matrix_fault(item))
        result = yield  # an interrupt propagates from here: the test stays unfinished
        self.progress.finish(item.nodeid)
        return result

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist, on the controller, before it starts a worker: hand it the run directory."""
        if self.run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix="mcpfaults-progress-"))
        node.workerinput[WORKERINPUT_KEY] = str(self.run_dir)

    def unfinished(self, worker: str | None = None) -> dict[str, Running]:
        """Tests started and not finished: in this process, or (on the xdist controller) in ``worker``'s
        progress file, or every worker's when ``worker`` is ``None``."""
        if self.run_dir is None:
            current = self.progress.current
            return {current.nodeid: current} if current is not None else {}
        files = [self.run_dir / f"{worker}.jsonl"] if worker else sorted(self.run_dir.glob("*.jsonl"))
        out: dict[str, Running] = {}
        for f in files:
            out.update(read_unfinished(f))
        return out

    def pytest_unconfigure(self) -> None:
        self._unlisten()
        self.progress.close()
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
