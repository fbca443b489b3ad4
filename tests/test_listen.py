"""``subscriptions/listen`` (2026-07-28): the stateless era's change notices, through the mcp 2.x
``Client`` (``mode="auto"`` against an auto sidecar and a stateless one) and plain httpx / a raw socket:
the notices its filter selects reach the client, each stamped with the subscription id; the filter is
checked; the body faults aimed at ``method:subscriptions/listen`` and what the client did next, from the
journal; and the stream ends at ``stop()`` in bounded time, gracefully for a client that reads it."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from typing import Any

import httpcore2
import httpx
import httpx2
import pytest
from mcp import types
from mcp.client import Client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourceUpdated,
    ServerEvent,
    Subscription,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Prompt, Resource, Sidecar

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

STATELESS = {
    "MCP-Protocol-Version": "2026-07-28",
    "Accept": "application/json, text/event-stream",
    "Mcp-Method": "subscriptions/listen",
}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
WATCHED = "test://watched-resource"
OBJECT = {"type": "object"}


def _listens(sc: Sidecar) -> list[Any]:
    return [r for r in sc.requests if r.mcp_method == "subscriptions/listen"]


def _listen_ended(requests: tuple[Any, ...]) -> bool:
    return any(r.mcp_method == "subscriptions/listen" and r.ended_at is not None for r in requests)


async def _next(sub: Subscription, seconds: float = 5.0) -> ServerEvent:
    return await asyncio.wait_for(anext(aiter(sub)), seconds)


def _listen_body(rpc_id: Any, notifications: Any) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    params = {"_meta": meta} if notifications is None else {"_meta": meta, "notifications": notifications}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "subscriptions/listen", "params": params}


@pytest.mark.parametrize(
    ("era", "mode"), [("auto", "auto"), ("stateless", "auto"), ("stateless", "2026-07-28")]
)
async def test_a_stateless_client_is_told_the_changes_its_listen_asked_for(era: str, mode: str) -> None:
    """The filter selects: a tool and prompts added, and the subscribed resource replaced, reach the
    client (its ``listen`` and its message handler); a replaced resource it did not name and a new one
    (it did not ask for ``resources/list_changed``) do not."""
    handled: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str) and method.startswith("notifications/"):
            handled.append(method)

    with Sidecar(tool_sets=["conformance"], era=era) as sc:
        async with Client(sc.mcp_url, mode=mode, message_handler=on_message) as client:
            caps = client.server_capabilities
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resource_subscriptions=[WATCHED]
            ) as sub:
                sc.add_tool("late", lambda: "x", input_schema=OBJECT)
                sc.surface.add(
                    [
                        Resource("test://static-text", "static-text", text="v2"),  # not named: nothing
                        Resource("test://new", "new", text="n"),  # resources/list_changed: not asked
                        Resource(WATCHED, "watched-resource", text="v2"),
                    ],
                    [Prompt("late_prompt", lambda: [])],
                )
                events = [await _next(sub) for _ in range(3)]
                read = await client.read_resource(WATCHED)
            await asyncio.to_thread(sc.wait_for, _listen_ended)  # its client closed it
        (listen,) = _listens(sc)
    assert listen.status == 200 and listen.era == "stateless" and listen.rpc_id == sub.subscription_id
    if mode == "auto":  # discovered (a version adopted directly discovers nothing)
        assert caps is not None and caps.tools is not None and caps.tools.list_changed is True
        assert caps.resources is not None and caps.resources.subscribe is True
    assert sub.honored == types.SubscriptionFilter(
        tools_list_changed=True, prompts_list_changed=True, resource_subscriptions=[WATCHED]
    )
    assert events == [ToolsListChanged(), ResourceUpdated(uri=WATCHED), PromptsListChanged()]
    assert read.contents[0].text == "v2"  # type: ignore[union-attr]
    assert handled == [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
        "notifications/prompts/list_changed",
    ]
    assert listen.client_closed  # leaving `listen` closed its stream: the 2026-07-28 cancellation
    assert listen.bytes_sent > 3 * len(b"event: message\ndata: {}\n\n")


async def test_the_ack_and_each_notice_carry_the_subscription_id_and_the_filter_is_checked() -> None:
    """On the wire: the ack is the first event, echoing the filter without what the sidecar does not
    serve (an extension's field, a false flag); each notice carries the listen request's id. A filter
    that is not one is the client's mistake, -32602 (HTTP 400), named; the session era has no listen."""
    with Sidecar(tool_sets=["basic"], era="auto") as sc:
        async with httpx.AsyncClient(timeout=5) as http:
            wanted = {"toolsListChanged": True, "promptsListChanged": False, "taskIds": ["t1"]}
            async with http.stream(
                "POST", sc.mcp_url, json=_listen_body(7, wanted), headers=STATELESS
            ) as resp:
                lines = resp.aiter_lines()
                ack = await _data(lines)
                sc.add_tool("late", lambda: "x", input_schema=OBJECT)
                notice = await _data(lines)
            assert resp.status_code == 200 and resp.headers["content-type"] == "text/event-stream"
            refused = [
                await http.post(sc.mcp_url, json=_listen_body(8, bad), headers=STATELESS)
                for bad in (None, {"toolsListChanged": "yes"}, {"resourceSubscriptions": "test://a"})
            ]
            session = await http.post(
                sc.mcp_url,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25"},
                },
                headers={"Accept": "application/json, text/event-stream"},
            )
            sid = session.headers["Mcp-Session-Id"]
            in_session = await http.post(
                sc.mcp_url,
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "subscriptions/listen",
                    "params": {"notifications": {}},
                },
                headers={"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid},
            )
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": {SUBSCRIPTION_ID: 7}},
    }
    assert notice == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {SUBSCRIPTION_ID: 7}},
    }
    assert [r.status_code for r in refused] == [400, 400, 400]
    messages = [r.json()["error"]["message"] for r in refused]
    assert "needs notifications (an object), got None" in messages[0]
    assert "notifications.toolsListChanged must be a boolean, got 'yes'" in messages[1]
    assert "notifications.resourceSubscriptions must be a list of URI strings" in messages[2]
    assert {r.json()["error"]["code"] for r in refused} == {-32602}
    assert in_session.json()["error"]["code"] == -32601
    assert [r.error_by for r in _listens(sc)[1:4]] == ["client"] * 3


