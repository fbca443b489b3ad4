"""A harness run as a child process, and the verdict when it never exits (docs/harness-process.md).

Some teardown bugs keep the whole process alive rather than one call (a client's background thread
joined without a timeout at interpreter exit, a CLI agent waiting on a session it never closes). When
the child outlives its budget, ``SIGABRT`` makes Python's faulthandler print every thread's stack, then
its whole process group is killed: every wait is bounded, and nothing of the group is left running (a
process that leaves the group with ``setsid`` is out of reach).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.stdio.procfs import stat
from pytest_mcpfaults.verdicts.patience import PatienceError
from pytest_mcpfaults.verdicts.stalls import StalledServer, own_event_stream

#: Seconds the child has to print its stacks and die after ``SIGABRT`` before the group is killed.
ABORT_GRACE = 2.0
#: The default budget when neither ``budget=`` nor a server's patience gives one.
DEFAULT_BUDGET = 5.0
#: The default ``startup``: seconds the child may run before its first MCP traffic.
DEFAULT_STARTUP = 60.0
#: How many frames of each thread, and lines in all, a verdict shows of the child's stacks.
MAX_FRAMES = 12
MAX_STACK_LINES = 60
#: How much of the end of the child's stderr is read for its stacks.
_STDERR_TAIL = 256 * 1024
_POLL = 0.02


class HarnessProcessError(PatienceError):
    """The harness process outlived its budget (after its last MCP traffic, after it was asked to stop,
    or before it talked MCP at all); it was stopped with ``SIGABRT``, its stacks are in the message,
    and it was killed with its process group."""


class HarnessProcess:
    """``args`` run as a child process (a process group of its own, ``PYTHONFAULTHANDLER=1``) watched
    against ``servers``: the servers it talks to, read live (a server appended to the list after the
    start counts too), or a function returning them. It must exit within ``budget`` seconds after its
    last MCP traffic, or after :meth:`stop` (default: the first server's patience, else 5), and talk
    MCP within ``startup`` seconds (default 60); else :meth:`wait` raises :class:`HarnessProcessError`
    with its stacks, its last MCP traffic and the likely fix. ``env`` is added to this process's
    environment; its stdout and stderr go to files in a temporary directory (removed at
    :meth:`close`), read with :attr:`stdout` and :attr:`stderr`.
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        servers: Sequence[StalledServer] | Callable[[], Sequence[StalledServer]] = (),
        budget: float | None = None,
        startup: float = DEFAULT_STARTUP,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(args, str) or not args or not all(isinstance(a, str) for a in args):
            raise TypeError(f"args must be a non-empty list of strings (the command line), got {args!r}")
        for name, value in (("budget", budget), ("startup", startup)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"{name} must be a positive number of seconds, got {value!r}")
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if isinstance(servers, (str, bytes)) or not (callable(servers) or isinstance(servers, Sequence)):
            raise TypeError(f"servers must be a list of servers or a function returning one, got {servers!r}")
        if env is not None and not isinstance(env, Mapping):
            raise TypeError(f"env must be a mapping of names to strings, got {env!r}")
        self.args = list(args)
        self._servers = servers
        self._budget = None if budget is None else float(budget)
        self.startup = float(startup)
        self._env = {**os.environ, **(env or {}), "PYTHONFAULTHANDLER": "1"}
        self._cwd = cwd
        self._dir: Path | None = None
        self._kept: dict[str, str] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._stopped_at: float | None = None
        self._stop_signal = "SIGTERM"
        self._gone = False  # its group was killed and none of it runs: never signal that id again
        self._ended_here = False  # the plugin ended it (its verdict, or close() while it ran)
        self.verdict: str | None = None

    @property
    def servers(self) -> list[StalledServer]:
        """The servers it is watched against, as they are now."""
        return list(self._servers() if callable(self._servers) else self._servers)

    @property
    def budget(self) -> float:
        """``budget=``, else the first server's patience, else :data:`DEFAULT_BUDGET`."""
        if self._budget is not None:
            return self._budget
        patience = next((s.patience for s in self.servers if s.patience is not None), None)
        return float(patience) if patience is not None else DEFAULT_BUDGET

    def start(self) -> HarnessProcess:
        """Start the child (in a new session, so its whole process group can be killed)."""
        if self._proc is not None:
            raise RuntimeError("the harness process was already started")
        self._dir = Path(tempfile.mkdtemp(prefix="mcpfaults-harness-"))
        try:  # the child writes its own copies of the files' descriptors: ours close at once
            with (self._dir / "stdout").open("wb") as out, (self._dir / "stderr").open("wb") as err:
                self._proc = subprocess.Popen(
                    self.args,
                    env=self._env,
                    cwd=self._cwd,
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        except BaseException:
            self.close()
            raise
        self._started_at = time.monotonic()
        _no_core_dump(self._proc.pid)
        return self

    @property
    def pid(self) -> int:
        return self._running().pid

    @property
    def returncode(self) -> int | None:
        return self._running().poll()

    @property
    def killed(self) -> bool:
        """Whether the plugin ended the child (its verdict, or ``close()`` while it still ran): it had
        no chance to end the MCP sessions it had open."""
        return self._ended_here

    @property
    def stdout(self) -> str:
        return self._read("stdout")

    @property
    def stderr(self) -> str:
        return self._read("stderr")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Ask the child to stop (``SIGTERM`` by default): from now on it has the budget to exit,
        counted from the first ``stop()`` (its MCP traffic no longer counts)."""
        proc = self._running()
        if proc.poll() is None:
            if self._stopped_at is None:
                self._stopped_at = time.monotonic()
                self._stop_signal = signal.Signals(sig).name
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        """The child's exit code, once it exits; :class:`HarnessProcessError` when it outlives its
        budget (see the class) or, with ``timeout``, runs longer than that in all."""
        __tracebackhide__ = True  # pytest shows the verdict at the test's line, not in here
        proc, started = self._running(), time.monotonic()
        while (code := proc.poll()) is None:
            why = self._overdue(started, timeout)
            if why is not None:
                self._fail(why)
            time.sleep(_POLL)
        return code

    def close(self) -> None:
        """Kill whatever is left of the child's process group, keep its output, remove its files."""
        self._kill()
        if self._dir is not None:
            for name in ("stdout", "stderr"):
                self._kept[name] = self._read(name)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> HarnessProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the verdict -------------------------------------------------------------------------------
    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("the harness process was not started: call start() or use `with`")
        return self._proc

    def _kill(self) -> bool:
        if self._proc is not None and not self._gone:
            self._ended_here = self._ended_here or self._proc.poll() is None
            self._gone = _kill_group(self._proc)
        return self._gone

    def _read(self, name: str, tail: int | None = None) -> str:
        if self._dir is None:
            text = self._kept.get(name, "")
            return text if tail is None else text[-tail:]
        path = self._dir / name
        with contextlib.suppress(OSError), path.open("rb") as f:
            if tail is not None:
                f.seek(max(0, path.stat().st_size - tail))
            return f.read().decode(errors="replace")
        return ""

    def _overdue(self, started: float, timeout: float | None) -> str | None:
        now, budget = time.monotonic(), self.budget
        last = self._last_traffic()
        if self._stopped_at is not None:  # asked to stop: it has the budget from then on
            if now - self._stopped_at > budget:
                return f"it was still running {budget:g} s after it was asked to stop ({self._stop_signal})"
        elif last is not None and last[1] > budget and not self._in_flight():
            return f"it was still running {budget:g} s after its last MCP traffic"
        elif last is None and now - self._started_at > self.startup:
            return f"it talked no MCP to the test's servers in the {self.startup:g} s it was given to start"
        if timeout is not None and now - started > timeout:
            return f"it was still running after the {timeout:g} s wait() allowed"
        return None

    def _in_flight(self) -> bool:
        """Whether a request of the harness is still unanswered (its event stream, a ``GET`` on the MCP
        endpoint, aside): a request the sidecar holds is its patience's to judge, not this rule's."""
        return any(
            r.ended_at is None and not own_event_stream(r, getattr(server, "mcp_path", None))
            for server in self.servers
            for r in server.journal.requests
        )

    def _last_traffic(self) -> tuple[tuple[StalledServer, RequestRecord], float] | None:
        """How long ago it ended (or began, while it runs); ``GET /health`` is not MCP traffic."""
        found: tuple[tuple[StalledServer, RequestRecord], float] | None = None
        for server in self.servers:
            health = getattr(server, "health_path", None)
            requests = [r for r in server.journal.requests if health is None or r.path != health]
            if not requests:
                continue
            last = max(requests, key=_last_seen)
            ago = server.journal.now() - _last_seen(last)
            if found is None or ago < found[1]:
                found = ((server, last), ago)
        return found

    def _fail(self, why: str) -> None:
        __tracebackhide__ = True
        proc = self._running()
        self._ended_here = True
        try:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGABRT)  # faulthandler prints every thread's stack, then dies
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(ABORT_GRACE)
        finally:
            gone = self._kill()
        stacks = _stacks(self._read("stderr", tail=_STDERR_TAIL))
        last = self._last_traffic()
        traffic = "none"
        if last is not None:
            (server, r), ago = last
            answer = (
                "still unanswered"
                if not r.done
                else f"answered {r.status}"
                if r.status is not None
                else "ended without an answer"
            )
            traffic = f"`{r.label}` (#{r.id}) to {server.url}, {ago:.2f} s before, {answer}"
        shown = stacks or ["(no Python stack: not a Python process, or it handles SIGABRT itself)"]
        lines = [
            f"the harness process did not exit: {why}",
            "",
            f"   process: pid {proc.pid}, {shlex.join(self.args)}",
            f"   last MCP traffic: {traffic}",
            "   its threads when it was stopped (SIGABRT, Python's faulthandler):",
            *(f"      {line}" for line in shown),
            f"   hint: {_hint(stacks)}",
            "",
            "it was killed with its process group: nothing of it is left running"
            if gone
            else f"its process group was sent SIGKILL, but a process of it still ran {ABORT_GRACE:g} s later",
        ]
        self.verdict = "\n".join(lines)
        raise HarnessProcessError(self.verdict)


def _last_seen(r: RequestRecord) -> float:
    return r.ended_at if r.ended_at is not None else r.started_at


def _no_core_dump(pid: int) -> None:
    """No core file when ``SIGABRT`` ends the child (Linux; elsewhere the limit is left as it is)."""
    with contextlib.suppress(ImportError, AttributeError, OSError, ValueError):
        import resource

        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))


