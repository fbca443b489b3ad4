"""``blackhole``: a connection that goes silent under a request (no FIN, no RST), the NAT or load
balancer that dropped an idle keep-alive connection; ``idle=``: only a pooled connection reused after
that long. Clients: a raw socket (what is dropped), httpx, the mcp 2.x ``Client`` and, through the
``mcp1_client`` fixture, mcp 1.x's ``ClientSession``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp1_client import Mcp1Client
from test_legacy_sse import ECHO, started

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import Blackhole, Trigger, parse_fault
from pytest_mcpfaults.verdicts.patience import patience_verdict

GET = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def _connect(sc: Sidecar) -> socket.socket:
    host, port = sc.url.rsplit("/", 1)[-1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    return s


def _read_all(s: socket.socket, within: float) -> bytes:
    """What the sidecar sends until it closes the connection or ``within`` seconds pass."""
    s.settimeout(within)
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except (TimeoutError, ConnectionError):
        pass
    return data


def test_the_kind_reads_and_refuses_its_idle() -> None:
    fault = parse_fault("blackhole(idle=2)@tools/call")
    assert fault == Blackhole(idle=2, when="tools/call")
    assert str(Blackhole()) == "blackhole"
    for bad in (-1, "2", float("nan"), True):
        with pytest.raises(ValueError, match="Blackhole: idle must be a finite non-negative number"):
            Blackhole(idle=bad)  # type: ignore[arg-type]


def test_what_the_client_sends_into_it_is_dropped_and_its_close_is_still_seen() -> None:
    """A raw socket: nothing comes back; a request sent once the connection is silent is never read
    (after ``release()`` the held one is answered, that one never is: ``hang`` would answer both);
    the client's close ends the hold (``client_closed``); the connection's record says when it went
    silent."""
    with Sidecar(faults=[Blackhole(when=Trigger("health", times=1))], patience=5.0) as sc:
        with _connect(sc) as s:
            s.sendall(GET)
            sc.wait_held(1)
            s.sendall(GET)  # into the void
            assert _read_all(s, 0.2) == b""
            sc.release()
            answered = _read_all(s, 0.3)
        assert answered.count(b"HTTP/1.1 200") == 1, answered
        sc.wait_idle(2)
        (rec,) = sc.requests  # the second request never reached the sidecar
        assert (rec.fault_kind, rec.hold, rec.status) == ("blackhole", "released", 200)
        (conn,) = sc.journal.connections
        assert conn.silent_at is not None and conn.silent_at >= rec.started_at
        assert conn.closed_by == "client"
    with Sidecar(faults=[Blackhole(when="health")], patience=5.0) as sc:
        with _connect(sc) as s:
            s.sendall(GET)
            sc.wait_held(1)
        sc.wait_idle(2)  # the close (FIN) reached the sidecar through the silence
        (rec,) = sc.requests
        assert rec.hold == "client_closed" and rec.client_closed
        assert sc.patience_violations == ()


def test_teardown_ends_an_unbounded_hold_at_once_with_a_reset() -> None:
    """``patience=None``: nothing bounds the hold but the sidecar's stop, which resets the connection
    (``hold="teardown"``) in bounded time."""
    with contextlib.ExitStack() as closing:  # the socket outlives the sidecar's stop
        with Sidecar(faults=[Blackhole(when="health")], patience=None) as sc:
            s = closing.enter_context(_connect(sc))
            s.sendall(GET)
            sc.wait_held(1)
            stopping = time.monotonic()
        assert time.monotonic() - stopping < 2.0
        assert _read_all(s, 1.0) == b""  # no byte, ever: the reset ends it
        (rec,) = sc.requests
        assert (rec.hold, rec.status, rec.client_closed) == ("teardown", None, False)
        assert sc.journal.connections[0].closed_by == "sidecar"


def test_idle_fires_only_on_a_connection_idle_that_long() -> None:
    """``idle=0.3``: a fresh connection and a keep-alive connection reused at once are answered; the
    same connection reused after 0.3 s idle is silenced (httpx: ``ReadTimeout``); the journal has the
    idle seconds of every request."""
    with Sidecar(faults=[Blackhole(idle=0.3, when="health")], patience=5.0) as sc:
        with httpx.Client(timeout=httpx.Timeout(5.0, read=0.3)) as http:
            assert http.get(sc.health_url).status_code == 200  # fresh
            assert http.get(sc.health_url).status_code == 200  # reused at once
            time.sleep(0.35)  # the pooled connection idles past 0.3 s (a sleep that cannot be short)
            with pytest.raises(httpx.ReadTimeout):
                http.get(sc.health_url)
            assert http.get(sc.health_url).status_code == 200  # httpx dropped it: a fresh one
        sc.wait_idle(2)
        recs = sc.requests
        assert [r.fault_kind for r in recs] == [None, None, "blackhole", None]
        assert recs[2].idle_before is not None and recs[2].idle_before >= 0.3
        assert recs[1].idle_before is not None and recs[1].idle_before < 0.3
        assert recs[2].hold == "client_closed"
        assert [c.silent_at is not None for c in sc.journal.connections] == [True, False]
        assert [c.requests for c in sc.journal.connections] == [3, 1]
        assert sc.fired == {"blackhole": 1}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_mcp2_client_times_out_on_a_reused_connection_then_calls_again(mode: str) -> None:
    """mcp 2.x: its pooled connection reused after ``idle`` gets no answer: ``MCPError … timed out``
    at its read timeout, the POST is closed, and its next call (a fresh connection) is answered."""
    with Sidecar(faults=[Blackhole(idle=0.3, when="tools/call")], patience=5.0) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=0.5) as client:
            assert (await client.call_tool("echo", {"text": "a"})).content[0].text == "a"
            await asyncio.sleep(0.35)
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("echo", {"text": "b"})
            assert (await client.call_tool("echo", {"text": "c"})).content[0].text == "c"
        await asyncio.to_thread(sc.wait_idle, 3)
        (silenced,) = [r for r in sc.requests if r.fault_kind == "blackhole"]
        assert silenced.label == "POST tools/call echo" and silenced.hold == "client_closed"
        conns = {c.id: c for c in sc.journal.connections}
        assert conns[silenced.conn_id].silent_at is not None
        assert [c.id for c in conns.values() if c.silent_at is not None] == [silenced.conn_id]
        assert sc.patience_violations == ()


async def test_the_patience_verdict_says_the_connection_went_silent(mcp1_client: Mcp1Client) -> None:
    """No read timeout: mcp 2.x waits until patience resets the connection, and the verdict says the
    connection went silent after so long idle; mcp 1.x (no read timeout) the same, and with
    ``read_timeout_seconds`` it raises ``McpError("Timed out …")`` and exits cleanly."""
    with Sidecar(faults=[Blackhole(when="tools/call")], patience=0.5, expect_hang=True) as sc:
        started = time.monotonic()
        with pytest.raises(BaseException) as raised:  # noqa: PT011
            async with Client(sc.mcp_url, mode="legacy") as client:
                await client.call_tool("echo", {"text": "a"})
        assert time.monotonic() - started < 0.5 + 2
        assert "ReadError" in repr(raised.value), raised.value
        await asyncio.to_thread(sc.wait_idle, 3)
        (v,) = sc.patience_violations
        text = patience_verdict(sc, [v])
        assert "on a blackholed `POST /mcp` (tools/call echo) (session era), never answered: its " in text
        silent = " went silent as it came (no FIN, no RST: nothing more was read from it or written to it"
        assert silent in text
        assert "held by `blackhole@tools/call`; when the 0.5 s budget" in text
        assert f"conn#{v.request.conn_id} went silent at " in text, text
        seen = await asyncio.to_thread(mcp1_client.call, sc.mcp_url, "echo", {"text": "hi"})
        assert seen.hung is False and seen.cancelled, seen  # patience reset it: as for `die`
        assert seen.exited == ["ReadError"], seen
        seen = await asyncio.to_thread(mcp1_client.call, sc.mcp_url, "echo", {"text": "hi"}, read_timeout=0.3)
        assert seen.error is not None and seen.error.startswith("Timed out"), seen
        assert seen.exited == [], seen
        assert sc.fired == {"blackhole": 3}


async def test_legacy_sse_message_post_gets_no_202_on_a_silent_connection() -> None:
    """Legacy HTTP+SSE: the matched message ``POST`` is held with no ``202`` on its own connection,
    which goes silent; the stream's connection is not touched."""
    with Sidecar(transport="sse", faults=["blackhole@tool:echo"], patience=5.0) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            stream, _, messages = await started(client, sc)
            with pytest.raises(httpx.ReadTimeout):
                await client.post(messages, json=ECHO, timeout=httpx.Timeout(5.0, read=0.3))
            await stream.aclose()
        await asyncio.to_thread(sc.wait_idle, 3)
        (rec,) = [r for r in sc.requests if r.fault_kind == "blackhole"]
        assert (rec.method, rec.status, rec.hold) == ("POST", None, "client_closed")
        silent = [c.id for c in sc.journal.connections if c.silent_at is not None]
        assert silent == [rec.conn_id]
