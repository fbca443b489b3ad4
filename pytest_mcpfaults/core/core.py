"""The transport-free sidecar core: one :class:`SidecarCore` per sidecar, held by every backend, whose
:meth:`SidecarCore.decide` answers every request. A backend turns what it received into an
:class:`Incoming`, calls ``decide`` with a :class:`Transport` (what only it can do) and turns the
:class:`Answer` into bytes. Nothing here touches a socket.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlsplit

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.auth.server import AuthServer, challenge_error
from pytest_mcpfaults.behaviour.body import shape_of
from pytest_mcpfaults.behaviour.connection import Dying, Holding, Notifying, Pausing, effect_of
from pytest_mcpfaults.behaviour.server_requests import outbound_effect
from pytest_mcpfaults.core.cancellation import Cancellations
from pytest_mcpfaults.core.errors import Dropped, ErrorLog, SidecarState
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.plan import Plan
from pytest_mcpfaults.core.resumption import Resumed, Resumption, primes
from pytest_mcpfaults.core.routing import RequestInfo, RouteKind, answer_reply
from pytest_mcpfaults.mcp.builtin import builtin_surface, builtin_tools
from pytest_mcpfaults.mcp.calls import ToolCalls
from pytest_mcpfaults.mcp.endpoint import AnswerSource, Era, McpEndpoint
from pytest_mcpfaults.mcp.jsonrpc import INVALID_REQUEST, Reply, client_error
from pytest_mcpfaults.mcp.outbound import Link, ServerMessages, notify_before
from pytest_mcpfaults.mcp.sessions import Sessions
from pytest_mcpfaults.mcp.tools import BenchmarkSessions, Tool
from pytest_mcpfaults.options.validation import is_loopback_host

if TYPE_CHECKING:
    from pytest_mcpfaults.options.fields import SidecarOptions

#: Headers an MCP request may carry once: a repeat is 400 (which copy a server, or a proxy in front of
#: it, would read is anyone's guess). ``Accept`` is not one: it is a list (RFC 9110 5.3: repeats are
#: one list), the sidecar does not read it, and the SDK's servers accept a repeat, which the mcp 1.26
#: client sends on its event-stream ``GET`` (its own ``Accept`` and httpx-sse's).
SINGLE_HEADERS = (
    "Origin", "Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Host", "Content-Type",
)  # fmt: skip
_SINGLE = frozenset(h.lower() for h in SINGLE_HEADERS)


@dataclass(frozen=True)
class Incoming:
    """One request as a transport received it (a stdio message is a ``POST`` to the MCP path).
    ``headers`` answers case-insensitive ``get()``; ``header_pairs`` keeps the repeats (the security
    checks need them); ``query`` is without the ``?``; ``idle``: seconds its connection had been idle
    (``None``: a transport without connections of its own)."""

    method: str
    path: str
    headers: Mapping[str, str]
    header_pairs: Iterable[tuple[str, str]]
    body: bytes
    query: str = ""
    idle: float | None = None


class Transport(Link, Protocol):
    """What only a transport can do (and a tool's ``ctx`` its :class:`~pytest_mcpfaults.mcp.outbound.Link`
    methods, for the messages it sends on its own)."""

    async def hold(self, fault: F.Fault) -> None:
        """Hold the request until release, client hang-up, teardown or patience; raise
        :class:`Dropped` unless it ends in a release."""

    async def die(self, restart: bool) -> None:
        """The transport's part of dying (the core has forgotten its sessions and set its state)."""

    async def pause(self, seconds: float) -> None:
        """A ``delay`` of ``seconds`` before the answer (or its body)."""

    async def event_stream(self, resumed: Resumed | None = None, fault: F.Fault | None = None) -> None:
        """Serve a ``GET`` event stream, open until teardown: ``resumed``'s events replayed first (a
        ``Last-Event-ID``), cut by ``fault`` (a body fault) if it says so."""


class Upstream(Protocol):
    """A source of the normal answer other than the fake MCP endpoint (proxy mode)."""

    async def answer(self, incoming: Incoming, info: RequestInfo, forced: Reply | None) -> Reply | None:
        """The upstream's answer (with ``forced``, the reply of a fault that ``rewrites_upstream``, in
        place of its result), or ``None`` for the core to answer; asked first outside the MCP endpoint,
        after the security checks on it."""


Step = Callable[[Transport], Awaitable[None]]
"""What acts once an answer is made, before it is sent (a ``delay(after=True)``, ``answer_after_cancel``)."""


