"""The legacy HTTP+SSE transport of MCP 2024-11-05, transport-free: the session registry and outboxes.

A client opens ``GET <sse_path>`` and reads an event stream whose first event is ``endpoint`` (the URL
to post messages to, ``<messages_path>?session_id=<hex>``); it then ``POST``s each JSON-RPC message
there, gets ``202 Accepted``, and reads the reply as an ``event: message`` on the stream. This module
holds what the core needs for that and nothing about sockets: one :class:`LegacySession` per open
stream (the MCP session its ``initialize`` created, and an outbox of :class:`StreamEvent` the socket
adapter writes to the stream), the answers the mcp SDK's SSE server gives for a missing, malformed or
unknown ``session_id``, and the classification of the two paths.

An outbox is bounded: once its stream holds more than :data:`OUTBOX_BYTES` its client has not read
(events queued behind a socket the client does not drain), a message POST to the session is refused
with 503 before it is processed (:meth:`LegacySession.overflow`), until the client reads; the stream
stays open. So a client that never reads its stream costs at most the bound and one reply.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import parse_qs

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.mcp import McpEndpoint, McpRequest, Reply, encode
from pytest_mcpfaults.sidecar.routing import RequestInfo

__all__ = [
    "OUTBOX_BYTES",
    "TRANSPORTS",
    "LegacySession",
    "LegacySse",
    "StreamEvent",
    "TransportName",
    "accepted",
    "serves_legacy",
    "serves_streamable",
]

TransportName = Literal["streamable_http", "sse", "both"]
"""Which MCP transports a socket sidecar serves (``Sidecar(transport=)``)."""
TRANSPORTS: tuple[TransportName, ...] = get_args(TransportName)

#: Bytes a legacy stream's outbox may hold unread before message POSTs to its session get 503.
OUTBOX_BYTES = 4 << 20


def serves_legacy(transport: TransportName) -> bool:
    return transport in ("sse", "both")


def serves_streamable(transport: TransportName) -> bool:
    return transport in ("streamable_http", "both")


def accepted() -> Reply:
    """The message POST's answer when the message was taken (its reply, if any, goes on the stream)."""
    return Reply(202, text="Accepted")


def _refused(status: int, text: str) -> Reply:
    reply = Reply(status, text=text)
    reply.error, reply.error_by = text, "client"
    return reply


@dataclass(frozen=True)
class StreamEvent:
    """One event to write on a stream: its bytes, the body fault aimed at the message it answers
    (``None``: none), and the journal id of that message's POST (``None``: the endpoint event)."""

    data: bytes
    fault: F.Fault | None = None
    rid: int | None = None


class LegacySession:
    """One open legacy stream: its id (the ``session_id`` of the endpoint URL), the journal id of its
    ``GET``, the MCP session its ``initialize`` created, and the outbox its stream writer drains."""

    def __init__(self, sid: str, rid: int, endpoint_url: str) -> None:
        self.id, self.rid, self.endpoint_url = sid, rid, endpoint_url
        self.mcp_session: str | None = None
        self.ended = False  # the server ended it (session_expired): its stream closes once drained
        self._outbox: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        self.unread_bytes = 0  # bytes of the events in the outbox (taken out by next())
        self.refused = 0  # message POSTs refused while the outbox was over OUTBOX_BYTES

    def endpoint_event(self) -> StreamEvent:
        return StreamEvent(b"event: endpoint\ndata: " + self.endpoint_url.encode() + b"\n\n")

    @property
    def queued(self) -> int:
        """Events waiting in the outbox (the end of the stream counts as one)."""
        return self._outbox.qsize()

    def put(self, event: StreamEvent) -> None:
        self.unread_bytes += len(event.data)
        self._outbox.put_nowait(event)

    def reply(self, rid: int, reply: Reply, fault: F.Fault | None) -> None:
        """Queue message ``rid``'s JSON-RPC reply as an event, carrying ``fault`` if it is a body fault
        (a reply without a payload, a notification's, is no event)."""
        if reply.payload is not None:
            data, _ = encode(reply.payload, True)
            self.put(StreamEvent(data, fault if fault is not None and fault.phase == "body" else None, rid))

    def overflow(self, limit: int = OUTBOX_BYTES) -> Reply | None:
        """The 503 for a message POST while the outbox holds more than ``limit`` unread bytes (the
        client's: it does not read its stream), else ``None``."""
        if self.unread_bytes <= limit:
            return None
        self.refused += 1
        refusal = _refused(
            503,
            f"Service Unavailable: the event stream of session {self.id} has {self.unread_bytes} bytes "
            f"of replies its client has not read (the bound is {limit}); read the stream, then post again",
        )
        refusal.headers["Retry-After"] = "1"
        return refusal

    def end(self) -> None:
        """End the stream after the events already queued (a clean close)."""
        self.ended = True
        self._outbox.put_nowait(None)

    async def next(self) -> StreamEvent | None:
        """The next event to write; ``None`` once the server ended the session."""
        event = await self._outbox.get()
        if event is not None:
            self.unread_bytes -= len(event.data)
        return event


