"""Resumption (SEP-1699): ``close_stream`` ends a call's event stream gracefully after n events with
a ``retry`` field, a ``GET`` with ``Last-Event-ID`` gets the rest, the journal's ``StreamRecord`` says
whether and when the client came back and with which id, and ``Sidecar.assert_client_resumed``: the
mcp 2.x ``Client`` resumes; a plain httpx client that reconnects without ``Last-Event-ID`` is caught."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp.client import Client
from test_cancellation import HEADERS, INIT  # the same session-era handshake

from pytest_mcpfaults import CloseStream, Sidecar
from pytest_mcpfaults.core.resumption import MAX_ID_DIGITS

ECHO = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "again"}},
}


def events(body: str) -> list[dict[str, str]]:
    """The SSE events of a body, each as its fields."""
    out = []
    for block in body.split("\n\n"):
        if block.strip():
            out.append(
                dict(
                    line.split(": ", 1) if ": " in line else (line.rstrip(":"), "")
                    for line in block.splitlines()
                )
            )
    return out


def session(client: httpx.Client, url: str) -> dict[str, str]:
    r = client.post(url, json=INIT, headers=HEADERS)
    return {**HEADERS, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}


@pytest.mark.parametrize("reply", ["json", "sse"])
async def test_mcp2_resumes_a_closed_stream_with_last_event_id_after_the_retry(reply: str) -> None:
    with Sidecar(reply=reply, faults=[CloseStream(retry_ms=300)]) as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "resumed"}, read_timeout_seconds=5)
        assert result.content[0].text == "resumed"  # type: ignore[union-attr]
        sc.wait_idle(5)
        [s] = sc.closed_streams
        call = sc.journal.request(s.request_id)
        assert call.label == "POST tools/call echo" and call.fault == "close_stream(retry_ms=300)"
        assert (s.events_sent, s.last_event_id, s.kept, s.retry_ms) == (1, f"{call.id}-0", 1, 300)
        get = sc.journal.request(s.resumed_by)  # type: ignore[arg-type]
        assert (get.method, get.last_event_id, get.status, s.resumed_with, s.replayed) == (
            "GET",
            s.last_event_id,
            200,
            s.last_event_id,
            1,
        )
        assert s.resumed_at is not None and s.resumed_at - s.closed_at >= 0.3  # it waited the retry
        sc.assert_client_resumed("tool:echo", within=2.0)


def test_the_closed_stream_and_its_replay_on_the_wire() -> None:
    with Sidecar(faults=[CloseStream(retry_ms=50)]) as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        first = client.post(sc.mcp_url, json=ECHO, headers=headers)
        assert first.status_code == 200 and first.headers["content-type"].startswith("text/event-stream")
        priming, retry = events(first.text)
        assert priming == {"id": priming["id"], "data": ""} and retry == {"retry": "50"}  # no reply sent
        again = client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": priming["id"]})
        [reply] = events(again.text)
        assert (
            reply["event"] == "message"
            and json.loads(reply["data"])["result"]["content"][0]["text"] == "again"
        )
        assert reply["id"] != priming["id"] and reply["id"].split("-")[0] == priming["id"].split("-")[0]
        # ids name their stream: another session's or an unknown id is never replayed
        other = session(client, sc.mcp_url)
        assert client.get(sc.mcp_url, headers={**other, "Last-Event-ID": priming["id"]}).status_code == 404
        assert client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": "99-0"}).status_code == 404
        assert client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": "nonsense"}).status_code == 400
        [s] = sc.closed_streams
        assert s.resumed_with == priming["id"] and s.replayed == 1


@pytest.mark.parametrize(
    "value",
    [
        "1" * 5000 + "-0",  # past int()'s 4,300-digit limit: once a ValueError, a 500 and a sidecar error
        "3-" + "9" * 5000,
        "1" * 19 + "-0",  # past MAX_ID_DIGITS
        "\u0663-\u0660",  # Arabic-Indic digits: int() reads them, the ids are never written so
        "-",
        "",
        "3--1",
        "-".join(["1"] * 2000),
    ],
)
def test_a_last_event_id_that_is_no_event_id_is_the_clients_400(value: str) -> None:
    with Sidecar(reply="sse", get_stream=True) as sc:
        with httpx.Client(timeout=5) as client:
            headers = session(client, sc.mcp_url)
            client.post(sc.mcp_url, json=ECHO, headers=headers)
            raw = {k.encode(): v.encode() for k, v in headers.items()}
            raw[b"Last-Event-ID"] = value.encode()  # UTF-8 bytes, as sent
            refused = client.get(sc.mcp_url, headers=raw)
            echoed = client.post(sc.mcp_url, json=ECHO, headers=headers)  # the session goes on
        sc.wait_idle(5)
        assert sc.errors == []
    assert refused.status_code == 400 and echoed.status_code == 200
    error = refused.json()["error"]
    assert error["code"] == -32600 and error["message"].startswith("Malformed Last-Event-ID ")
    assert f"at most {MAX_ID_DIGITS}" in error["message"] and len(error["message"]) < 300
    [get] = [r for r in sc.requests if r.method == "GET"]
    assert (get.status, get.error_by) == (400, "client")


def test_a_client_that_reconnects_without_last_event_id_is_caught() -> None:
    with Sidecar(faults=[CloseStream(retry_ms=50)]) as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        client.post(sc.mcp_url, json=ECHO, headers=headers)  # the stream ends without the reply ...
        client.get(sc.mcp_url, headers=headers)  # ... and the client reconnects without Last-Event-ID
        with pytest.raises(AssertionError) as failed:
            sc.assert_client_resumed(within=1.0)
        text = str(failed.value)
        assert "1 of 1 closed stream(s) not resumed right" in text
        assert "the stream answering tools/call echo (id 2) closed at" in text
        assert "after 1 event(s) (last id" in text and "retry 50 ms)" in text
        assert (
            "the client came back at" in text and "with GET /mcp without Last-Event-ID (answered 405)" in text
        )
        [s] = sc.closed_streams
        assert s.resumed_by is None


def test_a_client_that_never_comes_back_or_comes_back_too_soon_is_caught() -> None:
    with Sidecar(faults=[CloseStream(retry_ms=50)]) as sc, httpx.Client(timeout=5) as client:
        client.post(sc.mcp_url, json=ECHO, headers=session(client, sc.mcp_url))
        with pytest.raises(
            AssertionError, match=r"the client never came back for it \(no GET /mcp in its session"
        ):
            sc.assert_client_resumed("tool:echo", within=0.3)
    with Sidecar(faults=[CloseStream(retry_ms=5000)]) as sc, httpx.Client(timeout=5) as client:
        headers = session(client, sc.mcp_url)
        [priming, _] = events(client.post(sc.mcp_url, json=ECHO, headers=headers).text)
        client.get(sc.mcp_url, headers={**headers, "Last-Event-ID": priming["id"]})  # at once, not after 5 s
        with pytest.raises(AssertionError, match="sooner than its retry of 5000 ms"):
            sc.assert_client_resumed(within=1.0)


def test_nothing_closed_fails_and_bad_arguments_are_refused() -> None:
    with Sidecar() as sc, httpx.Client(timeout=5) as client:
        client.post(sc.mcp_url, json=ECHO, headers=session(client, sc.mcp_url))
        with pytest.raises(AssertionError, match="no event stream was closed for the client to resume"):
            sc.assert_client_resumed(within=0.2)
        with pytest.raises(ValueError, match="assert_client_resumed: within must be a positive number"):
            sc.assert_client_resumed(within=0)
    for bad, match in [({"after_events": -1}, "after_events"), ({"retry_ms": 1.5}, "retry_ms"),
                       ({"when": "initialize"}, "when= must name one")]:  # fmt: skip
        kwargs: dict[str, Any] = bad
        with pytest.raises(ValueError, match=match):
            CloseStream(**kwargs)
