"""The legacy 2024-11-05 HTTP+SSE transport (``Sidecar(transport='sse' | 'both')``): the core's routing
without sockets, then the socket sidecar with real clients (plain httpx for the bytes, the mcp 2.x
``sse_client`` for what a harness sees), and the journal each time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.sse import sse_client
from test_reliability import process_tcp_sockets

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.core import Incoming, SidecarCore
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.faults import format_plan
from pytest_mcpfaults.options.fields import SidecarOptions
from pytest_mcpfaults.strategies import fault_plans
from pytest_mcpfaults.transports.legacy_sse import LegacySession, LegacyTransport, serve_legacy

JSON = {"Content-Type": "application/json"}
CLIENT = {"name": "t", "version": "0"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": CLIENT}}  # fmt: skip


def rpc(method: str, id: int | None = 1, **params: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id is not None:
        msg["id"] = id
    return msg


# -- the core, without sockets -----------------------------------------------------------------------
class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def hold(self, fault: F.Fault) -> None:
        self.calls.append(("hold", fault))

    async def die(self, restart: bool) -> None:
        self.calls.append(("die", restart))

    async def pause(self, seconds: float) -> None:
        self.calls.append(("pause", seconds))

    async def event_stream(  # pragma: no cover - not used by the legacy transport
        self, resumed: object = None, fault: object = None
    ) -> None:
        self.calls.append(("event_stream", None))


def make_core(faults: list[F.Fault] | None = None, transport: str = "sse") -> SidecarCore:
    options = SidecarOptions(faults=faults or [], transport=transport)
    core = SidecarCore(options, service_url=lambda: "http://svc.test")
    serve_legacy(core)  # what the socket sidecar does for transport='sse' or 'both'
    core.state = "running"
    return core


def legacy(core: SidecarCore) -> LegacyTransport:
    assert isinstance(core.path_transport, LegacyTransport)
    return core.path_transport


async def ask(
    core: SidecarCore, t: Recording, method: str, path: str, body: Any = None, query: str = ""
) -> Any:
    data = json.dumps(body).encode() if body is not None else b""
    rid = core.journal.add_request(conn_id=1, method=method, path=path)
    answer = await core.decide(rid, Incoming(method, path, JSON, list(JSON.items()), data, query), t)
    if answer is not None and answer.replying is not None:  # what the transport does after the 202
        await answer.replying.make(t)  # type: ignore[arg-type]
    return answer


async def drain(session: LegacySession) -> list[bytes]:
    """The events queued for the stream, as its writer reads them (``unread_bytes``: what it has not)."""
    events = []
    while session.unread_bytes:
        ev = await session.next()
        assert ev is not None
        events.append(ev.data)
    return events


async def test_core_a_message_reply_goes_on_its_session_stream_and_the_post_gets_202() -> None:
    core, t = make_core(), Recording()
    stream = await ask(core, t, "GET", "/sse")
    session = stream.stream
    assert (stream.reply.status, stream.reply.headers["Content-Type"], stream.sse) == (
        200,
        "text/event-stream",
        True,
    )
    assert (
        session.endpoint_event().data
        == f"event: endpoint\ndata: /messages?session_id={session.id}\n\n".encode()
    )
    q = f"session_id={session.id}"
    posted = await ask(core, t, "POST", "/messages", INIT, q)
    assert (posted.reply.status, posted.reply.text, posted.stream) == (202, "Accepted", None)
    [event] = await drain(session)
    assert event.startswith(b"event: message\ndata: ") and event.endswith(b"\n\n")
    assert json.loads(event.split(b"data: ", 1)[1])["result"]["serverInfo"]["name"] == "mcpfaults-sidecar"
    assert session.mcp_session in core.mcp.sessions  # initialize created an MCP session for the stream
    note = await ask(core, t, "POST", "/messages", rpc("notifications/initialized", id=None), q)
    echo = await ask(
        core, t, "POST", "/messages", rpc("tools/call", name="echo", arguments={"text": "hi"}), q
    )
    assert note.reply.status == echo.reply.status == 202
    [reply] = await drain(session)  # the notification has no reply
    assert json.loads(reply.split(b"data: ", 1)[1])["result"]["content"][0]["text"] == "hi"
    rec = core.journal.requests[-1]
    assert (rec.mcp_method, rec.tool, rec.session_id, rec.era) == (
        "tools/call",
        "echo",
        session.mcp_session,
        "session",
    )
    assert t.calls == []


async def test_core_a_die_on_a_message_answers_202_and_dies_only_once_that_is_sent() -> None:
    core, t = make_core([F.Die(when="tool:echo")]), Recording()
    session = (await ask(core, t, "GET", "/sse")).stream
    q = f"session_id={session.id}"
    await ask(core, t, "POST", "/messages", INIT, q)
    answer = await ask(
        core, t, "POST", "/messages", rpc("tools/call", name="echo", arguments={"text": "x"}), q
    )
    assert (answer.reply.status, answer.fault, core.state, t.calls) == (
        202,
        F.Die(when="tool:echo"),
        "running",
        [],
    )
    assert answer.after is not None
    await answer.after()
    assert (core.state, t.calls, core.mcp.sessions, legacy(core).sessions) == (
        "dead",
        [("die", False)],
        {},
        {},
    )
    died = make_core([F.Die(when="GET /sse")])  # on the stream itself: it dies like any request
    with pytest.raises(Dropped):
        await ask(died, t, "GET", "/sse")


async def test_core_forced_json_rpc_answers_go_on_the_stream_http_level_ones_on_the_post() -> None:
    plan = [
        F.JsonRpcError(when="tool:echo"),
        F.Status(503, when="tool:sleep"),
        F.Terminating(when="tools/list"),
    ]
    core, t = make_core(plan), Recording()
    session = (await ask(core, t, "GET", "/sse")).stream
    q = f"session_id={session.id}"
    await ask(core, t, "POST", "/messages", INIT, q)
    await drain(session)
    forced = await ask(
        core, t, "POST", "/messages", rpc("tools/call", 5, name="echo", arguments={"text": "x"}), q
    )
    assert forced.reply.status == 202
    [event] = await drain(session)
    assert json.loads(event.split(b"data: ", 1)[1]) == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32603, "message": "Internal error"},
    }
    status = await ask(
        core, t, "POST", "/messages", rpc("tools/call", 6, name="sleep", arguments={"seconds": 0}), q
    )
    terminating = await ask(core, t, "POST", "/messages", rpc("tools/list", 7), q)
    assert (status.reply.status, terminating.reply.status) == (503, 503)
    assert await drain(session) == []


@pytest.mark.parametrize(
    ("query", "status", "text"),
    [
        ("", 400, "session_id is required"),
        ("session_id=nothex", 400, "Invalid session ID"),
        ("session_id=" + "0" * 32, 404, "Could not find session"),
    ],
)
async def test_core_a_message_post_naming_no_live_session_is_refused_as_the_sdk_server_does(
    query: str, status: int, text: str
) -> None:
    core, t = make_core(), Recording()
    answer = await ask(core, t, "POST", "/messages", INIT, query)
    assert (answer.reply.status, answer.reply.text) == (status, text)
    assert core.journal.requests[-1].error_by == "client"


# -- the socket sidecar, with real clients -----------------------------------------------------------
class Events:
    """Reads an SSE stream's raw bytes (a reader task: waiting on it with a timeout cannot cancel the
    stream) and splits its events. An error of the stream is raised by the read that reaches it."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self.buf = b""
        self.queue: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._read(chunks))

    async def _read(self, chunks: AsyncIterator[bytes]) -> None:
        try:
            async for chunk in chunks:
                self.queue.put_nowait(chunk)
            self.queue.put_nowait(EOFError("the stream ended"))
        except Exception as exc:
            self.queue.put_nowait(exc)

    async def _more(self) -> None:
        got = await self.queue.get()
        if isinstance(got, BaseException):
            self.queue.put_nowait(got)
            raise got
        self.buf += got

    async def raw(self, n: int) -> bytes:
        while len(self.buf) < n:
            await self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    async def event(self) -> bytes:
        while b"\n\n" not in self.buf:
            await self._more()
        out, self.buf = self.buf.split(b"\n\n", 1)
        return out + b"\n\n"


