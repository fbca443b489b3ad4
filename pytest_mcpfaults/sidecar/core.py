"""The transport-free sidecar core: one :class:`SidecarCore` per sidecar, held by composition by every
backend (the socket :class:`~pytest_mcpfaults.Sidecar`, the in-process backend, and the transports to
come), and one :meth:`SidecarCore.decide` that answers every request.

A backend turns the bytes it received into an :class:`Incoming`, creates the journal record, calls
``decide`` with the few things only it can do (a :class:`Transport`: hold a request, die, pause, keep an
event stream open), and turns the :class:`Answer` into bytes, shaped by the answer's body fault. The
core holds the plan and its trigger states, the MCP endpoint and its tools, the benchmark sessions,
the journal, the errors raised inside the sidecar and the lifecycle state; it writes what classifying,
choosing a fault and answering found to the journal. Nothing here touches a socket.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.auth import AuthServer, challenge_error
from pytest_mcpfaults.sidecar.body import shape_of
from pytest_mcpfaults.sidecar.builtin import builtin_surface, builtin_tools
from pytest_mcpfaults.sidecar.cancellation import Cancellations
from pytest_mcpfaults.sidecar.connection import Dying, Holding, Notifying, Pausing, effect_of
from pytest_mcpfaults.sidecar.errors import Dropped, SidecarError, SidecarState
from pytest_mcpfaults.sidecar.journal import Journal
from pytest_mcpfaults.sidecar.legacy_sse import (
    LegacySession,
    LegacySse,
    TransportName,
    accepted,
    serves_legacy,
    serves_streamable,
)
from pytest_mcpfaults.sidecar.mcp import AnswerSource, Era, McpEndpoint, Reply, client_error
from pytest_mcpfaults.sidecar.outbound import Link, ServerMessages, notify_before
from pytest_mcpfaults.sidecar.outbound_faults import outbound_effect
from pytest_mcpfaults.sidecar.resumption import Resumed, Resumption, primes
from pytest_mcpfaults.sidecar.routing import (
    PlanEntry,
    RequestInfo,
    classify,
    expires_session,
    forced_reply,
    pick,
    revokes_token,
)
from pytest_mcpfaults.sidecar.surface import Surface
from pytest_mcpfaults.sidecar.tools import BenchmarkSessions, Tool
from pytest_mcpfaults.validation import is_loopback_host

__all__ = [
    "SINGLE_HEADERS",
    "Answer",
    "Dropped",
    "Incoming",
    "SidecarCore",
    "Transport",
    "Upstream",
    "origin_allowed",
    "security_problem",
]

#: Headers a request may carry once: first-wins and last-wins readers would disagree about a repeat.
#: Headers an MCP request may carry once: a repeat is 400 (which copy a server, or a proxy in front of
#: it, would read is anyone's guess).
SINGLE_HEADERS = (
    "Origin", "Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Host", "Accept",
    "Content-Type",
)  # fmt: skip
_SINGLE = frozenset(h.lower() for h in SINGLE_HEADERS)


@dataclass(frozen=True)
class Incoming:
    """One request as a transport received it. ``headers`` answers case-insensitive ``get()``;
    ``header_pairs`` is every (name, value) pair received, repeats included (the security checks
    need the repeats). A stdio message is a ``POST`` to the MCP path. ``query``: the URL's query
    string, without the ``?`` (a legacy SSE message POST names its session there)."""

    method: str
    path: str
    headers: Mapping[str, str]
    header_pairs: Iterable[tuple[str, str]]
    body: bytes
    query: str = ""


class Transport(Link, Protocol):
    """What only a transport can do; :meth:`SidecarCore.decide` calls these (and a tool's ``ctx`` the
    :class:`~pytest_mcpfaults.sidecar.outbound.Link` methods, for the messages it sends on its own)."""

    async def hold(self, fault: F.Fault) -> None:
        """Hold the request until release, client hang-up, teardown or patience; raise
        :class:`Dropped` unless it ends in a release."""

    async def die(self, restart: bool) -> None:
        """The transport's part of dying (the listener, the connections, the process): the core has
        already forgotten its sessions and set its state."""

    async def pause(self, seconds: float) -> None:
        """A ``delay`` of ``seconds`` before the answer (or its body)."""

    async def event_stream(self, resumed: Resumed | None = None, fault: F.Fault | None = None) -> None:
        """Serve a ``GET`` event stream on the MCP endpoint, open until teardown (``resumed``: a
        client resuming one with ``Last-Event-ID``: the events to replay first, and its stream;
        ``fault``: the body fault aimed at the ``GET``, which may cut the stream)."""


class Upstream(Protocol):
    """A source of the normal answer other than the fake MCP endpoint (proxy mode)."""

    def defers(self, fault: F.Fault) -> bool:
        """Whether ``fault``'s forced reply is made from the upstream's answer: the request is still
        forwarded (``answer`` gets the forced reply), as ``tool_error`` rewrites the real result."""

    async def answer(self, incoming: Incoming, info: RequestInfo, forced: Reply | None) -> Reply | None:
        """The upstream's answer (``forced``: a deferred fault's reply, for the transport to put in
        place of the upstream's result), or ``None`` for the core to answer itself. Asked first for
        requests outside the MCP endpoint (health, other paths), after the security checks for MCP
        requests."""


Step = Callable[[Transport], Awaitable[None]]
"""What acts once an answer is made, before it is sent, on the transport it is sent by (a
``delay(after=True)``'s pause, ``answer_after_cancel``'s hold)."""


@dataclass(frozen=True)
class LegacyReply:
    """A legacy message's reply still to make, after its POST's 202: ``make(transport)`` makes it and
    puts it on ``session``'s stream (``transport``: the one a hold of the reply is on, the stream's)."""

    session: LegacySession
    make: Step


async def _hold_on(transport: Transport, *, fault: F.Fault) -> None:
    await transport.hold(fault)


async def _pause_on(transport: Transport, *, seconds: float) -> None:
    await transport.pause(seconds)


@dataclass
class Answer:
    """What to send: the reply, the fault that fired (body faults act when the transport delivers the
    bytes), and whether the payload is framed as one SSE event.

    ``stream``: a legacy SSE stream to serve after the reply's status and headers (its endpoint event,
    then its outbox until teardown; ``fault`` then acts on the stream's bytes). ``after``: what the
    transport awaits once the reply is sent in full (a ``die`` between a message POST's 202 and its
    reply on the stream). ``replying``: a legacy message's reply, which the transport makes once it
    has sent the 202, in a task of its own, and the request's record ends when that ends."""

    reply: Reply
    fault: F.Fault | None
    sse: bool
    stream: LegacySession | None = None
    after: Callable[[], Awaitable[None]] | None = None
    replying: LegacyReply | None = None


