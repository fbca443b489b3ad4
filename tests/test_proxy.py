"""Proxy mode end to end: the sidecar's faults in front of a real MCP server nobody here wrote, the mcp
SDK's own ``MCPServer`` under uvicorn (``tests/sdk_upstream.py``).

The mcp 2.x ``Client`` lists and calls the upstream's tools through the sidecar in both eras; ``die``,
``hang@DELETE /mcp`` and ``stall`` behave as on the fake; body faults cut the upstream's real bytes;
``tool_error`` / ``backend_gone`` rewrite a result the upstream really produced; an upstream that
fails is surfaced as a gateway's 502/504 and journaled as the upstream's. The journal shows both legs.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from quiet_upstream import quiet_stream
from sdk_upstream import SdkUpstream, serve
from sse_events import sse_messages, sse_response

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import (
    BackendGone,
    Delay,
    Die,
    Drip,
    Hang,
    JsonRpcError,
    MalformedJson,
    Reset,
    SessionExpired,
    Stall,
    Status,
    ToolError,
    Trigger,
    Truncate,
)

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

MODES = ["auto", "legacy"]
ERA = {"auto": "stateless", "legacy": "session"}
ACCEPT = {"Accept": "application/json, text/event-stream"}
SESSION_VERSION = "2025-11-25"
CUT = (httpx.ReadError, httpx.RemoteProtocolError)  # what httpx raises when a server cuts the connection


def leaves(exc: BaseException) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return [name for e in exc.exceptions for name in leaves(e)]
    return [type(exc).__name__]


def rpc(method: str, rid: int | None = 1, **params: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if rid is not None:
        msg["id"] = rid
    return msg


def initialize(c: httpx.Client, url: str) -> dict[str, str]:
    """A session-era handshake over plain httpx; the headers later requests carry."""
    init = rpc(
        "initialize",
        protocolVersion=SESSION_VERSION,
        capabilities={},
        clientInfo={"name": "t", "version": "1"},
    )
    r = c.post(url, json=init, headers=ACCEPT)
    assert r.status_code == 200, r.text
    headers = {
        **ACCEPT,
        "Mcp-Session-Id": r.headers["Mcp-Session-Id"],
        "MCP-Protocol-Version": SESSION_VERSION,
    }
    assert c.post(url, json=rpc("notifications/initialized", None), headers=headers).status_code == 202
    return headers


def settled(sc: Sidecar) -> None:
    """Wait until every request has ended (the client's connection may stay open)."""
    sc.journal.wait_for(lambda: all(r.done for r in sc.journal.requests), 3, "every request to end")


def add(a: int, b: int) -> dict[str, Any]:
    return rpc("tools/call", name="add", arguments={"a": a, "b": b})


@pytest.fixture(scope="module")
def up() -> Iterator[SdkUpstream]:
    with serve() as upstream:
        yield upstream


# -- both eras, both legs ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_mcp2_client_lists_and_calls_the_upstreams_tools(up: SdkUpstream, mode: str) -> None:
    with Sidecar(upstream=up.url) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=5) as client:
            tools = await client.list_tools()
            result = await client.call_tool("add", {"a": 2, "b": 3})
        assert {"add", "echo", "create_session", "delete_session"} <= {t.name for t in tools.tools}
        assert "sleep" not in {t.name for t in tools.tools}  # the fake's tools are not served
        assert result.content[0].text == "5" and not result.is_error
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.era == ERA[mode] and call.tool == "add"
        for rec in sc.requests:  # every request was forwarded, and what the upstream sent came through
            assert rec.forwarded, sc.journal.format()
            assert rec.upstream.status == rec.status
            assert rec.upstream.failure is None and rec.error_by is None
            if rec.method == "POST":
                assert rec.upstream.bytes == rec.bytes_sent
            assert rec.upstream.time is not None and rec.upstream.time >= 0
        assert call.upstream.bytes > 0
        assert f"upstream=200/{call.upstream.bytes}B/" in sc.journal.format()
        if mode == "legacy":
            assert sc.journal.sequence()[-1] == "DELETE /mcp"  # forwarded: the upstream's session ended
            (sid,) = sc.ended_sessions
            assert sc.sessions == ()
            assert sc.requests[-1].session_id == sid


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # still what servers send
@pytest.mark.parametrize("mode", MODES)
async def test_the_upstreams_own_notifications_are_journaled_as_sent(up: SdkUpstream, mode: str) -> None:
    progress: list[tuple[float, float | None]] = []
    logs: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    with Sidecar(upstream=up.url) as sc:
        client = Client(
            sc.mcp_url, mode=mode, read_timeout_seconds=5, logging_callback=on_log, log_level="info"
        )
        async with client:
            result = await client.call_tool("report", {"steps": 2}, progress_callback=on_progress)
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.tool == "report")
        notes = list(sc.journal.server_messages)
    assert result.content[0].text == "reported" and not result.is_error
    assert progress == [(1, 2), (2, 2)] and logs == ["step 1 of 2", "step 2 of 2"]  # what the client saw
    # journaled as the fake journals its tools' own: one record each, on the call's answer stream
    assert [(n.method, n.request_id, n.tool, n.outcome, n.id) for n in notes] == [
        (method, call.id, "report", "sent", None)
        for _ in (1, 2)
        for method in ("notifications/progress", "notifications/message")
    ], sc.journal.format()
    assert [n.params["progress"] for n in notes[::2]] == [1, 2]
    assert [n.params["data"] for n in notes[1::2]] == ["step 1 of 2", "step 2 of 2"]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_bounded_journal_keeps_its_limit_of_the_upstreams_notifications(up: SdkUpstream) -> None:
    seen: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(done)

    with Sidecar(upstream=up.url) as sc:
        sc.journal.set_limit(10)
        async with Client(sc.mcp_url, read_timeout_seconds=5) as client:
            await client.call_tool("report", {"steps": 30}, progress_callback=on_progress)
        await asyncio.to_thread(sc.wait_idle, 3)
    kept = sc.journal.server_messages.records
    assert seen == list(range(1, 31))  # the client got all 30 (logs: not asked for)
    assert len(kept) == 10 and sc.journal.server_messages.dropped == 20
    assert [m.params["progress"] for m in kept] == list(range(21, 31))  # the newest


