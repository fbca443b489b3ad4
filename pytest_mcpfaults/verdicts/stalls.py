"""A test that stopped making progress while the sidecar holds nothing: found from the journals,
worded as a verdict. Patience covers the requests the sidecar holds; this covers the other hangs.

A *stall*: a fault did its work (a ``die``, a cut body, an error answer) and the client wedged itself
on what it saw (mcp 1.x's ``ClientSession`` waits for ever on a request whose connection dropped). An
*idle* test: every request was answered and no fault fired since, yet the harness waits on itself (an
event its own reader never sets, a future nobody resolves). The sidecar cannot see the client, but it
can see that nothing has happened since for the patience budget: :func:`find_stall` and
:func:`find_idle` say so from the journals alone; where the test's thread was blocked (and, for an
idle test, that it was not computing: ``_pytest.blocked.Stillness``) is the pytest glue's to add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_mcpfaults.core.errors import SidecarState
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import ConnectionRecord, FiredRecord, RequestRecord
from pytest_mcpfaults.verdicts.clients import client_family, client_seen
from pytest_mcpfaults.verdicts.violation import hang_record


class StalledServer(Protocol):
    """What a stall is read from: a :class:`~pytest_mcpfaults.Sidecar` or a stdio server."""

    @property
    def journal(self) -> Journal: ...
    @property
    def state(self) -> SidecarState: ...
    @property
    def url(self) -> str: ...
    @property
    def mcp_path(self) -> str: ...
    @property
    def patience(self) -> float | None: ...


@dataclass(frozen=True)
class Stall:
    """No progress after the fault that fired last (``request``: ``None`` for a runtime call such as
    ``kill()``); ``background``: the client's own event stream since; ``client``: the latest request
    with a ``User-Agent``."""

    fired: FiredRecord
    request: RequestRecord | None
    budget: float
    idle: float
    state: SidecarState
    connections_since: tuple[ConnectionRecord, ...]
    background: tuple[RequestRecord, ...]
    client: RequestRecord | None

    @property
    def what(self) -> str:
        return self.fired.what or self.fired.kind


def find_stall(server: StalledServer, others: Sequence[StalledServer] = ()) -> Stall | None:
    """The stall of ``server``, or ``None``: a fault has fired, no request has arrived since but the
    client's own event stream (a ``GET`` on the MCP endpoint, which MCP clients reopen by themselves),
    at ``server`` or at any of ``others`` (the test's other servers: a fallback to a replica is
    progress), none is in flight, and at least the patience budget has passed since the fault and since
    the last answer ended (a delayed one, a hold the client let go of; a hold patience ended is its
    verdict's). A server with no budget (``patience=None``), not started or stopped, never stalls; nor
    does one whose last fault says ``expect_hang=True``."""
    budget = server.patience
    journal = server.journal
    fired, last = journal.last_activity
    if budget is None or fired is None or fired.expect_hang:
        return None
    idle = journal.now() - fired.at
    if idle < budget:
        return None
    fired_on = _request(journal, fired.request_id)
    if fired_on is not None and fired_on.held and fired_on.hold in (None, "patience"):
        return None  # a hold is patience's to judge: still held, or its violation is on the way
    kept = _kept_alive(server)
    if any(c.alive for c in kept):
        return None  # so is a stdio child a fault keeps running after the client asked it to end
    later: tuple[RequestRecord, ...] = ()
    if last is not None and last > fired.at:
        later = tuple(r for r in journal.requests_since(fired.next_request) if r.id != fired.request_id)
        if any(not own_event_stream(r, server.mcp_path) for r in later):
            return None
    fault_at = journal.t0 + fired.at  # on the monotonic clock every journal counts from
    for other in (o for o in others if o is not server):
        for r in reversed(other.journal.requests):  # in start order: the latest first
            if other.journal.t0 + r.started_at <= fault_at:
                break
            if not own_event_stream(r, other.mcp_path):
                return None
    state = server.state
    if state not in ("running", "dead", "frozen"):
        return None
    requests = journal.requests
    connections = journal.connections
    if state != "dead":
        open_ids = {c.id for c in connections if c.open}
        if any(r.ended_at is None and r.conn_id in open_ids for r in requests):
            return None  # a request still in flight is the sidecar's to answer (patience covers holds)
    # the clock starts when the last answer ended (a delayed one, a hold the client let go of), if later;
    # the client's own event stream is not progress, so its answers do not restart it (a client that
    # reopens a refused GET every half second would otherwise hold the verdict off for as long as it does)
    ends = (
        r.ended_at for r in requests if r.ended_at is not None and not own_event_stream(r, server.mcp_path)
    )
    exits = (c.exited_at for c in kept if c.exited_at is not None)  # the client's wait on it ended there
    idle = journal.now() - max([fired.at, *ends, *exits])
    if idle < budget:
        return None
    client = next((r for r in reversed(requests) if r.user_agent), None)
    since = tuple(c for c in connections if c.opened_at > fired.at or (c.closed_at or 0) > fired.at)
    return Stall(fired, fired_on, budget, idle, state, since, later, client)


def _kept_alive(server: StalledServer) -> list[Any]:
    """The stdio children of ``server`` a fault kept running after the client asked them to end (stdin
    closed under ``ignore_eof``, a signal under ``ignore_sigterm``): the stdio server times that wait
    with its own patience and kills the child when it runs out, a verdict of its own, so the stall clock
    waits for it and starts again when the child is gone (on a loaded machine the two budgets, both
    counted from the fault, raced). A ``Sidecar`` has no children."""
    children = getattr(server, "children", ())
    return [c for c in children if c.ignored_eof or any(s.action == "ignored" for s in c.signals)]


def _request(journal: Journal, rid: int | None) -> RequestRecord | None:
    if rid is None:
        return None
    try:
        return journal.request(rid)
    except KeyError:  # dropped from a bounded journal
        return None


def own_event_stream(r: RequestRecord, mcp_path: str | None) -> bool:
    """A request the client makes by itself, not a step of the test: its event stream (a ``GET`` on the
    MCP endpoint). The stall, idle and harness-process verdicts all leave it out."""
    return r.method == "GET" and r.path == mcp_path


def _since(stall: Stall) -> str:
    bits = [
        f"the client's own `{r.label}` (its event stream) at {r.started_at:.3f} s, answered {r.status}"
        for r in stall.background
    ]
    for c in stall.connections_since:
        if c.opened_at > stall.fired.at and not c.requests:
            bits.append(f"connection #{c.id} opened at {c.opened_at:.3f} s and sent no request")
        if c.closed_at is not None and c.closed_at > stall.fired.at:
            bits.append(f"connection #{c.id} closed by the {c.closed_by or 'peer'} at {c.closed_at:.3f} s")
    state = {
        "dead": "it has been down since (a reconnect is refused: the sidecar cannot see it)",
        "frozen": "it is frozen (a new request would be held, and none came)",
    }.get(stall.state, "it is up and would answer")
    seen = "; ".join(bits) if bits else "nothing else"
    return f"no request reached the sidecar; {seen}; {state}"


def _hint(stall: Stall, stdio: bool) -> str:
    family = "stdio" if stdio else client_family(stall.client.user_agent if stall.client else None)
    bound = {
        "httpx": (
            "if this is the mcp 1.x SDK (it sends this User-Agent): after a dropped or cut answer its "
            "ClientSession's awaiting call never returns by itself (it logs the error and waits on); "
            "bound every call with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=...)) "
            "or session.call_tool(..., read_timeout_seconds=timedelta(seconds=...)); and an event loop "
            "reused across run_until_complete calls keeps the wedged session: after a failure close it "
            "and open a new one (with a new loop)"
        ),
        "httpx2": (
            "if this is the mcp 2.x SDK (it sends this User-Agent): bound the call with "
            "Client(read_timeout_seconds=...) or call_tool(..., read_timeout_seconds=...), and open a new "
            "session after a failure instead of reusing the one that failed"
        ),
        "stdio": (
            "bound every call on the stdio session (mcp: ClientSession(read, write, "
            "read_timeout_seconds=...)), and after a failure (a server that died or stopped answering) "
            "start a new one instead of waiting on the session that failed"
        ),
    }.get(family)
    return bound or (
        "give every request to the sidecar a timeout below the budget, and after a failure open a new "
        "connection (and MCP session) instead of waiting on the one that failed"
    )


def stall_verdict(server: StalledServer, stall: Stall, blocked: str, *, stdio: bool = False) -> str:
    """``blocked``: where the test's thread was, already formatted (the pytest glue's to find)."""
    r = stall.request
    on = f" on `{r.label}` (request #{r.id})" if r is not None else " (the test's call)"
    lines = [
        f"the test made no progress for {stall.idle:.1f} s (the {stall.budget:g} s patience budget) after "
        f"`{stall.what}` fired at {server.url}:",
        "",
        f"   fired: `{stall.what}`{on}, {stall.fired.at:.3f} s after the sidecar started",
        f"   since then: {_since(stall)}",
    ]
    if stall.client is not None and not stdio:
        lines.append(f"   client seen: {client_seen(stall.client)}")
    lines.append(f"   hint: {_hint(stall, stdio)}")
    lines += ["", blocked]
    return "\n".join(lines)


def stall_record(stall: Stall, message: str, url: str | None) -> dict[str, object]:
    first, r = message.splitlines()[0], stall.request
    return {
        "kind": "no_progress",
        **hang_record(first, message, stall.what, stall.budget, stall.idle, r, stall.client, url),
    }


@dataclass(frozen=True)
class Idle:
    """No progress since the answer to the test's last request (``request``, at ``server``) ended."""

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
    """``switch``: how a test that waits on purpose says so (the glue's marker and ini names)."""
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
    r, first = idle.request, message.splitlines()[0]
    record = hang_record(first, message, None, idle.budget, idle.idle, r, r, idle.server.url)
    return {"kind": "idle", **record, "answered": r.status}