@dataclass
class Answer:
    """What to send: the reply, the fault that fired (a body fault acts as the transport writes), whether
    the payload is one SSE event, and ``after``, awaited once it is sent (a ``die`` after a 202)."""

    reply: Reply
    fault: F.Fault | None
    sse: bool
    after: Callable[[], Awaitable[None]] | None = None


@dataclass(frozen=True)
class _Answering:
    """A request being answered, as the steps of its normal answer read it."""

    rid: int
    incoming: Incoming
    info: RequestInfo
    transport: Transport
    fault: F.Fault | None


class PathTransport(Protocol):
    """An MCP transport on paths of its own (legacy HTTP+SSE), asked first for a request on its ``paths``."""

    @property
    def paths(self) -> tuple[str, ...]: ...

    def classify(self, incoming: Incoming) -> RequestInfo: ...

    async def decide(
        self,
        rid: int,
        incoming: Incoming,
        info: RequestInfo,
        fault: F.Fault | None,
        state: F.TriggerState | None,
        transport: Transport,
    ) -> Answer: ...

    def forget_all(self) -> None: ...


class SidecarCore:
    """The state and the request handling of one sidecar, whatever its transport: ``options`` (read
    where used), then what a backend builds at runtime: ``service_url`` (known once bound), how user tool
    handlers run, the ``upstream`` (proxy mode), the ``auth=`` server, a cassette's ``source`` (replay).
    The backend serving legacy HTTP+SSE sets ``path_transport``.
    """

    def __init__(
        self,
        options: SidecarOptions,
        *,
        service_url: Callable[[], str],
        run_sync: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
        run_async: Callable[[Awaitable[Any]], Awaitable[Any]] | None = None,
        upstream: Upstream | None = None,
        auth: AuthServer | None = None,
        source: AnswerSource | None = None,
    ) -> None:
        self.options = options
        self.streamable = options.transport != "sse"
        self.path_transport: PathTransport | None = None
        self.allowed_hosts: frozenset[str] | None = None  # Host names beside loopback: refuse_foreign_hosts
        self.service_url = service_url
        self.upstream, self.auth = upstream, auth
        self.state: SidecarState = "new"
        self.notify: Callable[[str, Mapping[str, Any] | None], None] = lambda method, params: None
        self.benchmark = BenchmarkSessions()
        tool_sets = () if source is not None else tuple(options.tool_sets)
        self.tools = builtin_tools(tool_sets, self.benchmark)
        for tool in source.tools.values() if source is not None else options.tools:
            self.add_tool(tool)
        self.journal = Journal()
        faults = cast("tuple[F.Fault, ...]", options.faults)  # parsed by SidecarOptions
        self.plan = Plan(faults, self.journal)
        self.errors = ErrorLog()
        self.record_error = self.errors.record
        self.server_messages = ServerMessages(self.journal.server_messages)
        self.cancels, self.resumption = Cancellations(self.journal), Resumption(self.journal)
        own = source is None  # a replay serves the cassette's tools only
        surface = builtin_surface(tool_sets, options.resources if own else (), options.prompts if own else ())
        calls = ToolCalls(
            tools=self.tools, sessions=Sessions(surface), on_error=self.record_error,
            tool_timeout=options.tool_timeout, run_sync=run_sync, run_async=run_async,
            messages=self.server_messages, on_ran_on=self.cancels.ran_on,
        )  # fmt: skip
        self.mcp = McpEndpoint(cast(Era, options.era), options.get_stream, calls, source)
        self.freeze_fault: F.Fault = FREEZE

    def refuse_foreign_hosts(self) -> None:
        """Refuse (403) an MCP request whose ``Host`` is neither loopback nor of ``allowed_origins``: the
        DNS-rebinding check a proxying sidecar does for its upstream (which sees the sidecar's ``Host``)."""
        self.allowed_hosts = frozenset(map(_hostname, self.options.allowed_origins)) - {""}

    # -- tools, state ------------------------------------------------------------------------------
    def add_tool(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            raise ValueError(f"Sidecar: tools must be Tool instances, got {tool!r}")
        self.tools[tool.name] = tool
        if self.state != "new":
            self.notify("notifications/tools/list_changed", None)

    def freeze(self, fault: F.Fault) -> None:
        """Hold every later request (a running sidecar only)."""
        if self.state == "running":
            self.state = "frozen"
            self.freeze_fault = fault

    def thaw(self) -> None:
        if self.state == "frozen":
            self.state = "running"

    def lose_process(self, *, restart: bool) -> None:
        """Dying: every session is lost with the process; dead until revived unless ``restart``."""
        self.state = "running" if restart else "dead"
        self.mcp.forget_all()
        self.benchmark.forget()
        if self.path_transport is not None:
            self.path_transport.forget_all()

    # -- answering ---------------------------------------------------------------------------------
    def too_large(self) -> Reply:
        """413 for a body over ``max_body_bytes`` (the connection is closed after it)."""
        text = f"request body over {self.options.max_body_bytes} bytes"
        return Reply(413, None, {"Connection": "close"}, sse=False, text=text)

    def classify(self, incoming: Incoming) -> RequestInfo:
        if self.path_transport is not None and incoming.path in self.path_transport.paths:
            return self.path_transport.classify(incoming)
        method, path = incoming.method, incoming.path
        if path == self.options.mcp_path and self.streamable:  # a POST there is parsed as JSON-RPC
            parsed = self.mcp.parse(incoming.headers, incoming.body) if method == "POST" else None
            if isinstance(parsed, Reply):
                return RequestInfo(method, path, "mcp", None, parsed)
            return RequestInfo(method, path, "mcp", parsed)
        kind: RouteKind = "health" if path == self.options.health_path else "other"
        return RequestInfo(method, path, kind, None)

    async def decide(self, rid: int, incoming: Incoming, transport: Transport) -> Answer | None:
        """Answer request ``rid``: classify it, hold it while frozen, act the fault that fires, else answer
        normally. ``None``: the transport served it (an event stream); :class:`Dropped`: it died."""
        if len(incoming.body) > self.options.max_body_bytes:
            return Answer(self.too_large(), None, False)
        info = self._classified(rid, incoming)
        if self.state == "frozen":
            await transport.hold(self.freeze_fault)
        fault, state = self.plan.choose(info, rid)
        if self.path_transport is not None and info.path in self.path_transport.paths:
            return await self.path_transport.decide(rid, incoming, info, fault, state, transport)
        reply = forced = None
        later: Step | None = None  # once the answer is made, before it is sent
        if fault is not None:
            later = await self.act(rid, info, fault, state, transport)
            reply = self.forced_reply(fault, info)
            if reply is not None and self.upstream is not None and fault.rewrites_upstream:
                forced, reply = reply, None  # forwarded all the same; the transport rewrites the answer
        asked = _Answering(rid, incoming, info, transport, fault)
        if reply is None:
            reply = await self.normal_answer(asked, forced)
            if reply is None:
                return None
        if later is not None:  # Delay(after=True), answer_after_cancel: the answer is made (the tool ran)
            await later(transport)
        self.journal_answer(rid, reply)
        framed = reply.sse if reply.sse is not None else self.options.reply == "sse"
        sse = framed or shape_of(fault).open_stream
        return Answer(self.with_ids(asked, reply) if sse else reply, fault, sse)

    async def act(
        self,
        rid: int,
        info: RequestInfo,
        fault: F.Fault,
        state: F.TriggerState | None,
        transport: Transport,
        notices: bool = True,
    ) -> Step | None:
        """The answer-level part of ``fault``, acted now, or returned when it acts once the answer is made.
        ``notices=False``: the request has no answer stream (a message POST answered 202)."""
        match effect_of(fault, state.fired if state is not None else 0):
            case Dying(restart=restart):
                self.lose_process(restart=restart)
                await transport.die(restart)
                raise Dropped
            case Holding(after=True):
                return lambda transport: transport.hold(fault)
            case Holding(freezes=freezes):
                if freezes:
                    self.freeze(fault)
                await transport.hold(fault)
            case Pausing(seconds=late, after=True):
                return lambda transport: transport.pause(late)
            case Pausing(seconds=late):
                await transport.pause(late)
            case Notifying() as effect:
                m = info.mcp  # its notifications on the answer stream (in proxy mode the upstream's are)
                if m is not None and notices and self.upstream is None:
                    await notify_before(
                        self.server_messages, transport, rid, m, effect.count, effect.interval, effect.holds
                    )
                if effect.holds:
                    await transport.hold(fault)
        return None

    def _classified(self, rid: int, incoming: Incoming) -> RequestInfo:
        """The request classified (with its ``auth=`` token, counted as a call) and journaled."""
        info = self.classify(incoming)
        if incoming.idle is not None:  # what `blackhole(idle=)` matches on
            info = dataclasses.replace(info, idle=incoming.idle)
        if self.auth is not None and info.kind == "mcp":
            info = dataclasses.replace(info, auth=self.auth.observe(incoming.headers))
            if info.mcp is not None and info.auth is not None:  # a session is bound to its principal
                info.mcp.principal = info.auth.principal
        if info.mcp is not None:
            m = info.mcp
            self.journal.update_request(
                rid, mcp_method=m.method, tool=m.tool, prompt=m.prompt, resource=m.resource,
                session_id=m.session_id, era=m.era,
                rpc_id=None if m.is_notification or m.method is None else m.id,  # requests only
            )  # fmt: skip
            if m.method == "notifications/cancelled":  # linked to the request it names, on arrival
                self.cancels.link(rid, m)
        elif info.kind == "mcp" and (session_header := incoming.headers.get("Mcp-Session-Id")):
            self.journal.update_request(rid, session_id=session_header, era="session")
        if info.auth is not None and info.auth.label is not None:
            self.journal.update_group(rid, "auth", token=info.auth.label)
        return info

    def forced_reply(self, fault: F.Fault, info: RequestInfo) -> Reply | None:
        """The reply ``fault`` forces (its token revoked if the fault says so); replaying or proxying, a
        forced tool result gets the tool's ``structuredContent`` as a rewritten one would (a deferred
        fault's is fitted to the real result instead)."""
        reply = answer_reply(fault, info, self.mcp, self.service_url())
        replaying = self.mcp.source is not None
        answered_here = self.upstream is not None and not fault.rewrites_upstream
        if reply is not None and info.mcp is not None and (replaying or answered_here):
            self.mcp.fit_forced(reply, info.mcp)
        token = info.auth.token if info.auth is not None else None
        if self.auth is not None and token is not None and fault.revokes_token:
            self.auth.revoke(token)
        return reply

    def journal_answer(self, rid: int, reply: Reply) -> None:
        """What went wrong (``error``/``error_by``) and, with ``auth=``, the challenge's error."""
        if reply.error_by is not None:
            self.journal.update_request(rid, error=reply.error, error_by=reply.error_by)
        if self.auth is not None and (auth_error := challenge_error(reply)) is not None:
            self.journal.update_group(rid, "auth", error=auth_error)

    async def normal_answer(self, asked: _Answering, forced: Reply | None) -> Reply | None:
        """An MCP request's answer, unless the client cancels it first (a proxied one is not raced);
        ``close_stream`` frames it as a stream to resume."""
        rid, info, fault = asked.rid, asked.info, asked.fault
        pending = self._normal(asked, forced)
        if info.mcp is None or self.upstream is not None:
            return await pending
        effect = outbound_effect(fault) if fault is not None else None
        if effect is not None:  # the requests the call's tool sends the client carry it
            self.server_messages.armed[rid] = effect
        try:
            reply = await self.cancels.run(rid, info.mcp, fault, pending)
        finally:
            self.server_messages.armed.pop(rid, None)
        if info.mcp.method == "notifications/cancelled" and reply is not None and reply.status == 202:
            self.cancels.heard(rid)
        resumable = shape_of(fault).resumable  # close_stream: a stream to resume (Resumption)
        if resumable is None or reply is None or reply.status != 200 or info.mcp.is_notification:
            return reply
        if reply.listen is None:  # a listen stream ends after its events instead (2026-07-28: no resumption)
            reply = self.resumption.close(rid, info.mcp.session_id, reply, *resumable)
        return reply

    async def _normal(self, asked: _Answering, forced: Reply | None) -> Reply | None:
        rid, incoming, info = asked.rid, asked.incoming, asked.info
        problem = security_problem(incoming.header_pairs, self.options.allowed_origins, self.allowed_hosts)
        if self.upstream is not None and info.kind != "mcp":
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
            return await self.mcp.post(info.mcp, headers, asked.transport, rid)
        principal = info.auth.principal if info.auth is not None else None
        if method == "DELETE":
            return self.mcp.delete(headers.get("Mcp-Session-Id"), principal)
        if method == "GET" and self.mcp.era != "stateless":
            return await self._get(asked, principal)
        return Reply(405, None, {"Allow": "POST" if self.mcp.era == "stateless" else "POST, DELETE"})

    async def _get(self, asked: _Answering, principal: str | None) -> Reply | None:
        """A session-era ``GET``: a stream resumed (``Last-Event-ID``) or opened (``get_stream=True``),
        else 405. ``None``: the transport served the stream."""
        headers = asked.incoming.headers
        sid, last = headers.get("Mcp-Session-Id"), headers.get("Last-Event-ID")
        if last is None and not self.mcp.get_stream:
            return Reply(405, None, {"Allow": "POST, DELETE"})
        problem = self.mcp.check_session(sid, principal)
        if problem is not None:
            return problem
        found = self.resumption.replay(asked.rid, sid, last) if last is not None else None
        if isinstance(found, Reply):
            return found
        # a fresh GET stream, or one resumed: replayed, then live
        await asked.transport.event_stream(found, asked.fault)
        return None

    def _authorization_server(self, rid: int, incoming: Incoming) -> Reply:
        """With ``auth=``, a request outside the MCP endpoint: the authorization server's, else 404; its
        grant, issued token and client go to the journal."""
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

    def with_ids(self, asked: _Answering, reply: Reply) -> Reply:
        """An event-stream answer in a session of the fake, its events given ids and kept for resumption
        (not a proxied one, nor ``malformed_json``'s half event, which a replay would undo)."""
        req = asked.info.mcp
        if req is None or req.session_id is None or req.is_notification or self.upstream is not None:
            return reply
        halves = shape_of(asked.fault).halves
        if reply.events is not None or reply.status != 200 or reply.payload is None or halves:
            return reply
        priming = primes(asked.incoming.headers.get("MCP-Protocol-Version"))
        return self.resumption.frame(asked.rid, req.session_id, reply, priming=priming)


#: What holds requests after ``Sidecar.freeze()`` (faults are frozen values: one serves every sidecar).
FREEZE = F.Freeze()


def _hostname(url: str) -> str:
    """The URL's host name, lower case; ``""`` for none or a malformed URL (``http://[::1``)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _same_origin(origin: str) -> str:
    """An origin as origins compare (RFC 6454): scheme and host in lower case, the scheme's default port
    left out; one that is not scheme://host[:port] (``null``, a malformed one, a path) as it is."""
    try:
        url = urlsplit(origin)
        port, host = url.port, url.hostname
    except ValueError:
        return origin
    if not host or "@" in url.netloc or url.path or url.query or url.fragment:
        return origin
    host = f"[{host}]" if ":" in host else host
    elided = port is None or port == {"http": 80, "https": 443}.get(url.scheme)
    return f"{url.scheme}://{host}" + ("" if elided else f":{port}")


def security_problem(
    headers: Iterable[tuple[str, str]],
    allowed_origins: Iterable[str],
    allowed_hosts: frozenset[str] | None = None,
) -> Reply | None:
    """The client error for an MCP request whose headers must not be trusted (``None``: they pass): a
    :data:`SINGLE_HEADERS` header repeated (400), an ``Origin`` neither loopback nor one of
    ``allowed_origins`` (403: the DNS-rebinding check the MCP spec asks of local servers), or, with
    ``allowed_hosts``, a ``Host`` neither loopback nor one of them (403)."""
    seen: dict[str, str] = {}
    repeated: set[str] = set()
    for name, value in headers:  # every MCP request: one pass, only the single headers kept
        lower = name.lower()
        if lower in seen:
            repeated.add(lower)
        elif lower in _SINGLE:
            seen[lower] = value
    origin, host = seen.get("origin", ""), seen.get("host", "")
    if repeated:
        first = next(h for h in SINGLE_HEADERS if h.lower() in repeated)
        return client_error(INVALID_REQUEST, f"Bad Request: the {first} header appears more than once")
    foreign = origin and not is_loopback_host(_hostname(origin))
    if foreign and _same_origin(origin) not in map(_same_origin, allowed_origins):
        return client_error(INVALID_REQUEST, f"Forbidden: Origin {origin!r} is not allowed", status=403)
    if allowed_hosts is not None and host:
        name = _hostname("//" + host)  # "": no host at all, never loopback nor allowed
        if not is_loopback_host(name) and name not in allowed_hosts:
            return client_error(
                INVALID_REQUEST,
                f"Forbidden: Host {host!r} is not allowed (not loopback: a DNS-rebinding request; a proxying "
                "sidecar refuses it for its upstream, which would only see the sidecar's own Host)",
                status=403,
            )
    return None