def data(event: bytes) -> Any:
    return json.loads(event.split(b"data: ", 1)[1])


async def open_stream(client: httpx.AsyncClient, sc: Sidecar) -> tuple[httpx.Response, Events, str]:
    resp = await client.send(client.build_request("GET", sc.sse_url), stream=True)
    events = Events(resp.aiter_raw())
    endpoint = await asyncio.wait_for(events.event(), 5)
    m = re.fullmatch(rb"event: endpoint\ndata: (/messages\?session_id=[0-9a-f]{32})\n\n", endpoint)
    assert m is not None, endpoint
    return resp, events, sc.url + m.group(1).decode()


async def test_the_stream_announces_the_message_url_and_replies_arrive_on_it_after_a_202() -> None:
    with Sidecar(transport="sse") as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            resp, events, messages = await open_stream(client, sc)
            assert (resp.status_code, resp.headers["content-type"]) == (200, "text/event-stream")
            posted = await client.post(messages, json=INIT)
            assert (posted.status_code, posted.text) == (202, "Accepted")
            assert (
                data(await asyncio.wait_for(events.event(), 5))["result"]["protocolVersion"] == "2024-11-05"
            )
            assert (await client.post(messages, content=b"{not json", headers=JSON)).status_code == 400
            assert (await client.get(messages)).status_code == 405
            assert (await client.post(sc.sse_url, json=INIT)).status_code == 405
            assert (await client.post(sc.mcp_url, json=INIT)).status_code == 404  # not served with "sse"
            await resp.aclose()
        sc.wait_idle(5)
        labels = [(r.label, r.status) for r in sc.requests]
        assert labels == [("GET /sse", 200), ("POST initialize", 202), ("POST /messages", 400),
                          ("GET /messages", 405), ("POST /sse", 405), ("POST /mcp", 404)]  # fmt: skip
        assert sc.requests[0].client_closed  # the client closed the stream


