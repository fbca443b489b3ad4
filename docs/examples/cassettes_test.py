"""Cassettes: record your real MCP server once through proxy mode, then replay it offline, with faults.
Your server here is the mcp SDK's own ``MCPServer`` served by uvicorn on a thread (as in proxy_test.py)."""

import asyncio
import json
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from mcp.client import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar, SidecarError, read_cassette
from pytest_mcpfaults.faults import BackendGone, Die, Stall, Trigger

if sys.version_info < (3, 11):  # the backport that anyio (and so mcp) already installs
    from exceptiongroup import ExceptionGroup

HERE = Path(__file__).resolve().parent
ACCEPT = {"Accept": "application/json, text/event-stream"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}


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
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(your_server().streamable_http_app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    server.should_exit = True
    thread.join(5)


async def open_and_close(url, mode="legacy"):
    async with Client(url, mode=mode, read_timeout_seconds=2) as client:
        opened = json.loads((await client.call_tool("open_ticket", {"title": "disk full"})).content[0].text)
        closed = await client.call_tool("close_ticket", {"id": opened["id"]})
        return opened, json.loads(closed.content[0].text)


# --8<-- [start:record]
@pytest.fixture(scope="module")
def cassette(upstream_url, tmp_path_factory):
    """Record once: the sidecar in front of your server writes every exchange when it stops."""
    path = tmp_path_factory.mktemp("cassettes") / "tickets.jsonl"
    with Sidecar(upstream=upstream_url, record=str(path)) as sidecar:
        live = asyncio.run(open_and_close(sidecar.mcp_url))
    assert live == ({"id": 1, "title": "disk full"}, {"closed": True})
    return path


def test_the_cassette_holds_what_your_server_said(cassette):
    exchanges = read_cassette(cassette).exchanges
    assert [e.tool for e in exchanges if e.tool] == ["open_ticket", "close_ticket"]
    assert exchanges[0].method == "initialize" and exchanges[-1].http == "DELETE"


# --8<-- [end:record]


# --8<-- [start:replay]
@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the session era, and the stateless one
async def test_the_replay_answers_as_your_server_did(mcp_sidecar_factory, cassette, mode):
    sidecar = mcp_sidecar_factory(cassette=str(cassette))  # offline: your server is not asked
    assert await open_and_close(sidecar.mcp_url, mode) == ({"id": 1, "title": "disk full"}, {"closed": True})
    assert set(sidecar.tools) == {"open_ticket", "close_ticket"}  # your server's tools and schemas


# --8<-- [end:replay]


# --8<-- [start:faults]
async def test_your_recorded_server_dies_under_close_ticket(mcp_sidecar_factory, cassette):
    sidecar = mcp_sidecar_factory(cassette=str(cassette), faults=[Die(when="tool:close_ticket")])
    with pytest.raises(ExceptionGroup):  # the connection reset under the call, as in front of your server
        await open_and_close(sidecar.mcp_url)
    assert sidecar.fired == {"die": 1}


async def test_your_recorded_server_stalls_then_its_backend_is_gone(mcp_sidecar_factory, cassette):
    sidecar = mcp_sidecar_factory(
        cassette=str(cassette),
        faults=[
            Stall(after_bytes=0, when=Trigger("tool:open_ticket", nth=1)),
            BackendGone(when="tool:close_ticket"),
        ],
    )
    async with Client(sidecar.mcp_url, mode="legacy", read_timeout_seconds=0.5) as client:
        with pytest.raises(MCPError, match="timed out"):  # the first open_ticket's answer never comes
            await client.call_tool("open_ticket", {"title": "disk full"})
    opened, closed = await open_and_close(sidecar.mcp_url)
    assert opened == {"id": 1, "title": "disk full"}  # the recorded answer
    assert "is no longer alive" in closed["error"]  # backend_gone names your server's address


# --8<-- [end:faults]


# --8<-- [start:miss]
async def test_a_call_the_cassette_never_saw_fails_naming_the_nearest(cassette):
    sidecar = Sidecar(cassette=str(cassette)).start()
    async with Client(sidecar.mcp_url, mode="legacy", read_timeout_seconds=10) as client:
        with pytest.raises(MCPError) as miss:  # at once, long before the 10 s: never a hang
            await client.call_tool("close_ticket", {"id": 7})
    assert str(miss.value).endswith("argument 'id' differs: recorded 1, sent 7")
    sidecar.stop()
    with pytest.raises(SidecarError, match="nearest: line"):  # and the test fails with it at teardown
        sidecar.check_errors()


async def test_ignore_an_argument_when_matching(mcp_sidecar_factory, cassette):
    sidecar = mcp_sidecar_factory(cassette=str(cassette), cassette_ignore=["id"])
    async with Client(sidecar.mcp_url, mode="legacy") as client:
        closed = await client.call_tool("close_ticket", {"id": 7})  # answered as the recorded id 1 was
    assert json.loads(closed.content[0].text) == {"closed": True}


# --8<-- [end:miss]


# --8<-- [start:marker]
# Committed next to the tests: recorded once (--mcpfaults-record=once, the default, records it when the
# file is missing, from the upstream named here), replayed in every later run, offline.
@pytest.mark.mcp_sidecar(
    upstream="http://127.0.0.1:9000/mcp", cassette=str(HERE / "cassettes" / "tickets.jsonl")
)
async def test_from_the_committed_cassette(mcp_sidecar):
    assert await open_and_close(mcp_sidecar.mcp_url) == ({"id": 1, "title": "disk full"}, {"closed": True})


# --8<-- [end:marker]


# --8<-- [start:redact]
async def test_what_is_never_written(upstream_url, tmp_path):
    def redact(exchange):  # your hook: after the default redaction, before the line is written
        return json.loads(json.dumps(exchange).replace("disk full", "<title>"))  # or None: left out

    path = tmp_path / "redacted.jsonl"
    with Sidecar(upstream=upstream_url, record=str(path), record_redact=redact) as sidecar:
        await open_and_close(sidecar.mcp_url)
        async with httpx.AsyncClient() as http:  # a client sending its credentials
            await http.post(
                sidecar.mcp_url,
                headers={"Authorization": "Bearer sk-live-0123456789abcdef", **ACCEPT},
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
            )
    text = path.read_text()
    assert "disk full" not in text and "<title>" in text
    assert "sk-live" not in text and '"Authorization": "[REDACTED]"' in text


# --8<-- [end:redact]
