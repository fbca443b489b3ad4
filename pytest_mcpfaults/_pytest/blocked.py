"""Where a blocked test's thread is, read from another thread, as faulthandler would show it.

The stack is trimmed to the code under test: the standard library, the environment's scripts, and the
packages of the MCP SDKs, pytest and its plugins and this plugin, with everything they require (read
from the installed distributions' metadata, so a new dependency of the SDK needs no edit here), are
left out, even when the harness is pip-installed; the ini key ``mcpfaults_harness_packages`` narrows
that to its packages. When the thread runs an asyncio event loop, the loop's tasks are where the
harness really waits: each task's coroutine chain is shown too, the one the loop must complete first.
"""

from __future__ import annotations

import asyncio
import linecache
import os
import sys
import sysconfig
import time
from collections.abc import Iterable
from functools import lru_cache
from types import FrameType

_MAX_FRAMES = 6
_MAX_TASKS = 4
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the pytest_mcpfaults package


#: The distributions whose code is never the code under test (with what they require): the MCP SDKs,
#: pytest and this plugin; every distribution that registers a pytest plugin is added to them.
NOT_UNDER_TEST = ("mcp", "fastmcp", "pytest", "pytest-mcpfaults")
_harness: frozenset[str] = frozenset()


def set_harness_packages(names: Iterable[str]) -> None:
    """Show only these top-level packages' frames among installed code (the ini key); empty: all."""
    global _harness
    _harness = frozenset(names)
    own_code.cache_clear()


