"""The upstream forwarder on its own (``pytest_mcpfaults.proxy.upstream``): requests to the mcp SDK's
own server, headers passed through and dropped, the body read as it comes, and each way an upstream
fails (refused, timed out, reset) told apart. The URL check that guards ``Sidecar(upstream=)``."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator, Iterator

import pytest
from sdk_upstream import SdkUpstream, serve

from pytest_mcpfaults.options.checks import check_upstream_url
from pytest_mcpfaults.proxy.upstream import Upstream, UpstreamError, end_to_end

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = ("Accept", "application/json, text/event-stream")


@pytest.fixture(scope="module")
def sdk() -> Iterator[SdkUpstream]:
    with serve() as up:
        yield up


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = Upstream("http://127.0.0.1:1/mcp", timeout=2.0)
    yield up
    await up.close()


async def test_an_initialize_comes_back_as_the_sdk_servers_own_sse_answer(
    sdk: SdkUpstream, upstream: Upstream
) -> None:
    resp = await upstream.send(
        "POST", sdk.url, [ACCEPT, ("Content-Type", "application/json")], json.dumps(INIT).encode()
    )
    body = await resp.read()
    upstream.done(resp)
    assert resp.status == 200 and resp.sse
    names = {n.lower() for n, _ in resp.headers}
    assert "mcp-session-id" in names  # the SDK's session header is relayed
    assert "transfer-encoding" not in names and "connection" not in names  # hop-by-hop: dropped
    assert body.startswith(b"event: message\r\ndata: ") or body.startswith(b"event: message\ndata: ")
    assert resp.received == len(body) and resp.ended_at is not None and resp.failure is None


async def test_a_missing_session_is_the_sdk_servers_400(sdk: SdkUpstream, upstream: Upstream) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    resp = await upstream.send(
        "POST", sdk.url, [ACCEPT, ("Content-Type", "application/json")], json.dumps(call).encode()
    )
    body = json.loads(await resp.read())
    assert resp.status == 400 and "session" in body["error"]["message"].lower()


def test_hop_by_hop_headers_and_those_connection_names_are_dropped() -> None:
    pairs = [
        ("Connection", "keep-alive, X-Private"),
        ("X-Private", "1"),
        ("Keep-Alive", "timeout=5"),
        ("Mcp-Session-Id", "abc"),
        ("Authorization", "Bearer t"),
        ("Transfer-Encoding", "chunked"),
    ]
    kept = end_to_end(pairs, frozenset({"connection", "keep-alive", "transfer-encoding"}))
    assert kept == [("Mcp-Session-Id", "abc"), ("Authorization", "Bearer t")]


async def test_nothing_listening_is_refused(upstream: Upstream) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UpstreamError) as info:
        await upstream.send("POST", f"http://127.0.0.1:{port}/mcp", [], b"{}")
    assert info.value.failure == "refused"
    assert "ConnectionRefusedError" in str(info.value)


async def _raw_server(on_connect: str) -> tuple[asyncio.Server, int]:
    """A TCP server on loopback that reads a request and then says nothing ('silent'), resets the
    connection ('reset'), or sends a status line and half a body then resets ('half')."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if on_connect == "silent":
            await asyncio.sleep(30)
            return
        if on_connect == "half":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            writer.write(head + b'{"a')
            await writer.drain()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _failure_of(url: str) -> str:
    """How one POST to ``url`` fails (:attr:`UpstreamError.failure`); it must fail."""
    up = Upstream(url, timeout=2.0)
    try:
        with pytest.raises(UpstreamError) as info:
            await up.send("POST", up.url, [], b"{}")
        return info.value.failure
    finally:
        await up.close()


async def test_an_upstream_that_never_answers_times_out_within_the_bound() -> None:
    server, port = await _raw_server("silent")
    up = Upstream(f"http://127.0.0.1:{port}/mcp", timeout=0.3)
    try:
        t0 = asyncio.get_running_loop().time()
        with pytest.raises(UpstreamError) as info:
            await up.send("POST", up.url, [], b"{}")
        assert info.value.failure == "timed_out"
        assert asyncio.get_running_loop().time() - t0 < 2.0
    finally:
        await up.close()
        server.close()


async def test_an_upstream_that_resets_before_answering_is_a_reset() -> None:
    server, port = await _raw_server("reset")
    try:
        assert await _failure_of(f"http://127.0.0.1:{port}/mcp") == "reset"
    finally:
        server.close()


async def test_an_upstream_that_resets_mid_body_fails_the_read_as_a_reset() -> None:
    server, port = await _raw_server("half")
    up = Upstream(f"http://127.0.0.1:{port}/mcp", timeout=2.0)
    try:
        resp = await up.send("POST", up.url, [], b"{}")
        assert resp.status == 200 and resp.content_length == 100
        with pytest.raises(UpstreamError) as info:
            await resp.read()
        assert info.value.failure == "reset" and resp.failure is info.value
        # aiohttp raises the reset before handing over bytes still buffered: 0 or the 3 that came
        assert resp.received in (0, 3)
    finally:
        await up.close()
        server.close()


