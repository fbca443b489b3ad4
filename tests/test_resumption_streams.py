"""Resumption beyond ``close_stream``: every event-stream answer of a session and every ``GET`` stream
carries event ids (a priming event first for clients of 2025-11-25 on), so a client whose stream
breaks (a ``reset``, a ``stall`` or ``drip`` it gives up on, a dropped ``GET`` stream) comes back with
``Last-Event-ID`` and gets what it missed, on that stream only; the events kept are bounded."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterator

import httpx
import pytest
from mcp.client import Client
from mcp1_client import Mcp1Client
from test_cancellation import HEADERS, INIT  # the same session-era handshake

from pytest_mcpfaults import Drip, Reset, Sidecar, Stall, Trigger, Truncate
from pytest_mcpfaults.core import resumption
from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.transports import notices

Event = dict[str, str]


def call(rid: int, text: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }


def session(client: httpx.Client, url: str, version: str = "2025-11-25") -> dict[str, str]:
    r = client.post(url, json=INIT, headers=HEADERS)
    return {**HEADERS, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": version}


def parse(block: str) -> Event:
    fields: Event = {}
    for line in block.splitlines():
        name, _, value = line.partition(": ")
        fields[name.rstrip(":")] = value
    return fields


def events(body: str) -> list[Event]:
    """The SSE events of a whole body, each as its fields (comments left out)."""
    return [parse(b) for b in body.split("\n\n") if b.strip() and not b.startswith(":")]


def next_event(lines: Iterator[str]) -> Event:
    """The next event of a stream being read line by line (each read bounded by the client's timeout)."""
    block: list[str] = []
    for line in lines:
        if line:
            block.append(line)
        elif block and not block[0].startswith(":"):
            return parse("\n".join(block))
        else:
            block = []
    raise AssertionError(f"the stream ended; last lines {block}")


def text_of(event: Event) -> str:
    return str(json.loads(event["data"])["result"]["content"][0]["text"])


def test_an_sse_answer_carries_a_priming_event_and_ids_and_a_json_answer_none() -> None:
    with Sidecar(reply="sse", era="session") as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        r = client.post(sc.mcp_url, json=call(2, "a"), headers=headers)
        rid = sc.journal.requests[-1].id
        assert events(r.text) == [{"id": f"{rid}-0", "data": ""}, {"id": f"{rid}-1", **events(r.text)[1]}]
        assert text_of(events(r.text)[1]) == "a"
        old = client.post(
            sc.mcp_url, json=call(3, "b"), headers={**headers, "MCP-Protocol-Version": "2025-06-18"}
        )
        [only] = events(old.text)  # an older client: ids on its messages, no priming event
        assert only["id"] == f"{sc.journal.requests[-1].id}-1" and text_of(only) == "b"
    with Sidecar(era="session") as sc, httpx.Client(timeout=5) as client:  # JSON answers: as they were
        r = client.post(sc.mcp_url, json=call(2, "c"), headers=session(client, sc.mcp_url))
        assert (
            r.headers["content-type"] == "application/json"
            and r.json()["result"]["content"][0]["text"] == "c"
        )


async def test_mcp2_resumes_an_sse_answer_reset_after_its_priming_event() -> None:
    """``reset`` after the priming event: the mcp 2.x client has an id, so it comes back with it and
    the call returns its result (before event ids it failed with the reset)."""
    with Sidecar(reply="sse", era="session", faults=[Reset(after_bytes=20, when="tool:echo")]) as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "back"}, read_timeout_seconds=10)
        assert result.content[0].text == "back"  # type: ignore[union-attr]
        sc.wait_idle(5)
        [post] = [r for r in sc.journal.requests if r.label == "POST tools/call echo"]
        [get] = [r for r in sc.journal.requests if r.method == "GET" and r.last_event_id is not None]
        assert post.fault == "reset(after_bytes=20)@tool:echo" and post.bytes_sent == 20
        assert (get.last_event_id, get.status) == (f"{post.id}-0", 200)