class LegacySse:
    """The legacy transport of one sidecar: its two paths and the live sessions. Loop thread only."""

    def __init__(self, *, sse_path: str, messages_path: str) -> None:
        self.sse_path, self.messages_path = sse_path, messages_path
        self.sessions: dict[str, LegacySession] = {}

    @property
    def paths(self) -> tuple[str, str]:
        return self.sse_path, self.messages_path

    def open(self, rid: int) -> LegacySession:
        """A new session for the stream of request ``rid`` (its endpoint event names it)."""
        sid = uuid.uuid4().hex
        session = self.sessions[sid] = LegacySession(sid, rid, f"{self.messages_path}?session_id={sid}")
        return session

    def close(self, session: LegacySession) -> None:
        """The stream is gone (client closed it, teardown): later POSTs to it get 404."""
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]

    def end(self, session: LegacySession) -> None:
        """The server ends the session: POSTs to it get 404 and its stream closes."""
        self.close(session)
        session.end()

    def forget_all(self) -> None:
        """The process died: every session is lost (the transport resets their streams)."""
        self.sessions.clear()

    def lookup(self, query: str) -> LegacySession | Reply:
        """The session a message POST names in its query, or the mcp SDK SSE server's refusal: 400
        ``session_id is required``, 400 ``Invalid session ID``, 404 ``Could not find session``."""
        values = parse_qs(query).get("session_id")
        if not values:
            return _refused(400, "session_id is required")
        try:
            sid = uuid.UUID(hex=values[0]).hex  # as the SDK reads it: hyphens and braces allowed
        except ValueError:
            return _refused(400, "Invalid session ID")
        session = self.sessions.get(sid)
        if session is None:
            return _refused(404, "Could not find session")
        return session

    def classify(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
        endpoint: McpEndpoint,
    ) -> RequestInfo:
        """Both paths are MCP requests. A message POST to a live session has its body parsed as
        JSON-RPC (session era), carrying the MCP session id its stream's ``initialize`` created; one
        naming no live session is refused before its body is read, as the SDK's server does (so no
        fault aimed at an MCP method or tool fires on it)."""
        if path != self.messages_path or method != "POST":
            return RequestInfo(method, path, "mcp", None)
        session = self.lookup(query)
        if isinstance(session, Reply):
            return RequestInfo(method, path, "mcp", None, session)
        parsed = endpoint.parse(headers, body)
        if isinstance(parsed, Reply):
            return RequestInfo(method, path, "mcp", None, _refused(400, "Could not parse message"))
        message = McpRequest(parsed.message, parsed.method, parsed.id, session.mcp_session, "session")
        return RequestInfo(method, path, "mcp", message)