# -- faults before forwarding -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_die_at_the_second_tool_call_is_as_on_the_fake(up: SdkUpstream, mode: str) -> None:
    ran = len(up.calls)
    with Sidecar(upstream=up.url, faults=[Die(when=Trigger("tools/call", nth=2))]) as sc:
        first = None
        with pytest.raises(BaseExceptionGroup) as exc_info:  # noqa: PT012
            async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=2.0) as client:
                first = await client.call_tool("add", {"a": 1, "b": 1})
                await client.call_tool("echo", {"text": "never"})
        assert first is not None and first.content[0].text == "2"
        assert leaves(exc_info.value) == [
            "ReadError"
        ]  # httpx2.ReadError: reset under the call, as on the fake
        await asyncio.to_thread(sc.wait_idle, 3)
        (died,) = [r for r in sc.requests if r.fault_kind == "die"]
        assert died.label == "POST tools/call echo"
        assert died.status is None and died.bytes_sent == 0
        assert not died.forwarded  # the upstream never saw it
        assert sc.state == "dead" and sc.fired == {"die": 1}
        assert sc.journal.sequence()[-1] == "POST tools/call echo"  # no DELETE got through
    assert up.calls[ran:] == ["add"]  # the upstream ran the first call only


def test_hang_at_delete_holds_the_client_until_the_patience_budget(up: SdkUpstream) -> None:
    async def session() -> None:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
            await client.call_tool("add", {"a": 1, "b": 2})

    with Sidecar(upstream=up.url, faults=[Hang(when="DELETE /mcp")], patience=0.5) as sc:
        t0 = time.monotonic()
        asyncio.run(session())  # the SDK swallows the reset of its close-time DELETE (a WARNING)
        assert time.monotonic() - t0 < 5
        sc.wait_idle(3)
        (v,) = sc.patience_violations
        assert v.request.label == "DELETE /mcp" and v.request.era == "session"
        assert not v.request.forwarded  # held before forwarding: the upstream never saw the DELETE
        assert v.describe().startswith(
            "the client waited 0.5 s (the whole budget) on a hung `DELETE /mcp` (session era), never answered"
        )
        assert len(sc.sessions) == 1  # the upstream's session was never ended


def test_status_and_jsonrpc_error_answer_without_forwarding(up: SdkUpstream) -> None:
    ran = len(up.calls)
    plan = [
        Status(code=503, when=Trigger("tools/call", nth=1)),
        JsonRpcError(when=Trigger("tools/call", nth=2)),
    ]
    with Sidecar(upstream=up.url, faults=plan) as sc, httpx.Client(timeout=5) as c:
        headers = initialize(c, sc.mcp_url)
        first = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        second = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        third = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        assert first.status_code == 503
        assert second.status_code == 200 and second.json()["error"]["code"] == -32603
        assert third.status_code == 200 and sse_response(third.content)["result"]["content"][0]["text"] == "3"
        calls = [r for r in sc.requests if r.mcp_method == "tools/call"]
        assert [r.forwarded for r in calls] == [False, False, True]
    assert up.calls[ran:] == ["add"]


def test_delay_acts_before_forwarding(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[Delay(seconds=0.3, when="tools/call")]) as sc:
        with httpx.Client(timeout=5) as c:
            headers = initialize(c, sc.mcp_url)
            r = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        assert sse_response(r.content)["result"]["content"][0]["text"] == "3"
        sc.wait_idle(3)
        call = next(x for x in sc.requests if x.mcp_method == "tools/call")
        assert call.upstream is not None and call.upstream.ended_at is not None
        assert call.ended_at is not None
        assert call.upstream.sent_at - call.started_at >= 0.3  # the upstream saw the request late
        assert call.ended_at - call.upstream.ended_at < 0.3  # and its answer was not held back


def test_delay_after_acts_once_the_upstream_has_answered(up: SdkUpstream) -> None:
    """``delay(after=True)``: forwarded at once; the upstream's answer reaches the client late."""
    ran = len(up.calls)
    with Sidecar(upstream=up.url, faults=[Delay(seconds=0.3, after=True, when="tools/call")]) as sc:
        with httpx.Client(timeout=5) as c:
            headers = initialize(c, sc.mcp_url)
            r = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        assert sse_response(r.content)["result"]["content"][0]["text"] == "3"
        sc.wait_idle(3)
        call = next(x for x in sc.requests if x.mcp_method == "tools/call")
        assert call.upstream is not None and call.upstream.answered_at is not None
        assert call.ended_at is not None
        assert call.upstream.sent_at - call.started_at < 0.3  # forwarded at once
        assert call.ended_at - call.upstream.answered_at >= 0.3  # the answer was held back
    assert up.calls[ran:] == ["add"]  # the upstream did the work


