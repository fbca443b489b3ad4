"""The check behind ``Sidecar.assert_client_resumed``, from the journal's closed streams and requests:
when a stream was not resumed right, what the client did instead.
"""

from __future__ import annotations

from pytest_mcpfaults.core.records import RequestRecord, StreamRecord
from pytest_mcpfaults.verdicts.cancel_checks import named
from pytest_mcpfaults.verdicts.patience import Watched, judged

_WHO = "Sidecar.assert_client_resumed"


def _came_back(sc: Watched, s: StreamRecord) -> list[RequestRecord]:
    return [
        r
        for r in sc.journal.requests
        if r.method == "GET"
        and r.path == sc.mcp_path
        and r.session_id == s.session_id
        and r.started_at >= s.closed_at
    ]


def _problem(sc: Watched, s: StreamRecord, within: float) -> str | None:
    what = named(sc.journal.request(s.request_id))
    closed = (
        f"the stream answering {what} closed at {s.closed_at:.2f} s after {s.events_sent} event(s) "
        f"(last id {s.last_event_id!r}, retry {s.retry_ms} ms)"
    )
    if s.resumed_at is not None:
        waited = s.resumed_at - s.closed_at
        if waited < s.retry_ms / 1000:
            early = f"the client came back after {waited:.3f} s, sooner than its retry of {s.retry_ms} ms"
            return f"{closed}: {early}"
        if waited > within:
            return f"{closed}: the client resumed it only after {waited:.2f} s, later than {within:g} s"
        return None
    gets = _came_back(sc, s)
    plain = [r for r in gets if r.last_event_id is None]
    if plain:
        r = plain[0]
        return (
            f"{closed}: the client came back at {r.started_at:.2f} s with GET {r.path} without Last-Event-ID "
            f"(answered {r.status}), so the reply was never replayed"
        )
    if gets:
        r = gets[0]
        return (
            f"{closed}: the client came back at {r.started_at:.2f} s with Last-Event-ID {r.last_event_id!r}, "
            f"which names no event of that stream (answered {r.status})"
        )
    return f"{closed}: the client never came back for it (no GET {sc.mcp_path} in its session since)"


def check_client_resumed(sc: Watched, target: str | None, within: float) -> None:
    """``Sidecar.assert_client_resumed`` (its docstring says what passes and how long it waits)."""
    journal = sc.journal
    streams, matching_text = judged(
        sc,
        _WHO,
        target,
        within,
        lambda matches: [s for s in journal.streams if matches(journal.request(s.request_id))],
        lambda s: s.resumed_at is not None,
        lambda s: s.closed_at + within,
    )
    if not streams:
        raise AssertionError(
            f"{_WHO}: no event stream{matching_text} was closed for the client to resume (close_stream "
            f"closes one); requests seen: {', '.join(journal.sequence()) or 'none'}"
        )
    problems = [p for s in streams if (p := _problem(sc, s, within)) is not None]
    if problems:
        head = f"{_WHO}: {len(problems)} of {len(streams)} closed stream(s){matching_text} not resumed right:"
        raise AssertionError("\n".join([head, *("  " + p for p in problems)]))
