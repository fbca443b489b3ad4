"""Which fault answers a request, and the reply an answer-level fault forces; pure, shared by every
backend, so all pick the same fault and answer it with the same bytes.

The answer phase's behaviour, one function per kind registered on a :func:`functools.singledispatch`
dispatcher (a subclass answers as its base): :func:`answer_reply` (the reply), :func:`applies` (which
requests it can answer), :func:`resting` (a flap's healthy turns). Facts of a kind (whether it ends the
session, rewrites an upstream's answer, revokes a token) are class attributes on the kind.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import singledispatch
from typing import Any, Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.auth.server import AuthInfo, challenge, refusal
from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.faults.triggers import Target, parse_target
from pytest_mcpfaults.mcp.endpoint import McpEndpoint
from pytest_mcpfaults.mcp.jsonrpc import INVALID_REQUEST, McpRequest, Reply, rpc_error, tool_result

PlanEntry = tuple[F.Fault, F.TriggerState]
RouteKind = Literal["health", "mcp", "other"]
"""Which endpoint a request went to (:attr:`RequestInfo.kind`)."""


@dataclass(frozen=True)
class RequestInfo:
    """What a trigger can match on: HTTP method, path, endpoint kind and the parsed MCP message."""

    method: str
    path: str
    kind: RouteKind
    mcp: McpRequest | None
    bad_body: Reply | None = None  # the error reply for a POST body that is not one JSON-RPC message
    #: With ``auth=``: the bearer token an MCP request carried (what the auth kinds answer).
    auth: AuthInfo | None = None
    #: Seconds the request's connection had been idle when it came (``Incoming.idle``).
    idle: float | None = None

    def matches(self, target: str | Target) -> bool:
        """Whether a trigger target (see :class:`~pytest_mcpfaults.faults.Trigger`) names this request."""
        t = parse_target(target) if isinstance(target, str) else target
        return _MATCHES[t.kind](self, t)


_MATCHES: dict[str, Callable[[RequestInfo, Target], bool]] = {
    "any": lambda i, t: True,
    "endpoint": lambda i, t: i.kind == t.value,
    "path": lambda i, t: i.path == t.value,
    "request": lambda i, t: i.method == t.verb and i.path == t.value,
    "tool": lambda i, t: i.mcp is not None and i.mcp.method == "tools/call" and i.mcp.tool == t.value,
    "prompt": lambda i, t: i.mcp is not None and i.mcp.prompt == t.value,
    "resource": lambda i, t: i.mcp is not None and i.mcp.resource == t.value,
    "method": lambda i, t: i.mcp is not None and i.mcp.method == t.value,
}


def record_matches(
    record: RequestRecord,
    target: str,
    *,
    mcp_path: str,
    health_path: str | None,
    legacy_paths: Sequence[str] = (),
) -> bool:
    """Whether a journal record names a request that ``target`` matches (for assertions by target);
    ``legacy_paths``: the legacy SSE transport's paths, MCP requests too."""
    kind: RouteKind = "other"
    if record.path in (mcp_path, health_path, *legacy_paths):
        kind = "health" if record.path == health_path else "mcp"
    era = record.era or "session"  # not matched on: any era will do
    params = {"name": record.tool or record.prompt, "uri": record.resource}
    mcp = McpRequest({"params": params, "id": 0}, record.mcp_method, 0, record.session_id, era)
    return RequestInfo(record.method, record.path, kind, mcp if record.mcp_method else None).matches(target)


@singledispatch
def applies(fault: F.Fault, info: RequestInfo) -> bool:
    """Whether a fault kind can answer this request at all (tool faults answer ``tools/call`` only)."""
    return True


@applies.register(F.ToolError)
@applies.register(F.BackendGone)
@applies.register(F.ErrorPayload)
@applies.register(F.DropClientAnswer)  # its tool's requests to the client are what it acts on
def _applies_to_tool_calls(fault: F.Fault, info: RequestInfo) -> bool:
    return info.mcp is not None and info.mcp.method == "tools/call"


