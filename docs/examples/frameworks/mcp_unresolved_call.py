"""The case run by mcp_unresolved_call_test.py, in a pytest of its own (not collected here: the name
has no ``_test``): the official mcp SDK's streamable HTTP client calls a tool that reports progress
and then works on for longer than the client's read timeout (scaled down: a 0.5 s read timeout for
the 300 s the SDK reads with by default, a 1 s pause for minutes of work). No fault: the sidecar
answers everything. No LLM.

mcp 1.x: the read times out in the middle of the tool's event stream, and the transport, with no
event id to resume from (the progress notification that opened the stream carries none), returns
without telling the session; ``call_tool`` waits for ever on a
response nothing will deliver (modelcontextprotocol/python-sdk issues #1811 and #3441; 1.30.0, the
last 1.x release, still does it). mcp 2.0.0 resolves the abandoned request with an error (PR #3047):
``call_tool`` raises ``MCPError: SSE stream ended without a response``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

BUDGET = 2.0
VERSION = importlib.metadata.version("mcp")


# --8<-- [start:case]
async def call(url: str) -> str:
    """Connect, call ``progress`` (two steps a second apart), say what came of it."""
    if VERSION.startswith("1."):
        import httpx as http  # mcp 1.x reads through httpx
    else:
        import httpx2 as http  # mcp 2.x through httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    http_client = http.AsyncClient(timeout=http.Timeout(5.0, read=0.5))
    async with (
        http_client,
        streamable_http_client(url, http_client=http_client) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        try:
            result = await session.call_tool(
                "progress", {"steps": 2, "interval": 1.0}, progress_callback=on_progress
            )
        except Exception as exc:  # the SDK's MCPError / McpError
            return f"call_tool raised {type(exc).__name__}: {exc} (progress seen: {steps})"
        return f"call_tool returned {result.content[0].text!r}"  # type: ignore[union-attr]


@pytest.mark.mcp_sidecar(era="session", patience=BUDGET, tool_sets=("basic", "client"))
def test_a_tool_that_works_past_the_read_timeout(mcp_sidecar):
    print(f"mcp {VERSION}: calling", flush=True)
    outcome = asyncio.run(call(mcp_sidecar.mcp_url))
    print(f"mcp {VERSION}: {outcome}")


# --8<-- [end:case]
