"""A sync user tool handler's call on a worker thread, and what stopping that call can do to it.

A thread cannot be killed: when the call is stopped, the awaiting task is cancelled and the answer
abandoned, but the handler runs on to its end. :func:`on_worker` tells the handler (its
``ctx.cancelled``) and the journal (``ran_on``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

RanOn = Callable[[bool], None]


class SyncToolContext:
    """What a sync (``def``) tool handler with a parameter named ``ctx`` gets there.

    ``cancelled`` is a :class:`threading.Event`, set when the call is stopped (the client cancelled
    it, it ran past ``tool_timeout``, or the sidecar stopped). The sidecar cannot stop a thread, so a
    handler that runs long polls ``ctx.cancelled.is_set()``, or waits with
    ``ctx.cancelled.wait(seconds)`` where it would ``time.sleep``; what it returns then is not sent."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.cancelled = threading.Event()

    def __repr__(self) -> str:
        return f"SyncToolContext(tool={self.tool!r}, cancelled={self.cancelled.is_set()})"


async def on_worker(
    run_sync: Callable[[Callable[[], Any]], Awaitable[Any]],
    fn: Callable[[], Any],
    *,
    cancelled: threading.Event | None = None,
    ran_on: RanOn | None = None,
) -> Any:
    """``fn()`` on a worker thread, awaited. Cancelled before ``fn`` returned: ``cancelled`` is set and
    ``ran_on(False)`` told, then ``ran_on(True)`` when ``fn`` ends on its thread."""
    loop = asyncio.get_running_loop()
    finished = False
    abandoned = False

    def ended() -> None:  # on the loop thread, once fn has ended on its own
        nonlocal finished
        finished = True
        if abandoned and ran_on is not None:
            ran_on(True)

    def work() -> Any:
        try:
            return fn()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to tell
                loop.call_soon_threadsafe(ended)

    try:
        return await run_sync(work)
    except asyncio.CancelledError:
        if cancelled is not None:
            cancelled.set()
        if not finished:
            abandoned = True
            if ran_on is not None:
                ran_on(False)
        raise