async def _data(lines: Any) -> Any:
    """The next SSE event's data, parsed (bounded: the caller's client has a read timeout)."""
    async for line in lines:
        if line.startswith("data: "):
            return json.loads(line[len("data: ") :])
    raise AssertionError("the stream ended")


async def _told_of_a_new_tool(client: Client, sc: Sidecar, name: str) -> ServerEvent:
    async with client.listen(tools_list_changed=True) as sub:
        sc.add_tool(name, lambda: "x", input_schema=OBJECT)
        return await _next(sub)


@pytest.mark.parametrize(
    "fault",
    [
        "reset(after_bytes=300)@method:subscriptions/listen[times=1]",  # RST inside the first notice
        "truncate(after_bytes=300)@method:subscriptions/listen[times=1]",  # FIN inside it
        "close_stream@method:subscriptions/listen[times=1]",  # a clean end after the ack, without the result
    ],
)
async def test_a_dropped_listen_stream_and_what_the_mcp2_client_did_next(fault: str) -> None:
    """The stream dies after the ack: mcp 2.x raises ``SubscriptionLost`` in the consumer and does not
    re-listen by itself (the journal holds one listen until the harness listens again, its own
    choice); the re-listened stream, not faulted (the trigger fired once), is told the next change."""
    with Sidecar(tool_sets=["basic"], faults=[fault]) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            with pytest.raises(SubscriptionLost):
                await _told_of_a_new_tool(client, sc, "late")
            tools = await client.list_tools()  # the client is fine otherwise
            after_drop = [r.mcp_method for r in sc.requests]
            event = await _told_of_a_new_tool(client, sc, "later")  # the harness re-listens
    first, second = _listens(sc)
    assert after_drop == ["server/discover", "subscriptions/listen", "tools/list"]  # no re-listen of its own
    assert "late" in {t.name for t in tools.tools}
    assert first.fault_kind == fault.split("(")[0].split("@")[0] and first.status == 200
    assert not first.client_closed  # the sidecar ended it
    assert second.fault_kind is None and event == ToolsListChanged()
    assert sc.fired == {first.fault_kind: 1}


@pytest.mark.parametrize(
    ("fault", "raised", "status"),
    [
        ("malformed_json@subscriptions/listen", "Failed to parse SSE message", 200),  # the ack's JSON halved
        ("status(code=503)@subscriptions/listen", "Server returned an error response", 503),
        ("jsonrpc_error(code=-32001,message=no listeners)@method:subscriptions/listen", "no listeners", 200),
    ],
)
async def test_a_fault_answered_before_the_stream_opens_fails_the_listen(
    fault: str, raised: str, status: int
) -> None:
    """``subscriptions/listen`` is a trigger target (bare or as ``method:``); a fault that answers in the
    stream's place makes mcp 2.x's ``listen`` raise as it enters; the client goes on."""
    with Sidecar(tool_sets=["basic"], faults=[fault]) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            with pytest.raises(MCPError, match=raised):
                await _told_of_a_new_tool(client, sc, "late")
            tools = await client.list_tools()
    (listen,) = _listens(sc)
    assert listen.status == status and listen.fault_kind == fault.split("(")[0].split("@")[0]
    assert "echo" in {t.name for t in tools.tools}  # the listen never entered: nothing was added


