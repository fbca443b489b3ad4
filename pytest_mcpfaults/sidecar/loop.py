"""One process-wide event-loop thread that hosts every sidecar.

The harness under test never shares this loop, so sync tests, asyncio tests and anyio tests all work
the same. The thread starts on first use and is a daemon; after ``fork`` (xdist workers are new
processes, but a harness may fork) a child starts its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def get_loop() -> asyncio.AbstractEventLoop:
    """The sidecar loop, started on first use."""
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="mcpfaults-sidecar-loop", daemon=True).start()
            ready.wait()
            _loop, _pid = loop, os.getpid()
        return _loop


def in_loop_thread() -> bool:
    """Whether the caller is running on the sidecar loop thread."""
    loop = _loop
    if loop is None:
        return False
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def run(coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
    """Run ``coro`` on the sidecar loop from any other thread and wait for its result."""
    if in_loop_thread():
        coro.close()
        raise RuntimeError("a blocking Sidecar method was called from the sidecar's own loop thread")
    future = asyncio.run_coroutine_threadsafe(coro, get_loop())
    try:
        return future.result(timeout)
    except FutureTimeout:
        future.cancel()
        raise TimeoutError(f"sidecar operation did not finish within {timeout} s") from None


def call_soon(fn: Any, *args: Any) -> None:
    """Schedule a plain callback on the sidecar loop (thread-safe, does not wait)."""
    get_loop().call_soon_threadsafe(fn, *args)
