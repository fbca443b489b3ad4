"""Session hygiene: what a client owes the sessions it opened, read from the journal (and the client's
spans) at the end of a test. The three duties, and what excuses each, are docs/sessions.md's: end what
you open, start over after a ``404``, keep calling after a failure.

The journal does not tie a session to its ``initialize`` (the id is the answer's), so as many sessions
with no request of their own as there are ``initialize`` requests the client gave up on, or whose
answer a fault cut, are excused: one of those may have opened a session whose id never reached the
client (or whose transport the fault ended, as for any other request it cut).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pytest_mcpfaults.core.records import ConnectionRecord, RequestRecord

if TYPE_CHECKING:
    from pytest_mcpfaults.spans.records import RecordedSpan

#: How many of a session's requests a verdict lists.
SHOWN = 6
#: The span attributes of a client's MCP request (OpenTelemetry's MCP semantic conventions).
METHOD_ATTR = "mcp.method.name"
ID_ATTR = "jsonrpc.request.id"
#: Seconds of slack between a span's clock and a journal's when matching a call to its request.
SLACK = 0.05


class SessionHygieneError(AssertionError):
    """A client did not end a session it opened, or kept calling one the sidecar had lost."""


@dataclass(frozen=True)
class SessionProblem:
    """One duty a client broke: ``never_ended`` (``requests``: the session's), ``used_after_lost``
    (``lost``: the ``404`` that told it; ``requests``: the calls on the dead id after it) or
    ``call_never_reached``."""

    session_id: str
    kind: Literal["never_ended", "used_after_lost", "call_never_reached"]
    requests: tuple[RequestRecord, ...]
    lost: RequestRecord | None = None
    #: ``call_never_reached``: the client's spans of the calls that failed without reaching the
    #: sidecar (``requests``: the failed call after which they came).
    calls: tuple[RecordedSpan, ...] = ()

    def describe(self) -> str:
        sid = self.session_id[:12] + ("…" if len(self.session_id) > 12 else "")
        shown = ", ".join(f"`{r.label}` (#{r.id})" for r in self.requests[:SHOWN])
        more = f" and {len(self.requests) - SHOWN} more" if len(self.requests) > SHOWN else ""
        if self.kind == "never_ended":
            used = f"its requests: {shown}{more}" if self.requests else "no request after its `initialize`"
            return (
                f"session {sid} was never ended: no `DELETE` came for it ({used}); "
                "it was still open when the test's fixtures were done"
            )
        if self.kind == "call_never_reached":
            failed = self.requests[0]
            why = f"`{failed.fault}` fired" if failed.fault else f"answered {failed.status}"
            calls = "; ".join(_call(span) for span in self.calls[:SHOWN])
            more = f" and {len(self.calls) - SHOWN} more" if len(self.calls) > SHOWN else ""
            return (
                f"after `{failed.label}` (#{failed.id}) failed ({why}), the client's later calls "
                f"failed without reaching the sidecar: {calls}{more}"
            )
        assert self.lost is not None
        return (
            f"session {sid} was lost (`{self.lost.label}` #{self.lost.id} was answered 404) and the "
            f"client kept calling it instead of sending a new `initialize`: {shown}{more}"
        )


def session_problems(
    requests: Sequence[RequestRecord],
    live: Iterable[str],
    *,
    owed: bool = True,
    connections: Iterable[ConnectionRecord] = (),
) -> list[SessionProblem]:
    """``live``: the session ids still open at the end; ``owed=False`` (the test keeps its sessions)
    skips the ``never_ended`` duty; ``connections``: the journal's, to tell a fault that cut its
    connection from one answered in full."""
    problems: list[SessionProblem] = []
    if owed:
        deleted = {r.session_id for r in requests if r.method == "DELETE" and r.session_id}
        last = {r.conn_id: r.id for r in sorted(requests, key=lambda r: r.id)}  # what a close cut
        severed = {last[c.id] for c in connections if c.closed_by == "sidecar" and c.id in last}
        faulted = {r.session_id for r in requests if r.fault and r.session_id and _cut(r, severed)}
        # an initialize the client gave up on, or whose answer a fault cut (a reset before the status
        # line: the id never reached the client), may have opened a session the client cannot end
        abandoned = sum(
            1
            for r in requests
            if r.mcp_method == "initialize" and (r.fault or r.client_closed) and _cut(r, severed)
        )
        for sid in live:
            if sid not in deleted and sid not in faulted:
                mine = tuple(r for r in requests if r.session_id == sid)
                if not mine and abandoned:
                    abandoned -= 1  # maybe the session an abandoned initialize opened
                    continue
                problems.append(SessionProblem(sid, "never_ended", mine))
    told: dict[str, RequestRecord] = {}
    for r in requests:
        if r.status == 404 and r.session_id and r.session_id not in told:
            told[r.session_id] = r
    for sid, lost in told.items():
        since = lost.ended_at if lost.ended_at is not None else lost.started_at
        later = tuple(
            r for r in requests
            if r.session_id == sid and r.id != lost.id and r.method != "DELETE" and r.started_at > since
        )  # fmt: skip
        if later:
            problems.append(SessionProblem(sid, "used_after_lost", later, lost))
    return problems


def _cut(r: RequestRecord, severed: set[int]) -> bool:
    """The fault on ``r`` may have ended the client's transport, and with it the ``DELETE``: no answer
    or an HTTP error (mcp 1.x's transport ends on one), a hold, a close by either side (``severed``:
    the last request of each connection the sidecar closed). An answer sent in full with a success
    status on a connection left open (a ``tool_error``, a ``delay``) ends neither SDK's transport
    (measured: mcp 2.3 and 1.30 both send their ``DELETE`` after one)."""
    return (r.status or 500) >= 400 or r.held is not None or r.client_closed or r.id in severed


def _call(span: RecordedSpan) -> str:
    rpc_id = span.attributes.get(ID_ATTR)
    named = f"JSON-RPC id {rpc_id}, " if rpc_id is not None else ""
    error = f": {span.status_description}" if span.status_description else ""
    return f"`{span.name}` ({named}span ERROR{error})"


def client_calls(spans: Sequence[RecordedSpan]) -> list[RecordedSpan]:
    """CLIENT spans with an ``mcp.method.name`` other than a notification's, in start order. A call
    span with a call span of the same method inside it (a framework's span around the SDK's) is one
    call: the inner one is kept."""
    calls = [
        s
        for s in spans
        if s.kind == "CLIENT"
        and isinstance(s.attributes.get(METHOD_ATTR), str)
        and not s.attributes[METHOD_ATTR].startswith("notifications/")
    ]
    by_uid: dict[int | None, RecordedSpan] = {s.uid: s for s in spans if s.uid is not None}
    outer: set[int | None] = set()
    for call in calls:
        parent = by_uid.get(call.parent_uid)
        while parent is not None:
            if parent.attributes.get(METHOD_ATTR) == call.attributes[METHOD_ATTR]:
                outer.add(parent.uid)
            parent = by_uid.get(parent.parent_uid)
    return sorted((c for c in calls if c.uid is None or c.uid not in outer), key=lambda s: s.start_time or 0)


def unreached_calls(
    requests: Sequence[RequestRecord],
    received: Sequence[tuple[RequestRecord, float]],
    calls: Sequence[RecordedSpan],
    clock: float,
) -> list[SessionProblem]:
    """The calls that failed in the client after a call failed at this sidecar: ``requests`` is its
    journal, ``clock`` its journal's :meth:`~pytest_mcpfaults.core.journal.Journal.epoch`; ``received`` every
    request any sidecar of the test received, with the wall time it came; ``calls`` the client's
    call spans (:func:`client_calls`). A call is matched to a request of its method received while
    its span was open (and of its JSON-RPC id, when the span names one); one that failed unmatched is
    not held against the client once a later call reached this sidecar."""
    from pytest_mcpfaults.faults.kinds import fault_kinds

    kinds = fault_kinds()
    if any(r.fault_kind in kinds and kinds[r.fault_kind].stops_reading for r, _ in received):
        return []  # the sidecar may not have read what was sent: nothing to hold against the client
    failed = [r for r in requests if r.mcp_method and (r.fault is not None or _refused(r))]
    if not failed:
        return []
    first = min(failed, key=lambda r: r.started_at)
    since = clock + first.started_at - SLACK
    unmatched = list(received)
    missing: list[RecordedSpan] = []
    for span in calls:
        if span.start_time is None or span.end_time is None:
            continue  # still open: its request may be on its way
        start, end = span.start_time / 1e9 - SLACK, span.end_time / 1e9 + SLACK
        method, rpc_id = span.attributes[METHOD_ATTR], span.attributes.get(ID_ATTR)
        match = next(
            (
                i
                for i, (r, at) in enumerate(unmatched)
                if r.mcp_method == method
                and (rpc_id is None or str(r.rpc_id) == str(rpc_id))
                and start <= at <= end
            ),
            None,
        )
        if match is not None:
            del unmatched[match]
        elif span.status_code == "ERROR" and start >= since:
            missing.append(span)
    # the duty is that a later call still reaches the sidecar: a call after the failed one did (the
    # failed span may be a call to another MCP server, which the span does not name)
    last = max(
        (clock + r.started_at for r in requests if r.mcp_method and r.rpc_id is not None), default=None
    )
    missing = [s for s in missing if last is None or last <= (s.end_time or 0) / 1e9]
    if not missing:
        return []
    return [SessionProblem(first.session_id or "", "call_never_reached", (first,), calls=tuple(missing))]


def _refused(r: RequestRecord) -> bool:
    """An HTTP error answer the client did not cause: a request the sidecar refused as malformed (mcp
    2.x's ``server/discover`` probe of a session-era server, answered 400) is the protocol's way, not a
    failed call."""
    return (r.status or 0) >= 400 and r.error_by != "client"


#: The hint for each kind of problem, in the order a verdict gives them.
_HINTS = {
    "never_ended": (
        "end every session the client opens: mcp 2.x: leave `async with Client(...)`; mcp 1.x: "
        "leave `streamable_http_client(...)` (terminate_on_close=True, the default), on the error "
        "path too; or, when the test keeps its sessions on purpose, mark it "
        "`@pytest.mark.mcp_keep_sessions` (ini `mcpfaults_session_hygiene = off` turns the check off)"
    ),
    "used_after_lost": (
        "on a 404 for its session id, open a new session (a new `initialize` without the id) "
        "instead of calling the lost one"
    ),
    "call_never_reached": (
        "one failed call must not poison the client: after a connection error or an error answer, "
        "send the next call (on a new connection or a new session when the old one is gone) instead "
        "of failing it in the client"
    ),
}


def hygiene_verdict(url: str, problems: Sequence[SessionProblem]) -> str:
    lines = [f"mcpfaults: session hygiene at {url}:", ""]
    lines += [f"   {p.describe()}" for p in problems]
    hints = [hint for kind, hint in _HINTS.items() if any(p.kind == kind for p in problems)]
    lines += ["", *(f"   hint: {h}" for h in hints)]
    return "\n".join(lines)