async def test_a_dripped_listen_stream_still_tells_its_client() -> None:
    with Sidecar(
        tool_sets=["basic"], faults=["drip(chunk_bytes=16,interval=0.001)@subscriptions/listen"]
    ) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            event = await _told_of_a_new_tool(client, sc, "late")
    assert event == ToolsListChanged() and _listens(sc)[0].fault_kind == "drip"


def _reset_read(caught: pytest.ExceptionInfo[BaseExceptionGroup[BaseException]]) -> bool:
    """The reset reached the client as a read error: httpx2's, or httpcore2's when the task reading the
    stream sees the reset first (which one does is the scheduler's: seen under five xdist workers)."""
    return caught.group_contains(httpx2.ReadError, depth=None) or caught.group_contains(
        httpcore2.ReadError, depth=None
    )


async def test_a_reset_before_the_status_line_fails_the_whole_mcp2_client() -> None:
    """As for any request mcp 2.x sends: the connection reset before an answer takes the client down."""
    with (
        Sidecar(tool_sets=["basic"], faults=["reset@subscriptions/listen"]) as sc,
        pytest.raises(BaseExceptionGroup) as caught,
    ):
        async with Client(sc.mcp_url, mode="auto") as client:
            await _told_of_a_new_tool(client, sc, "late")
    assert _reset_read(caught)
    (listen,) = _listens(sc)
    assert listen.status is None and listen.bytes_sent == 0


async def test_a_hung_listen_is_a_patience_verdict_and_its_reset_takes_the_mcp2_client_down() -> None:
    """``hang`` holds the listen before any answer: mcp 2.x's ``listen`` awaits its ack without a bound
    of its own, the patience budget resets the connection, and that takes the client down, as a
    reset before the status line does."""
    with (
        Sidecar(tool_sets=["basic"], faults=["hang@subscriptions/listen"], patience=0.5) as sc,
        pytest.raises(BaseExceptionGroup) as caught,
    ):
        async with Client(sc.mcp_url, mode="auto") as client:
            await _told_of_a_new_tool(client, sc, "late")
    assert _reset_read(caught)
    (violation,) = sc.patience_violations
    assert violation.request.mcp_method == "subscriptions/listen" and violation.request.hold == "patience"


async def test_a_listen_stream_closed_before_its_ack_fails_the_listen_itself() -> None:
    """``close_stream(after_events=0)``: the stream ends cleanly with nothing on it; mcp 2.x's ``listen``
    raises as it enters (the stream ended without a response), and does not try again."""
    with Sidecar(
        tool_sets=["basic"], faults=["close_stream(after_events=0)@method:subscriptions/listen"]
    ) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            with pytest.raises(MCPError, match="SSE stream ended without a response"):
                await _told_of_a_new_tool(client, sc, "late")
    (listen,) = _listens(sc)
    assert listen.status == 200 and listen.bytes_sent == 0 and listen.fault_kind == "close_stream"


async def test_a_stall_after_the_ack_holds_the_notices_without_patience_and_one_before_it_is_a_hang() -> None:
    """After the ack the client is listening, as it should: the held stream is not a patience
    violation, and released, its notices flow. Before the ack the mcp 2.x client's ``listen`` waits
    for it without a bound of its own: the patience verdict names the listen."""
    with Sidecar(
        tool_sets=["basic"], faults=["stall(after_bytes=300)@method:subscriptions/listen"], patience=0.5
    ) as sc:
        async with (
            Client(sc.mcp_url, mode="auto") as client,
            client.listen(tools_list_changed=True) as sub,
        ):
            sc.add_tool("late", lambda: "x", input_schema=OBJECT)
            await asyncio.to_thread(sc.wait_for, lambda rs: any(r.held for r in rs))
            with pytest.raises(TimeoutError):  # held past the patience budget: nothing told yet
                await _next(sub, 1.0)
            sc.release()
            event = await _next(sub)
    (listen,) = _listens(sc)
    assert event == ToolsListChanged() and listen.hold == "released"
    assert sc.patience_violations == ()

    with Sidecar(tool_sets=["basic"], faults=["stall@method:subscriptions/listen"], patience=0.5) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            started = time.monotonic()
            with pytest.raises(MCPError, match="SSE stream ended without a response"):
                async with client.listen(tools_list_changed=True):
                    pass
            waited = time.monotonic() - started
    (violation,) = sc.patience_violations
    assert violation.request.mcp_method == "subscriptions/listen" and violation.request.hold == "patience"
    assert 0.5 <= waited < 5