async def test_a_die_on_a_message_sends_its_202_then_resets_the_stream_before_the_reply() -> None:
    with Sidecar(transport="sse", faults=[F.Die(when="tool:echo")]) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            resp, events, messages = await open_stream(client, sc)
            await client.post(messages, json=INIT)
            await events.event()
            posted = await client.post(messages, json=rpc("tools/call", name="echo", arguments={"text": "x"}))
            assert (posted.status_code, posted.text) == (202, "Accepted")  # the POST was taken...
            with pytest.raises(httpx.ReadError):  # ...and the stream is reset before its reply
                await asyncio.wait_for(events.event(), 5)
            await resp.aclose()
            with pytest.raises(httpx.ConnectError):  # the process is gone: nothing listens
                await client.get(sc.sse_url)
        assert sc.state == "dead" and sc.fired == {"die": 1}
        _, _, echo = sc.requests
        assert (echo.label, echo.status, echo.fault_kind) == ("POST tools/call echo", 202, "die")
        assert sc.journal.connections[0].closed_by == "sidecar"  # the stream's connection was reset


async def test_the_sdk_client_sees_connection_closed_when_the_sidecar_dies_between_202_and_reply() -> None:
    with Sidecar(transport="sse", faults=[F.Die(when="tool:echo")]) as sc:
        with pytest.raises(BaseException) as caught:  # noqa: PT011, PT012 - an ExceptionGroup from anyio
            async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
                async with ClientSession(read, write, read_timeout_seconds=5) as session:
                    await session.initialize()
                    await asyncio.wait_for(session.call_tool("echo", {"text": "x"}), 10)
        assert "Connection closed" in repr(caught.value)
        assert sc.journal.sequence()[-1] == "POST tools/call echo"
        assert sc.requests[-1].status == 202 and sc.state == "dead"


async def test_no_endpoint_event_leaves_sse_client_waiting_and_the_patience_verdict_names_the_stream() -> (
    None
):
    with Sidecar(
        transport="sse", faults=["stall(after_bytes=0)@GET /sse"], patience=1.0, expect_hang=True
    ) as sc:

        async def connect() -> None:
            async with sse_client(sc.sse_url, timeout=5, sse_read_timeout=0.5):
                pass  # pragma: no cover - never connected

        with pytest.raises(asyncio.TimeoutError):  # the harness's own bound: sse_client alone never returns
            await asyncio.wait_for(connect(), 3)
        [stream] = sc.requests
        assert (stream.label, stream.status, stream.bytes_sent, bool(stream.held)) == (
            "GET /sse",
            200,
            0,
            True,
        )
        assert stream.fault == "stall@GET /sse"
    with Sidecar(
        transport="sse", faults=["stall(after_bytes=0)@GET /sse"], patience=1.0, expect_hang=True
    ) as sc:
        async with httpx.AsyncClient(timeout=5) as client, client.stream("GET", sc.sse_url) as resp:
            assert resp.status_code == 200  # status and headers, then nothing at all
            with pytest.raises(httpx.ReadError):  # reset when the sidecar's patience ran out
                await resp.aread()
        [v] = sc.patience_violations
        assert v.request.label == "GET /sse" and v.kind == "stall" and v.answered == "partial"
        assert (
            "the response to `GET /sse`, which stalled after the status line (200) and 0 bytes"
            in v.describe()
        )
        assert "held by `stall@GET /sse`" in v.details()