# -- faults on the upstream's answer ----------------------------------------------------------------

#: The stall tests' read timeout: the client's own give-up on a held body, inside the sidecar's 5 s patience.
READ = 2.0


def test_stall_after_bytes_holds_the_upstreams_real_sse_answer(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[Stall(after_bytes=12, when="tools/call")]) as sc:
        # READ also bounds the healthy initialize and the upstream's status line: 0.3 s was outrun by them
        # on a busy machine; it stays under the 5 s patience, so the client is the one that gives up
        with httpx.Client(timeout=httpx.Timeout(5.0, read=READ)) as c:
            headers = initialize(c, sc.mcp_url)
            with c.stream("POST", sc.mcp_url, json=add(1, 2), headers=headers) as resp:
                assert resp.status_code == 200
                assert resp.headers["Content-Type"].startswith("text/event-stream")  # the upstream's framing
                chunks = resp.iter_raw()
                got = next(chunks)
                with pytest.raises(httpx.ReadTimeout):
                    next(chunks)
        assert got == b"event: messa"  # the first 12 bytes the SDK server sent
        sc.wait_idle(3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.fault_kind == "stall" and call.status == 200 and call.bytes_sent == 12
        assert call.hold == "client_closed"
        assert call.upstream.status == 200 and call.upstream.bytes > 12  # the upstream answered in full
        assert call.upstream.failure is None


def test_stall_at_zero_bytes_sends_the_upstreams_status_line_then_holds(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[Stall(after_bytes=0, when="tools/call")]) as sc:
        with httpx.Client(timeout=httpx.Timeout(5.0, read=READ)) as c:  # as above
            headers = initialize(c, sc.mcp_url)
            with c.stream("POST", sc.mcp_url, json=add(1, 2), headers=headers) as resp:
                assert resp.status_code == 200  # the status line and headers came
                with pytest.raises(httpx.ReadTimeout):
                    next(resp.iter_raw())
        sc.wait_idle(3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.status == 200 and call.bytes_sent == 0 and call.hold == "client_closed"


@pytest.mark.parametrize("mode", MODES)
async def test_stall_times_the_mcp2_client_out_and_released_it_completes(up: SdkUpstream, mode: str) -> None:
    # the client's 2 s timeout (its initialize, forwarded to the upstream process, takes it too) far
    # inside the 10 s budget: the POST closed on the timeout, not at the budget, on a loaded machine too
    with Sidecar(upstream=up.url, faults=[Stall(after_bytes=5, when="tools/call")], patience=10.0) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=2.0) as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("add", {"a": 1, "b": 2})
        await asyncio.to_thread(sc.wait_idle, 5)
        assert sc.patience_violations == ()  # both eras close the stalled POST on the timeout, as on the fake
    with Sidecar(upstream=up.url, faults=[Stall(after_bytes=5, when="tools/call")], patience=None) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=5.0) as client:
            call = asyncio.ensure_future(client.call_tool("add", {"a": 4, "b": 5}))
            await asyncio.to_thread(sc.wait_held, 1)
            sc.release()
            result = await asyncio.wait_for(call, 5)
        assert result.content[0].text == "9"  # the rest of the upstream's real answer, after the stall
        await asyncio.to_thread(sc.wait_idle, 3)
        rec = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert rec.hold == "released" and rec.bytes_sent == rec.upstream.bytes


@pytest.mark.parametrize(
    "fault", [Truncate(after_bytes=10, when="tools/call"), Reset(after_bytes=10, when="tools/call")]
)
def test_truncate_and_reset_cut_the_upstreams_bytes(up: SdkUpstream, fault: Truncate | Reset) -> None:
    with Sidecar(upstream=up.url, faults=[fault]) as sc, httpx.Client(timeout=5) as c:
        headers = initialize(c, sc.mcp_url)
        got = b""
        with pytest.raises(CUT), c.stream("POST", sc.mcp_url, json=add(1, 2), headers=headers) as resp:  # noqa: PT012
            for chunk in resp.iter_raw():
                got += chunk
        assert got == b"event: mess"[:10]
        settled(sc)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.bytes_sent == 10 and call.upstream.status == 200


