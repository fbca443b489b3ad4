"""One process-wide event-loop thread that hosts every sidecar.

The harness under test never shares this loop, so sync tests, asyncio tests and anyio tests all work
the same. The thread starts on first use and is a daemon; after ``fork`` (xdist workers are new
processes, but a harness may fork) a child starts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

T = TypeVar("T")


_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def get_loop() -> asyncio.AbstractEventLoop:
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


async def call(fn: Callable[[], object]) -> None:
    """Run ``fn`` on the loop thread (``run(call(fn))``): a change of state that request handlers read
    there."""
    fn()


async def cancel_all(tasks: Iterable[asyncio.Task[Any]], timeout: float = 1.0) -> None:
    """Cancel the tasks still running (but the caller's) and wait for them, bounded."""
    me = asyncio.current_task()
    running = [t for t in tasks if t is not me and not t.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=timeout)


def run(coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
    """Run ``coro`` on the sidecar loop from any other thread and wait for its result."""
    try:
        on_loop = asyncio.get_running_loop() is _loop
    except RuntimeError:  # no loop runs in this thread
        on_loop = False
    if on_loop:
        coro.close()
        raise RuntimeError("a blocking Sidecar method was called from the sidecar's own loop thread")
    future = asyncio.run_coroutine_threadsafe(coro, get_loop())
    try:
        return future.result(timeout)
    except FutureTimeout:
        future.cancel()
        raise TimeoutError(f"sidecar operation did not finish within {timeout} s") from None


class WorkerPool:
    """Daemon threads that run blocking calls (sync tool handlers) off the loop thread.

    Bounded (``max_workers``), started lazily, and idle threads exit after ``idle_exit`` seconds.
    Daemon threads, not a ``concurrent.futures`` executor: a handler that never returns must not
    hold up interpreter exit (executor threads are joined at exit). A call cannot be interrupted:
    when its awaiter is cancelled or times out, the call is abandoned and runs to its end on its
    thread; nothing of the pool's owner is referenced by the pool.
    """

    def __init__(self, name: str, max_workers: int = 16, idle_exit: float = 5.0) -> None:
        self.name, self.max_workers, self.idle_exit = name, max_workers, idle_exit
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``fn()`` on a worker; a future of the running loop (call on the loop thread)."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: the pool is closed")
            spawn = self._idle == 0 and self._threads < self.max_workers
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1 if self._idle else 0
        self._queue.put((fn, fut))
        if spawn:
            threading.Thread(target=self._work, name=self.name, daemon=True).start()
        return fut

    def close(self) -> None:
        """Refuse new calls; idle workers exit, busy ones exit when their call ends; calls still
        queued are cancelled."""
        with self._lock:
            self._closed = True
            count = self._threads
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                _settle(item[1], None, None, cancel=True)
        for _ in range(count):
            self._queue.put(None)

    def _work(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self.idle_exit)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0 or self._closed:
                        self._idle -= 1 if self._idle else 0
                        self._threads -= 1
                        return
                continue
            if item is None:
                with self._lock:
                    self._threads -= 1
                return
            fn, fut = item
            try:
                result, error = fn(), None
            except BaseException as exc:  # handed to the awaiter, which decides what it means
                result, error = None, exc
            _settle(fut, result, error)
            del fn, fut, item, result, error  # an abandoned call's objects go now, not at the next one
            with self._lock:
                if self._closed:
                    self._threads -= 1
                    return
                self._idle += 1


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None, cancel: bool = False) -> None:
    def settle() -> None:
        if fut.done():
            return
        if cancel:
            fut.cancel()
        elif error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        fut.get_loop().call_soon_threadsafe(settle)