async def test_a_stalled_reply_holds_the_stream_journaled_on_its_get_and_release_lets_it_finish() -> None:
    with Sidecar(transport="sse", faults=["stall(after_bytes=10)@tool:echo"], patience=None) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            resp, events, messages = await open_stream(client, sc)
            await client.post(messages, json=INIT)
            await events.event()
            posted = await client.post(
                messages, json=rpc("tools/call", 9, name="echo", arguments={"text": "x"})
            )
            assert posted.status_code == 202
            assert await asyncio.wait_for(events.raw(10), 5) == b"event: mes"
            sc.wait_for(lambda reqs: reqs[0].held, 5)
            with pytest.raises(asyncio.TimeoutError):  # nothing more comes while it is held
                await asyncio.wait_for(events.raw(1), 0.3)
            stream = sc.requests[0]
            assert (stream.fault, stream.fault_kind, stream.hold) == (
                "stall(after_bytes=10)@tool:echo",
                "stall",
                None,
            )
            await asyncio.to_thread(sc.release)
            rest = await asyncio.wait_for(events.event(), 5)
            assert data(b"event: mes" + rest) == {
                "jsonrpc": "2.0",
                "id": 9,
                "result": {"content": [{"type": "text", "text": "x"}], "isError": False},
            }
            await resp.aclose()
        assert sc.requests[0].hold == "released"
        assert sc.fired == {"stall": 1}
        assert [r.label for r in sc.held_requests("mcp")] == ["GET /sse"]  # the legacy paths are MCP ones


async def test_malformed_json_and_jsonrpc_error_act_on_the_reply_event_session_expired_ends_the_stream() -> (
    None
):
    plan = ["malformed_json@tool:echo", "jsonrpc_error(code=-32001)@tools/list", "session_expired@tool:sleep"]
    with Sidecar(transport="both", faults=plan) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            _, events, messages = await open_stream(client, sc)
            await client.post(messages, json=INIT)
            await events.event()
            await client.post(messages, json=rpc("tools/call", 2, name="echo", arguments={"text": "x"}))
            broken = await asyncio.wait_for(events.event(), 5)
            assert broken.startswith(b"event: message\ndata: {")
            with pytest.raises(ValueError):  # noqa: PT011
                data(broken)
            await client.post(messages, json=rpc("tools/list", 3))
            assert data(await asyncio.wait_for(events.event(), 5))["error"]["code"] == -32001
            gone = await client.post(
                messages, json=rpc("tools/call", 4, name="sleep", arguments={"seconds": 0})
            )
            assert (gone.status_code, gone.text) == (404, "Could not find session")
            with pytest.raises(EOFError):  # the stream ends cleanly, after the events sent before
                await asyncio.wait_for(events.event(), 5)
            assert events.buf == b""
            again = await client.post(messages, json=rpc("tools/list", 5))
            assert (again.status_code, again.text) == (404, "Could not find session")
        assert sc.fired == {"malformed_json": 1, "jsonrpc_error": 1, "session_expired": 1}
        assert [r.status for r in sc.requests[2:]] == [202, 202, 404, 404]


async def test_status_on_the_stream_fails_the_sdk_connect_with_that_status() -> None:
    with Sidecar(transport="sse", faults=["status(code=503)@GET /sse"]) as sc:
        with pytest.raises(Exception) as caught:  # noqa: PT011 - the SDK's httpx (httpx2 in mcp 2.x)
            async with sse_client(sc.sse_url, timeout=5):
                pass  # pragma: no cover
        assert type(caught.value).__name__ == "HTTPStatusError"
        assert "Server error '503 Service Unavailable'" in str(caught.value)
        assert [(r.label, r.status) for r in sc.requests] == [("GET /sse", 503)]


def test_stop_releases_a_held_stream_and_ends_every_stream() -> None:
    async def hold_open(sc: Sidecar) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            held = await client.send(client.build_request("GET", sc.sse_url), stream=True)
            idle = await client.send(client.build_request("GET", sc.sse_url), stream=True)
            streams = Events(held.aiter_raw()), Events(idle.aiter_raw())
            await asyncio.wait_for(streams[1].event(), 5)
            await asyncio.to_thread(sc.wait_for, lambda reqs: reqs[0].held, 5)
            await asyncio.to_thread(sc.stop)
            for events in streams:
                with pytest.raises(httpx.ReadError):  # reset by the teardown
                    await asyncio.wait_for(events.event(), 5)

    sc = Sidecar(transport="sse", faults=[F.Stall(when=F.Trigger("GET /sse", times=1))], patience=None)
    sc.start()
    asyncio.run(hold_open(sc))
    held, idle = sc.requests
    assert (held.hold, held.done, idle.done) == ("teardown", True, True)
    assert all(not c.open for c in sc.journal.connections)