def _kill_group(proc: subprocess.Popen[bytes]) -> bool:
    """Whether none of the group runs any more after SIGKILL and a bounded wait."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(ABORT_GRACE)
    deadline = time.monotonic() + ABORT_GRACE
    while (running := _group_running(proc.pid)) and time.monotonic() < deadline:
        time.sleep(_POLL)  # a signalled process dies when next scheduled: a loaded machine lags
    return not running


def _group_running(pgid: int) -> bool:
    """Zombies do not run; ``False`` without ``/proc``."""
    for pid in Path("/proc").glob("[0-9]*"):
        fields = stat(pid.name)
        if fields is not None and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+")


def _stacks(stderr: str) -> list[str]:
    """The thread stacks faulthandler printed on ``SIGABRT``: the thread that took the signal (Linux
    gives it to the main thread, where the interpreter's exit runs) first, each most recent call
    first, trimmed."""
    start = stderr.rfind("Fatal Python error: Aborted")
    if start < 0:
        return []
    threads: list[list[str]] = []
    for raw in stderr[start:].splitlines()[1:]:
        line = raw.rstrip()
        if not line.strip() or line.startswith("Extension modules"):
            continue
        if _THREAD.match(line) or not threads:
            threads.append([line])
        else:
            threads[-1].append(line)
    threads.sort(key=lambda t: not t[0].startswith("Current thread"))
    lines: list[str] = []
    for thread in threads:
        frames = thread[1:]
        lines += [thread[0], *frames[:MAX_FRAMES]]
        if len(frames) > MAX_FRAMES:
            lines.append(f"  ... {len(frames) - MAX_FRAMES} more frames")
    return lines[:MAX_STACK_LINES] + (["..."] if len(lines) > MAX_STACK_LINES else [])


def _hint(stacks: list[str]) -> str:
    text = "\n".join(stacks)
    if re.search(r"in (_shutdown|join|_wait_for_tstate_lock)\b", text):
        return (
            "a thread is joined without a timeout at exit (a non-daemon thread the interpreter waits "
            "for, or a client's stop() joining its background loop, from a finalizer at exit): join "
            "with a timeout, stop the thread's event loop before joining, or close the client "
            "explicitly before the interpreter exits"
        )
    return (
        "after its last MCP request the process waits on something that never comes: bound every "
        "wait at exit with a timeout, and close its MCP sessions and transports before it returns"
    )