def test_a_reset_before_any_byte_lets_the_upstream_finish_the_request_first(up: SdkUpstream) -> None:
    """The SDK server sends an SSE answer's status line before its tool runs; ``reset`` at 0 bytes
    still resets only once the upstream's answer has ended (the proxy table: the upstream ran it)."""
    ran = len(up.calls)
    pause = rpc("tools/call", name="pause", arguments={"seconds": 0.3})
    with Sidecar(upstream=up.url, faults=[Reset(when="tools/call")]) as sc, httpx.Client(timeout=5) as c:
        headers = initialize(c, sc.mcp_url)
        with pytest.raises(CUT):
            c.post(sc.mcp_url, json=pause, headers=headers)
        assert up.calls[ran:] == ["pause"]  # finished before the client saw the reset
        settled(sc)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.status is None and call.bytes_sent == 0 and call.fault_kind == "reset"
        assert call.upstream.status == 200 and call.upstream.bytes > 0  # the whole answer came, unrelayed


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
@pytest.mark.parametrize("reset", [False, True])
def test_notifications_a_reset_before_any_byte_never_relayed_are_not_journaled(
    up: SdkUpstream, reset: bool
) -> None:
    report = rpc("tools/call", name="report", arguments={"steps": 2}, _meta={"progressToken": "t"})
    faults = [Reset(when="tools/call")] if reset else []
    with Sidecar(upstream=up.url, faults=faults) as sc, httpx.Client(timeout=5) as c:
        headers = initialize(c, sc.mcp_url)
        if reset:
            with pytest.raises(CUT):
                c.post(sc.mcp_url, json=report, headers=headers)
        else:
            r = c.post(sc.mcp_url, json=report, headers=headers)
            assert [
                m["params"]["progress"]
                for m in sse_messages(r.content)
                if m.get("method") == "notifications/progress"
            ] == [1, 2]
        settled(sc)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.upstream.status == 200 and call.upstream.bytes > 0  # the upstream sent them
        progress = [n.params["progress"] for n in sc.journal.server_messages if n.method.endswith("progress")]
    assert progress == ([] if reset else [1, 2])


def test_drip_paces_the_upstreams_bytes_and_the_answer_is_whole(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[Drip(chunk_bytes=16, interval=0.005, when="tools/call")]) as sc:
        with httpx.Client(timeout=5) as c:
            headers = initialize(c, sc.mcp_url)
            with c.stream("POST", sc.mcp_url, json=add(20, 22), headers=headers) as resp:
                pieces = list(resp.iter_raw())
        body = b"".join(pieces)
        assert sse_response(body)["result"]["content"][0]["text"] == "42"
        assert len(pieces) > 1  # not one write
        sc.wait_idle(3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.bytes_sent == call.upstream.bytes == len(body)


def test_malformed_json_cuts_the_upstreams_answer_in_half(up: SdkUpstream) -> None:
    with (
        Sidecar(upstream=up.url, faults=[MalformedJson(when="tools/call")]) as sc,
        httpx.Client(timeout=5) as c,
    ):
        headers = initialize(c, sc.mcp_url)
        r = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        settled(sc)
        call = next(x for x in sc.requests if x.mcp_method == "tools/call")
        assert r.status_code == 200 and len(r.content) == call.upstream.bytes // 2 == call.bytes_sent
        with pytest.raises(json.JSONDecodeError):
            sse_response(r.content)


@pytest.mark.parametrize("mode", MODES)
async def test_tool_error_rewrites_a_result_the_upstream_really_produced(up: SdkUpstream, mode: str) -> None:
    ran = len(up.calls)
    with Sidecar(upstream=up.url, faults=[ToolError(text="disk full", when="tool:add")]) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=5) as client:
            result = await client.call_tool("add", {"a": 1, "b": 2})
            after = await client.call_tool("echo", {"text": "fine"})
        assert result.is_error and result.content[0].text == "disk full"
        assert after.content[0].text == "fine"
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.tool == "add")
        assert call.fault_kind == "tool_error" and call.forwarded and call.upstream.status == 200
    assert up.calls[ran:] == ["add", "echo"]  # the tool ran on the upstream: only its result was rewritten


async def test_backend_gone_names_the_upstream_and_the_delete_really_ran(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[BackendGone()]) as sc:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
            created = json.loads((await client.call_tool("create_session", {"task_id": "t"})).content[0].text)
            sid = created["session_id"]
            assert sid in up.sessions
            gone = await client.call_tool("delete_session", {"session_id": sid})
        assert json.loads(gone.content[0].text) == {
            "error": f"Error closing session {sid}: Service at {up.origin} is no longer alive"
        }
        assert sid not in up.sessions  # the upstream deleted it: the answer lies about it


async def test_session_expired_ends_the_session_for_the_client(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[SessionExpired(when=Trigger("tools/call", nth=2))]) as sc:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
            with pytest.raises(MCPError, match="Session not found"):
                await client.call_tool("add", {"a": 1, "b": 2})
        await asyncio.to_thread(sc.wait_idle, 3)
        (sid,) = sc.ended_sessions
        delete = sc.requests[-1]
        assert delete.label == "DELETE /mcp" and delete.status == 404 and not delete.forwarded
        assert delete.session_id == sid


def test_die_with_restart_forgets_the_sessions_the_upstream_assigned(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, faults=[Die(restart=True, when=Trigger("tools/call", nth=1))]) as sc:
        with httpx.Client(timeout=5) as c:
            headers = initialize(c, sc.mcp_url)
            assert sc.sessions == (headers["Mcp-Session-Id"],)
            with pytest.raises(CUT):
                c.post(sc.mcp_url, json=add(1, 2), headers=headers)
            again = c.post(sc.mcp_url, json=add(1, 2), headers=headers)
        assert again.status_code == 404 and again.json()["error"]["message"] == "Session not found"
        assert sc.state == "running" and headers["Mcp-Session-Id"] in sc.ended_sessions
        assert not sc.requests[-1].forwarded


