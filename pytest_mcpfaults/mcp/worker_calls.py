"""A sync user tool handler's call on a worker thread, and what stopping that call can do to it.

The socket sidecar runs a sync handler on a worker thread (``WorkerPool``), off the loop. A thread
cannot be killed: when the call is stopped (the client cancelled it, ``tool_timeout`` ran out, the
sidecar stopped) the awaiting task is cancelled and the call's answer is abandoned, but the handler
runs on to its end and its result is dropped. :func:`on_worker` says so twice: to the handler, through
the :class:`SyncToolContext` it gets when it takes ``ctx`` (``ctx.cancelled`` is set, so a handler that
polls it or waits on it returns early), and to the journal, through ``ran_on`` (the call's record gets
``ran_on=True`` when it is stopped while its handler runs, and ``ran_until`` when the handler ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["RanOn", "SyncToolContext", "on_worker"]

RanOn = Callable[[bool], None]
"""Told, on the loop thread, ``False`` when the call is stopped while its handler still runs, and then
``True`` once that handler has returned or raised."""


class SyncToolContext:
    """What a sync (``def``) tool handler with a parameter named ``ctx`` gets there.

    ``cancelled`` is a :class:`threading.Event`, set when the call is stopped: the client cancelled it
    (``notifications/cancelled``, or in the 2026-07-28 era closed its stream), it ran past
    ``tool_timeout``, or the sidecar stopped. The sidecar cannot stop a thread, so a handler that runs
    long polls ``ctx.cancelled.is_set()``, or waits with ``ctx.cancelled.wait(seconds)`` where it
    would ``time.sleep``, and returns once it is set; what it returns then is not sent. ``tool``: the
    tool's name. (An ``async def`` handler gets a
    :class:`~pytest_mcpfaults.mcp.outbound.ToolContext` instead, and is stopped by
    ``asyncio.CancelledError``.)"""

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
    """``fn()`` on a worker thread (``run_sync``), awaited. When the awaiting task is cancelled before
    ``fn`` returned: ``cancelled`` is set (the handler's ``ctx.cancelled``) and ``ran_on`` is told, then
    told again when ``fn`` ends on its thread; the cancellation goes on."""
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