@applies.register(F.SessionExpired)
@applies.register(F.JsonRpcError)
@applies.register(F.ProgressThenStall)
@applies.register(F.NotificationFlood)
def _applies_to_requests(fault: F.Fault, info: RequestInfo) -> bool:
    return info.mcp is not None and not info.mcp.is_notification


@applies.register
def _applies_malformed(fault: F.MalformedServerRequest, info: RequestInfo) -> bool:
    """A ``tools/call``; in the stateless era not ``no_id`` (an input request's key is its id)."""
    era_ok = info.mcp is not None and (info.mcp.era == "session" or fault.form != "no_id")
    return era_ok and _applies_to_tool_calls(fault, info)


@applies.register(F.DuplicateServerRequest)
def _applies_to_session_calls(fault: F.Fault, info: RequestInfo) -> bool:
    """A session-era ``tools/call``: the stateless era has no server requests on a stream to repeat."""
    return info.mcp is not None and info.mcp.method == "tools/call" and info.mcp.era == "session"


@applies.register(F.Unauthorized)
def _applies_to_mcp(fault: F.Fault, info: RequestInfo) -> bool:
    return info.kind == "mcp"


@applies.register
def _applies_past_expiry(fault: F.TokenExpired, info: RequestInfo) -> bool:
    """A token past its ``calls`` (a request without a token is refused by the sidecar itself)."""
    return (
        info.kind == "mcp"
        and info.auth is not None
        and info.auth.token is not None
        and (info.auth.calls >= fault.calls)
    )


@applies.register
def _applies_without_scope(fault: F.InsufficientScope, info: RequestInfo) -> bool:
    """A request whose token was not granted every scope of ``fault.scope``."""
    held = info.auth.scopes if info.auth is not None else frozenset()
    return info.kind == "mcp" and not set(fault.scope.split()) <= held


@applies.register
def _applies_after_idle(fault: F.Blackhole, info: RequestInfo) -> bool:
    """With ``idle``: a request on a connection idle at least that long (a pooled connection reused)."""
    return fault.idle is None or (info.idle is not None and info.idle >= fault.idle)


@singledispatch
def resting(fault: F.Fault, state: F.TriggerState) -> bool:
    """Whether a fault whose trigger fired on this request lets it through all the same (a flap's
    healthy turn)."""
    return False