async def test_the_listen_stream_ends_gracefully_at_stop() -> None:
    """The sidecar stopping ends the stream with the listen request's result: the client's loop ends,
    no ``SubscriptionLost``; the journal says the sidecar ended it."""
    with Sidecar(tool_sets=["basic"]) as sc:
        async with (
            Client(sc.mcp_url, mode="auto") as client,
            client.listen(tools_list_changed=True) as sub,
        ):
            started = time.monotonic()
            await asyncio.to_thread(sc.stop)
            stopped = time.monotonic() - started
            told = [event async for event in sub]  # ends: the graceful close
    (listen,) = _listens(sc)
    assert told == [] and stopped < 2
    assert not listen.client_closed and listen.ended_at is not None


BIG = "test://big/" + "x" * 50_000  # a URI whose notices fill a socket's buffers fast


def _raw_listen(sc: Sidecar) -> socket.socket:
    """A client that sends a listen for ``BIG`` on a raw socket (and never reads), once its stream is open."""
    host, port = sc.url.split("//")[1].split(":")[0], sc.port
    raw = socket.create_connection((host, port), timeout=5)
    body = json.dumps(_listen_body("raw", {"resourceSubscriptions": [BIG]})).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in {**STATELESS, "Content-Type": "application/json"}.items())
    raw.sendall(
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    sc.wait_for(lambda rs: any(r.mcp_method == "subscriptions/listen" and r.status == 200 for r in rs))
    return raw


def test_a_listen_stream_whose_backlog_overflows_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that does not read: once its stream's backlog is full (8 here, 1024 by default) the
    sidecar resets its connection at once, while it runs, rather than queue for ever."""
    from pytest_mcpfaults.transports import notices

    monkeypatch.setattr(notices, "LISTEN_BACKLOG", 8)
    with Sidecar(tool_sets=["basic"]) as sc:
        raw = _raw_listen(sc)
        try:
            for n in range(400):  # ~20 MB: past the socket buffers, then past the backlog
                sc.surface.add([Resource(BIG, "big", text=str(n))])
            sc.wait_for(lambda rs: _listens(sc)[0].ended_at is not None)
            (conn,) = [c for c in sc.journal.connections if c.id == _listens(sc)[0].conn_id]
        finally:
            raw.close()
    assert conn.closed_by == "sidecar"
    assert _listens(sc)[0].bytes_sent < 400 * len(BIG)


def test_the_listen_stream_ends_at_stop_in_bounded_time_when_its_client_never_reads() -> None:
    """A client that sends a listen and never reads its stream, with ~25 MB of notices (fewer than its
    backlog) stuck behind it: ``stop()`` still returns at once (the graceful end is bounded, then the
    connection is reset) and the client's socket is closed."""
    sc = Sidecar(tool_sets=["basic"]).start()
    try:
        raw = _raw_listen(sc)
        for n in range(500):  # the first adds it, each later one is a resources/updated for it
            sc.surface.add([Resource(BIG, "big", text=str(n))])
        sc.wait_for(lambda rs: _listens(sc)[0].bytes_sent > 1_000_000)  # writing, and blocked behind
        started = time.monotonic()
    finally:
        sc.stop()
    stopped = time.monotonic() - started
    raw.settimeout(5)
    try:
        while raw.recv(1 << 20):  # drain what was sent: the connection ends (FIN or RST) within the bound
            pass
    except ConnectionResetError:
        pass
    finally:
        raw.close()
    (listen,) = _listens(sc)
    assert stopped < 3
    assert listen.ended_at is not None and listen.error is None
    assert listen.bytes_sent < 500 * len(BIG)  # it was stuck: not everything was written


def test_the_in_process_backend_answers_a_listen_with_its_ack_and_its_graceful_end_at_once() -> None:
    """No stream stays open in process: the ack, then the result (a stream the server ended)."""
    from pytest_mcpfaults.inprocess import mock_sidecar

    with mock_sidecar() as sc:
        answer = httpx.post(sc.mcp_url, json=_listen_body(3, {"toolsListChanged": True}), headers=STATELESS)
    events = [
        json.loads(line[len("data: ") :]) for line in answer.text.splitlines() if line.startswith("data: ")
    ]
    assert answer.headers["content-type"] == "text/event-stream"
    assert [e.get("method", "result" if "result" in e else None) for e in events] == [
        "notifications/subscriptions/acknowledged",
        "result",
    ]
    assert events[1]["result"]["_meta"] == {SUBSCRIPTION_ID: 3}
