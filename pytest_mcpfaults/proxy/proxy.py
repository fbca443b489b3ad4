"""Proxy mode: the user's real MCP server as the source of the normal answer (``Sidecar(upstream=URL)``).

:class:`Proxy` is the core's :class:`~pytest_mcpfaults.core.core.Upstream`: a request the plan does not
answer is forwarded to the upstream; the answer comes back to the core as a :class:`Relayed` reply whose
body the socket transport then relays chunk by chunk (:meth:`Proxy.deliver`), so body faults act on the
real bytes and the tool faults rewrite the real result (the upstream still runs the tool). What the
sidecar still answers itself, and what a client sees when the upstream fails, is docs/proxy.md's.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import shape_of
from pytest_mcpfaults.core.core import Answer, Incoming, SidecarCore
from pytest_mcpfaults.core.records import UpstreamLeg
from pytest_mcpfaults.core.routing import RequestInfo
from pytest_mcpfaults.mcp.endpoint import learn_listing
from pytest_mcpfaults.mcp.jsonrpc import INVALID_REQUEST, Reply, rpc_error
from pytest_mcpfaults.mcp.listen import LISTEN_METHOD
from pytest_mcpfaults.proxy.cassette.recorder import Pending, Recorder
from pytest_mcpfaults.proxy.relay import NotificationTap, listed_response, relay
from pytest_mcpfaults.proxy.upstream import Upstream, UpstreamError, UpstreamResponse, gateway_error
from pytest_mcpfaults.transports.inject import Delivery, deliver


@dataclass
class Relayed(Reply):
    """The upstream's answer, its body still to come (``response``), or the gateway error for none
    (``failure``). ``forced``: a deferred fault's reply, in place of the upstream's result for ``mid``;
    ``long_lived``: an event stream whose relay ends when its client goes."""

    response: UpstreamResponse | None = None
    failure: UpstreamError | None = None
    forced: Reply | None = None
    mid: Any = None
    sent_at: float = 0.0
    recording: Pending | None = None
    long_lived: bool = False
    #: A ``tools/list`` answer's body as it is relayed (:class:`_Listing`), to learn the tools' schemas.
    listing: _Listing | None = None
    #: The tool a ``tools/call`` names (for the notifications its answer carries).
    tool: str | None = None


class Proxy:
    """The proxy-mode half of one sidecar: which requests go upstream, forwarding them, relaying the
    answers. Loop thread only."""

    def __init__(self, upstream: Upstream, sidecar_core: SidecarCore, recorder: Recorder | None) -> None:
        self.upstream, self.journal = upstream, sidecar_core.journal
        #: Where the notifications an upstream's SSE answer to a POST carries are journaled (as sent).
        self.messages = sidecar_core.server_messages
        #: ``record=``: the cassette every exchange with the upstream on the MCP endpoint is recorded into.
        self.recorder = recorder
        self.era = sidecar_core.options.era
        self.upstream_health = sidecar_core.options.upstream_health
        # The core's MCP endpoint keeps the transport sessions (those the upstream assigned, so that
        # Sidecar.sessions / ended_sessions read as on the fake; die and session_expired end them
        # there) and gives the era gate's refusals.
        self.endpoint = sidecar_core.mcp

    # -- the core's Upstream -----------------------------------------------------------------
    async def answer(self, incoming: Incoming, info: RequestInfo, forced: Reply | None) -> Reply | None:
        if info.kind == "health" and self.upstream_health is None:
            return None  # the core answers it
        m = info.mcp
        if info.kind == "mcp":
            sid = incoming.headers.get("Mcp-Session-Id")
            if sid and sid in self.endpoint.sessions.ended:
                return rpc_error(INVALID_REQUEST, "Session not found", status=404)
            if m is not None and (  # another era's request: the fake's refusal, as a one-era server's
                (self.era == "session" and m.era == "stateless")
                or (self.era == "stateless" and m.method == "initialize")
            ):
                return await self.endpoint.post(m, incoming.headers)
        return await self._forward(incoming, info, forced)

    def target(self, incoming: Incoming, info: RequestInfo) -> str:
        """The upstream URL a request goes to (its health path for ``/health``, the same path on the
        upstream's origin for any path but the MCP endpoint)."""
        if info.kind == "mcp":
            return self.upstream.url
        if info.kind == "health":
            assert self.upstream_health is not None
            return self.upstream.origin + self.upstream_health
        return self.upstream.origin + incoming.path

    async def _forward(self, incoming: Incoming, info: RequestInfo, forced: Reply | None) -> Relayed:
        m = info.mcp
        mid = m.id if m is not None else None
        sent = time.monotonic()
        # an event stream that may stay quiet for as long as the server has nothing to say (the session
        # era's GET, the stateless era's subscriptions/listen): upstream_timeout does not bound its gaps
        long_lived = incoming.method == "GET" or (m is not None and m.method == LISTEN_METHOD)
        try:
            resp = await self.upstream.send(
                incoming.method,
                self.target(incoming, info),
                incoming.header_pairs,
                incoming.body,
                bound_body=not long_lived,
            )
        except UpstreamError as exc:
            return self._gateway_error(exc, mid, sent)
        self._track(incoming, resp)
        relayed = Relayed(
            resp.status,
            sse=resp.sse,
            response=resp,
            forced=forced,
            mid=mid,
            sent_at=sent,
            long_lived=long_lived,
            tool=m.tool if m is not None else None,
        )
        if self.recorder is not None and info.kind == "mcp" and incoming.method in ("POST", "DELETE"):
            # fed the upstream's body as it is read
            relayed.recording = pending = self.recorder.start(
                incoming.method, incoming.headers, m, status=resp.status, response_headers=resp.headers,
                content_type=resp.content_type, sent_at=resp.sent_at, headers_at=resp.headers_at,
            )  # fmt: skip
            resp.tap = pending.feed
        if m is not None and m.method == "tools/list" and 200 <= resp.status < 300:
            relayed.listing = _Listing(resp.tap, resp.sse, mid, self.endpoint.listed_schemas)
            resp.tap = relayed.listing.feed
        return relayed

    def _track(self, incoming: Incoming, resp: UpstreamResponse) -> None:
        for name, value in resp.headers:
            if name.lower() == "mcp-session-id" and value not in self.endpoint.sessions.ended:
                version = incoming.headers.get("MCP-Protocol-Version") or ""
                self.endpoint.sessions.setdefault(value, version)
        sid = incoming.headers.get("Mcp-Session-Id")
        if incoming.method == "DELETE" and sid and 200 <= resp.status < 300:
            self.endpoint.sessions.end(sid)

    def _gateway_error(self, exc: UpstreamError, mid: Any, sent: float) -> Relayed:
        return gateway_error(
            Relayed, exc, f"upstream {self.upstream.url}", mid, failure=exc, mid=mid, sent_at=sent
        )

    # -- the transport's part --------------------------------------------------------------------
    async def deliver(
        self,
        request: web.BaseRequest,
        answer: Answer,
        rid: int,
        hold: Callable[[F.Fault], Awaitable[None]],
        out: Delivery,
    ) -> web.StreamResponse:
        """Write a :class:`Relayed` answer to the client (or its gateway error) and journal the upstream
        leg."""
        reply = answer.reply
        assert isinstance(reply, Relayed)
        journal = self.journal
        t0 = journal.t0
        if reply.response is None:  # the upstream gave no answer: the gateway error, no body fault
            assert reply.failure is not None
            journal.update_request(
                rid,
                upstream=UpstreamLeg(
                    reply.sent_at - t0, ended_at=journal.now(), failure=reply.failure.failure
                ),
            )
            return await deliver(request, Answer(reply, None, False), hold=hold, out=out)
        resp = reply.response
        leg = UpstreamLeg(reply.sent_at - t0, resp.headers_at - t0, status=resp.status)
        journal.update_request(rid, upstream=leg)
        fault = answer.fault
        if not shape_of(fault).resets_at_once:  # (a reset before the status line relays none of them)
            self._tap_notifications(request, reply, resp, rid)
        completed: list[bool] = []

        def complete() -> None:  # the body is out: the record is finished before the client can close
            if not completed:
                completed.append(True)
                now = journal.now()
                journal.update_request(
                    rid, status=out.status, bytes_sent=out.bytes_sent, body_bytes=out.body_bytes,
                    upstream=replace(leg, bytes=resp.received, ended_at=now), ended_at=now,
                )  # fmt: skip

        async def body_hold() -> None:  # only body faults hold while relaying
            assert fault is not None
            await hold(fault)

        try:
            return await relay(
                request, resp, fault=fault, forced=reply.forced, mid=reply.mid, hold=body_hold, out=out,
                complete=complete,
            )  # fmt: skip
        except UpstreamError as exc:  # failed while reading a body to rewrite, before anything was sent
            failed = self._gateway_error(exc, reply.mid, reply.sent_at)
            journal.update_request(rid, error=failed.error, error_by="upstream")
            return await deliver(request, Answer(failed, None, False), hold=hold, out=out)
        finally:
            self._relayed(reply, resp, rid)

    def _tap_notifications(
        self, request: web.BaseRequest, reply: Relayed, resp: UpstreamResponse, rid: int
    ) -> None:
        # each notification of an SSE answer to a POST journaled as it passes (the upstream's progress and
        # logs, 'sent' as the fake's own)
        if request.method == "POST" and resp.sse:
            resp.tap = NotificationTap(
                lambda m, p: self.messages.notified(m, p, rid, reply.tool), resp.tap
            ).feed

    def _relayed(self, reply: Relayed, resp: UpstreamResponse, rid: int) -> None:
        self.upstream.done(resp)
        # the upstream leg's end: its bytes, when, its failure (the request's too, unless one is named)
        ended = resp.ended_at - self.journal.t0 if resp.ended_at is not None else self.journal.now()
        rec = self.journal.request(rid)
        assert rec.upstream is not None  # written when the upstream's answer began
        leg = replace(rec.upstream, bytes=resp.received, ended_at=ended)
        fields: dict[str, Any] = {"upstream": leg}
        if resp.failure is not None:
            fields["upstream"] = replace(leg, failure=resp.failure.failure)
            if rec.error_by is None:
                fields["error"], fields["error_by"] = str(resp.failure), "upstream"
        self.journal.update_request(rid, **fields)
        whole = resp.failure is None and resp.at_eof
        if reply.recording is not None and self.recorder is not None:
            self.recorder.finish(reply.recording, complete=whole)
        if reply.listing is not None and whole and not reply.listing.learned:
            learn_listing(self.endpoint.listed_schemas, reply.listing.response())


#: The most of a ``tools/list`` answer kept to learn the tools' output schemas from.
_LISTING_MAX_BYTES = 4 << 20


class _Listing:
    """The body of an upstream's ``tools/list`` answer as it is relayed, for the endpoint to learn the
    tools' output schemas (a fault answering a call then gets the ``structuredContent`` it declares).

    Learned as soon as a chunk completes the response, before the chunk is relayed: a client may call
    a tool the moment it has the listing (learning when the relay ended raced that call)."""

    def __init__(
        self, then: Callable[[bytes], None] | None, sse: bool, mid: Any, schemas: dict[str, Any]
    ) -> None:
        self.then, self.sse, self.mid, self.schemas = then, sse, mid, schemas
        self.parts: list[bytes] = []
        self.size = 0
        self.learned = False

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size <= _LISTING_MAX_BYTES:
            self.parts.append(chunk)
            # a JSON body may end with this chunk when it ends a value, an event stream's response event
            # when the stream so far ends with a blank line (read from the last bytes kept, so a line
            # break split across chunks counts and the whole body is parsed only at event ends)
            if self.sse:
                ends = b"".join(self.parts[-2:])[-4:].endswith((b"\n\n", b"\r\n\r\n", b"\r\r"))
            else:
                ends = chunk.rstrip().endswith(b"}")
            if not self.learned and ends:
                response = self.response()
                if response is not None:
                    learn_listing(self.schemas, response)
                    self.learned = True
        if self.then is not None:
            self.then(chunk)

    def response(self) -> dict[str, Any] | None:
        if self.size > _LISTING_MAX_BYTES:
            return None
        return listed_response(b"".join(self.parts), self.sse, self.mid)