def test_mcp1_resumes_an_sse_answer_reset_after_its_priming_event(mcp1_client: Mcp1Client) -> None:
    """The same with mcp 1.x's ``ClientSession`` (1.30, the overlay, in a child Python)."""
    with Sidecar(reply="sse", era="session", faults=[Reset(after_bytes=20, when="tool:echo")]) as sc:
        seen = mcp1_client.call(sc.mcp_url, "echo", {"text": "back"}, read_timeout=10)
        sc.wait_idle(5)
        [post] = [r for r in sc.journal.requests if r.label == "POST tools/call echo"]
        [get] = [r for r in sc.journal.requests if r.method == "GET" and r.last_event_id is not None]
    assert seen.version.startswith("1.") and seen.texts == ["back"] and seen.error is None, seen
    assert post.fault == "reset(after_bytes=20)@tool:echo" and post.bytes_sent == 20
    assert (get.last_event_id, get.status) == (f"{post.id}-0", 200)


@pytest.mark.parametrize(
    "fault", [Stall(after_bytes=20, when="tool:echo"), Drip(chunk_bytes=8, interval=0.5, when="tool:echo")]
)
def test_a_client_giving_up_on_a_slow_sse_answer_resumes_it_with_last_event_id(fault: Stall | Drip) -> None:
    with (
        Sidecar(reply="sse", era="session", faults=[fault], patience=3) as sc,
        httpx.Client(timeout=5) as client,
    ):
        headers = session(client, sc.mcp_url)
        with client.stream("POST", sc.mcp_url, json=call(2, "slow"), headers=headers) as r:
            priming = next_event(r.iter_lines())  # then the client gives up on the stream
        assert priming["data"] == ""
        again = client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": priming["id"]})
        [reply] = events(again.text)
        assert again.status_code == 200 and text_of(reply) == "slow"
        rid = int(priming["id"].split("-")[0])
        assert reply["id"] == f"{rid}-1" and sc.journal.request(rid).label == "POST tools/call echo"
        sc.release()


def test_a_dropped_get_stream_is_resumed_with_what_it_missed_and_goes_on_live() -> None:
    with Sidecar(get_stream=True, era="session") as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        with client.stream("GET", sc.mcp_url, headers=headers) as get:
            lines = get.iter_lines()
            priming = next_event(lines)
            sc.add_tool("one", lambda: "1", input_schema={"type": "object"})
            first = next_event(lines)
        key = priming["id"].split("-")[0]
        assert (priming, first["id"]) == ({"id": f"{key}-0", "data": ""}, f"{key}-1")
        sc.wait_for(lambda reqs: any(r.id == int(key) and r.done for r in reqs), timeout=5)
        sc.add_tool("two", lambda: "2", input_schema={"type": "object"})  # while nobody listens
        with client.stream("GET", sc.mcp_url, headers={**headers, "Last-Event-ID": first["id"]}) as again:
            lines = again.iter_lines()
            missed = next_event(lines)
            sc.add_tool("three", lambda: "3", input_schema={"type": "object"})
            live = next_event(lines)
        assert (missed["id"], live["id"]) == (f"{key}-2", f"{key}-3")  # the same stream, its ids going on
        assert json.loads(missed["data"])["method"] == "notifications/tools/list_changed"
        [resume] = [r for r in sc.journal.requests if r.last_event_id is not None]
        assert (resume.method, resume.last_event_id, resume.status) == ("GET", first["id"], 200)


@pytest.mark.parametrize("cut", [Reset, Truncate])
async def test_mcp2_resumes_its_get_stream_cut_by_a_fault_and_misses_no_notification(
    cut: type[Reset | Truncate],
) -> None:
    """``reset`` / ``truncate`` aimed at ``GET /mcp`` cut the stream once ``after_bytes`` of it are sent
    (here in the first notification): the mcp 2.x client comes back with the priming event's id, gets
    that notification replayed, and the next one live (mcp 1.30 does the same, measured by hand)."""
    told: list[str] = []

    async def on_message(message: object) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str):
            told.append(method)

    async def until(n: int) -> None:
        for _ in range(100):  # bounded: 5 s
            if len(told) >= n:
                return
            await asyncio.sleep(0.05)

    def opened(reqs: tuple[RequestRecord, ...]) -> bool:
        return any(r.method == "GET" and r.status == 200 for r in reqs)

    def resumed(reqs: tuple[RequestRecord, ...]) -> bool:
        return any(r.method == "GET" and r.last_event_id is not None for r in reqs)

    fault = cut(after_bytes=20, when=Trigger("GET /mcp", times=1))
    with Sidecar(get_stream=True, era="session", faults=[fault]) as sc:
        async with Client(sc.mcp_url, mode="legacy", message_handler=on_message):
            await asyncio.to_thread(
                sc.wait_for, lambda reqs: any(r.method == "GET" and r.status == 200 for r in reqs)
            )
            sc.add_tool("one", lambda: "1", input_schema={"type": "object"})  # cut in its event
            await asyncio.to_thread(sc.wait_for, resumed, 5)
            await until(1)
            sc.add_tool("two", lambda: "2", input_schema={"type": "object"})
            await until(2)
        gets = [r for r in sc.journal.requests if r.method == "GET" and r.status == 200]
    assert told == ["notifications/tools/list_changed"] * 2
    first, again = gets[0], next(r for r in gets if r.last_event_id is not None)
    assert first.fault == str(fault) and first.bytes_sent == 20
    assert again.last_event_id == f"{first.id}-0" and again.fault is None