async def test_era_session_sends_a_dual_era_upstreams_clients_to_sessions(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, era="session") as sc:
        async with Client(sc.mcp_url, mode="auto", read_timeout_seconds=5) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
        await asyncio.to_thread(sc.wait_idle, 3)
        discover = sc.requests[0]
        assert discover.mcp_method == "server/discover" and discover.status == 400 and not discover.forwarded
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.era == "session" and call.forwarded


# -- the upstream failing ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_upstream_that_refuses_is_a_502_recorded_as_the_upstreams() -> None:
    with Sidecar(upstream=f"http://127.0.0.1:{_free_port()}/mcp") as sc, httpx.Client(timeout=5) as c:
        r = c.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT)
        assert r.status_code == 502
        assert r.json()["error"]["message"].startswith(f"Bad Gateway: upstream {sc.upstream}: cannot connect")
        assert r.json()["id"] == 1
        settled(sc)
        (rec,) = sc.requests
        assert rec.error_by == "upstream" and rec.upstream.failure == "refused"
        assert rec.upstream.status is None and rec.status == 502 and rec.forwarded
        sc.check_errors()  # the upstream's failure is not a sidecar error


class _RawUpstream:
    """A TCP server on its own thread that reads a request and then stays silent, or answers a status
    line and part of a body and resets; it counts the connections still open."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.open = 0
        self.seen = 0
        self.sent = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(5)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.seen += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            if self.mode == "stalls-json":  # a status line, 10 bytes of a 100-byte body, then nothing
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                writer.write(head + b'\r\n{"jsonrpc"')
            if self.mode == "stalls-sse":  # a status line, a 10-byte chunk of an event stream, then nothing
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                writer.write(head + b"\r\na\r\nevent: mes\r\n")
            if self.mode.startswith("stalls"):
                await writer.drain()
                await reader.read()
                return
            if self.mode == "endless":  # an event stream of comments that never ends (no answer ever)
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                writer.write(head + b"\r\n")
                ping = b": " + b"p" * 4000 + b"\n\n"
                while True:
                    writer.write(b"%x\r\n" % len(ping) + ping + b"\r\n")
                    await writer.drain()
                    self.sent += len(ping)
                    await asyncio.sleep(0.005)
            if self.mode == "half":
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                writer.write(head + b"\r\n")
                writer.write(b"6\r\nevent:\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.transport.abort()
                return
            await reader.read()  # silent until the other side closes
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open -= 1

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def silent() -> Iterator[_RawUpstream]:
    raw = _RawUpstream("silent")
    yield raw
    raw.close()


def test_an_upstream_that_never_answers_is_a_504_within_upstream_timeout(silent: _RawUpstream) -> None:
    url = f"http://127.0.0.1:{silent.port}/mcp"
    with Sidecar(upstream=url, upstream_timeout=0.3) as sc, httpx.Client(timeout=5) as c:
        t0 = time.monotonic()
        r = c.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT)
        assert time.monotonic() - t0 < 3
        assert r.status_code == 504 and r.json()["error"]["message"].startswith("Gateway Timeout")
        settled(sc)
        (rec,) = sc.requests
        assert rec.upstream.failure == "timed_out" and rec.error_by == "upstream"


def test_an_upstream_reset_mid_answer_resets_the_client() -> None:
    raw = _RawUpstream("half")
    try:
        with Sidecar(upstream=f"http://127.0.0.1:{raw.port}/mcp") as sc, httpx.Client(timeout=5) as c:
            got = b""
            with pytest.raises(CUT), c.stream("POST", sc.mcp_url, json=add(1, 2), headers=ACCEPT) as resp:  # noqa: PT012
                assert resp.status_code == 200
                for chunk in resp.iter_raw():
                    got += chunk
            assert got in (b"", b"event:")  # what came before the reset, if the client read it first
            settled(sc)
            (rec,) = sc.requests
            assert rec.status == 200 and rec.upstream.status == 200
            assert rec.upstream.failure == "reset" and rec.error_by == "upstream"
    finally:
        raw.close()


@pytest.mark.parametrize("mode", ["stalls-json", "stalls-sse"])
def test_an_upstream_silent_mid_answer_past_upstream_timeout(mode: str) -> None:
    """Nothing relayed yet (a small JSON answer is relayed whole): 504. Part of an event stream relayed
    already: the client's connection is reset."""
    raw = _RawUpstream(mode)
    try:
        url = f"http://127.0.0.1:{raw.port}/mcp"
        with Sidecar(upstream=url, upstream_timeout=0.3) as sc:
            with httpx.Client(timeout=5) as c:
                t0 = time.monotonic()
                if mode == "stalls-json":
                    r = c.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT)
                    assert r.status_code == 504 and r.json()["error"]["message"].startswith("Gateway Timeout")
                else:
                    with c.stream("POST", sc.mcp_url, json=add(1, 2), headers=ACCEPT) as resp:
                        assert resp.status_code == 200
                        with pytest.raises(CUT):
                            resp.read()
                assert time.monotonic() - t0 < 3
            sc.wait_idle(3)
            (rec,) = sc.requests
            assert rec.upstream.status == 200 and rec.upstream.bytes == 10
            assert rec.upstream.failure == "timed_out" and rec.error_by == "upstream"
            assert rec.status == (504 if mode == "stalls-json" else 200)
            if mode == "stalls-sse":
                assert rec.bytes_sent == 10  # what was relayed before the upstream fell silent
    finally:
        raw.close()


