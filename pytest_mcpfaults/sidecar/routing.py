"""Which fault answers a request, and the reply an answer-level fault forces. Pure: no I/O.

Shared by the socket sidecar (:mod:`pytest_mcpfaults.sidecar.server`) and the in-process backend
(:mod:`pytest_mcpfaults.inprocess`), so both pick the same fault for the same request sequence and
answer it with the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.journal import RequestRecord
from pytest_mcpfaults.sidecar.mcp import McpEndpoint, McpRequest, Reply, rpc_error, tool_result
from pytest_mcpfaults.triggers import Target, parse_target

__all__ = [
    "PlanEntry",
    "RequestInfo",
    "RouteKind",
    "applies",
    "classify",
    "forced_reply",
    "jitter",
    "pick",
    "record_matches",
]

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

    def matches(self, target: str | Target) -> bool:
        """Whether a trigger target (see :class:`~pytest_mcpfaults.faults.Trigger`) names this request."""
        t = parse_target(target) if isinstance(target, str) else target
        kind = t.kind
        if kind == "any":
            return True
        if kind == "endpoint":
            return self.kind == t.value
        if kind == "path":
            return self.path == t.value
        if kind == "request":
            return self.method == t.verb and self.path == t.value
        if self.mcp is None:
            return False
        if kind == "tool":
            return self.mcp.method == "tools/call" and self.mcp.tool == t.value
        return self.mcp.method == t.value


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
    mcp = McpRequest({"params": {"name": record.tool}, "id": 0}, record.mcp_method, 0, record.session_id, era)
    return RequestInfo(record.method, record.path, kind, mcp if record.mcp_method else None).matches(target)


def classify(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    mcp_path: str,
    health_path: str | None,
    endpoint: McpEndpoint,
) -> RequestInfo:
    """Classify a request; a POST to the MCP endpoint is parsed as JSON-RPC."""
    if path == mcp_path:
        if method != "POST":
            return RequestInfo(method, path, "mcp", None)
        parsed = endpoint.parse(headers, body)
        if isinstance(parsed, Reply):
            return RequestInfo(method, path, "mcp", None, parsed)
        return RequestInfo(method, path, "mcp", parsed)
    kind: RouteKind = "health" if health_path is not None and path == health_path else "other"
    return RequestInfo(method, path, kind, None)


def applies(fault: F.Fault, info: RequestInfo) -> bool:
    """Whether a fault kind can answer this request at all (tool faults answer ``tools/call`` only)."""
    if isinstance(fault, (F.ToolError, F.BackendGone, F.ErrorPayload)):
        return info.mcp is not None and info.mcp.method == "tools/call"
    if isinstance(fault, (F.SessionExpired, F.JsonRpcError)):
        return info.mcp is not None and not info.mcp.is_notification
    return True


def pick(plan: Sequence[PlanEntry], info: RequestInfo) -> tuple[F.Fault | None, F.TriggerState | None]:
    """The first fault in plan order that fires on this request. Every matching fault counts the
    request (``nth``/``after`` see it); a fault that would fire but lost to an earlier one keeps its
    ``times`` budget."""
    chosen: tuple[F.Fault | None, F.TriggerState | None] = (None, None)
    for fault, state in plan:
        if not info.matches(fault.trigger.selector) or not applies(fault, info):
            continue
        fires = state.consider()
        if fires and isinstance(fault, F.Flap) and ((state.seen - 1) // fault.every) % 2 == 0:
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


def forced_reply(
    fault: F.Fault | None, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    """The reply an answer-level fault forces, or ``None`` to answer normally. ``SessionExpired``
    also ends the transport session on ``endpoint``."""
    mid = info.mcp.id if info.mcp else None
    if isinstance(fault, F.Status):
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        return Reply(fault.code, {"error": fault.body or f"injected HTTP {fault.code}"}, headers, sse=False)
    if isinstance(fault, F.Flap):
        return Reply(fault.code, {"error": f"injected HTTP {fault.code} (flapping)"}, sse=False)
    if isinstance(fault, F.Absent):
        return Reply(404, {"error": "Not Found"}, sse=False)
    if isinstance(fault, F.Terminating):
        r = rpc_error(-32000, "Service Unavailable: the server is terminating", mid, status=503)
        r.headers["Connection"] = "close"
        return r
    if isinstance(fault, F.JsonRpcError):
        return rpc_error(fault.code, fault.message, mid)
    if isinstance(fault, F.SessionExpired):
        sid = info.mcp.session_id if info.mcp else None
        if sid:
            endpoint.end_session(sid)
        return rpc_error(-32600, "Session not found", status=404)
    if isinstance(fault, (F.ToolError, F.BackendGone, F.ErrorPayload)) and info.mcp is not None:
        if isinstance(fault, F.ToolError):
            result = tool_result(fault.text, is_error=True)
        elif isinstance(fault, F.ErrorPayload):  # a successful result whose JSON says what failed
            result = tool_result({"error": fault.error_message(info.mcp.tool, info.mcp.arguments)})
        else:
            url = fault.service_url or service_url
            sid = info.mcp.arguments.get("session_id")
            msg = f"Service at {url} is no longer alive"
            if info.mcp.tool == "delete_session" and sid is not None:
                msg = f"Error closing session {sid}: {msg}"
            result = tool_result({"error": msg})
        if info.mcp.era == "stateless":
            result["resultType"] = "complete"
        return Reply(200, {"jsonrpc": "2.0", "id": mid, "result": result})
    return None