@lru_cache(maxsize=1)
def _library_packages() -> frozenset[str]:
    """Top-level import names of :data:`NOT_UNDER_TEST`, the pytest plugins and what they require."""
    from importlib import metadata

    dists = metadata.distributions()
    names = {d.metadata["Name"] for d in dists if any(ep.group == "pytest11" for ep in d.entry_points)}
    todo = [*NOT_UNDER_TEST, *names]
    seen: set[str] = set()
    while todo:
        name = _normal(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [r.split(";")[0].split("[")[0].split("(")[0].strip().split(" ")[0] for r in requires
                 if "extra ==" not in r]  # fmt: skip
        todo = [t.rstrip("<>=!~,0123456789.*") for t in todo]
    return frozenset(top for top, dists in metadata.packages_distributions().items()
                     if any(_normal(d) in seen for d in dists)) | {"pytest_mcpfaults", "_pytest"}  # fmt: skip


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _top_level(path: str) -> tuple[str, bool]:
    """The top-level package ``path`` belongs to (by the ``sys.path`` entry it is under, the longest)
    and whether that entry holds installed distributions; ``("", False)`` for a file on no entry."""
    entries = [os.path.join(os.path.abspath(e or "."), "") for e in sys.path]
    under = max((e for e in entries if path.startswith(e)), key=len, default="")
    if not under:
        return "", False
    try:
        installed = any(name.endswith(".dist-info") for name in os.listdir(under))
    except OSError:
        installed = False
    return path[len(under) :].split(os.sep, 1)[0].removesuffix(".py"), installed


@lru_cache(maxsize=512)
def own_code(filename: str) -> bool:
    """Whether ``filename`` is the code under test: not the standard library, not a package of the
    MCP SDKs, pytest or this plugin (see the module), and among installed code one of the harness
    packages when the ini key names them."""
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    paths = sysconfig.get_paths()
    stdlib = tuple(os.path.join(os.path.abspath(paths[k]), "") for k in ("stdlib", "platstdlib", "scripts"))
    if path.startswith((os.path.join(_HERE, ""), *stdlib)):
        return False
    top, installed = _top_level(path)
    if top in _library_packages():
        return False
    return not (_harness and installed and top not in _harness)


def _own(frames: Iterable[FrameType]) -> list[str]:
    """The last frames of the code under test, as a traceback shows them."""
    lines = []
    for frame in frames:
        code = frame.f_code
        if own_code(code.co_filename):
            text = linecache.getline(code.co_filename, frame.f_lineno).strip()
            where = f'  File "{code.co_filename}", line {frame.f_lineno} in {code.co_name}'
            lines.append(f"{where}\n    {text}" if text else where)
    return lines[-_MAX_FRAMES:]


def _coro_frames(task: asyncio.Task[object]) -> list[FrameType]:
    out: list[FrameType] = []
    coro: object = task.get_coro()
    while coro is not None:
        coro = _async_generator(coro)
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        frame = frame or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        out.append(frame)
        nxt = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        coro = nxt or getattr(coro, "ag_await", None)
    return out


def _async_generator(awaitable: object) -> object:
    """The async generator an ``__anext__()`` / ``asend()`` / ``athrow()`` awaitable drives (an async
    fixture's teardown awaits one), else ``awaitable``: those awaitables expose no frame of their own,
    and the generator is their only referent (CPython)."""
    if type(awaitable).__name__ not in ("async_generator_asend", "async_generator_athrow"):
        return awaitable
    import gc

    return next((r for r in gc.get_referents(awaitable) if hasattr(r, "ag_frame")), awaitable)


def blocked_at(thread_id: int | None) -> str:
    """Where thread ``thread_id`` is now, trimmed to the harness's own frames (see the module)."""
    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    if frame is None:
        return "where the test's thread is blocked: unknown (the thread was not found)"
    frames = _stack(frame)[::-1]  # outermost first, as a traceback reads
    out = ["the test's thread is blocked at (most recent call last, the harness's own frames):"]
    out += _own(frames) or ["  (no frame of the harness's own: it is inside a library)"]
    loop, future = _loop_and_future(frames[-1])
    if loop is not None:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        except RuntimeError:  # the loop's task set changed under us too often
            tasks = []
        tasks.sort(key=lambda t: t is not future)
        waiting = [(task, lines) for task in tasks if (lines := _own(_coro_frames(task)))]
        for task, lines in waiting[:_MAX_TASKS]:
            out += [f"in its event loop, task {task.get_name()!r} is waiting at:", *lines]
    return "\n".join(out)


_GLUE = os.path.join(_HERE, "_pytest", "")


def _loop_and_future(frame: FrameType | None) -> tuple[asyncio.AbstractEventLoop | None, object]:
    """The event loop the thread of ``frame`` (its innermost) runs, and the future that loop was asked
    to complete (``asyncio.run``'s and pytest-asyncio's: the test's own task)."""
    loop, future = None, None
    for f in reversed(_stack(frame)):  # outermost first: the innermost loop has the last word
        here = f.f_locals.get("self") if f.f_code.co_name in ("run_forever", "run_until_complete") else None
        if isinstance(here, asyncio.AbstractEventLoop):
            loop, future = here, f.f_locals.get("future", future)
    return loop, future


def _stack(frame: FrameType | None) -> list[FrameType]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


_ASYNCIO = os.path.join(os.path.dirname(asyncio.__file__), "")


def _waiting_task(frame: FrameType | None) -> list[FrameType]:
    """Where the test's own task waits while its thread runs an event loop: its coroutine chain, whose
    innermost frame stays one frame at one line while the task waits, however often other tasks (a
    heartbeat, a keep-alive ping) wake the loop and change the thread's own frames. asyncio's own frames
    at its end are left out: ``await asyncio.sleep(…)`` in a poll loop is a new frame each time, as
    ``time.sleep`` in a thread's poll loop is none. Empty when the thread runs no loop or that task runs
    now."""
    _, task = _loop_and_future(frame)
    if not isinstance(task, asyncio.Task) or task.done() or getattr(task.get_coro(), "cr_running", False):
        return []
    chain = _coro_frames(task)
    while len(chain) > 1 and chain[-1].f_code.co_filename.startswith(_ASYNCIO):
        chain.pop()
    return chain


def _in_plugin_wait(frame: FrameType | None) -> bool:
    """Whether the thread is inside the plugin's own code (not its pytest glue, which wraps every
    test): a wait the plugin bounds and gives its own verdict for, not the harness waiting on itself."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(os.path.join(_HERE, "")) and not name.startswith(_GLUE):
            return True
        frame = frame.f_back
    return False


def _children_cpu() -> float:
    """CPU seconds of this process's child processes: those it waited for (``os.times``) and, on
    Linux, the live descendants (``/proc/<pid>/task/<tid>/children``, ``/proc/<pid>/stat``); 0.0
    for what cannot be read."""
    times = os.times()
    total = times.children_user + times.children_system
    if not sys.platform.startswith("linux"):
        return total
    from pytest_mcpfaults.stdio.procfs import stat  # not at the plugin's import: it stays glue only

    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    todo, seen = [os.getpid()], set()
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid in seen:
                    continue
                seen.add(kid)
                todo.append(kid)
                fields = stat(kid)
                if fields is not None:
                    total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


class Stillness:
    """Whether a thread is really blocked, read from another thread by sampling it: its innermost
    frame stayed the same frame at the same line at every :meth:`sample`, and (where the platform has
    per-thread CPU clocks) it used almost no CPU meanwhile, so a one-line busy loop, which also stays on
    one line, is not taken for a wait. Nor is a thread waiting on a child process that computes (a
    harness the test runs as a subprocess, slow beside other jobs): the CPU of this process's children
    counts as the thread's. The frame is kept (not its ``id``, which a new frame of the same function
    may reuse in a polling loop) until it changes."""

    #: CPU seconds a still thread may use per second of stillness (signal handlers, a GC pass).
    #: A blocked thread uses next to none; a thread computing beside six busy processes on two cores
    #: still gets a few percent (0.1 let one through as "blocked" in a loaded run).
    CPU_SHARE = 0.02

    def __init__(self, thread_id: int | None) -> None:
        self._tid = thread_id
        self._frame: FrameType | None = None
        self._line = -1
        self._since = 0.0
        self._cpu0 = 0.0
        self._clock: int | None = None
        if thread_id is not None and hasattr(time, "pthread_getcpuclockid"):
            try:
                self._clock = time.pthread_getcpuclockid(thread_id)
            except OSError:
                self._clock = None

    def _cpu(self) -> float:
        if self._clock is None:
            return 0.0
        try:
            return time.clock_gettime(self._clock) + _children_cpu()
        except OSError:  # the thread is gone
            return 0.0

    def sample(self, now: float) -> float:
        """Sample the thread at ``now`` (``time.monotonic()``); seconds it has been still since."""
        frame = sys._current_frames().get(self._tid) if self._tid is not None else None
        cpu = self._cpu()
        chain = _waiting_task(frame)
        if chain:
            frame = None if any(_in_plugin_wait(f) for f in chain) else chain[-1]
        elif frame is not None and _in_plugin_wait(frame):
            frame = None  # a bounded wait of the plugin's own (HarnessProcess.wait, Journal.wait_for)
        if frame is None or frame is not self._frame or frame.f_lineno != self._line:
            self._frame, self._line = frame, (frame.f_lineno if frame is not None else -1)
            self._since, self._cpu0 = now, cpu
            return 0.0  # moved (or not found)
        if cpu - self._cpu0 > 0.005 + self.CPU_SHARE * (now - self._since):
            self._since, self._cpu0 = now, cpu  # it computes on one line: not a wait
            return 0.0
        return now - self._since
