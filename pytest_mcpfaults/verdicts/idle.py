"""A hang with no fault: the test waits on itself after talking MCP, found from the journals.

Every request the test made was answered, no fault fired since, the sidecar is up and holds nothing,
and yet the test does not finish: the harness waits on an event its own reader never sets, a future
nobody resolves. :func:`find_idle` finds that from the journals; whether the test's thread is really
blocked (not computing) is the pytest glue's to add (``_pytest.blocked.Stillness``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.verdicts.stalls import StalledServer, own_event_stream

__all__ = ["Idle", "find_idle", "idle_record", "idle_verdict"]


@dataclass(frozen=True)
class Idle:
    """No progress after the test's last answered request: the sidecar that answered it, the request,
    the budget, and how long nothing has happened since its answer ended."""

    server: StalledServer
    request: RequestRecord
    budget: float
    idle: float


def _busy(server: StalledServer) -> bool:
    """A request of the test still in flight on an open connection (the sidecar's to answer)."""
    open_ids = {c.id for c in server.journal.connections if c.open}
    return any(
        r.ended_at is None and r.conn_id in open_ids and not own_event_stream(r, server.mcp_path)
        for r in server.journal.requests
    )


def find_idle(servers: Sequence[StalledServer]) -> Idle | None:
    """The idle hang of a test that uses ``servers``, or ``None``: among them, the one whose last
    request of the test (not its event stream) ended latest is running (not frozen, dead or stopped)
    with a patience budget, no fault fired on it since that request began, no request of the test is in
    flight on any of them, and the budget has passed since that answer ended."""
    latest: tuple[float, StalledServer, RequestRecord] | None = None
    for server in servers:
        if server.state == "new":
            continue
        if _busy(server):
            return None
        ended = [
            r
            for r in server.journal.requests
            if r.ended_at is not None and not own_event_stream(r, server.mcp_path)
        ]
        if ended:
            last = max(ended, key=lambda r: r.ended_at or 0.0)
            end = server.journal.t0 + (last.ended_at or 0.0)  # on one clock across sidecars
            if latest is None or end > latest[0]:
                latest = (end, server, last)
    if latest is None:
        return None  # the test never talked MCP
    _, server, last = latest
    budget = server.patience
    if budget is None or server.state != "running":
        return None
    fired, _ = server.journal.last_activity
    if fired is not None and fired.at >= last.started_at:
        return None  # a fault fired on it: a stall, or patience, is that fault's verdict
    idle = server.journal.now() - (last.ended_at or 0.0)
    if idle < budget:
        return None
    return Idle(server, last, budget, idle)


def idle_verdict(idle: Idle, blocked: str, switch: str) -> str:
    """The verdict text: the last request, what the sidecar holds (nothing), where the test's thread
    was blocked (``blocked``, already formatted), and what to do (``switch``: how a test that waits on
    purpose says so)."""
    r, url = idle.request, idle.server.url
    fired, _ = idle.server.journal.last_activity
    since = "and no fault fired" if fired is None else "and no fault fired since"
    lines = [
        f"the test made no progress for {idle.idle:.1f} s after its last MCP request `{r.label}` (#{r.id}) "
        f"ended, {since}: the sidecar at {url} is up and idle",
        "",
        f"   last request: `{r.label}` (request #{r.id}), answered {r.status} at {r.ended_at or 0.0:.3f} s "
        "after the sidecar started",
        "   since then: nothing in flight and no request of the test, and the test's thread stayed at the "
        f"same line using no CPU for the {idle.budget:g} s patience budget",
        "   hint: the harness is waiting on itself, not on the sidecar: on an event, future, queue or lock "
        "its own code should have set once the answer came (a reader task that ended or swallowed an "
        "error, a callback never registered, a result put on another queue); bound that wait with a "
        f"timeout. If the test waits on purpose, {switch}",
        "",
        blocked,
    ]
    return "\n".join(lines)


def idle_record(idle: Idle, message: str) -> dict[str, object]:
    """A JSON-ready dict of an idle hang for the per-test record (beside the patience violations)."""
    r = idle.request
    return {
        "kind": "idle",
        "message": message.splitlines()[0],
        "details": message,
        "fault": None,
        "budget": idle.budget,
        "budget_from": "sidecar",
        "waited": round(idle.idle, 3),
        "request": r.label,
        "method": r.method,
        "path": r.path,
        "mcp_method": r.mcp_method,
        "tool": r.tool,
        "era": r.era,
        "answered": r.status,
        "user_agent": r.user_agent,
        "protocol_version": r.protocol_version,
        "connection": r.conn_id,
        "client_closed": None,
        "sidecar": idle.server.url,
        "expected": False,
    }
