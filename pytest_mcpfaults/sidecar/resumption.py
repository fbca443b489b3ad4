"""Resumption (SEP-1699, 2025-11-25): an event stream closed gracefully by ``close_stream``, and its
replay to a ``GET`` of the MCP endpoint with ``Last-Event-ID``. Loop thread only; no I/O.

A stream ``close_stream`` answers is framed here: a priming event (an id and empty data), then the
reply's event, each with an id ``<stream>-<n>`` (``<stream>``: the journal id of the request it
answers, so an id names its stream, as the spec asks); once ``after_events`` events are sent a
``retry`` field follows and the response ends. The events not sent are kept, and a
:class:`~pytest_mcpfaults.sidecar.journal.StreamRecord` journals the close. A ``GET`` whose
``Last-Event-ID`` names an event of a kept stream in the same session gets the events after it and
the stream ends (the record says when the client came back and with which id); any other
``Last-Event-ID`` is answered 404 (events are never replayed across streams or sessions).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pytest_mcpfaults.sidecar.journal import Journal, StreamRecord
from pytest_mcpfaults.sidecar.mcp import Reply, encode, rpc_error

__all__ = ["Resumption"]

_EVENT_ID = re.compile(r"(\d+)-(\d+)")
_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass
class _Kept:
    session_id: str | None
    events: list[bytes]  # every event of the stream, framed with its id
    record: int  # its StreamRecord's index in the journal


class Resumption:
    """The streams closed gracefully, by the journal id of the request each answered."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._kept: dict[int, _Kept] = {}

    def close(
        self, rid: int, session_id: str | None, reply: Reply, after_events: int, retry_ms: int
    ) -> Reply:
        """``reply`` (the normal answer of request ``rid``) as a stream closed after ``after_events``
        events with ``retry: retry_ms``; journaled when something was kept back."""
        message = encode(reply.payload, True)[0] if reply.payload is not None else b""
        events = [f"id: {rid}-0\ndata: \n\n".encode()]
        if message:
            events.append(f"id: {rid}-1\n".encode() + message)
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
            self._kept[rid] = _Kept(session_id, events, self.journal.streams.add(record))
        return dataclasses.replace(reply, headers={**reply.headers, **_HEADERS}, sse=True, events=body)

    def replay(self, rid: int, session_id: str | None, last_event_id: str) -> Reply:
        """The answer of the ``GET`` ``rid`` carrying ``Last-Event-ID: last_event_id``."""
        m = _EVENT_ID.fullmatch(last_event_id.strip())
        kept = self._kept.get(int(m[1])) if m else None
        if m is None or kept is None or kept.session_id != session_id or int(m[2]) >= len(kept.events):
            return rpc_error(-32600, f"Unknown Last-Event-ID {last_event_id!r}", status=404)
        after = kept.events[int(m[2]) + 1 :]
        record = self.journal.streams.records[kept.record]
        if record.resumed_by is None:  # the first resumption is the one the record keeps
            self.journal.streams.replace(
                kept.record,
                dataclasses.replace(
                    record, resumed_at=self.journal.now(), resumed_by=rid, resumed_with=last_event_id,
                    replayed=len(after),
                ),
            )  # fmt: skip
        headers = {**_HEADERS, **({"Mcp-Session-Id": session_id} if session_id else {})}
        return Reply(200, None, headers, sse=True, events=b"".join(after))