def test_events_are_replayed_on_their_own_stream_and_session_only() -> None:
    with Sidecar(reply="sse", era="session") as sc, httpx.Client(timeout=5) as client:
        mine, theirs = session(client, sc.mcp_url), session(client, sc.mcp_url)
        r = client.post(sc.mcp_url, json=call(2, "mine"), headers=mine)
        priming, _ = events(r.text)
        stolen = client.get(sc.mcp_url, headers={**theirs, "Last-Event-ID": priming["id"]})
        unknown = client.get(sc.mcp_url, headers={**mine, "Last-Event-ID": "999-0"})
        assert (stolen.status_code, unknown.status_code) == (404, 404)
        assert "Unknown Last-Event-ID '999-0'" in unknown.text


def test_the_events_kept_are_bounded_and_a_forgotten_one_is_404_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(resumption, "RETAINED_EVENTS", 4)
    with Sidecar(reply="sse", era="session") as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        first = events(client.post(sc.mcp_url, json=call(2, "old"), headers=headers).text)
        for i in range(3):  # two events each: the first call's are forgotten
            client.post(sc.mcp_url, json=call(3 + i, "new"), headers=headers)
        gone = client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": first[0]["id"]})
        assert gone.status_code == 404 and "Unknown Last-Event-ID" in gone.text
        last = events(client.post(sc.mcp_url, json=call(9, "kept"), headers=headers).text)
        kept = client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": last[0]["id"]})
        assert kept.status_code == 200 and text_of(events(kept.text)[0]) == "kept"
    with Sidecar(get_stream=True, era="session") as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        with client.stream("GET", sc.mcp_url, headers=headers) as get:
            lines = get.iter_lines()
            priming = next_event(lines)
            for name in "abcde":  # a live stream: its oldest events go, the stream stays
                sc.add_tool(name, lambda: "x", input_schema={"type": "object"})
                next_event(lines)
            late = client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": priming["id"]})
        assert late.status_code == 404 and "the events after it are no longer kept" in late.text, late.text


def test_the_dormant_get_streams_are_bounded_the_oldest_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one dormant stream kept, the first session's dropped stream is forgotten when the second's
    drops: what is posted then is kept for the second only; the first, resumed, goes on live."""
    monkeypatch.setattr(notices, "DORMANT_STREAMS", 1)
    with Sidecar(get_stream=True, era="session") as sc, httpx.Client(timeout=5) as client:
        a, b = session(client, sc.mcp_url), session(client, sc.mcp_url)
        primed = {}
        for name, headers in (("a", a), ("b", b)):
            with client.stream("GET", sc.mcp_url, headers=headers) as get:
                primed[name] = next_event(get.iter_lines())["id"]
            sc.wait_for(functools.partial(_ended, int(primed[name].split("-")[0])), timeout=5)
        sc.add_tool("one", lambda: "1", input_schema={"type": "object"})  # a's stream is forgotten: b's only
        with client.stream("GET", sc.mcp_url, headers={**b, "Last-Event-ID": primed["b"]}) as again:
            assert next_event(again.iter_lines())["id"] == primed["b"].replace("-0", "-1")  # replayed
        with client.stream("GET", sc.mcp_url, headers={**a, "Last-Event-ID": primed["a"]}) as again:
            [resumed] = [r for r in sc.journal.requests if r.last_event_id == primed["a"]]
            assert resumed.bytes_sent == 0  # nothing replayed: "one" was never kept for it
            lines = again.iter_lines()
            sc.add_tool("two", lambda: "2", input_schema={"type": "object"})
            assert next_event(lines)["id"] == primed["a"].replace("-0", "-1")  # "two", live


def _ended(rid: int, reqs: tuple[RequestRecord, ...]) -> bool:
    return any(r.id == rid and r.done for r in reqs)
