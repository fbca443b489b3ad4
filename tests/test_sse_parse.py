"""The SSE parser the proxy's notification tap and the cassette recorder share
(:class:`~pytest_mcpfaults.proxy.sse_parse.SseParser`): the events of a body fed split every way a socket may
split it, their fields, a last event without its blank line, and the ``max_bytes`` skip."""

from __future__ import annotations

import pytest

from pytest_mcpfaults.proxy.sse_parse import SseParser

BODY = (
    b"id: 2-0\r\nretry: 5000\r\ndata: \r\n\r\n"  # a priming event: empty data
    b": a comment\n\n"  # no field: not an event
    b'event: message\nid: 2-1\ndata: {"a":\ndata: 1}\n\n'  # two data lines, joined with \n
    b"id: 2-2\n\n"  # an id alone
    b"data: last"  # the body ends without the blank line
)
EXPECTED = [
    {"id": b"2-0", "retry": b"5000", "data": b""},
    {"event": b"message", "id": b"2-1", "data": b'{"a":\n1}'},
    {"id": b"2-2", "data": None},
]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(BODY)])
def test_the_events_of_a_body_split_every_way(size: int) -> None:
    parser = SseParser()
    events = [e for i in range(0, len(BODY), size) for e in parser.feed(BODY[i : i + size])]
    assert events == EXPECTED
    assert parser.end() == [{"data": b"last"}]
    assert parser.end() == []  # nothing is left after it


@pytest.mark.parametrize("size", [1, 5, 100, 10_000])
def test_an_event_over_max_bytes_is_skipped_and_the_next_is_read(size: int) -> None:
    body = b"data: " + b"x" * 5000 + b"\ndata: more\n\n" + b"data: next\n\n"
    parser = SseParser(max_bytes=1000)
    events = [e for i in range(0, len(body), size) for e in parser.feed(body[i : i + size])]
    assert events == [{"data": b"next"}]


def test_a_long_line_is_kept_whole_without_a_bound() -> None:
    line = b"y" * 300_000
    parser = SseParser()
    events = [e for i in range(0, len(line), 4096) for e in parser.feed(line[i : i + 4096])]
    assert events == [] and parser.feed(b"\n") == [] and parser.end() == []
    parser = SseParser()
    chunks = [b"data: ", *(line[i : i + 4096] for i in range(0, len(line), 4096)), b"\n\n"]
    assert [e for c in chunks for e in parser.feed(c)] == [{"data": line}]
