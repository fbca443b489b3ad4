"""The transport-free steps of answering one request, shared by every backend (the socket sidecar,
the in-process one): what the journal records of a classified request, which fault fires, the
security checks every MCP request passes, and the answers that need no MCP dispatch.

A backend turns its bytes into a :class:`~pytest_mcpfaults.sidecar.routing.RequestInfo` and the
header pairs it received, calls these in order, and turns the :class:`~pytest_mcpfaults.sidecar.mcp.Reply`
into bytes. What needs a live connection (holds, GET event streams, body faults) stays in the socket
backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.journal import Journal
from pytest_mcpfaults.sidecar.mcp import Reply, client_error
from pytest_mcpfaults.sidecar.routing import PlanEntry, RequestInfo, pick
from pytest_mcpfaults.validation import is_loopback_host

__all__ = [
    "SINGLE_HEADERS",
    "choose_fault",
    "journal_classified",
    "method_not_allowed",
    "origin_allowed",
    "plain_reply",
    "security_problem",
]

#: Headers a request may carry once: first-wins and last-wins readers would disagree about a repeat.
SINGLE_HEADERS = ("Origin", "Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Host")


def journal_classified(journal: Journal, rid: int, info: RequestInfo, session_header: str | None) -> None:
    """Record what classifying request ``rid`` found: its MCP method, tool, session and era."""
    if info.mcp is not None:
        m = info.mcp
        journal.update_request(rid, mcp_method=m.method, tool=m.tool, session_id=m.session_id, era=m.era)
    elif info.kind == "mcp" and session_header:
        journal.update_request(rid, session_id=session_header, era="session")


def choose_fault(
    plan: Sequence[PlanEntry], info: RequestInfo, journal: Journal, rid: int
) -> tuple[F.Fault | None, F.TriggerState | None]:
    """The fault that fires on request ``rid`` (:func:`~pytest_mcpfaults.sidecar.routing.pick`),
    recorded on the request and counted in ``fired``."""
    fault, state = pick(plan, info)
    if fault is not None:
        journal.update_request(rid, fault=str(fault), fault_kind=fault.kind)
        journal.add_fired(fault.kind)
    return fault, state


def plain_reply(info: RequestInfo) -> Reply | None:
    """The answer to a request outside the MCP endpoint: ``/health`` 200, anything else 404; ``None``
    for the MCP endpoint."""
    if info.kind == "health":
        return Reply(200, {"status": "ok"}, sse=False)
    if info.kind == "other":
        return Reply(404, {"error": "Not Found"}, sse=False)
    return None


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


def security_problem(headers: Iterable[tuple[str, str]], allowed_origins: Iterable[str]) -> Reply | None:
    """The client-error answer for an MCP request whose headers must not be trusted: a
    :data:`SINGLE_HEADERS` header sent twice (400), or an ``Origin`` that is not allowed (403);
    ``None`` when they pass. ``headers`` are every (name, value) pair received, repeats included."""
    seen: dict[str, list[str]] = {}
    for name, value in headers:
        seen.setdefault(name.lower(), []).append(value)
    twice = [h for h in SINGLE_HEADERS if len(seen.get(h.lower(), ())) > 1]
    if twice:
        return client_error(-32600, f"Bad Request: the {twice[0]} header appears more than once")
    origin = (seen.get("origin") or [""])[0]
    if origin and not origin_allowed(origin, allowed_origins):
        return client_error(-32600, f"Forbidden: Origin {origin!r} is not allowed", status=403)
    return None


def method_not_allowed(stateless: bool) -> Reply:
    """405 for an HTTP method the MCP endpoint does not serve, with the ``Allow`` of the era."""
    return Reply(405, None, {"Allow": "POST" if stateless else "POST, DELETE"})