@pytest.fixture
def endless() -> Iterator[_RawUpstream]:
    raw = _RawUpstream("endless")
    yield raw
    raw.close()


def _tool_error_on(raw: _RawUpstream, timeout: float | None) -> Sidecar:
    return Sidecar(
        upstream=f"http://127.0.0.1:{raw.port}/mcp", faults=[ToolError()], upstream_timeout=timeout
    )


def test_an_answer_to_rewrite_must_be_complete_within_upstream_timeout(endless: _RawUpstream) -> None:
    """``tool_error`` reads the whole answer to rewrite it: an endless event stream used to be buffered
    for as long as it went on (each chunk came within the gap timeout); now the whole answer has
    ``upstream_timeout``."""
    with _tool_error_on(endless, 0.5) as sc, httpx.Client(timeout=10) as c:
        t0 = time.monotonic()
        r = c.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT)
        assert time.monotonic() - t0 < 3
        assert r.status_code == 504
        assert "its answer was not complete within upstream_timeout=0.5 s" in r.json()["error"]["message"]
        settled(sc)
        (rec,) = sc.requests
        assert (rec.upstream.failure, rec.error_by) == ("timed_out", "upstream")


def test_an_answer_to_rewrite_is_bounded_in_size(
    endless: _RawUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_mcpfaults.proxy import relay

    monkeypatch.setattr(relay, "REWRITE_MAX_BYTES", 100_000)
    with _tool_error_on(endless, None) as sc, httpx.Client(timeout=10) as c:
        r = c.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT)
        assert r.status_code == 502
        message = r.json()["error"]["message"]
        assert (
            "over the rewrite_max_bytes limit of 100000 bytes that a fault rewriting it may buffer" in message
        )
        settled(sc)
        (rec,) = sc.requests
        assert (rec.upstream.failure, rec.error_by) == ("error", "upstream")
        assert rec.upstream.bytes is not None and 100_000 < rec.upstream.bytes < 200_000
        _wait_closed(endless)  # the upstream connection was dropped, not kept reading


def _wait_closed(raw: _RawUpstream) -> None:
    """Wait (bounded) until ``raw`` sees its connection closed (at its next write)."""
    deadline = time.monotonic() + 3
    while raw.open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert raw.open == 0


def test_reading_an_answer_to_rewrite_stops_when_the_client_left(endless: _RawUpstream) -> None:
    with _tool_error_on(endless, None) as sc:
        with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=0.3) as c:
            c.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT)
        _wait_closed(endless)  # the sidecar closed the upstream connection once the client left
        sent = endless.sent
        time.sleep(0.2)
        assert endless.sent == sent
        settled(sc)
        (rec,) = sc.requests
        assert rec.error_by is None  # nobody's failure: the client left


def test_stop_is_bounded_with_a_stuck_upstream_and_closes_its_connections(silent: _RawUpstream) -> None:
    url = f"http://127.0.0.1:{silent.port}/mcp"
    sc = Sidecar(upstream=url, upstream_timeout=None).start()  # nothing bounds the upstream but stop()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(sc.mcp_url, json=add(1, 2), headers=ACCEPT, timeout=10)
        except httpx.HTTPError as exc:
            errors.append(exc)

    clients = [threading.Thread(target=call) for _ in range(3)]
    for t in clients:
        t.start()
    deadline = time.monotonic() + 5
    while silent.seen < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert silent.open == 3  # three requests stuck on the upstream
    t0 = time.monotonic()
    sc.stop()
    assert time.monotonic() - t0 < 2.0
    for t in clients:
        t.join(5)
    assert len(errors) == 3  # every client's connection was cut
    deadline = time.monotonic() + 2
    while silent.open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert silent.open == 0  # every upstream connection was closed at stop


# -- headers and paths -------------------------------------------------------------------------------