async def test_streamable_http_and_legacy_sse_are_served_side_by_side_with_both() -> None:
    from mcp.client import Client

    with Sidecar(transport="both", era="session") as sc:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
            assert (await client.call_tool("echo", {"text": "http"})).content[0].text == "http"  # type: ignore[union-attr]
        async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write, read_timeout_seconds=5) as session:
                await session.initialize()
                assert (await session.call_tool("echo", {"text": "sse"})).content[0].text == "sse"  # type: ignore[union-attr]
        paths = {r.path for r in sc.requests}
        assert paths == {"/mcp", "/sse", "/messages"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transport": "http"}, "transport must be one of 'streamable_http', 'sse', 'both', got 'http'"),
        ({"transport": "sse", "sse_path": "sse"}, "sse_path must be a path starting with '/', got 'sse'"),
        (
            {"transport": "both", "messages_path": "/mcp"},
            "messages_path and mcp_path must differ, both are '/mcp'",
        ),
        (
            {"transport": "sse", "messages_path": "/sse"},
            "messages_path and sse_path must differ, both are '/sse'",
        ),
        (
            {"transport": "sse", "era": "stateless"},
            "era='stateless' refuses it (use era='auto' or 'session')",
        ),
        (
            {"transport": "sse", "reply": "sse"},
            "reply='sse' shapes Streamable HTTP answers, which transport='sse'",
        ),
        ({"transport": "sse", "get_stream": True}, "get_stream=True shapes Streamable HTTP answers"),
        (
            {"transport": "both", "upstream": "http://127.0.0.1:1/mcp"},
            "which proxy mode (upstream=) does not relay",
        ),
    ],
)
def test_bad_transport_arguments_are_refused_naming_the_argument(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Sidecar(**kwargs)


def test_sse_url_names_the_transport_when_it_is_not_served() -> None:
    with (
        Sidecar() as sc,
        pytest.raises(RuntimeError, match="serves transport='streamable_http'; pass transport='sse'"),
    ):
        sc.sse_url  # noqa: B018


def test_the_marker_takes_the_transport_and_a_held_stream_gets_a_verdict_naming_it(
    pytester: pytest.Pytester, run_plugin: Any
) -> None:
    pytester.makepyfile(
        test_served="""
        import httpx, pytest

        @pytest.mark.mcp_sidecar(transport="sse", sse_path="/events", messages_path="/msg")
        def test_served(mcp_sidecar):
            with httpx.stream("GET", mcp_sidecar.url + "/events", timeout=5) as r:
                first = next(r.iter_raw())
            assert first.startswith(b"event: endpoint\\ndata: /msg?session_id=")

        @pytest.mark.mcp_sidecar(transport="sse", patience=0.5, faults=["stall@GET /sse"])
        def test_no_endpoint_event(mcp_sidecar):
            with httpx.stream("GET", mcp_sidecar.sse_url, timeout=10) as r:
                try:
                    r.read()
                except httpx.ReadError:
                    pass
        """,
        test_refused="""
        import pytest

        @pytest.mark.mcp_sidecar(transport="stdio")
        def test_refused(mcp_sidecar):
            pass
        """,
    )
    result = run_plugin("test_served.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*the response to `GET /sse`, which stalled after the status line (200) and 0 bytes*"]
    )
    refused = run_plugin("test_refused.py")
    refused.stdout.fnmatch_lines(["*transport must be one of 'streamable_http', 'sse', 'both', got 'stdio'*"])
    assert refused.ret != 0


async def started(client: httpx.AsyncClient, sc: Sidecar) -> tuple[httpx.Response, Events, str]:
    """A stream whose session is initialized: the stream, its events, the message URL."""
    resp, events, messages = await open_stream(client, sc)
    await client.post(messages, json=INIT)
    await asyncio.wait_for(events.event(), 5)
    return resp, events, messages


ECHO = rpc("tools/call", 3, name="echo", arguments={"text": "x"})


def result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"content": [{"type": "text", "text": text}], "isError": is_error},
    }


ECHOED = result("x")


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("truncate(after_bytes=5)@tool:echo", httpx.RemoteProtocolError),  # FIN mid-event
        ("reset(after_bytes=5)@tool:echo", httpx.ReadError),  # RST mid-event
    ],
)
async def test_truncate_and_reset_cut_the_stream_inside_the_reply_event(fault: str, error: type) -> None:
    with Sidecar(transport="sse", faults=[fault]) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            _, events, messages = await started(client, sc)
            assert (await client.post(messages, json=ECHO)).status_code == 202
            assert await asyncio.wait_for(events.raw(5), 5) == b"event"
            with pytest.raises(error):
                await asyncio.wait_for(events.event(), 5)
        assert sc.journal.connections[0].closed_by == "sidecar"
        assert sc.fired == {fault.split("(")[0]: 1}


