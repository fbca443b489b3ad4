"""Resumption (SEP-1699, 2025-11-25): the event ids of the session era's event streams, the events kept,
and their replay to a ``GET`` with ``Last-Event-ID``. Loop thread only; no I/O.

An event's id is ``<stream>-<n>``: the journal id of the request the stream answers (unique in the
session) and a count of its events. Event ``0`` is the *priming* event (an id, empty data), sent first
to clients of 2025-11-25 or later. Every event sent is kept (the oldest forgotten first, past
:data:`RETAINED_EVENTS` or :data:`RETAINED_BYTES`), so a client whose stream broke gets the events after
the last id it read, on that stream only: a ``POST``'s answer ends after its replay, a ``GET`` stream
goes on live. ``close_stream`` closes an answer on purpose after ``after_events`` events (a
:class:`~pytest_mcpfaults.core.records.StreamRecord`). A ``Last-Event-ID`` naming no kept event of the
session is answered 404; one not of that form (ASCII digits, at most :data:`MAX_ID_DIGITS` each) 400,
before any number is read from it.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from dataclasses import dataclass, field

from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import StreamRecord
from pytest_mcpfaults.mcp.endpoint import encode
from pytest_mcpfaults.mcp.jsonrpc import EVENT_STREAM, INVALID_REQUEST, Reply, client_error, rpc_error

#: The events a sidecar keeps for replay, across its streams; the oldest are forgotten first.
RETAINED_EVENTS = 4096
#: The bytes of those events (a stream bigger than this keeps only its newest events).
RETAINED_BYTES = 4 * 1024 * 1024
#: The first protocol version whose clients get a priming event (SEP-1699).
PRIMING_SINCE = "2025-11-25"

#: The most digits each number of a ``Last-Event-ID`` may have (a journal id and an event count fit).
MAX_ID_DIGITS = 18

_EVENT_ID = re.compile(f"([0-9]{{1,{MAX_ID_DIGITS}}})-([0-9]{{1,{MAX_ID_DIGITS}}})")  # ASCII digits only


def _malformed(last_event_id: str) -> Reply:
    """The client's 400 for a ``Last-Event-ID`` that is no event id (cut at 100 characters)."""
    shown = repr(last_event_id[:100])
    if len(last_event_id) > 100:
        shown += f" ... ({len(last_event_id)} characters)"
    why = (
        f"Malformed Last-Event-ID {shown}: this server's event ids are <stream>-<n>, each number ASCII "
        f"digits (at most {MAX_ID_DIGITS})"
    )
    return client_error(INVALID_REQUEST, why)


def primes(protocol_version: str | None) -> bool:
    """Whether a client of ``protocol_version`` (its ``MCP-Protocol-Version``) gets a priming event."""
    return protocol_version is not None and protocol_version >= PRIMING_SINCE


@dataclass(frozen=True)
class Resumed:
    """A ``GET`` resuming a ``GET`` stream: its stream's key, and the events to replay before it goes
    on live."""

    stream: int
    events: bytes


@dataclass
class _Stream:
    session_id: str | None
    get: bool  # a GET stream: it goes on after a replay
    events: deque[bytes] = field(default_factory=deque)  # the retained events, framed with their ids
    first: int = 0  # the index of events[0]
    next: int = 1  # the index of the next event (0 is the priming event's)
    live: int = 0  # responses writing it now (a GET stream and those resuming it)
    record: int | None = None  # its StreamRecord's index in the journal (close_stream)


