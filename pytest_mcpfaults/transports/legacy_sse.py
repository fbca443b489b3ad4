"""The legacy HTTP+SSE transport of MCP 2024-11-05, transport-free: its sessions, its requests' answers
(what it answers, and the bounded outbox: docs/legacy-sse.md). The core asks :class:`LegacyTransport`
first for a request on its two paths (its ``path_transport``); the socket adapter writes each
session's outbox to its stream.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.connection import Dying, effect_of
from pytest_mcpfaults.core.core import Answer, Incoming, SidecarCore, Step, Transport, security_problem
from pytest_mcpfaults.core.routing import RequestInfo
from pytest_mcpfaults.mcp.endpoint import encode
from pytest_mcpfaults.mcp.jsonrpc import EVENT_STREAM, McpRequest, Reply

#: Bytes a legacy stream's outbox may hold unread before message POSTs to its session get 503.
OUTBOX_BYTES = 4 << 20


def serve_legacy(core: SidecarCore) -> None:
    if core.options.transport in ("sse", "both"):
        core.path_transport = LegacyTransport(core)


def accepted() -> Reply:
    """The message POST's answer when the message was taken (its reply, if any, goes on the stream)."""
    return Reply(202, text="Accepted")


def _json_rpc(reply: Reply) -> bool:
    """Whether a forced reply is a JSON-RPC answer (sent on the stream) rather than an HTTP-level one
    (status, terminating: the POST's own answer)."""
    return reply.status == 200 and isinstance(reply.payload, dict) and "jsonrpc" in reply.payload


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

    def __init__(self, sid: str, rid: int, endpoint_url: str, owner: LegacyTransport) -> None:
        self.id, self.rid, self.endpoint_url, self.owner = sid, rid, endpoint_url, owner
        self.mcp_session: str | None = None
        self._outbox: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        self.unread_bytes = 0  # bytes of the events in the outbox (taken out by next())

    def endpoint_event(self) -> StreamEvent:
        return StreamEvent(b"event: endpoint\ndata: " + self.endpoint_url.encode() + b"\n\n")

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
        refusal = _refused(
            503,
            f"Service Unavailable: the event stream of session {self.id} has {self.unread_bytes} bytes "
            f"of replies its client has not read (the bound is {limit}); read the stream, then post again",
        )
        refusal.headers["Retry-After"] = "1"
        return refusal

    def close(self) -> None:
        """The stream is gone (the client closed it, teardown, a cut): see :meth:`LegacyTransport.close`."""
        self.owner.close(self)

    def end(self) -> None:
        """End the stream after the events already queued (a clean close)."""
        self._outbox.put_nowait(None)

    async def next(self) -> StreamEvent | None:
        """The next event to write; ``None`` once the server ended the session."""
        event = await self._outbox.get()
        if event is not None:
            self.unread_bytes -= len(event.data)
        return event


@dataclass(frozen=True)
class LegacyReply:
    """A legacy message's reply still to make, after its POST's 202: ``make(transport)`` makes it and
    puts it on ``session``'s stream (``transport``: the one a hold of the reply is on, the stream's)."""

    session: LegacySession
    make: Step


@dataclass(frozen=True)
class _Message:
    """A request on the legacy paths as the core handed it over; ``later`` acts once its answer is made."""

    rid: int
    incoming: Incoming
    info: RequestInfo
    fault: F.Fault | None
    later: Step | None


@dataclass
class LegacyAnswer(Answer):
    """The core's answer to a legacy request: with ``stream``, a legacy SSE stream to serve after the
    status and headers (``fault`` acts on its bytes); with ``replying``, a message's reply the transport
    makes once it has sent the 202 (the request's record ends when that ends)."""

    stream: LegacySession | None = None
    replying: LegacyReply | None = None