async def test_drip_sends_the_reply_event_whole_and_endless_sse_then_holds_the_stream() -> None:
    plan = ["drip(chunk_bytes=4, interval=0.001)@tool:echo", "endless_sse@tool:sleep"]
    with Sidecar(transport="sse", faults=plan, patience=None) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            _, events, messages = await started(client, sc)
            await client.post(messages, json=ECHO)
            assert data(await asyncio.wait_for(events.event(), 5)) == ECHOED
            await client.post(messages, json=rpc("tools/call", 4, name="sleep", arguments={"seconds": 0}))
            assert data(await asyncio.wait_for(events.event(), 5))["id"] == 4  # the whole event...
            sc.wait_for(lambda reqs: reqs[0].held, 5)  # ...then the stream is held
            await client.post(messages, json={**ECHO, "id": 5})
            with pytest.raises(asyncio.TimeoutError):  # a later reply waits behind the hold
                await asyncio.wait_for(events.event(), 0.3)
            await asyncio.to_thread(sc.release)
            assert data(await asyncio.wait_for(events.event(), 5))["id"] == 5
        assert sc.requests[0].fault_kind == "endless_sse" and sc.requests[0].hold == "released"


@pytest.mark.parametrize(
    ("fault", "error", "sent"),
    [
        ("truncate(after_bytes=20)@GET /sse", httpx.RemoteProtocolError, 20),  # mid endpoint event, FIN
        ("reset(after_bytes=20)@GET /sse", httpx.ReadError, 20),
    ],
)
async def test_body_faults_aimed_at_the_stream_act_on_its_bytes_from_its_start(
    fault: str, error: type, sent: int
) -> None:
    with Sidecar(transport="sse", faults=[fault]) as sc:
        async with httpx.AsyncClient(timeout=5) as client, client.stream("GET", sc.sse_url) as resp:
            assert resp.status_code == 200
            events = Events(resp.aiter_raw())
            assert await asyncio.wait_for(events.raw(sent), 5) == b"event: endpoint\ndata"
            with pytest.raises(error):
                await asyncio.wait_for(events.event(), 5)
        assert sc.requests[0].bytes_sent == sent


async def test_reset_at_zero_on_the_stream_resets_before_the_status_line() -> None:
    with Sidecar(transport="sse", faults=["reset@GET /sse"]) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            with pytest.raises(httpx.ReadError):  # RST before the status line
                await client.get(sc.sse_url)
        assert (sc.requests[0].status, sc.requests[0].bytes_sent) == (None, 0)
        assert legacy(sc.core).sessions == {}


async def test_hang_on_a_message_holds_the_post_itself_and_patience_names_it() -> None:
    with Sidecar(transport="sse", faults=["hang@tool:echo"], patience=0.5, expect_hang=True) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            _, _, messages = await started(client, sc)
            with pytest.raises(httpx.ReadError):  # no 202: the POST is held, then reset at patience
                await client.post(messages, json=ECHO)
        [v] = sc.patience_violations
        assert v.request.label == "POST tools/call echo" and v.answered == "none"
        assert "`POST /messages` (tools/call echo) (session era)" in v.describe()


def test_every_built_in_http_kind_says_how_it_acts_on_legacy_sse() -> None:
    """docs/faults.md's "Faults by transport" table is each kind's ``legacy_sse`` cell."""
    from pytest_mcpfaults.faults import fault_kinds

    built_in = [cls for cls in fault_kinds().values() if cls.__module__.startswith("pytest_mcpfaults")]
    assert [cls.kind for cls in built_in if "http" in cls.transports and not cls.legacy_sse] == []


@pytest.mark.parametrize(
    ("fault", "status", "on_stream"),
    [
        ("delay(seconds=0.2)@tool:echo", 202, ECHOED),
        ("tool_error(text='disk full')@tool:echo", 202, result("disk full", is_error=True)),
        ("error_payload@tool:echo", 202, result('{"error": "backend timed out"}')),
        ("absent@tool:echo", 404, None),
        ("terminating@tool:echo", 503, None),
        ("flap(every=1, code=502)@POST /messages", 502, None),  # healthy first: initialize passed
    ],
)  # fmt: skip
async def test_answer_level_faults_answer_the_post_and_json_rpc_ones_go_on_the_stream(
    fault: str, status: int, on_stream: Any
) -> None:
    with Sidecar(transport="sse", faults=[fault]) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            _, events, messages = await started(client, sc)
            posted = await client.post(messages, json=ECHO)
            assert posted.status_code == status
            if on_stream is not None:
                assert posted.text == "Accepted"
                assert data(await asyncio.wait_for(events.event(), 5)) == on_stream
            else:
                with pytest.raises(asyncio.TimeoutError):  # nothing goes on the stream
                    await asyncio.wait_for(events.event(), 0.3)
        assert sc.fired == {fault.split("(")[0].split("@")[0]: 1}