async def test_once_closed_it_refuses_to_send(sdk: SdkUpstream) -> None:
    up = Upstream(sdk.url)
    await up.close()
    with pytest.raises(UpstreamError, match="stopped"):
        await up.send("POST", sdk.url, [], b"{}")


@pytest.mark.parametrize(
    ("url", "allow", "problem"),
    [
        ("http://127.0.0.1:9000/mcp", False, None),
        ("http://localhost:9000/mcp", False, None),
        ("http://[::1]:9000/mcp", False, None),
        ("https://127.0.0.1/mcp", False, None),
        ("http://example.test/mcp", True, None),
        ("http://example.test/mcp", False, "not a loopback address"),
        ("http://10.0.0.1:9000/mcp", False, "allow_remote_upstream=True"),
        ("ftp://127.0.0.1/mcp", False, "http:// or https://"),
        ("127.0.0.1:9000/mcp", False, "http:// or https://"),
        ("http://u:p@127.0.0.1/mcp", False, "user name or password"),
        ("http://127.0.0.1:9000/mcp?x=1", False, "query or a fragment"),
        ("http://127.0.0.1:0/mcp", False, "port"),
        ("http://127.0.0.1:99999/mcp", False, "not a valid URL"),
        ("", False, "URL string"),
        (9000, False, "URL string"),
    ],
)
def test_the_upstream_url_check(url: object, allow: bool, problem: str | None) -> None:
    found = check_upstream_url(url, allow)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


async def test_an_answer_that_is_not_http_is_an_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()
        await reader.read()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        assert await _failure_of(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp") == "error"
    finally:
        server.close()


class _KeepAlive:
    """A loopback HTTP/1.1 server that keeps connections alive and records every request head it reads,
    with the connection it came on. ``drop_second``: the second request on a connection is read and the
    connection closed without an answer (an upstream that closed an idle keep-alive connection just as
    the request was sent on it); ``close_after_answer``: each connection is closed after its first
    answer (an upstream's keep-alive timeout), ``closed`` set once it is."""

    def __init__(self, drop_second: bool = False, close_after_answer: bool = False) -> None:
        self.drop_second, self.close_after_answer = drop_second, close_after_answer
        self.closed = asyncio.Event()
        self.heads: list[tuple[int, bytes]] = []
        self.connections = 0

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn, served = self.connections, 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.heads.append((conn, head))
                served += 1
                if self.drop_second and served == 2:
                    writer.close()
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                )
                await writer.drain()
                if self.close_after_answer:
                    writer.close()
                    await writer.wait_closed()
                    self.closed.set()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass


async def test_keep_alive_connections_are_reused_and_repeated_headers_passed_on() -> None:
    server = _KeepAlive()
    async with server as url:
        up = Upstream(url, timeout=2.0)
        try:
            for _ in range(3):
                resp = await up.send("POST", url, [("X-Tag", "a"), ("x-tag", "b")], b"{}")
                assert await resp.read() == b"{}" and resp.status == 200 and resp.content_length == 2
                up.done(resp)
        finally:
            await up.close()
    assert [conn for conn, _ in server.heads] == [1, 1, 1]  # one connection, kept alive
    assert b"X-Tag: a\r\nx-tag: b\r\n" in server.heads[0][1]  # both values, in the order sent


@pytest.mark.parametrize(("method", "outcome"), [("DELETE", "sent again"), ("POST", "reset")])
async def test_a_kept_alive_connection_the_upstream_closed_under_a_request(method: str, outcome: str) -> None:
    """An idempotent request is sent again, once, on a new connection; a POST is not (it may have run)."""
    server = _KeepAlive(drop_second=True)
    async with server as url:
        up = Upstream(url, timeout=2.0)
        try:
            first = await up.send("POST", url, [], b"{}")
            await first.read()
            up.done(first)
            if outcome == "reset":
                with pytest.raises(UpstreamError) as info:
                    await up.send(method, url, [], b"")
                assert info.value.failure == "reset"
                assert [conn for conn, _ in server.heads] == [1, 1]
            else:
                again = await up.send(method, url, [], b"")
                assert again.status == 200 and await again.read() == b"{}"
                up.done(again)
                assert [conn for conn, _ in server.heads] == [1, 1, 2]  # dropped on 1, answered on 2
        finally:
            await up.close()


async def test_a_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    server = _KeepAlive(close_after_answer=True)
    async with server as url:
        up = Upstream(url, timeout=2.0)
        try:
            first = await up.send("POST", url, [], b"{}")
            await first.read()
            up.done(first)
            await asyncio.wait_for(server.closed.wait(), 2)
            # the FIN is in the idle connection's socket now (loopback); one turn of the loop reads it
            await asyncio.sleep(0.01)
            second = await up.send("POST", url, [], b"{}")  # a POST is never sent twice: a new connection
            assert second.status == 200 and await second.read() == b"{}"
            up.done(second)
            assert [conn for conn, _ in server.heads] == [1, 2]
        finally:
            await up.close()
