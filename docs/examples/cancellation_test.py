"""Cancellation (docs/cancellation.md): a harness that cancels its call at its own timeout passes
``assert_client_cancelled``, one that only deletes the session is caught; the journal's records of a
cancellation; the two cancel kinds; a cancel on the legacy HTTP+SSE transport; a sync tool that
stops on ``ctx.cancelled``."""

from __future__ import annotations

import httpx
import pytest
from mcp import ClientSession
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import IgnoreCancel, SyncToolContext, Tool

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
SLEEP = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": "sleep", "arguments": {"seconds": 3}},
}


# --8<-- [start:cancels]
@pytest.mark.mcp_sidecar(era="session")
async def test_the_harness_cancels_its_call_at_its_timeout(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("sleep", {"seconds": 3}, read_timeout_seconds=0.5)
    # mcp 2.x sent notifications/cancelled naming the call, then deleted the session
    mcp_sidecar.assert_client_cancelled("tool:sleep", within=1.0)
    [cancel] = mcp_sidecar.cancellations
    call = mcp_sidecar.journal.request(cancel.cancels)
    assert call.label == "POST tools/call sleep" and cancel.in_flight
    # at the client's 0.5 s timeout, not at once: the sidecar's clock starts when the call arrived, after
    # the client's own timer had started (seen: 0.4993 s), so the lower bound leaves it that transit
    assert 0.4 <= cancel.since_sent < 1.0
    assert call.cancel.outcome == "stopped"  # the sidecar stopped the tool, sent no response


# --8<-- [end:cancels]


# --8<-- [start:caught]
async def test_a_harness_that_deletes_without_cancelling_is_caught(mcp_sidecar):
    with httpx.Client(headers=ACCEPT) as http:
        sid = http.post(mcp_sidecar.mcp_url, json=INIT).headers["mcp-session-id"]
        session = {"Mcp-Session-Id": sid}
        with pytest.raises(httpx.ReadTimeout):  # the harness's own timeout ...
            http.post(mcp_sidecar.mcp_url, json=SLEEP, headers=session, timeout=0.5)
        http.delete(mcp_sidecar.mcp_url, headers=session)  # ... then it ends the session
    with pytest.raises(AssertionError, match=r"without cancelling tools/call sleep \(id 3\)"):
        mcp_sidecar.assert_client_cancelled("tool:sleep", within=1.0)


# --8<-- [end:caught]


# --8<-- [start:ignore]
@pytest.mark.mcp_sidecar(era="session", faults=[IgnoreCancel(when="tool:sleep")])
async def test_a_server_that_ignores_the_cancel(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("sleep", {"seconds": 1}, read_timeout_seconds=0.3)
    mcp_sidecar.wait_idle()
    [call] = [r for r in mcp_sidecar.requests if r.label == "POST tools/call sleep"]
    assert call.cancel.outcome == "ignored"  # the tool ran its whole second, then answered
    assert call.ended_at - call.started_at >= 1.0


# --8<-- [end:ignore]


# --8<-- [start:legacy]
@pytest.mark.mcp_sidecar(transport="sse")
async def test_a_cancel_on_the_legacy_sse_transport(mcp_sidecar):
    async with sse_client(mcp_sidecar.sse_url, timeout=5) as (read, write):  # noqa: SIM117
        async with ClientSession(read, write) as session:
            await session.initialize()
            with pytest.raises(MCPError, match="timed out"):
                await session.call_tool("sleep", {"seconds": 3}, read_timeout_seconds=0.5)
    mcp_sidecar.assert_client_cancelled("tool:sleep", within=1.0)
    [call] = [r for r in mcp_sidecar.requests if r.label == "POST tools/call sleep"]
    assert call.status == 202  # the POST was taken at once; its reply was owed on the stream ...
    assert call.cancel.outcome == "stopped"  # ... and never sent: the cancel stopped the call


# --8<-- [end:legacy]


# --8<-- [start:sync]
def lookup(query: str, ctx: SyncToolContext) -> str:
    """A sync tool: it runs on a worker thread, which a cancel cannot kill, so it waits on
    ctx.cancelled where it would sleep, and gives up once the call is stopped."""
    if ctx.cancelled.wait(3):  # True: the call was stopped
        return "gave up"
    return f"found {query}"


SYNC = Tool("lookup", lookup, {"type": "object", "properties": {"query": {"type": "string"}}})


@pytest.mark.mcp_sidecar(era="session", tools=[SYNC])
async def test_a_sync_tool_stops_on_ctx_cancelled(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("lookup", {"query": "x"}, read_timeout_seconds=0.5)
    mcp_sidecar.wait_for(lambda reqs: any(r.ran_until is not None for r in reqs))
    [call] = [r for r in mcp_sidecar.requests if r.label == "POST tools/call lookup"]
    assert call.cancel.outcome == "stopped" and call.ran_on  # it ran on after the cancel ...
    assert call.ran_until - call.cancel.at < 1.0  # ... briefly: it saw ctx.cancelled; nothing sent


# --8<-- [end:sync]