class LegacyTransport:
    """The legacy transport of one sidecar: its two paths (the options' ``sse_path`` and ``messages_path``),
    the live sessions, and the answers to its requests. Loop thread only."""

    def __init__(self, core: SidecarCore) -> None:
        self.core = core
        self.sse_path, self.messages_path = core.options.sse_path, core.options.messages_path
        self.sessions: dict[str, LegacySession] = {}

    @property
    def paths(self) -> tuple[str, str]:
        return self.sse_path, self.messages_path

    def open(self, rid: int) -> LegacySession:
        """A new session for the stream of request ``rid`` (its endpoint event names it)."""
        sid = uuid.uuid4().hex
        url = f"{self.messages_path}?session_id={sid}"
        session = self.sessions[sid] = LegacySession(sid, rid, url, self)
        return session

    def close(self, session: LegacySession) -> None:
        """The stream is gone (client closed it, teardown, a cut): later POSTs to it get 404, and the
        MCP session its ``initialize`` created ends with it (a legacy session lives as long as its
        stream, as in the mcp SDK's SSE server)."""
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        mcp = self.core.mcp
        if session.mcp_session is not None and session.mcp_session in mcp.sessions:
            mcp.sessions.end(session.mcp_session)

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

    def classify(self, incoming: Incoming) -> RequestInfo:
        """Both paths are MCP requests. A message POST to a live session has its body parsed as
        JSON-RPC (session era), carrying the MCP session id its stream's ``initialize`` created; one
        naming no live session is refused before its body is read, as the SDK's server does (so no
        fault aimed at an MCP method or tool fires on it)."""
        method, path = incoming.method, incoming.path
        if path != self.messages_path or method != "POST":
            return RequestInfo(method, path, "mcp", None)
        session = self.lookup(incoming.query)
        if isinstance(session, Reply):
            return RequestInfo(method, path, "mcp", None, session)
        parsed = self.core.mcp.parse(incoming.headers, incoming.body)
        if isinstance(parsed, Reply):
            return RequestInfo(method, path, "mcp", None, _refused(400, "Could not parse message"))
        message = McpRequest(parsed.message, parsed.method, parsed.id, session.mcp_session, "session")
        return RequestInfo(method, path, "mcp", message)

    async def decide(
        self,
        rid: int,
        incoming: Incoming,
        info: RequestInfo,
        fault: F.Fault | None,
        state: F.TriggerState | None,
        transport: Transport,
    ) -> LegacyAnswer:
        """As on any request, except that a ``die`` on a message POST to a live session answers 202
        first and dies once that is sent."""
        core = self.core
        session = self.lookup(incoming.query) if info.path == self.messages_path else None
        later: Step | None = None
        forced: Reply | None = None
        if fault is not None:
            effect = effect_of(fault, state.fired if state is not None else 0)
            if isinstance(effect, Dying) and isinstance(session, LegacySession) and incoming.method == "POST":
                restart = effect.restart

                async def dying() -> None:
                    core.lose_process(restart=restart)
                    await transport.die(restart)

                return LegacyAnswer(accepted(), fault, False, after=dying)  # 202, then the process dies
            later = await core.act(rid, info, fault, state, transport, notices=False)
            forced = core.forced_reply(fault, info)
        answer = await self._answer(_Message(rid, incoming, info, fault, later), forced, session, transport)
        core.journal_answer(rid, answer.reply)
        return answer

    async def _answer(
        self, msg: _Message, forced: Reply | None, session: LegacySession | Reply | None, transport: Transport
    ) -> LegacyAnswer:
        """A message's JSON-RPC reply goes on its session's stream while the POST gets 202; a request
        the MCP endpoint answers is answered after its 202 (as the mcp SDK's SSE server does), so the
        client can post its ``notifications/cancelled`` meanwhile; ``later`` acts once it is made."""
        core, rid, incoming, info, fault = self.core, msg.rid, msg.incoming, msg.info, msg.fault
        if forced is None:
            forced = security_problem(incoming.header_pairs, core.options.allowed_origins, core.allowed_hosts)
        if info.path == self.sse_path:
            if forced is not None:
                return LegacyAnswer(forced, fault, False)
            if incoming.method != "GET":
                return LegacyAnswer(Reply(405, None, {"Allow": "GET"}), fault, False)
            return LegacyAnswer(Reply(200, None, {**EVENT_STREAM}), fault, True, stream=self.open(rid))
        if incoming.method != "POST":
            return LegacyAnswer(Reply(405, None, {"Allow": "POST"}), fault, False)
        expired = fault is not None and fault.ends_session
        if forced is not None and not _json_rpc(forced) and not expired:  # HTTP-level: the POST's own
            return LegacyAnswer(forced, fault, False)
        if not isinstance(session, LegacySession):
            assert session is not None
            return LegacyAnswer(session, fault, False)
        if expired:  # the server forgot the session: 404, and its stream closes
            self.end(session)
            return LegacyAnswer(Reply(404, text="Could not find session"), None, False)
        overflow = session.overflow()
        if overflow is not None:  # the client does not read its stream: not processed, not queued
            return LegacyAnswer(overflow, None, False)
        reply = forced
        if reply is None:
            m = info.mcp
            if m is None:
                assert info.bad_body is not None
                return LegacyAnswer(info.bad_body, fault, False)
            if m.method is not None and not m.is_notification:  # a request: answered after its 202
                make = functools.partial(self._reply, msg, session)
                return LegacyAnswer(accepted(), None, False, replying=LegacyReply(session, make))
            reply = await core.mcp.post(m, incoming.headers)
            if m.method == "notifications/cancelled" and reply.status == 202:
                core.cancels.heard(rid)
        if msg.later is not None:
            await msg.later(transport)
        core.journal_answer(rid, reply)  # the POST's answer is a plain 202: the journal keeps the reply's
        session.reply(rid, reply, fault)
        return LegacyAnswer(accepted(), None, False)

    async def _reply(self, msg: _Message, session: LegacySession, transport: Transport) -> None:
        """Make the reply of message ``rid`` and put it on its session's stream, unless the client
        cancels it first (a stopped request's reply is no event at all)."""
        m, core, rid, fault = msg.info.mcp, self.core, msg.rid, msg.fault
        assert m is not None
        if core.cancels.stopped_before(rid, fault):  # its cancel came before this began
            return
        reply = await core.cancels.run(rid, m, fault, core.mcp.post(m, msg.incoming.headers, rid=rid))
        if reply is None or reply.payload is None:  # stopped by its cancellation: nothing to send
            return
        created = reply.headers.get("Mcp-Session-Id")
        if m.method == "initialize" and created:
            session.mcp_session = created
        if msg.later is not None:
            await msg.later(transport)
        core.journal_answer(rid, reply)  # the POST's own answer is a plain 202: the journal keeps the reply's
        session.reply(rid, reply, fault)
