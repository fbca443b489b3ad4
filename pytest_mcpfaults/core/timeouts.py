"""A bounded await, for any asyncio code of the package (no loop thread, no transport): :func:`within`.

It lives apart from :mod:`pytest_mcpfaults.transports.loop` (the socket sidecar's loop thread) so the
transport-free core (``mcp/endpoint.py``) and the clients (``upstream.py``, the OTLP receiver) can bound a
wait without importing the socket transport.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


if sys.version_info >= (3, 11):

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        """``await asyncio.wait_for(awaitable, seconds)`` without the task ``wait_for`` makes for a
        coroutine (before 3.12) and its extra loop steps: one timer on the current task. Raises
        ``asyncio.TimeoutError`` (``TimeoutError``) as ``wait_for`` does."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - 3.10: asyncio.timeout is new in 3.11

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)