async def test_freeze_on_a_message_holds_its_post_and_every_later_request_new_streams_included() -> None:
    with Sidecar(transport="sse", faults=["freeze@tool:echo"], patience=None) as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            _, events, messages = await started(client, sc)
            post = asyncio.ensure_future(client.post(messages, json=ECHO))
            await asyncio.to_thread(sc.wait_for, lambda reqs: reqs[-1].held, 5)
            stream = asyncio.ensure_future(client.get(sc.sse_url, timeout=0.5))
            with pytest.raises(httpx.ReadTimeout):  # a new stream gets no status line while frozen
                await stream
            assert not post.done()
            await asyncio.to_thread(sc.release)
            assert (await asyncio.wait_for(post, 5)).status_code == 202
            assert data(await asyncio.wait_for(events.event(), 5)) == ECHOED
        held = [r.label for r in sc.requests if r.held]
        assert held == ["POST tools/call echo", "GET /sse"]


async def test_a_foreign_origin_is_refused_on_the_stream_and_on_the_messages() -> None:
    evil = {"Origin": "http://evil.example"}
    with Sidecar(transport="sse") as sc:
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(sc.sse_url, headers=evil)).status_code == 403
            _, events, messages = await started(client, sc)
            assert (await client.post(messages, json=ECHO, headers=evil)).status_code == 403
            with pytest.raises(asyncio.TimeoutError):  # nothing goes on the stream for it
                await asyncio.wait_for(events.event(), 0.3)
        assert [r.error_by for r in sc.requests if r.status == 403] == ["client", "client"]


async def test_serve_takes_the_transport_flags_and_announces_the_sse_url() -> None:
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest_mcpfaults", "serve", "--json", "--transport", "both",
        "--sse-path", "/events", "--messages-path", "/msg", "--fault", "tool_error(text='no')@tool:echo",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
        assert info["sse_url"] == info["url"] + "/events"
        async with sse_client(info["sse_url"], timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write, read_timeout_seconds=5) as session:
                await session.initialize()
                result = await session.call_tool("echo", {"text": "x"})
        assert result.is_error and result.content[0].text == "no"  # type: ignore[union-attr]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    bad = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest_mcpfaults", "serve", "--transport", "sse", "--messages-path", "/sse",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(bad.communicate(), 30)
    assert bad.returncode == 2
    assert (
        "error: argument --messages-path: --messages-path and --sse-path must differ, both are '/sse'"
        in err.decode()
    )


async def test_malformed_json_and_drip_aimed_at_the_stream_act_on_every_message_event() -> None:
    for fault in ("malformed_json@GET /sse", "drip(chunk_bytes=7, interval=0.001)@GET /sse"):
        with Sidecar(transport="sse", faults=[fault]) as sc:
            async with httpx.AsyncClient(timeout=5) as client:
                _, events, messages = await open_stream(client, sc)  # the endpoint event is intact
                for rid in (1, 2):
                    await client.post(messages, json={**INIT, "id": rid})
                    event = await asyncio.wait_for(events.event(), 5)
                    assert event.startswith(b"event: message\ndata: {")
                    if fault.startswith("malformed_json"):
                        with pytest.raises(ValueError):  # noqa: PT011
                            data(event)
                    else:
                        assert data(event)["id"] == rid
            assert sc.fired == {fault.split("(")[0].split("@")[0]: 1}  # fired once: on the stream


SSE_TARGETS = ["GET /sse", "POST /messages", "initialize", "tool:echo", "tools/call", "*"]


@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    plan=fault_plans(max_faults=2, targets=SSE_TARGETS, patience=0.2),
    read_reply=st.booleans(),
    close_stream=st.booleans(),
)
def test_any_plan_over_legacy_sse_stop_is_bounded_and_leaves_nothing_open(
    plan: list[F.Fault], read_reply: bool, close_stream: bool
) -> None:
    sc = Sidecar(transport="sse", faults=plan, patience=0.2).start()
    port = sc.port
    with httpx.Client(timeout=httpx.Timeout(2.0, read=0.5)) as client:
        stream: httpx.Response | None = None
        first = b""
        with contextlib.suppress(httpx.HTTPError):
            stream = client.send(client.build_request("GET", sc.sse_url), stream=True)
            chunks = stream.iter_raw()
            first = next(chunks, b"")
        m = re.search(rb"data: (/messages\?session_id=[0-9a-f]{32})\n\n", first)
        if m is not None and stream is not None:
            for body in (INIT, ECHO):
                with contextlib.suppress(httpx.HTTPError):
                    client.post(sc.url + m.group(1).decode(), json=body)
            if read_reply:
                with contextlib.suppress(httpx.HTTPError):
                    next(chunks, b"")
        if stream is not None and close_stream:
            stream.close()
        t0 = time.monotonic()
        sc.stop()
        took = time.monotonic() - t0
        assert took < 1.0, f"stop() took {took:.3f} s with plan {format_plan(plan)}"
        assert process_tcp_sockets(port)["local"] == [], sc.journal.format()
        assert sc.journal.open_connections() == ()
        assert all(r.done for r in sc.requests), sc.journal.format()
        assert all(r.hold is not None for r in sc.requests if r.held), sc.journal.format()
        assert legacy(sc.core).sessions == {}
    sc.check_errors()


