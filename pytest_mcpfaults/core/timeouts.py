"""A bounded await (:func:`within`), apart from the socket transport so that the transport-free core and
the clients can bound a wait without importing it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


if sys.version_info >= (3, 11):

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        """``asyncio.wait_for(awaitable, seconds)`` without the task it makes for a coroutine (before
        3.12) and its extra loop steps: one timer on the current task."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - 3.10: asyncio.timeout is new in 3.11

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)
