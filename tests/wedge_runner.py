"""A benchmark runner of the shape that wedged for ever after a fault (issue 24): one MCP session,
opened once and kept across ``run_until_complete`` calls of a private event loop, with no read timeout
unless asked for, and a cleanup that keeps the session's own outcome (it swallows a failed delete).

The same code runs with mcp 1.x (``streamablehttp_client``; the suite's child Pythons get it from
``mcp1_overlay``) and mcp 2.x (``streamable_http_client``): both ship ``ClientSession``.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import mcp.client.streamable_http as _streamable
from mcp import ClientSession

MCP1 = hasattr(_streamable, "streamablehttp_client")
_open = _streamable.streamablehttp_client if MCP1 else _streamable.streamable_http_client


class Runner:
    """Open a session on ``url`` now; ``call`` and ``run_task`` reuse it (and the loop) ever after."""

    def __init__(self, url: str, read_timeout: float | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.stack = AsyncExitStack()
        self.read_timeout = read_timeout
        self.session: Any = None
        self.loop.run_until_complete(self._open(url))

    async def _open(self, url: str) -> None:
        streams = await self.stack.enter_async_context(_open(url))
        t = self.read_timeout
        timeout: Any = None if t is None else (timedelta(seconds=t) if MCP1 else t)
        session = ClientSession(streams[0], streams[1], read_timeout_seconds=timeout)
        self.session = await self.stack.enter_async_context(session)
        await self.session.initialize()

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        result = self.loop.run_until_complete(self.session.call_tool(tool, args))
        return json.loads(result.content[0].text)

    def run_task(self, task_id: str) -> str:
        sid = self.call("create_session", {"task_id": task_id})["session_id"]
        try:
            self.call("evaluate_session", {"session_id": sid})
        finally:
            try:
                self.call("delete_session", {"session_id": sid})
            except Exception as exc:  # hardened: a failed cleanup does not fail the session
                return f"cleanup failed: {type(exc).__name__}"
        return "ok"