def _raw_stream(sc: Sidecar) -> tuple[socket.socket, str, str]:
    """A legacy event stream opened on a raw socket (whose reading the test controls), read up to its
    endpoint event: the socket, the session id and the message URL."""
    stream = socket.create_connection(("127.0.0.1", sc.port))
    stream.sendall(b"GET /sse HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    stream.settimeout(5)
    head = b""
    while b"session_id=" not in head or b"\n\n" not in head.split(b"session_id=", 1)[1]:
        head += stream.recv(4096)
    sid = head.split(b"session_id=", 1)[1].split(b"\n", 1)[0].strip().decode()
    return stream, sid, f"{sc.url}/messages?session_id={sid}"


def test_a_stream_its_client_does_not_read_bounds_its_outbox_and_posts_get_503_until_it_reads() -> None:
    """Replies owed to a client that never reads its stream were queued without bound (+61 MB for
    60 MB owed); past OUTBOX_BYTES unread, a message POST is refused with 503 before it is processed,
    and once the client reads, POSTs are taken again."""

    from pytest_mcpfaults.transports.legacy_sse import OUTBOX_BYTES

    text = "e" * 100_000
    with Sidecar(transport="sse") as sc, httpx.Client(timeout=10) as client:
        stream, sid, url = _raw_stream(sc)
        try:
            assert client.post(url, json=INIT, headers=JSON).status_code == 202
            codes: list[int] = []
            for i in range(1, 500):  # 50 MB owed at most; the bound is 4 MiB
                r = client.post(url, json=rpc("tools/call", i, name="echo", arguments={"text": text}))
                codes.append(r.status_code)
                if r.status_code != 202:
                    break
            assert codes[-1] == 503, codes
            assert r.headers["Retry-After"] == "1"
            assert 20 < len(codes) < 400  # OUTBOX_BYTES / 100 KB, and what the socket buffers hold
            assert r.text.startswith(f"Service Unavailable: the event stream of session {sid} has ")
            assert f"(the bound is {OUTBOX_BYTES}); read the stream, then post again" in r.text
            refused = sc.journal.requests[-1]
            assert (refused.status, refused.error_by, refused.tool) == (503, "client", "echo")
            # the client reads its stream: every reply taken arrives, then a POST is taken again
            owed = len(codes)  # the initialize's reply and every echo taken (the 503's is not)
            stream.settimeout(10)
            seen, tail = 0, b""
            while seen < owed:
                chunk = tail + stream.recv(1 << 16)
                seen += chunk.count(b"event: message")
                tail = chunk[-13:]  # shorter than the marker: never counted twice
            r = client.post(url, json=rpc("tools/call", 999, name="echo", arguments={"text": "again"}))
            assert r.status_code == 202
            assert sc.errors == []
        finally:
            stream.close()


def test_a_client_that_closes_a_stream_blocked_on_its_unread_bytes_is_no_sidecar_error() -> None:
    """The stream's writer waits for the socket to drain; the client then closes it. aiohttp's drain
    raises a plain ConnectionError('Connection lost'), which was taken for a bug of the sidecar's (a
    SidecarError at teardown)."""

    with Sidecar(transport="sse") as sc, httpx.Client(timeout=10) as client:
        stream, _, url = _raw_stream(sc)
        assert client.post(url, json=INIT, headers=JSON).status_code == 202
        for i in range(1, 500):  # until the outbox is over its bound: the writer waits on the socket
            r = client.post(url, json=rpc("tools/call", i, name="echo", arguments={"text": "e" * 100_000}))
            if r.status_code == 503:
                break
        assert r.status_code == 503
        stream.close()
        sc.journal.wait_for(lambda: sc.journal.requests[0].done, 5.0, "the stream's end")
        get = sc.journal.requests[0]
        assert (get.path, get.status, get.client_closed) == ("/sse", 200, True)
        assert sc.errors == []
