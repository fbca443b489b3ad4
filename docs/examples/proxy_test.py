"""Proxy mode: your server, our faults. A real MCP server (here the mcp SDK's own ``MCPServer``, served by
uvicorn on a thread) behind a sidecar that forwards what its faults do not answer."""

import json
import socket
import sys
import threading
import time

import httpx
import pytest
import uvicorn
from mcp.client import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults.faults import Die, Stall, ToolError, Trigger

if sys.version_info < (3, 11):  # the backport that anyio (and so mcp) already installs
    from exceptiongroup import ExceptionGroup


# --8<-- [start:server]
def your_server() -> MCPServer:
    server = MCPServer("tickets")
    tickets = {}

    @server.tool()
    def open_ticket(title: str) -> str:
        """Open a ticket."""
        tickets[len(tickets) + 1] = title
        return json.dumps({"id": len(tickets), "title": title})

    @server.tool()
    def close_ticket(id: int) -> str:
        """Close a ticket."""
        return json.dumps({"closed": tickets.pop(id, None) is not None})

    return server


@pytest.fixture(scope="module")
def upstream_url():
    """Serve it on 127.0.0.1 (a free port) for the module; your own server may already be running."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY below
    sock.bind(("127.0.0.1", 0))
    app = your_server().streamable_http_app()  # both protocol eras, SSE answers
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    server.should_exit = True
    thread.join(5)


# --8<-- [end:server]


# --8<-- [start:die]
async def test_your_server_dies_under_the_second_call(mcp_sidecar_factory, upstream_url):
    sidecar = mcp_sidecar_factory(upstream=upstream_url, faults=[Die(when=Trigger("tools/call", nth=2))])
    # leaving `async with` re-raises the transport error, as on the fake: ExceptionGroup[httpx2.ReadError]
    with pytest.raises(ExceptionGroup):  # noqa: PT012
        async with Client(sidecar.mcp_url, mode="legacy", read_timeout_seconds=2) as client:
            opened = await client.call_tool("open_ticket", {"title": "disk full"})
            assert json.loads(opened.content[0].text) == {"id": 1, "title": "disk full"}  # your server's
            await client.call_tool("close_ticket", {"id": 1})  # the sidecar dies under this one
    first, died = [r for r in sidecar.requests if r.mcp_method == "tools/call"]
    assert first.forwarded and first.upstream.status == 200  # both legs of the first call
    assert died.fault_kind == "die" and not died.forwarded  # your server never saw the second


# --8<-- [end:die]


# --8<-- [start:rewrite]
async def test_a_tool_error_in_place_of_your_servers_real_result(mcp_sidecar_factory, upstream_url):
    sidecar = mcp_sidecar_factory(
        upstream=upstream_url, faults=[ToolError("quota exceeded", when="tool:open_ticket")]
    )
    async with Client(sidecar.mcp_url, mode="auto") as client:  # the 2026-07-28 stateless era
        result = await client.call_tool("open_ticket", {"title": "x"})
    assert result.is_error and result.content[0].text == "quota exceeded"
    (call,) = [r for r in sidecar.requests if r.tool == "open_ticket"]
    assert (
        call.upstream.status == 200 and call.upstream.bytes > 0
    )  # the tool really ran; its answer was replaced


# --8<-- [end:rewrite]


# --8<-- [start:stall]
async def test_your_servers_answer_stalls_after_its_first_bytes(mcp_sidecar_factory, upstream_url):
    sidecar = mcp_sidecar_factory(upstream=upstream_url, faults=[Stall(after_bytes=20, when="tools/call")])
    async with Client(sidecar.mcp_url, mode="legacy", read_timeout_seconds=0.5) as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("open_ticket", {"title": "y"})
    sidecar.wait_idle(5)  # the held call's record is final once its connection is gone
    (call,) = [r for r in sidecar.requests if r.mcp_method == "tools/call"]
    assert call.bytes_sent == 20 < call.upstream.bytes  # 20 of the bytes your server sent, then nothing
    assert call.hold == "client_closed"  # the client gave up on its own: no patience verdict


# --8<-- [end:stall]


# --8<-- [start:gateway]
def test_a_server_that_is_not_there_is_a_502(mcp_sidecar_factory):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    sidecar = mcp_sidecar_factory(upstream=nowhere)
    r = httpx.post(sidecar.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 502 and r.json()["error"]["message"].startswith("Bad Gateway")
    (rec,) = sidecar.requests
    assert rec.error_by == "upstream" and rec.upstream.failure == "refused"


# --8<-- [end:gateway]