class Resumption:
    """The event streams of one sidecar's sessions, by the journal id of the request each answers."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._streams: dict[int, _Stream] = {}
        self._order: deque[tuple[int, int]] = deque()  # (stream, size) of every retained event, oldest first
        self._bytes = 0

    # -- framing ---------------------------------------------------------------------------------
    def open(self, key: int, session_id: str | None, *, priming: bool, get: bool = False) -> bytes:
        """Start stream ``key`` (unless started); its priming event when ``priming``, else ``b""``."""
        if key in self._streams:
            return b""
        stream = self._streams[key] = _Stream(session_id, get, live=int(get))
        if not priming:
            stream.first = 1
            return b""
        return self._keep(key, stream, f"id: {key}-0\ndata: \n\n".encode())

    def event(self, key: int, message: bytes) -> bytes:
        """``message`` (one SSE event) as the next event of stream ``key``, with its id; kept."""
        stream = self._streams.get(key)
        if stream is None:  # a dormant GET stream forgotten with its last event: nothing to keep it for
            return message
        n = stream.next
        stream.next += 1
        if not stream.events:
            stream.first = n
        return self._keep(key, stream, f"id: {key}-{n}\n".encode() + message)

    def frame(self, rid: int, session_id: str | None, reply: Reply, *, priming: bool) -> Reply:
        """``reply`` framed as SSE, its events (priming, notifications, reply) with ids, kept."""
        head = self.open(rid, session_id, priming=priming)
        body = [head, *(self.event(rid, encode(n, True)[0]) for n in reply.notifications)]
        if reply.payload is not None:
            body.append(self.event(rid, encode(reply.payload, True)[0]))
        return _stream(reply, b"".join(body))

    def left(self, key: int) -> None:
        """A response writing ``GET`` stream ``key`` has ended (the client may resume it)."""
        stream = self._streams.get(key)
        if stream is not None:
            stream.live = max(0, stream.live - 1)
            if not stream.events and not stream.live:
                del self._streams[key]

    def _keep(self, key: int, stream: _Stream, data: bytes) -> bytes:
        stream.events.append(data)
        self._order.append((key, len(data)))
        self._bytes += len(data)
        while len(self._order) > RETAINED_EVENTS or (self._bytes > RETAINED_BYTES and len(self._order) > 1):
            old, size = self._order.popleft()
            self._bytes -= size
            gone = self._streams.get(old)
            if gone is not None and gone.events:  # events leave in the order they came: its oldest
                gone.events.popleft()
                gone.first += 1
                if not gone.events and not gone.live and gone.record is None:
                    del self._streams[old]
        return data

    # -- close_stream ----------------------------------------------------------------------------
    def close(
        self, rid: int, session_id: str | None, reply: Reply, after_events: int, retry_ms: int
    ) -> Reply:
        """``reply`` (the normal answer of request ``rid``) as a stream closed after ``after_events``
        events with ``retry: retry_ms``; journaled when something was kept back."""
        events = [self.open(rid, session_id, priming=True)]
        if reply.payload is not None:
            events.append(self.event(rid, encode(reply.payload, True)[0]))
        sent = events[:after_events]
        body = b"".join(sent)
        if len(sent) < len(events):
            body += f"retry: {retry_ms}\n\n".encode()
            record = StreamRecord(
                request_id=rid,
                session_id=session_id,
                closed_at=self.journal.now(),
                events_sent=len(sent),
                last_event_id=f"{rid}-{len(sent) - 1}" if sent else None,
                retry_ms=retry_ms,
                kept=len(events) - len(sent),
            )
            self._streams[rid].record = self.journal.streams.add(record)  # there: its newest event is kept
        return _stream(reply, body)

    # -- replay ----------------------------------------------------------------------------------
    def replay(self, rid: int, session_id: str | None, last_event_id: str) -> Reply | Resumed:
        """The answer of the ``GET`` ``rid`` with ``Last-Event-ID: last_event_id``: the events after it
        (a :class:`Resumed` for a ``GET`` stream, which goes on live), or a 404 (400) saying why not."""
        m = _EVENT_ID.fullmatch(last_event_id.strip())
        if m is None:
            return _malformed(last_event_id)
        key, n = int(m[1]), int(m[2])
        stream = self._streams.get(key)
        if stream is None or stream.session_id != session_id or n >= stream.next:
            return rpc_error(INVALID_REQUEST, f"Unknown Last-Event-ID {last_event_id!r}", status=404)
        if n + 1 < stream.first:
            text = (
                f"Last-Event-ID {last_event_id!r}: the events after it are no longer kept (a sidecar keeps "
                f"its last {RETAINED_EVENTS} events, {RETAINED_BYTES} bytes)"
            )
            return rpc_error(INVALID_REQUEST, text, status=404)
        after = list(stream.events)[n + 1 - stream.first :]
        # the first resumption is the one the record keeps
        if stream.record is not None and self.journal.streams[stream.record].resumed_by is None:
            resumed = {"resumed_at": self.journal.now(), "resumed_by": rid, "resumed_with": last_event_id}
            self.journal.streams.update(stream.record, {**resumed, "replayed": len(after)})
        if stream.get:
            stream.live += 1
            return Resumed(key, b"".join(after))
        headers = {**EVENT_STREAM, **({"Mcp-Session-Id": session_id} if session_id else {})}
        return Reply(200, None, headers, sse=True, events=b"".join(after))


def _stream(reply: Reply, events: bytes) -> Reply:
    return dataclasses.replace(reply, headers={**reply.headers, **EVENT_STREAM}, sse=True, events=events)
