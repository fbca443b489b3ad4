"""Resumption (docs/resumption.md): close_stream ends a call's event stream after its priming event;
the mcp 2.x Client resumes it with Last-Event-ID and passes ``assert_client_resumed``, a client that
reconnects without Last-Event-ID is caught."""

from __future__ import annotations

import httpx
import pytest
from mcp.client import Client

from pytest_mcpfaults import CloseStream

ACCEPT = {"Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "h", "version": "1"},
    },
}
ECHO = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "x"}},
}


# --8<-- [start:resumes]
@pytest.mark.mcp_sidecar(era="session", faults=[CloseStream(retry_ms=300, when="tool:echo")])
async def test_the_client_resumes_the_closed_stream(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        result = await client.call_tool("echo", {"text": "resumed"})
    assert result.content[0].text == "resumed"  # the reply came on the resumed stream
    mcp_sidecar.assert_client_resumed("tool:echo", within=2.0)
    [stream] = mcp_sidecar.closed_streams
    assert stream.resumed_with == stream.last_event_id  # GET /mcp with Last-Event-ID
    assert stream.resumed_at - stream.closed_at >= 0.3  # after the retry


# --8<-- [end:resumes]


# --8<-- [start:caught]
@pytest.mark.mcp_sidecar(era="session", faults=[CloseStream(retry_ms=50)])
def test_a_client_that_reconnects_without_last_event_id_is_caught(mcp_sidecar):
    with httpx.Client(headers=ACCEPT) as http:
        session = {"Mcp-Session-Id": http.post(mcp_sidecar.mcp_url, json=INIT).headers["mcp-session-id"]}
        http.post(mcp_sidecar.mcp_url, json=ECHO, headers=session)  # ends after the priming event
        http.get(mcp_sidecar.mcp_url, headers=session)  # reconnects, without Last-Event-ID
        http.delete(mcp_sidecar.mcp_url, headers=session)  # and ends its session
    with pytest.raises(AssertionError, match="with GET /mcp without Last-Event-ID"):
        mcp_sidecar.assert_client_resumed(within=1.0)


# --8<-- [end:caught]
