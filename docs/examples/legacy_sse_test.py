"""The legacy 2024-11-05 HTTP+SSE transport: serving it, faults on its stream and on its message POSTs."""

import asyncio

import pytest
from mcp import ClientSession, MCPError
from mcp.client.sse import sse_client


# --8<-- [start:connect]
@pytest.mark.mcp_sidecar(transport="sse")
async def test_a_legacy_sse_client(mcp_sidecar):
    async with sse_client(mcp_sidecar.sse_url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("echo", {"text": "hello"})
    assert result.content[0].text == "hello"
    mcp_sidecar.wait_idle(5)
    assert mcp_sidecar.journal.sequence()[:4] == [
        "GET /sse",  # the stream: its first event names the message URL
        "POST initialize",  # each message is a POST to /messages?session_id=<hex>: 202 Accepted,
        "POST notifications/initialized",  # its reply arrives on the stream
        "POST tools/call echo",
    ]
    assert all(r.status == 202 for r in mcp_sidecar.requests[1:])


# --8<-- [end:connect]


# --8<-- [start:both]
async def test_both_transports_on_one_sidecar(mcp_sidecar_factory):
    from mcp.client import Client

    sidecar = mcp_sidecar_factory(transport="both", era="session")
    async with Client(sidecar.mcp_url, mode="legacy") as client:  # Streamable HTTP on /mcp
        await client.call_tool("echo", {"text": "over streamable http"})
    async with (
        sse_client(sidecar.sse_url) as (read, write),
        ClientSession(read, write) as session,
    ):  # legacy HTTP+SSE on /sse
        await session.initialize()
        await session.call_tool("echo", {"text": "over legacy sse"})
    assert {r.path for r in sidecar.requests} == {"/mcp", "/sse", "/messages"}


# --8<-- [end:both]


# --8<-- [start:no_endpoint]
@pytest.mark.mcp_sidecar(transport="sse", faults=["stall@GET /sse"])
async def test_a_stream_that_never_sends_the_endpoint_event(mcp_sidecar):
    async def connect():
        async with (
            sse_client(mcp_sidecar.sse_url, sse_read_timeout=0.5) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

    # sse_client never returns here, even past its own sse_read_timeout: bound it yourself.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(connect(), 2.0)
    [stream] = mcp_sidecar.requests
    assert (stream.status, stream.bytes_sent) == (200, 0)  # headers, then not one byte
    mcp_sidecar.assert_client_released(within=2.0, target="GET /sse")  # sse_read_timeout closed it


# --8<-- [end:no_endpoint]


# --8<-- [start:die]
@pytest.mark.mcp_sidecar(transport="sse", faults=["die@tool:delete_session"])
async def test_the_sidecar_dies_between_the_202_and_the_reply(mcp_sidecar):
    with pytest.raises(BaseException, match="unhandled errors") as caught:  # noqa: PT012
        async with (
            sse_client(mcp_sidecar.sse_url) as (read, write),
            ClientSession(read, write, read_timeout_seconds=5) as session,
        ):
            await session.initialize()
            await session.call_tool("delete_session", {"session_id": "b-1"})
    assert "Connection closed" in repr(caught.value)  # the SDK's MCPError(-32000), in ExceptionGroups
    delete = mcp_sidecar.requests[-1]
    assert (delete.label, delete.status) == ("POST tools/call delete_session", 202)  # taken, then died
    assert mcp_sidecar.state == "dead"


# --8<-- [end:die]


# --8<-- [start:stall]
@pytest.mark.mcp_sidecar(transport="sse", faults=["stall(after_bytes=12)@tool:echo"], patience=None)
async def test_a_reply_that_stalls_on_the_stream(mcp_sidecar):
    async with (
        sse_client(mcp_sidecar.sse_url) as (read, write),
        ClientSession(read, write, read_timeout_seconds=1) as session,
    ):
        await session.initialize()
        with pytest.raises(MCPError, match="timed out"):
            await session.call_tool("echo", {"text": "x"})
    echo = next(r for r in mcp_sidecar.requests if r.tool == "echo")
    assert echo.status == 202  # the POST was answered; its reply stalled on the stream:
    mcp_sidecar.assert_client_released(within=5.0, target="GET /sse")  # leaving sse_client closed it
    stream = mcp_sidecar.requests[0]  # the hold is the stream's, named by the fault that holds it
    assert (stream.label, stream.fault) == ("GET /sse", "stall(after_bytes=12)@tool:echo")


# --8<-- [end:stall]
