"""The relay's SSE notification parser (:class:`~pytest_mcpfaults.proxy.relay.NotificationTap`),
fed the bytes of an SSE body split every way a socket may split them: each notification is handed on
once, whole, and nothing else is (a priming event's empty data, responses, requests, an event too long
to look into); the chained tap gets every byte unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_mcpfaults.proxy import relay
from pytest_mcpfaults.proxy.relay import NotificationTap


def _event(message: dict[str, Any], eid: str = "", eol: str = "\n") -> str:
    head = f"id: {eid}{eol}" if eid else ""
    return f"{head}event: message{eol}data: {json.dumps(message)}{eol}{eol}"


PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": 1, "progress": 1},
}
LOG = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}
ASK = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
ANSWER = {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}


def _fed(body: bytes, size: int) -> tuple[list[tuple[str, Any]], bytes]:
    seen: list[tuple[str, Any]] = []
    passed: list[bytes] = []
    tap = NotificationTap(lambda method, params: seen.append((method, params)), passed.append)
    for i in range(0, len(body), size):
        tap.feed(body[i : i + size])
    return seen, b"".join(passed)


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
@pytest.mark.parametrize("size", [1, 2, 7, 64, 1 << 20])
def test_each_notification_is_handed_on_once_however_the_body_is_split(eol: str, size: int) -> None:
    priming = f"id: 1-0{eol}data:{eol}{eol}"
    body = (priming + _event(PROGRESS, "1-1", eol) + _event(ASK, "", eol) + _event(LOG, "1-2", eol)).encode()
    body += _event(ANSWER, "1-3", eol).encode()
    seen, passed = _fed(body, size)
    assert seen == [(PROGRESS["method"], PROGRESS["params"]), (LOG["method"], LOG["params"])]
    assert passed == body


def test_an_event_too_long_to_look_into_is_skipped_and_the_next_one_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(relay, "EVENT_MAX_BYTES", 200)
    long = {**LOG, "params": {"level": "info", "data": "x" * 400}}
    body = (_event(long) + _event(PROGRESS)).encode()
    for size in (1, 50, 1000):
        seen, passed = _fed(body, size)
        assert seen == [(PROGRESS["method"], PROGRESS["params"])], size
        assert passed == body


def test_data_that_is_not_json_is_passed_over() -> None:
    body = b"data: {not json\n\n" + _event(LOG).encode()
    assert _fed(body, 5)[0] == [(LOG["method"], LOG["params"])]