@pytest.fixture
async def echo_upstream() -> AsyncIterator[str]:
    """An aiohttp app (on the test's loop) that answers with the headers it got; ``/healthz`` too."""

    async def echo(request: web.Request) -> web.Response:
        seen = {"path": request.path, "headers": dict(request.headers)}
        return web.json_response(
            seen,
            headers={
                "X-Upstream": "yes",
                "Mcp-Session-Id": "s-1",
                "Connection": "keep-alive, X-Secret",
                "X-Secret": "1",
            },
        )

    app = web.Application()
    app.router.add_route("*", "/mcp", echo)
    app.router.add_route("*", "/healthz", echo)
    app.router.add_route("*", "/.well-known/oauth-protected-resource", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_mcp_headers_pass_through_and_hop_by_hop_ones_do_not(echo_upstream: str) -> None:
    sent = {
        **ACCEPT,
        "Content-Type": "application/json",
        "Mcp-Session-Id": "abc",
        "MCP-Protocol-Version": SESSION_VERSION,
        "Authorization": "Bearer token-1",
        "X-Custom": "kept",
        "Connection": "keep-alive, X-Hop",
        "X-Hop": "dropped",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic xyz",
        "Accept-Encoding": "gzip",
        "Expect": "100-continue",
    }
    with Sidecar(upstream=echo_upstream + "/mcp") as sc:
        async with httpx.AsyncClient(timeout=5) as c:
            r = await c.post(sc.mcp_url, json=add(1, 2), headers=sent)
    got = {k.lower(): v for k, v in r.json()["headers"].items()}
    for name in (
        "accept",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "authorization",
        "x-custom",
    ):
        assert got[name] == sent[next(k for k in sent if k.lower() == name)], name
    for name in ("x-hop", "keep-alive", "proxy-authorization", "expect"):
        assert name not in got, name
    assert got["host"] == echo_upstream.removeprefix("http://")  # the upstream's own
    assert got["accept-encoding"] == "identity"  # so the faults cut the bytes it sends
    assert r.headers["X-Upstream"] == "yes" and r.headers["Mcp-Session-Id"] == "s-1"  # answer headers relayed


async def test_upstream_headers_set_or_drop_what_is_forwarded(echo_upstream: str) -> None:
    """``upstream_headers=``: a value replaces the client's header, ``None`` keeps it from the upstream."""
    sent = {**ACCEPT, "Content-Type": "application/json", "Authorization": "Bearer client", "X-Keep": "1"}
    rewrites = {"Authorization": None, "X-Tenant": "t-42"}
    with Sidecar(upstream=echo_upstream + "/mcp", upstream_headers=rewrites) as sc:
        async with httpx.AsyncClient(timeout=5) as c:
            r = await c.post(sc.mcp_url, json=add(1, 2), headers=sent)
    got = {k.lower(): v for k, v in r.json()["headers"].items()}
    assert "authorization" not in got
    assert got["x-tenant"] == "t-42" and got["x-keep"] == "1"
    with pytest.raises(ValueError, match=r"upstream_headers needs an upstream"):
        Sidecar(upstream_headers={"A": "b"})
    with pytest.raises(ValueError, match=r"upstream_headers: 'Content-Length' is a hop-by-hop or framing"):
        Sidecar(upstream=echo_upstream + "/mcp", upstream_headers={"Content-Length": "1"})
    with pytest.raises(ValueError, match=r"upstream_headers\['X'\] must be a string without CR/LF/NUL"):
        Sidecar(upstream=echo_upstream + "/mcp", upstream_headers={"X": "a\r\nb"})
    with pytest.raises(ValueError, match=r"upstream_headers must be a dict of header names"):
        Sidecar(upstream=echo_upstream + "/mcp", upstream_headers=["Authorization"])  # type: ignore[arg-type]
    assert "X-Secret" not in r.headers  # named by the upstream's Connection header: hop-by-hop


@pytest.mark.parametrize("name", ["Proxy-Authorization", "proxy-authenticate", "Trailers", "Expect"])
def test_upstream_headers_refuse_every_header_the_sidecar_never_forwards(name: str) -> None:
    """``Proxy-Authorization`` (hop-by-hop: dropped from the client's request) could be set through
    ``upstream_headers`` and went out; the refused names are the ones never forwarded, derived."""
    with pytest.raises(ValueError, match=f"upstream_headers: {name!r} is a hop-by-hop or framing header"):
        Sidecar(upstream="http://127.0.0.1:9/mcp", upstream_headers={name: "x"})


@pytest.mark.parametrize("value", ["a\x1bb", "a\x7f", "a\x00", "\x0b", "a\rb"])
def test_upstream_headers_refuse_control_characters(value: str) -> None:
    message = r"upstream_headers\['X'\] must be a string without CR/LF/NUL or other control characters"
    with pytest.raises(ValueError, match=message):
        Sidecar(upstream="http://127.0.0.1:9/mcp", upstream_headers={"X": value})
    accepted = Sidecar(upstream="http://127.0.0.1:9/mcp", upstream_headers={"X": "a\tb é"})
    assert accepted.options.upstream_headers == {"X": "a\tb é"}


async def test_health_is_local_unless_upstream_health_and_other_paths_go_upstream(
    up: SdkUpstream, echo_upstream: str
) -> None:
    async with httpx.AsyncClient(timeout=5) as c:
        with Sidecar(upstream=up.url) as sc:
            local = await c.get(sc.health_url)  # the SDK server has no /health: the sidecar answers
            assert local.status_code == 200 and local.json() == {"status": "ok"}
            assert not sc.requests[0].forwarded
        with Sidecar(upstream=echo_upstream + "/mcp", upstream_health="/healthz") as sc:
            health = await c.get(sc.health_url)
            meta = await c.get(sc.url + "/.well-known/oauth-protected-resource")
            assert health.status_code == 200 and health.json()["path"] == "/healthz"
            assert meta.status_code == 200 and meta.json()["path"] == "/.well-known/oauth-protected-resource"
            await asyncio.to_thread(settled, sc)
            assert all(r.forwarded for r in sc.requests)
        with Sidecar(
            upstream=up.url, upstream_health="/health", faults=[Status(code=503, when="health")]
        ) as sc:
            assert (await c.get(sc.health_url)).status_code == 503  # health faults act before forwarding
            assert not sc.requests[0].forwarded


async def test_a_client_hanging_up_on_a_relayed_get_stream_closes_the_upstream_connection() -> None:
    """The upstream's GET event stream says nothing for ever; when the client goes, so does the
    sidecar's connection to the upstream (no wait for teardown)."""
    async with quiet_stream("GET", b": open\n\n") as up:
        with Sidecar(upstream=up.url) as sc:
            async with httpx.AsyncClient(timeout=5) as c, c.stream("GET", sc.mcp_url, headers=ACCEPT) as resp:
                assert resp.status_code == 200
                assert await resp.aiter_raw().__anext__() == b": open\n\n"
                await asyncio.wait_for(up.opened.wait(), 2)
            await asyncio.wait_for(up.gone.wait(), 2)  # the client closed: the upstream's stream ended too
            await asyncio.to_thread(sc.wait_idle, 3)
            (rec,) = sc.requests
            assert rec.client_closed and rec.upstream.status == 200 and rec.upstream.bytes == 8


async def test_era_stateless_refuses_initialize_as_a_stateless_server_would(up: SdkUpstream) -> None:
    with Sidecar(upstream=up.url, era="stateless") as sc:
        async with httpx.AsyncClient(timeout=5) as c:
            init = rpc(
                "initialize", protocolVersion=SESSION_VERSION, capabilities={}, clientInfo={"name": "t"}
            )
            r = await c.post(sc.mcp_url, json=init, headers=ACCEPT)
        assert r.json()["error"]["code"] == -32022  # unsupported protocol version, as the fake answers
        assert not sc.requests[0].forwarded
        async with Client(sc.mcp_url, mode="auto", read_timeout_seconds=5) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"


# -- arguments ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"upstream": "http://10.1.2.3:9000/mcp"}, "not a loopback address"),
        ({"upstream": "10.1.2.3:9000/mcp"}, "http:// or https://"),
        ({"upstream": 9000}, "URL string"),
        ({"upstream_health": "/health"}, "needs an upstream"),
        ({"allow_remote_upstream": True}, "needs an upstream"),
        (
            {"upstream": "http://127.0.0.1:9/mcp", "upstream_health": "health"},
            "upstream_health must be a path",
        ),
        (
            {"upstream": "http://127.0.0.1:9/mcp", "upstream_health": "/h", "health_path": None},
            "health_path is None",
        ),
        ({"upstream": "http://127.0.0.1:9/mcp", "upstream_timeout": 0}, "upstream_timeout must be"),
        (
            {"upstream": "http://127.0.0.1:9/mcp", "allow_remote_upstream": "yes"},
            "allow_remote_upstream must be True",
        ),
        ({"upstream": "http://127.0.0.1:9/mcp", "get_stream": True}, "get_stream=True"),
    ],
)
def test_bad_proxy_arguments_are_refused_naming_them(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="Sidecar: ") as info:
        Sidecar(**kwargs)
    assert message in str(info.value)