class SidecarCore:
    """The state and the request handling of one sidecar, whatever its transport.

    Args (as the sidecars take them): ``mcp_path``, ``health_path``, ``era``, ``reply`` (the default
    framing), ``tools`` (extra tools, beside ``tool_sets``), ``faults`` (the normalised plan),
    ``get_stream``, ``allowed_origins``, ``max_body_bytes``, ``service_url`` (a callable: the URL is
    known once the transport is bound), ``tool_timeout``, ``run_sync`` / ``run_async`` (how the MCP
    endpoint runs user tool handlers), ``upstream`` (proxy mode), and ``transport`` with ``sse_path`` /
    ``messages_path`` (which MCP transports are served: Streamable HTTP on ``mcp_path``, the legacy
    HTTP+SSE transport on its two paths, or both), ``auth`` (the sidecar as an OAuth-protected
    resource: its :class:`~pytest_mcpfaults.sidecar.auth.AuthServer`, or ``None``), ``source`` (replay:
    a cassette's answers).
    """

    def __init__(
        self,
        *,
        mcp_path: str,
        health_path: str | None,
        era: Era,
        reply: str,
        tools: Iterable[Tool],
        tool_sets: Sequence[str],
        surface: Surface | None = None,
        faults: Sequence[F.Fault],
        get_stream: bool,
        allowed_origins: Sequence[str],
        max_body_bytes: int,
        service_url: Callable[[], str],
        tool_timeout: float | None = None,
        run_sync: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
        run_async: Callable[[Awaitable[Any]], Awaitable[Any]] | None = None,
        upstream: Upstream | None = None,
        transport: TransportName = "streamable_http",
        sse_path: str = "/sse",
        messages_path: str = "/messages",
        auth: AuthServer | None = None,
        source: AnswerSource | None = None,
    ) -> None:
        self.mcp_path, self.health_path, self.transport = mcp_path, health_path, transport
        self.streamable = serves_streamable(transport)
        self.legacy = (
            LegacySse(sse_path=sse_path, messages_path=messages_path) if serves_legacy(transport) else None
        )
        self.reply_sse = reply == "sse"
        self.allowed_origins = tuple(allowed_origins)
        self.allowed_hosts: frozenset[str] | None = None  # Host names beside loopback: refuse_foreign_hosts
        self.max_body_bytes, self.service_url = max_body_bytes, service_url
        self.upstream, self.auth = upstream, auth
        self.state: SidecarState = "new"
        self.notify: Callable[[str, Mapping[str, Any] | None], None] = _no_notice
        self.benchmark = BenchmarkSessions()
        self.tools = builtin_tools(tuple(tool_sets), self.benchmark)
        for tool in tools:
            self.add_tool(tool)
        self.plan_entries: list[PlanEntry] = [(f, F.TriggerState(f.trigger)) for f in faults]
        self.journal = Journal()
        self.server_messages = ServerMessages(self.journal.server_messages)
        self.cancels, self.resumption = Cancellations(self.journal), Resumption(self.journal)
        self.mcp = McpEndpoint(
            era=era, tools=self.tools, get_stream=get_stream, on_error=self.record_error,
            tool_timeout=tool_timeout, run_sync=run_sync, run_async=run_async,
            messages=self.server_messages,
            source=source,
            surface=surface if surface is not None else builtin_surface(tuple(tool_sets)),
            on_ran_on=self.cancels.ran_on,
        )  # fmt: skip
        self.freeze_fault: F.Fault = FREEZE
        self._errors: list[tuple[str, BaseException]] = []
        self._errors_lock = threading.Lock()

    def refuse_foreign_hosts(self) -> None:
        """Refuse (403) an MCP request whose ``Host`` is not loopback nor a host of
        ``allowed_origins``: a loopback server's own DNS-rebinding check, which a proxying sidecar does
        in the upstream's place (the upstream sees the sidecar's ``Host``, not the client's)."""
        hosts = set()
        for origin in self.allowed_origins:
            with contextlib.suppress(ValueError):
                hosts.add((urlsplit(origin).hostname or "").lower())
        self.allowed_hosts = frozenset(hosts - {""})

    # -- tools, plan, state ------------------------------------------------------------------------
    def add_tool(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            raise ValueError(f"Sidecar: tools must be Tool instances, got {tool!r}")
        self.tools[tool.name] = tool
        if self.state != "new":
            self.notify("notifications/tools/list_changed", None)

    @property
    def plan(self) -> tuple[F.Fault, ...]:
        return tuple(f for f, _ in self.plan_entries)

    def inject(self, plan: Sequence[F.Fault]) -> None:
        self.plan_entries.extend((f, F.TriggerState(f.trigger)) for f in plan)

    def clear_faults(self) -> None:
        self.plan_entries.clear()

    def freeze(self, fault: F.Fault) -> None:
        """Hold every later request (a running sidecar only)."""
        if self.state == "running":
            self.state = "frozen"
            self.freeze_fault = fault

    def thaw(self) -> None:
        if self.state == "frozen":
            self.state = "running"

    def lose_process(self, *, restart: bool) -> None:
        """What dying does to the sidecar itself: every session is lost with the process; dead until
        revived unless ``restart``."""
        self.state = "running" if restart else "dead"
        self.mcp.forget_all()
        self.benchmark.forget()
        if self.legacy is not None:
            self.legacy.forget_all()

    def close_stream(self, session: LegacySession) -> None:
        """A legacy SSE stream is gone (the client closed it, teardown, a cut): its session ends,
        and with it the MCP session its ``initialize`` created (a legacy session lives as long as
        its stream, as in the mcp SDK's SSE server)."""
        if self.legacy is not None:
            self.legacy.close(session)
        if session.mcp_session is not None and session.mcp_session in self.mcp.sessions:
            self.mcp.end_session(session.mcp_session)

    # -- errors ------------------------------------------------------------------------------------
    def record_error(self, where: str, exc: BaseException) -> None:
        with self._errors_lock:
            self._errors.append((where, exc))

    @property
    def errors(self) -> list[BaseException]:
        with self._errors_lock:
            return [e for _, e in self._errors]

    def check_errors(self) -> None:
        with self._errors_lock:
            errors = list(self._errors)
        if errors:
            raise SidecarError(errors) from errors[0][1]

    # -- answering ---------------------------------------------------------------------------------
    def too_large(self) -> Reply:
        """413 for a body over ``max_body_bytes`` (the connection is closed after it)."""
        text = f"request body over {self.max_body_bytes} bytes"
        return Reply(413, None, {"Connection": "close"}, sse=False, text=text)

    def classify(self, incoming: Incoming) -> RequestInfo:
        legacy = self.legacy
        if legacy is not None and incoming.path in legacy.paths:
            i = incoming
            return legacy.classify(i.method, i.path, i.query, i.headers, i.body, self.mcp)
        if not self.streamable and incoming.path == self.mcp_path:
            return RequestInfo(incoming.method, incoming.path, "other", None)  # not served: 404
        return classify(
            incoming.method,
            incoming.path,
            incoming.headers,
            incoming.body,
            mcp_path=self.mcp_path,
            health_path=self.health_path,
            endpoint=self.mcp,
        )

    async def decide(self, rid: int, incoming: Incoming, transport: Transport) -> Answer | None:
        """Answer request ``rid``: classify it, hold it while frozen, pick the fault that fires, apply
        the answer-level part of that fault (die, freeze, hang, delay, a forced reply), else answer
        normally (health, 404, the security checks, MCP dispatch or the upstream). ``None``: the
        transport served it itself (an event stream). Raises :class:`Dropped` when the request dies."""
        if len(incoming.body) > self.max_body_bytes:
            return Answer(self.too_large(), None, False)
        info = self._classified(rid, incoming)
        if self.state == "frozen":
            await transport.hold(self.freeze_fault)
        fault, state = self._choose_fault(info, rid)
        legacy = self.legacy if self.legacy is not None and info.path in self.legacy.paths else None
        session = legacy.lookup(incoming.query) if legacy and info.path == legacy.messages_path else None
        reply: Reply | None = None
        forced: Reply | None = None
        later: Step | None = None  # once the answer is made, before it is sent
        if fault is not None:
            match effect_of(fault, state.fired if state is not None else 0):
                case Dying(restart=restart):

                    async def dying() -> None:
                        self.lose_process(restart=restart)
                        await transport.die(restart)

                    if isinstance(session, LegacySession) and incoming.method == "POST":
                        return Answer(accepted(), fault, False, after=dying)  # 202, then the process dies
                    await dying()
                    raise Dropped
                case Holding(after=True):
                    later = functools.partial(_hold_on, fault=fault)
                case Holding(freezes=freezes):
                    if freezes:
                        self.freeze(fault)
                    await transport.hold(fault)
                case Pausing(seconds=late, after=True):
                    later = functools.partial(_pause_on, seconds=late)
                case Pausing(seconds=late):
                    await transport.pause(late)
                case Notifying() as notifying:
                    await self._notify(rid, info, transport, notifying, fault, legacy is not None)
            reply = self._forced_reply(fault, info)
            if reply is not None and self.upstream is not None and self.upstream.defers(fault):
                forced, reply = reply, None  # forwarded all the same; the transport rewrites the answer
        if legacy is not None:  # never with an upstream (the Sidecar refuses the pair)
            answer = await self._legacy(rid, incoming, info, fault, reply, session, later, transport)
            if answer.reply.error_by is not None:
                self.journal.update_request(rid, error=answer.reply.error, error_by=answer.reply.error_by)
            return answer
        if reply is None:
            reply = await _answer(self, rid, incoming, info, transport, fault, forced)
            if reply is None:
                return None
        if later is not None:  # Delay(after=True), answer_after_cancel: the answer is made (the tool ran)
            await later(transport)
        self._journal_answer(rid, reply)
        sse = (reply.sse if reply.sse is not None else self.reply_sse) or shape_of(fault).open_stream
        return Answer(_with_ids(self, rid, incoming, info, reply, fault) if sse else reply, fault, sse)

    async def _legacy(
        self,
        rid: int,
        incoming: Incoming,
        info: RequestInfo,
        fault: F.Fault | None,
        forced: Reply | None,
        session: LegacySession | Reply | None,
        later: Step | None,
        transport: Transport,
    ) -> Answer:
        """A legacy SSE request, after its answer-level fault acted: the stream (``GET sse_path``) or a
        message (``POST messages_path``), whose JSON-RPC reply (normal or forced) goes on its session's
        stream, carrying the body fault, while the POST gets ``202 Accepted``. A request the MCP
        endpoint answers is answered after its 202 (:class:`LegacyReply`, as the mcp SDK's SSE server
        does), so the client can post its ``notifications/cancelled`` meanwhile; ``later`` (a
        ``delay(after=True)``, ``answer_after_cancel``'s hold) acts once its reply is made."""
        assert self.legacy is not None
        if forced is None:
            forced = security_problem(incoming.header_pairs, self.allowed_origins, self.allowed_hosts)
        if info.path == self.legacy.sse_path:
            if forced is not None:
                return Answer(forced, fault, False)
            if incoming.method != "GET":
                return Answer(Reply(405, None, {"Allow": "GET"}), fault, False)
            stream = self.legacy.open(rid)
            headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            return Answer(Reply(200, None, headers), fault, True, stream=stream)
        if incoming.method != "POST":
            return Answer(Reply(405, None, {"Allow": "POST"}), fault, False)
        expired = fault is not None and expires_session(fault)
        if forced is not None and not _json_rpc(forced) and not expired:  # HTTP-level: the POST's own
            return Answer(forced, fault, False)
        if not isinstance(session, LegacySession):
            assert session is not None
            return Answer(session, fault, False)
        if expired:  # the server forgot the session: 404, and its stream closes
            self.legacy.end(session)
            return Answer(Reply(404, text="Could not find session"), None, False)
        overflow = session.overflow()
        if overflow is not None:  # the client does not read its stream: not processed, not queued
            return Answer(overflow, None, False)
        reply = forced
        if reply is None:
            m = info.mcp
            if m is None:
                assert info.bad_body is not None
                return Answer(info.bad_body, fault, False)
            if m.method is not None and not m.is_notification:  # a request: answered after its 202
                make = functools.partial(_legacy_reply, self, rid, incoming, info, fault, session, later)
                return Answer(accepted(), None, False, replying=LegacyReply(session, make))
            reply = await self.mcp.post(m, incoming.headers)
            if m.method == "notifications/cancelled" and reply.status == 202:
                self.cancels.heard(rid)
        if later is not None:
            await later(transport)
        self._journal_answer(rid, reply)  # the POST's answer is a plain 202: the journal keeps the reply's
        session.reply(rid, reply, fault)
        return Answer(accepted(), None, False)

    def _classified(self, rid: int, incoming: Incoming) -> RequestInfo:
        """The request classified, with what it carried for ``auth=`` (counted as a call of its token),
        and journaled."""
        info = self.classify(incoming)
        if self.auth is not None and info.kind == "mcp":
            info = dataclasses.replace(info, auth=self.auth.observe(incoming.headers))
            if info.mcp is not None and info.auth is not None:  # a session is bound to its principal
                info.mcp.principal = info.auth.principal
        self._journal_classified(rid, info, incoming.headers.get("Mcp-Session-Id"))
        return info

    def _forced_reply(self, fault: F.Fault, info: RequestInfo) -> Reply | None:
        """The reply ``fault`` forces; with ``auth=``, the request's token revoked if the fault says so; a
        replaying or proxying sidecar shapes a forced successful tool result as the proxy shapes a
        rewritten one (the tool's ``structuredContent``: the recorded tool's, or as the upstream's
        listing declared it; a fault the proxy defers is fitted to the real result instead)."""
        reply = forced_reply(fault, info, self.mcp, self.service_url())
        replaying = self.mcp.source is not None
        answered_here = self.upstream is not None and not self.upstream.defers(fault)
        if reply is not None and info.mcp is not None and (replaying or answered_here):
            self.mcp.fit_forced(reply, info.mcp)
        token = info.auth.token if info.auth is not None else None
        if self.auth is not None and token is not None and revokes_token(fault):
            self.auth.revoke(token)
        return reply

    def _journal_answer(self, rid: int, reply: Reply) -> None:
        """What went wrong (``error``/``error_by``) and, with ``auth=``, the challenge's error."""
        if reply.error_by is not None:
            self.journal.update_request(rid, error=reply.error, error_by=reply.error_by)
        if self.auth is not None and (auth_error := challenge_error(reply)) is not None:
            self.journal.update_group(rid, "auth", error=auth_error)

    def _authorization_server(self, rid: int, incoming: Incoming) -> Reply:
        """A request outside the MCP endpoint with ``auth=``: the authorization server's paths (the
        metadata, registration, authorization, the token endpoint), 404 for any other; a token
        request's grant and the token it issued, and the registered client a request named, go to the
        journal."""
        assert self.auth is not None
        i = incoming
        answer = self.auth.answer(i.method, i.path, i.headers, i.body, i.query)
        if answer is None:
            return Reply(404, {"error": "Not Found"}, sse=False)
        if answer.grant is not None or answer.issued is not None or answer.client is not None:
            self.journal.update_group(
                rid, "auth", grant=answer.grant, issued=answer.issued, client=answer.client
            )
        return answer.reply

    async def _notify(
        self,
        rid: int,
        info: RequestInfo,
        transport: Transport,
        effect: Notifying,
        fault: F.Fault,
        legacy: bool,
    ) -> None:
        """A fault's notifications before the answer, on the request's answer stream, then its hold.
        None on a legacy POST (answered 202; its reply goes on the session's stream) nor in proxy mode
        (the upstream's answer is relayed as it comes): there the fault only holds."""
        m = info.mcp
        if m is not None and not legacy and self.upstream is None:
            headers = {"Mcp-Session-Id": m.session_id} if m.era == "session" and m.session_id else {}
            await notify_before(
                self.server_messages, transport, rid=rid, tool=m.tool, headers=headers,
                token=m.meta.get("progressToken"), count=effect.count, interval=effect.interval,
                logs=not effect.holds,
            )  # fmt: skip
        if effect.holds:
            await transport.hold(fault)

    def _journal_classified(self, rid: int, info: RequestInfo, session_header: str | None) -> None:
        if info.mcp is not None:
            m = info.mcp
            self.journal.update_request(
                rid,
                mcp_method=m.method,
                tool=m.tool,
                prompt=m.prompt,
                resource=m.resource,
                session_id=m.session_id,
                era=m.era,
                rpc_id=None if m.is_notification or m.method is None else m.id,  # requests only
            )
            if m.method == "notifications/cancelled":  # linked to the request it names, on arrival
                self.cancels.link(rid, m)
        elif info.kind == "mcp" and session_header:
            self.journal.update_request(rid, session_id=session_header, era="session")
        if info.auth is not None and info.auth.label is not None:
            self.journal.update_group(rid, "auth", token=info.auth.label)

    def _choose_fault(self, info: RequestInfo, rid: int) -> tuple[F.Fault | None, F.TriggerState | None]:
        if not self.plan_entries:  # no plan (most requests of most tests): nothing to match
            return None, None
        fault, state = pick(self.plan_entries, info)
        if fault is not None:
            text = str(fault)
            self.journal.update_request(rid, fault=text, fault_kind=fault.kind)
            self.journal.add_fired(fault.kind, rid, text, getattr(fault, "expect_hang", False))
        return fault, state

    async def _normal(
        self,
        rid: int,
        incoming: Incoming,
        info: RequestInfo,
        transport: Transport,
        forced: Reply | None = None,
        fault: F.Fault | None = None,
    ) -> Reply | None:
        if self.upstream is not None and info.kind != "mcp":
            problem = security_problem(incoming.header_pairs, self.allowed_origins, self.allowed_hosts)
            if problem is not None and problem.status == 403:  # a foreign Host or Origin: not forwarded
                return problem
            forwarded = await self.upstream.answer(incoming, info, None)
            if forwarded is not None:
                return forwarded
        if info.kind == "health":
            return Reply(200, {"status": "ok"}, sse=False)
        if info.kind == "other":
            if self.auth is not None:
                return self._authorization_server(rid, incoming)
            return Reply(404, {"error": "Not Found"}, sse=False)
        problem = security_problem(incoming.header_pairs, self.allowed_origins, self.allowed_hosts)
        if problem is not None:
            return problem
        if self.auth is not None and info.auth is not None:
            refused = self.auth.refusal(info.auth)
            if refused is not None:
                return refused
        if self.upstream is not None:
            forwarded = await self.upstream.answer(incoming, info, forced)
            if forwarded is not None:
                return forwarded
            if forced is not None:
                return forced
        method, headers = incoming.method, incoming.headers
        if method == "POST":
            if info.mcp is None:
                assert info.bad_body is not None
                return info.bad_body
            return await self.mcp.post(info.mcp, headers, transport, rid)
        principal = info.auth.principal if info.auth is not None else None
        if method == "DELETE":
            return self.mcp.delete(headers.get("Mcp-Session-Id"), principal)
        if method == "GET" and self.mcp.era != "stateless":
            return await _get(self, rid, headers, transport, fault, principal)
        return Reply(405, None, {"Allow": "POST" if self.mcp.era == "stateless" else "POST, DELETE"})


async def _get(
    core: SidecarCore,
    rid: int,
    headers: Mapping[str, str],
    transport: Transport,
    fault: F.Fault | None,
    principal: str | None = None,
) -> Reply | None:
    """A session-era ``GET`` of the MCP endpoint: one resuming a stream with ``Last-Event-ID`` (its
    replay; a ``GET`` stream goes on live), a ``GET`` stream (``get_stream=True``), else 405.
    ``None``: the transport served the stream."""
    sid, last = headers.get("Mcp-Session-Id"), headers.get("Last-Event-ID")
    if last is None and not core.mcp.get_stream:
        return Reply(405, None, {"Allow": "POST, DELETE"})
    problem = core.mcp.check_session(sid, principal)
    if problem is not None:
        return problem
    found = core.resumption.replay(rid, sid, last) if last is not None else None
    if isinstance(found, Reply):
        return found
    await transport.event_stream(found, fault)  # a fresh GET stream, or one resumed: replayed, then live
    return None


async def _answer(
    core: SidecarCore,
    rid: int,
    incoming: Incoming,
    info: RequestInfo,
    transport: Transport,
    fault: F.Fault | None,
    forced: Reply | None,
) -> Reply | None:
    """``core``'s normal answer (a function: ``SidecarCore`` has methods enough). An MCP request's is
    made unless the client cancels it first (:meth:`Cancellations.run`), and a
    ``notifications/cancelled`` the sidecar accepts cancels the request it names; ``close_stream``
    frames it as a stream to resume (:meth:`SidecarCore._normal` answers the ``GET`` with
    ``Last-Event-ID`` that resumes it). A proxied request's answer is the upstream's: not raced."""
    pending = core._normal(rid, incoming, info, transport, forced, fault)
    if info.mcp is None or core.upstream is not None:
        return await pending
    effect = outbound_effect(fault) if fault is not None else None
    if effect is not None:  # the requests the call's tool sends the client carry it
        core.server_messages.arm(rid, effect)
    try:
        reply = await core.cancels.run(rid, info.mcp, fault, pending)
    finally:
        core.server_messages.disarm(rid)
    if info.mcp.method == "notifications/cancelled" and reply is not None and reply.status == 202:
        core.cancels.heard(rid)
    resumable = shape_of(fault).resumable  # close_stream: a stream to resume (Resumption)
    if resumable is None or reply is None or reply.status != 200 or info.mcp.is_notification:
        return reply
    if reply.listen is None:  # a listen stream ends after its events instead (2026-07-28: no resumption)
        reply = core.resumption.close(rid, info.mcp.session_id, reply, *resumable)
    return reply


async def _legacy_reply(
    core: SidecarCore,
    rid: int,
    incoming: Incoming,
    info: RequestInfo,
    fault: F.Fault | None,
    session: LegacySession,
    later: Step | None,
    transport: Transport,
) -> None:
    """Make the reply of legacy message ``rid`` (its POST answered 202) and put it on its session's
    stream, unless the client cancels it first (:meth:`Cancellations.run`: a stopped request's reply
    is no event at all); ``transport`` is the one its hold, if any, is on."""
    m = info.mcp
    assert m is not None
    if core.cancels.stopped_before(rid, fault):  # its cancel came before this began
        return
    reply = await core.cancels.run(rid, m, fault, core.mcp.post(m, incoming.headers, rid=rid))
    if reply is None or reply.payload is None:  # stopped by its cancellation: nothing to send
        return
    created = reply.headers.get("Mcp-Session-Id")
    if m.method == "initialize" and created:
        session.mcp_session = created
    if later is not None:
        await later(transport)
    core._journal_answer(rid, reply)  # the POST's own answer is a plain 202: the journal keeps the reply's
    session.reply(rid, reply, fault)


def _with_ids(
    core: SidecarCore, rid: int, incoming: Incoming, info: RequestInfo, reply: Reply, fault: F.Fault | None
) -> Reply:
    """An event-stream answer in a session of the fake: its events carry ids, kept for a client that
    resumes it (:class:`~pytest_mcpfaults.sidecar.resumption.Resumption`); ``close_stream``'s are framed
    already, a proxied answer is the upstream's, and ``malformed_json``'s half event is the fault (a
    replay would undo it)."""
    req = info.mcp
    if req is None or req.session_id is None or req.is_notification or core.upstream is not None:
        return reply
    if reply.events is not None or reply.status != 200 or reply.payload is None or shape_of(fault).halves:
        return reply
    priming = primes(incoming.headers.get("MCP-Protocol-Version"))
    return core.resumption.frame(rid, req.session_id, reply, priming=priming)


def _no_notice(method: str, params: Mapping[str, Any] | None) -> None:
    """``SidecarCore.notify`` (a server notification for the clients' open streams, from any thread)
    until a transport that has such streams sets its own (the socket sidecar's ``GET`` streams, which
    also sets the surface's ``on_change``); without one nobody is told."""


#: What holds requests after ``Sidecar.freeze()`` (faults are frozen values: one serves every sidecar).
FREEZE = F.Freeze()


def _json_rpc(reply: Reply) -> bool:
    """Whether a forced reply is a JSON-RPC answer (the legacy transport sends it on the stream)
    rather than an HTTP-level one (status, terminating: the POST's own answer)."""
    return reply.status == 200 and isinstance(reply.payload, dict) and "jsonrpc" in reply.payload


def origin_allowed(origin: str, allowed_origins: Iterable[str]) -> bool:
    """Whether a browser ``Origin`` may reach the MCP endpoint: one of ``allowed_origins``, or any
    loopback origin (the DNS-rebinding check the MCP spec asks of local servers). A malformed origin
    (``http://[::1``) is not allowed."""
    if origin in allowed_origins:
        return True
    try:
        host = urlsplit(origin).hostname or ""
    except ValueError:
        return False
    return is_loopback_host(host)


def host_allowed(host: str, allowed_hosts: Iterable[str]) -> bool:
    """Whether a ``Host`` header (``name[:port]``, ``[v6]:port``) names a loopback host or one of
    ``allowed_hosts``. A malformed value is not allowed."""
    try:
        name = (urlsplit("//" + host).hostname or "").lower()
    except ValueError:
        return False
    return bool(name) and (is_loopback_host(name) or name in allowed_hosts)


def security_problem(
    headers: Iterable[tuple[str, str]],
    allowed_origins: Iterable[str],
    allowed_hosts: frozenset[str] | None = None,
) -> Reply | None:
    """The client-error answer for an MCP request whose headers must not be trusted: a
    :data:`SINGLE_HEADERS` header sent twice (400), an ``Origin`` that is not allowed (403), or, with
    ``allowed_hosts`` (not ``None``), a ``Host`` that is neither loopback nor one of them (403);
    ``None`` when they pass. ``headers`` are every (name, value) pair received, repeats included."""
    seen: set[str] = set()
    repeated: set[str] = set()
    origin = host = ""
    for name, value in headers:  # every MCP request: one pass, only the single headers kept
        lower = name.lower()
        if lower in _SINGLE:
            if lower in seen:
                repeated.add(lower)
            else:
                seen.add(lower)
                if lower == "origin":
                    origin = value
                elif lower == "host":
                    host = value
    if repeated:
        first = next(h for h in SINGLE_HEADERS if h.lower() in repeated)
        return client_error(-32600, f"Bad Request: the {first} header appears more than once")
    if origin and not origin_allowed(origin, allowed_origins):
        return client_error(-32600, f"Forbidden: Origin {origin!r} is not allowed", status=403)
    if allowed_hosts is not None and host and not host_allowed(host, allowed_hosts):
        return client_error(
            -32600,
            f"Forbidden: Host {host!r} is not allowed (not loopback: a DNS-rebinding request; a proxying "
            "sidecar refuses it for its upstream, which would only see the sidecar's own Host)",
            status=403,
        )
    return None
