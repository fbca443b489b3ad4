"""Session hygiene: a client that ends its session passes; one that keeps its sessions on purpose says
so. ``docs/examples/sessions/leak.py`` holds the runner that never ends its session, which fails at
teardown (``tests/test_session_hygiene.py`` runs it and compares the verdict with docs/sessions.md)."""

from __future__ import annotations

import contextlib

import httpx
import pytest
from mcp.client import Client
from opentelemetry import trace

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
RUNNER = {"name": "runner", "version": "1"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": RUNNER}}  # fmt: skip


# --8<-- [start:ends]
@pytest.mark.mcp_sidecar(era="session")
async def test_a_client_that_ends_its_session(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "hi"})
    # leaving `async with` sent DELETE /mcp: the session is ended, nothing is owed


# --8<-- [end:ends]


# --8<-- [start:kept]
@pytest.mark.mcp_keep_sessions  # this test leaves its session open on purpose
@pytest.mark.mcp_sidecar(era="session")
def test_a_session_kept_on_purpose(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        sid = http.post(mcp_sidecar.mcp_url, json=INIT, headers=HEADERS).headers["Mcp-Session-Id"]
    assert sid in mcp_sidecar.sessions  # still live when the test ends: no DELETE is asked for


# --8<-- [end:kept]


# --8<-- [start:keeps_calling]
TRACER = trace.get_tracer("runner")


async def call(client, tool, arguments):
    """One tool call in a span that follows OpenTelemetry's MCP conventions; an error is the call's
    own: the next call goes out as any other."""
    attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool}
    with TRACER.start_as_current_span(
        f"tools/call {tool}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ):
        return await client.call_tool(tool, arguments)


@pytest.mark.mcp_sidecar(era="session", faults=["status(code=503)@tool:echo[times=1]"])
async def test_a_runner_that_keeps_calling_after_a_failed_call(mcp_sidecar, mcp_spans):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        with contextlib.suppress(Exception):
            await call(client, "echo", {"text": "first"})  # answered 503
        result = await call(client, "echo", {"text": "second"})
    assert result.content[0].text == "second"
    assert [r.status for r in mcp_sidecar.journal.requests if r.tool == "echo"] == [503, 200]


# --8<-- [end:keeps_calling]