def test_a_remote_upstream_needs_the_opt_in_and_tools_stay_the_upstreams() -> None:
    Sidecar(upstream="http://example.test:9000/mcp", allow_remote_upstream=True)  # accepted on purpose
    sc = Sidecar(upstream="http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match="add the tool to the upstream server"):
        sc.add_tool("x", lambda: None, input_schema={"type": "object"})


# -- the upstream's DNS-rebinding check ---------------------------------------------------------------

INIT = rpc(
    "initialize", protocolVersion=SESSION_VERSION, capabilities={}, clientInfo={"name": "t", "version": "1"}
)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "10.0.0.7", "[2001:db8::1]:8080"])
def test_a_foreign_host_is_refused_as_the_upstream_would_refuse_it(up: SdkUpstream, host: str) -> None:
    """The SDK server refuses a request whose ``Host`` is not loopback (its DNS-rebinding protection);
    through the proxy it saw the sidecar's own ``Host`` and answered 200. The sidecar now refuses it
    in the upstream's place, 403, without forwarding, as it refuses a foreign ``Origin``."""
    calls = len(up.calls)
    with httpx.Client(timeout=10) as c:
        direct = c.post(up.url, json=INIT, headers={**ACCEPT, "Host": host})
        assert direct.status_code in (403, 421)  # the upstream's own check
        with Sidecar(upstream=up.url) as sc:
            r = c.post(sc.mcp_url, json=INIT, headers={**ACCEPT, "Host": host})
            assert r.status_code == 403
            assert r.json()["error"]["message"].startswith(f"Forbidden: Host {host!r} is not allowed")
            other = c.get(sc.url + "/.well-known/oauth-protected-resource", headers={"Host": host})
            assert other.status_code == 403  # not forwarded to the upstream's other paths either
            ok = c.post(sc.mcp_url, json=INIT, headers={**ACCEPT, "Host": f"localhost:{sc.port}"})
            assert ok.status_code == 200
            settled(sc)
            first = sc.requests[0]
            assert (first.status, first.error_by, first.upstream) == (403, "client", None)
    assert len(up.calls) == calls


def test_a_host_named_in_allowed_origins_is_let_through(up: SdkUpstream) -> None:
    with (
        Sidecar(upstream=up.url, allowed_origins=["http://app.test:3000"]) as sc,
        httpx.Client(timeout=10) as c,
    ):
        r = c.post(sc.mcp_url, json=INIT, headers={**ACCEPT, "Host": f"app.test:{sc.port}"})
        assert r.status_code == 200
