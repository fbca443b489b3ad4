"""The check behind ``Sidecar.assert_client_cancelled``, from the journal's requests and the
cancellations linked to them: when a request was not cancelled in time, what the client did instead.
"""

from __future__ import annotations

from pytest_mcpfaults.core.records import CancellationRecord, RequestRecord
from pytest_mcpfaults.verdicts.patience import Watched, judged

_WHO = "Sidecar.assert_client_cancelled"


def named(r: RequestRecord) -> str:
    """E.g. ``tools/call sleep (id 3)``."""
    what = " ".join(x for x in (r.mcp_method, r.tool) if x) or f"{r.method} {r.path}"
    return f"{what} (id {r.rpc_id!r})" if isinstance(r.rpc_id, str) else f"{what} (id {r.rpc_id})"


def _cancellation(sc: Watched, r: RequestRecord) -> CancellationRecord | None:
    return next((c for c in sc.journal.cancellations if c.cancels == r.id and c.in_flight), None)


def _deleted_first(sc: Watched, r: RequestRecord, c: CancellationRecord) -> RequestRecord | None:
    """The ``DELETE`` that ended ``r``'s session before the notification ``c`` arrived, if one did: a
    cancel sent after the session is gone finds no session (404) and stops nothing, however soon."""
    if c.notification is None:  # 2026-07-28: a closed stream, no session to delete
        return None
    return next(
        (
            x
            for x in sc.journal.requests
            if x.method == "DELETE"
            and r.id < x.id < c.notification
            and x.session_id == r.session_id
            and x.status is not None
            and 200 <= x.status < 300
        ),
        None,
    )


def _deadline(r: RequestRecord, within: float) -> float:
    return r.started_at + within


def _answered_in_time(r: RequestRecord, within: float) -> bool:
    return r.ended_at is not None and r.ended_at <= _deadline(r, within)


def check_client_cancelled(sc: Watched, target: str | None, within: float) -> None:
    """``Sidecar.assert_client_cancelled`` (its docstring says what passes and how long it waits)."""
    journal = sc.journal
    matching, matching_text = judged(
        sc,
        _WHO,
        target,
        within,
        lambda matches: [r for r in journal.requests if r.rpc_id is not None and matches(r)],
        lambda r: r.done or _cancellation(sc, r) is not None,
        lambda r: _deadline(r, within),
    )
    left = [r for r in matching if not _answered_in_time(r, within) or _cancellation(sc, r) is not None]
    if not left:
        seen = ", ".join(journal.sequence()) or "none"
        raise AssertionError(
            f"{_WHO}: no request{matching_text} was left in flight for {within:g} s, so nothing was "
            f"cancelled (every one was answered before that); requests seen: {seen}"
        )
    bad = [
        (r, c)
        for r in left
        if (c := _cancellation(sc, r)) is None
        or (c.since_sent or 0.0) > within
        or _deleted_first(sc, r, c) is not None
    ]
    if not bad:
        return
    lines = [
        f"{_WHO}: {len(bad)} of {len(left)} request(s){matching_text} left in flight were not cancelled "
        f"within {within:g} s:"
    ]
    for r, c in bad:
        lines.append(f"  {_headline(sc, r, c, within)}; {_fate(sc, r)}")
        later = _instead(sc, r, r.ended_at if r.ended_at is not None else journal.now())
        if later:
            lines.append("    then the client sent: " + ", ".join(x.label for x in later))
    first = bad[0][0]
    session = [x for x in journal.requests if x.session_id == first.session_id and x.id >= first.id]
    lines.append(f"journal from {named(first)} on:")
    lines.extend("  " + line for line in journal.format(session[:12]).splitlines())
    raise AssertionError("\n".join(lines))


def _instead(sc: Watched, r: RequestRecord, until: float) -> list[RequestRecord]:
    return [
        x
        for x in sc.journal.requests
        if x.id > r.id
        and x.started_at <= until
        and x.session_id == r.session_id
        and (x.era == r.era or x.method == "DELETE")
    ]


def _headline(sc: Watched, r: RequestRecord, c: CancellationRecord | None, within: float) -> str:
    what = named(r)
    first = None if c is None else _deleted_first(sc, r, c)
    if c is not None and first is not None:
        answered = sc.journal.request(c.notification) if c.notification is not None else None
        status = f" (answered {answered.status})" if answered is not None and answered.status else ""
        return (
            f"the client sent DELETE {first.path} at {first.started_at:.2f} s "
            f"({first.started_at - r.started_at:.2f} s after the call) before cancelling {what}, still in "
            f"flight: its notifications/cancelled came {c.at - first.started_at:.2f} s after the DELETE, "
            f"when the session was gone{status}; cancel before deleting the session"
        )
    if c is not None:
        return (
            f"the client cancelled {what} only {c.since_sent or 0.0:.2f} s after sending it, later than "
            f"{within:g} s"
        )
    until = r.ended_at if r.ended_at is not None else sc.journal.now()
    later = _instead(sc, r, until)
    delete = next((x for x in later if x.method == "DELETE"), None)
    if delete is not None:
        return (
            f"the client sent DELETE {delete.path} at {delete.started_at:.2f} s "
            f"({delete.started_at - r.started_at:.2f} s after the call) without cancelling {what}, still "
            "in flight"
        )
    if r.client_closed and r.client_closed_at is not None:
        return (
            f"the client closed the connection of {what} {r.client_closed_at - r.started_at:.2f} s after "
            f"sending it without cancelling it, still in flight (in the {r.era} era a closed connection "
            "is not a cancellation: send notifications/cancelled)"
        )
    return f"the client did not cancel {what} within {within:g} s of sending it, still in flight then"


def _fate(sc: Watched, r: RequestRecord) -> str:
    if r.ended_at is None:
        return f"unanswered {sc.journal.now() - r.started_at:.2f} s after it was sent"
    return f"the sidecar's answer ended {r.ended_at - r.started_at:.2f} s after it was sent"
