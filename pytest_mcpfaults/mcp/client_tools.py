"""The ``client`` tool set: built-in tools that send the client messages of their own during the
call (:class:`~pytest_mcpfaults.mcp.outbound.ToolContext`), so a harness's answers to server
requests, and its handling of progress and logging, can be tested without writing a tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pytest_mcpfaults.mcp.outbound import LOG_LEVELS, ToolContext
from pytest_mcpfaults.mcp.tools import BuiltinTool


async def _ask_user(ctx: ToolContext, message: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    return await ctx.elicit(message, schema)


async def _ask_model(ctx: ToolContext, prompt: str, max_tokens: int = 100) -> dict[str, Any]:
    return await ctx.sample(prompt, max_tokens=max_tokens)


async def _list_roots(ctx: ToolContext) -> dict[str, Any]:
    return {"roots": await ctx.list_roots()}


async def _ping_client(ctx: ToolContext) -> str:
    await ctx.ping()
    return "pong"


async def _progress(ctx: ToolContext, steps: int, interval: float = 0.0, total: float | None = None) -> str:
    for step in range(1, steps + 1):
        if step > 1 and interval:
            await asyncio.sleep(interval)
        await ctx.progress(step, steps if total is None else total, f"step {step} of {steps}")
    return f"done after {steps} steps"


async def _log(ctx: ToolContext, level: str, message: str) -> str:
    if await ctx.log(level, message, logger="mcpfaults"):
        return f"logged at {level}"
    return f"not sent: the client asked for {ctx.log_level or 'no logs'}"


_STRING = {"type": "string"}
_NONE: Mapping[str, Any] = {"type": "object", "properties": {}}

#: Stateless: one copy serves every sidecar.
CLIENT_TOOLS = (
    BuiltinTool(
        "ask_user",
        _ask_user,
        {"type": "object", "properties": {"message": _STRING}, "required": ["message"]},
        "Ask the user (elicitation/create) and answer what the client answered.",
        client_paced=True,
    ),
    BuiltinTool(
        "ask_model",
        _ask_model,
        {
            "type": "object",
            "properties": {"prompt": _STRING, "max_tokens": {"type": "integer", "minimum": 1}},
            "required": ["prompt"],
        },
        "Ask the client's model (sampling/createMessage) and answer its message.",
        client_paced=True,
    ),
    BuiltinTool(
        "list_roots", _list_roots, _NONE, "Ask the client for its roots (roots/list).", client_paced=True
    ),
    BuiltinTool("ping_client", _ping_client, _NONE, "Ping the client, then answer pong.", client_paced=True),
    BuiltinTool(
        "progress",
        _progress,
        {
            "type": "object",
            "properties": {
                "steps": {"type": "integer", "minimum": 0},
                "interval": {"type": "number", "minimum": 0},
                "total": {"type": "number"},
            },
            "required": ["steps"],
        },
        "Report progress `steps` times, `interval` seconds apart, then answer.",
        client_paced=True,
    ),
    BuiltinTool(
        "log",
        _log,
        {
            "type": "object",
            "properties": {"level": {"type": "string", "enum": list(LOG_LEVELS)}, "message": _STRING},
            "required": ["level", "message"],
        },
        "Send one log message at `level` (if the client asked for that level or below).",
    ),
)