@resting.register
def _flap_resting(fault: F.Flap, state: F.TriggerState) -> bool:
    return ((state.seen - 1) // fault.every) % 2 == 0


def pick(plan: Sequence[PlanEntry], info: RequestInfo) -> tuple[F.Fault | None, F.TriggerState | None]:
    """The first fault in plan order that fires on this request. Every matching fault counts the
    request (``nth``/``after`` see it); a fault that would fire but lost to an earlier one keeps its
    ``times`` budget."""
    chosen: tuple[F.Fault | None, F.TriggerState | None] = (None, None)
    for fault, state in plan:
        if not info.matches(fault.trigger.selector) or not applies(fault, info):
            continue
        fires = state.consider()
        if fires and resting(fault, state):
            state.fired -= 1  # healthy phase of the flap
            fires = False
        if fires and chosen[0] is None:
            chosen = (fault, state)
        elif fires:  # an earlier fault won: this one saw the request but did not fire (times intact)
            state.fired -= 1
    return chosen


def jitter(fault: F.Delay, fired: int) -> float:
    """The jitter of the ``fired``-th firing of a :class:`~pytest_mcpfaults.faults.Delay` (seeded)."""
    if not fault.jitter:
        return 0.0
    return random.Random(fault.seed * 1_000_003 + fired).random() * fault.jitter


@singledispatch
def answer_reply(fault: F.Fault, info: RequestInfo, endpoint: McpEndpoint, service_url: str) -> Reply | None:
    """The reply ``fault`` forces on the request ``info`` (``None``: answered normally). One function
    per answer kind, registered with ``@answer_reply.register``; a kind of another phase (or a
    subclass of one) is answered normally, and shaped or held elsewhere."""
    return None


@answer_reply.register
def _status(fault: F.Status, info: RequestInfo, endpoint: McpEndpoint, service_url: str) -> Reply | None:
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
    return Reply(fault.code, {"error": fault.body or f"injected HTTP {fault.code}"}, headers, sse=False)


@answer_reply.register
def _flap(fault: F.Flap, info: RequestInfo, endpoint: McpEndpoint, service_url: str) -> Reply | None:
    return Reply(fault.code, {"error": f"injected HTTP {fault.code} (flapping)"}, sse=False)


@answer_reply.register
def _absent(fault: F.Absent, info: RequestInfo, endpoint: McpEndpoint, service_url: str) -> Reply | None:
    return Reply(404, {"error": "Not Found"}, sse=False)


@answer_reply.register
def _terminating(
    fault: F.Terminating, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    r = rpc_error(
        -32000,
        "Service Unavailable: the server is terminating",
        info.mcp.id if info.mcp else None,
        status=503,
    )
    r.headers["Connection"] = "close"
    return r


@answer_reply.register
def _jsonrpc_error(
    fault: F.JsonRpcError, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    return rpc_error(fault.code, fault.message, info.mcp.id if info.mcp else None)


@answer_reply.register
def _session_expired(
    fault: F.SessionExpired, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    sid = info.mcp.session_id if info.mcp else None
    if sid:
        endpoint.sessions.end(sid)
    return rpc_error(INVALID_REQUEST, "Session not found", status=404)


@answer_reply.register
def _tool_error(
    fault: F.ToolError, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    return _tool_reply(info, tool_result(fault.text, is_error=True))


@answer_reply.register
def _error_payload(
    fault: F.ErrorPayload, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    if info.mcp is None:
        return None
    # a successful result whose JSON says what failed
    message = fault.error_message(info.mcp.tool, info.mcp.arguments, service_url)
    return _tool_reply(info, tool_result({"error": message}))


@answer_reply.register
def _backend_gone(
    fault: F.BackendGone, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    if info.mcp is None:
        return None
    url = fault.service_url or service_url
    sid = info.mcp.arguments.get("session_id")
    msg = f"Service at {url} is no longer alive"
    if info.mcp.tool == "delete_session" and sid is not None:
        msg = f"Error closing session {sid}: {msg}"
    return _tool_reply(info, tool_result({"error": msg}))


def _refused(info: RequestInfo, status: int, error: str, why: str, scope: str | None = None) -> Reply:
    metadata_url = info.auth.metadata_url if info.auth is not None else None
    return refusal(status, challenge(metadata_url, error, why, scope), error, why)


@answer_reply.register
def _unauthorized(
    fault: F.Unauthorized, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    return _refused(
        info, 401, "invalid_token", "the access token is no longer valid (injected: unauthorized)"
    )


@answer_reply.register
def _token_expired(
    fault: F.TokenExpired, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    return _refused(info, 401, "invalid_token", "The access token expired")


@answer_reply.register
def _insufficient_scope(
    fault: F.InsufficientScope, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    why = f"this request needs the scope {fault.scope!r}"
    return _refused(info, 403, "insufficient_scope", why, scope=fault.scope)


def _tool_reply(info: RequestInfo, result: dict[str, Any]) -> Reply | None:
    """A tool fault's JSON-RPC result for the ``tools/call`` in ``info`` (``None``: not an MCP request)."""
    if info.mcp is None:
        return None
    if info.mcp.era == "stateless":
        result["resultType"] = "complete"
    return Reply(200, {"jsonrpc": "2.0", "id": info.mcp.id, "result": result})
