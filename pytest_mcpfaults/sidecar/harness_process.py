"""A harness run as a child process, and the verdict when it never exits.

Some teardown bugs keep the whole process alive rather than one call: a managed MCP client whose
background thread is joined without a timeout at interpreter exit, a CLI agent that waits on a
session it never closes. :class:`HarnessProcess` runs the harness as a child (in a process group of
its own, with ``PYTHONFAULTHANDLER=1``) and watches it against the servers it talks to: once it has
talked MCP, it must exit within the budget after its last MCP traffic; once asked to stop
(:meth:`HarnessProcess.stop`), within the budget after that. When it does not,
:meth:`HarnessProcess.wait` sends it ``SIGABRT`` (Python's faulthandler then prints every thread's
stack), kills what is left of its process group, and raises :class:`HarnessProcessError` with the
stack, its last MCP traffic and the likely fix. Nothing of the group is left running, whatever the
child does.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from pytest_mcpfaults.sidecar.journal import Journal, RequestRecord
from pytest_mcpfaults.sidecar.patience import PatienceError

__all__ = ["HarnessProcess", "HarnessProcessError"]

#: Seconds the child has to print its stacks and die after ``SIGABRT`` before the group is killed.
ABORT_GRACE = 2.0
#: How many lines of the child's stacks a verdict shows.
MAX_STACK_LINES = 40
_POLL = 0.02


class Server(Protocol):
    """What is read of a server the harness talks to: a ``Sidecar`` or a ``StdioServer``."""

    @property
    def url(self) -> str: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def patience(self) -> float | None: ...


class HarnessProcessError(PatienceError):
    """The harness process outlived its budget (after its last MCP traffic, or after it was asked to
    stop); it was stopped with ``SIGABRT``, its stacks are in the message, and it was killed."""


class HarnessProcess:
    """``args`` run as a child process watched against ``servers``; see the module.

    ``budget``: seconds the child may run on after its last MCP traffic or after :meth:`stop`
    (default: the first server's patience, else 5). ``env`` is added to this process's environment;
    its stdout and stderr go to files, read with :attr:`stdout` and :attr:`stderr`.
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        servers: Sequence[Server] = (),
        budget: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(args, str) or not args or not all(isinstance(a, str) for a in args):
            raise TypeError(f"args must be a non-empty list of strings (the command line), got {args!r}")
        patience = next((s.patience for s in servers if s.patience is not None), None)
        self.budget = float(budget if budget is not None else patience if patience is not None else 5.0)
        if not self.budget > 0:
            raise ValueError(f"budget must be a positive number of seconds, got {budget!r}")
        self.args = list(args)
        self.servers = list(servers)
        self._env = {**os.environ, **(env or {}), "PYTHONFAULTHANDLER": "1"}
        self._cwd = cwd
        self._dir = Path(tempfile.mkdtemp(prefix="mcpfaults-harness-"))
        self._out: IO[bytes] | None = None
        self._err: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped_at: float | None = None
        self.verdict: str | None = None

    def start(self) -> HarnessProcess:
        """Start the child (in a new session, so its whole process group can be killed)."""
        self._out = (self._dir / "stdout").open("wb")
        self._err = (self._dir / "stderr").open("wb")
        self._proc = subprocess.Popen(
            self.args, env=self._env, cwd=self._cwd, stdout=self._out, stderr=self._err,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        return self

    @property
    def pid(self) -> int:
        return self._running().pid

    @property
    def returncode(self) -> int | None:
        return self._running().poll()

    @property
    def stdout(self) -> str:
        return (self._dir / "stdout").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return (self._dir / "stderr").read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Ask the child to stop (``SIGTERM`` by default); from now on it has the budget to exit."""
        if self._running().poll() is None:
            self._stopped_at = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        """The child's exit code, once it exits; :class:`HarnessProcessError` when it outlives its
        budget (see the module) or, with ``timeout``, runs longer than that in all."""
        proc, started = self._running(), time.monotonic()
        while (code := proc.poll()) is None:
            why = self._overdue(started, timeout)
            if why is not None:
                self._fail(why)
            time.sleep(_POLL)
        return code

    def close(self) -> None:
        """Kill whatever is left of the child's process group and close its output files."""
        if self._proc is not None:
            _kill_group(self._proc)
        for f in (self._out, self._err):
            if f is not None:
                f.close()

    def __enter__(self) -> HarnessProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the verdict -------------------------------------------------------------------------------
    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("the harness process was not started: call start() or use `with`")
        return self._proc

    def _overdue(self, started: float, timeout: float | None) -> str | None:
        now = time.monotonic()
        if self._stopped_at is not None and now - self._stopped_at > self.budget:
            return f"{self.budget:g} s after it was asked to stop it was still running"
        last = self._last_traffic()
        if last is not None and last[1] > self.budget:
            return f"{self.budget:g} s after its last MCP traffic it was still running"
        if timeout is not None and now - started > timeout:
            return f"it was still running after the {timeout:g} s wait() allowed"
        return None

    def _last_traffic(self) -> tuple[tuple[Server, RequestRecord], float] | None:
        """The latest request any server saw and how many seconds ago it ended (or began)."""
        found: tuple[tuple[Server, RequestRecord], float] | None = None
        for server in self.servers:
            requests = server.journal.requests
            if not requests:
                continue
            last = max(requests, key=lambda r: r.ended_at if r.ended_at is not None else r.started_at)
            ago = server.journal.now() - (last.ended_at if last.ended_at is not None else last.started_at)
            if found is None or ago < found[1]:
                found = ((server, last), ago)
        return found

    def _fail(self, why: str) -> None:
        proc = self._running()
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGABRT)  # faulthandler prints every thread's stack, then it dies
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(ABORT_GRACE)
        _kill_group(proc)
        if self._err is not None:
            self._err.flush()
        stacks = _stacks(self.stderr)
        last = self._last_traffic()
        traffic = "none"
        if last is not None:
            (server, r), ago = last
            traffic = f"`{r.label}` (#{r.id}) to {server.url}, {ago:.1f} s before, answered {r.status}"
        lines = [
            f"the harness process did not exit: {why}",
            "",
            f"   process: pid {proc.pid}, {' '.join(self.args)}",
            f"   last MCP traffic: {traffic}",
            "   its threads when it was stopped (SIGABRT, Python's faulthandler):",
            *(
                f"      {line}"
                for line in stacks
                or ["(no Python stack: not a Python process, or it handles SIGABRT itself)"]
            ),  # fmt: skip
            f"   hint: {_hint(stacks)}",
            "",
            "it was killed with its process group: nothing of it is left running",
        ]
        self.verdict = "\n".join(lines)
        raise HarnessProcessError(self.verdict)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's process group and wait (bounded) until none of it runs any more."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(ABORT_GRACE)
    deadline = time.monotonic() + ABORT_GRACE
    while _group_running(proc.pid) and time.monotonic() < deadline:
        time.sleep(_POLL)  # a signalled process dies when next scheduled: a loaded machine lags


def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies do not); ``False`` without ``/proc``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _stacks(stderr: str) -> list[str]:
    """The thread stacks faulthandler printed on ``SIGABRT``, most recent call first, trimmed."""
    start = stderr.rfind("Fatal Python error: Aborted")
    if start < 0:
        return []
    lines = [ln.rstrip() for ln in stderr[start:].splitlines()[1:]]
    kept = [ln for ln in lines if ln.strip() and not ln.startswith("Extension modules")]
    return kept[:MAX_STACK_LINES] + (["..."] if len(kept) > MAX_STACK_LINES else [])


def _hint(stacks: list[str]) -> str:
    text = "\n".join(stacks)
    if re.search(r"in (_shutdown|join|_wait_for_tstate_lock)\b", text):
        return (
            "a thread is joined without a timeout at exit (a non-daemon thread the interpreter waits "
            "for, or a client's stop() joining its background loop): join with a timeout, stop the "
            "thread's event loop before joining, or make it a daemon"
        )
    return (
        "after its last MCP request the process waits on something that never comes: bound every "
        "wait at exit with a timeout, and close its MCP sessions and transports before it returns"
    )
