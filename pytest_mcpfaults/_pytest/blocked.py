"""Where a blocked test's thread is, read from another thread, as faulthandler would show it.

The stack is trimmed to the harness's own frames: library code (the standard library, anything
installed with a ``.dist-info`` beside it: site-packages, a ``pip --target`` directory; the
environment's scripts, such as ``bin/pytest``), pytest and
this plugin are left out, so what remains is the test and the harness it drives. When the thread is
running an asyncio event loop (an async test, ``asyncio.run``, or a private loop's
``run_until_complete``), the loop's tasks are where the harness really waits: each task's coroutine
chain is shown the same way, the one the loop was asked to complete first.
"""

from __future__ import annotations

import asyncio
import linecache
import os
import sys
import sysconfig
from collections.abc import Iterable
from functools import lru_cache
from types import FrameType

__all__ = ["blocked_at", "own_code"]

_MAX_FRAMES = 6
_MAX_TASKS = 4
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the pytest_mcpfaults package


@lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib", "scripts")}
    for entry in sys.path:
        try:
            if entry and any(name.endswith(".dist-info") for name in os.listdir(entry)):
                roots.add(entry)
        except OSError:
            continue
    return tuple(os.path.join(os.path.abspath(r), "") for r in roots)


@lru_cache(maxsize=512)
def own_code(filename: str) -> bool:
    """Whether ``filename`` is the harness's own code (not a library, pytest or this plugin)."""
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    if path.startswith(os.path.join(_HERE, "")):
        return False
    return not path.startswith(_library_roots())


def _line(frame: FrameType, lineno: int) -> str:
    code = frame.f_code
    text = linecache.getline(code.co_filename, lineno).strip()
    where = f'  File "{code.co_filename}", line {lineno} in {code.co_name}'
    return f"{where}\n    {text}" if text else where


def _own(frames: Iterable[tuple[FrameType, int]]) -> list[str]:
    lines = [_line(f, n) for f, n in frames if own_code(f.f_code.co_filename)]
    return lines[-_MAX_FRAMES:]


def _thread_frames(frame: FrameType | None) -> list[tuple[FrameType, int]]:
    out = []
    while frame is not None:
        out.append((frame, frame.f_lineno))
        frame = frame.f_back
    return out[::-1]  # outermost first, as a traceback reads


def _coro_frames(task: asyncio.Task[object]) -> list[tuple[FrameType, int]]:
    out: list[tuple[FrameType, int]] = []
    coro: object = task.get_coro()
    while coro is not None:
        coro = _async_generator(coro)
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        frame = frame or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        out.append((frame, frame.f_lineno))
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


def _running_loop(frames: list[tuple[FrameType, int]]) -> tuple[asyncio.AbstractEventLoop, object] | None:
    """The event loop the thread runs (and the future it was asked to complete), from its frames."""
    loop, future = None, None
    for frame, _ in frames:
        if frame.f_code.co_name in ("run_forever", "run_until_complete"):
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, asyncio.AbstractEventLoop):
                loop = candidate
                future = frame.f_locals.get("future", future)
    return (loop, future) if loop is not None else None


def blocked_at(thread_id: int | None) -> str:
    """Where thread ``thread_id`` is now, trimmed to the harness's own frames (see the module)."""
    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    if frame is None:
        return "where the test's thread is blocked: unknown (the thread was not found)"
    frames = _thread_frames(frame)
    out = ["the test's thread is blocked at (most recent call last, the harness's own frames):"]
    out += _own(frames) or ["  (no frame of the harness's own: it is inside a library)"]
    found = _running_loop(frames)
    if found is not None:
        loop, future = found
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        except RuntimeError:  # the loop's task set changed under us too often
            tasks = []
        tasks.sort(key=lambda t: t is not future)
        shown = 0
        for task in tasks:
            lines = _own(_coro_frames(task))
            if lines and shown < _MAX_TASKS:
                out.append(f"in its event loop, task {task.get_name()!r} is waiting at:")
                out += lines
                shown += 1
    return "\n".join(out)
