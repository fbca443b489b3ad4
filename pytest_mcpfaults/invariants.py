"""Span invariants: pure functions from recorded spans to a list of :class:`Violation`.

Nothing here talks to OpenTelemetry; every function takes a sequence of
:class:`~pytest_mcpfaults.spans.RecordedSpan` (for example ``recorder.spans()``) and returns the
violations it found, an empty list when the invariant holds. ``session`` and ``cleanup`` are span-name
globs (one string or a sequence of them).

A "cleanup subtree" is a span beneath the session whose name matches ``cleanup`` together with all of
its descendants. A span is a *cleanup failure* when it lies in a cleanup subtree and its status is
ERROR. A span is a *primary failure* when it lies beneath the session, outside every cleanup subtree,
and its status is ERROR.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_mcpfaults.span_queries import (
    DEFAULT_CLEANUP,
    DEFAULT_SESSION,
    Patterns,
    as_patterns,
    matches,
    seen_names,
)
from pytest_mcpfaults.span_records import RecordedSpan, child_index, span_key
from pytest_mcpfaults.span_tree import describe_span, format_tree

__all__ = [
    "ALL_INVARIANTS",
    "SpanInvariantError",
    "Violation",
    "all_spans_ended",
    "check_all",
    "cleanup_at_most",
    "cleanup_never_flips",
    "format_violations",
    "results_by_invariant",
]

#: Names of the invariants :func:`check_all` runs, in the order it runs them.
ALL_INVARIANTS: tuple[str, ...] = ("cleanup_never_flips", "cleanup_at_most", "all_spans_ended")


@dataclass(frozen=True)
class Violation:
    """One broken invariant: its name, the span at fault (``None`` when no span is), and why."""

    invariant: str
    span: RecordedSpan | None
    message: str


class SpanInvariantError(AssertionError):
    """Raised by the recorder's ``assert_*`` methods; the message lists the violations and the tree."""

    def __init__(self, violations: Sequence[Violation], spans: Sequence[RecordedSpan]) -> None:
        self.violations = tuple(violations)
        super().__init__(format_violations(violations, spans))


def format_violations(violations: Sequence[Violation], spans: Sequence[RecordedSpan]) -> str:
    """The violations, one per bullet (repeated messages once), followed by the span tree."""
    seen: dict[str, list[str]] = {}
    for v in violations:
        seen.setdefault(v.message, []).append(v.invariant)
    bullets = [f"- [{', '.join(dict.fromkeys(names))}] {msg}" for msg, names in seen.items()]
    count = len(violations)
    head = f"{count} span invariant violation{'s' if count != 1 else ''}:"
    return "\n".join([head, *bullets, "", "Span tree:", format_tree(spans)])


def results_by_invariant(
    names: Sequence[str], violations: Sequence[Violation]
) -> list[tuple[str, bool, str]]:
    """``(name, ok, message)`` for each invariant in ``names``: ok when no violation carries its name."""
    out: list[tuple[str, bool, str]] = []
    for name in names:
        msgs = [v.message for v in violations if v.invariant == name]
        out.append((name, not msgs, "\n".join(dict.fromkeys(msgs))))
    return out


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _no_session(invariant: str, patterns: tuple[str, ...], spans: Sequence[RecordedSpan]) -> Violation:
    pats = ", ".join(repr(p) for p in patterns)
    return Violation(
        invariant,
        None,
        f"no session span was recorded (no span name matches {pats}); span names seen: {seen_names(spans)}",
    )


def _cleanup_subtrees(
    spans: Sequence[RecordedSpan], session: RecordedSpan, cleanup: tuple[str, ...]
) -> tuple[list[tuple[RecordedSpan, list[RecordedSpan]]], list[RecordedSpan]]:
    """Split what lies beneath ``session``: the outermost cleanup spans, each with its subtree
    (itself included), and every other descendant."""
    index = child_index(spans)
    subtrees: list[tuple[RecordedSpan, list[RecordedSpan]]] = []
    others: list[RecordedSpan] = []
    stack = list(reversed(index.get(span_key(session), [])))
    while stack:
        s = stack.pop()
        if matches(s.name, cleanup):
            members: list[RecordedSpan] = []
            inner = [s]
            while inner:
                m = inner.pop()
                members.append(m)
                inner.extend(reversed(index.get(span_key(m), [])))
            subtrees.append((s, members))
        else:
            others.append(s)
            stack.extend(reversed(index.get(span_key(s), [])))
    return subtrees, others


def _failure_messages(members: Sequence[RecordedSpan]) -> list[str]:
    """Texts a cleanup failure can leave behind: ERROR descriptions and exception messages (both bare
    and in the SDK's ``"<ExcType>: <msg>"`` form)."""
    out: list[str] = []
    for m in members:
        if m.failed and m.status_description:
            out.append(m.status_description)
        for etype, emsg in m.exceptions:
            if emsg:
                out.append(emsg)
                out.append(f"{etype.rsplit('.', 1)[-1]}: {emsg}")
    return list(dict.fromkeys(out))


def _derived(text: str, messages: Sequence[str]) -> str | None:
    """The cleanup message ``text`` equals or contains, if any."""
    if not text:
        return None
    for msg in sorted(messages, key=len, reverse=True):
        if msg == text or msg in text:
            return msg
    return None


# --------------------------------------------------------------------------------------------------
# Invariants
# --------------------------------------------------------------------------------------------------


# Exception types (the last part of ``exception.type``) that end a session from outside: a user's
# interrupt or the process exiting is the session's own outcome, never a cleanup flip.
_INTERRUPTS = frozenset({"KeyboardInterrupt", "SystemExit"})


def _short_type(etype: str) -> str:
    return etype.rsplit(".", 1)[-1]


def _clip(text: str, limit: int = 160) -> str:
    text = text.replace("\r", "").replace("\n", "⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cause(root: RecordedSpan, failing: RecordedSpan) -> str:
    return describe_span(failing) + ("" if failing is root else f" inside {root.name}")


def _copied_description(
    sess: RecordedSpan,
    subtrees: Sequence[tuple[RecordedSpan, list[RecordedSpan]]],
    primary: Sequence[RecordedSpan],
) -> str | None:
    """Rule 1: the session's description equals or contains a cleanup message."""
    desc = sess.status_description or ""
    for root, members in subtrees:
        msg = _derived(desc, _failure_messages(members))
        if msg is None:
            continue
        source = next((m for m in members if msg in _failure_messages([m])), root)
        if primary:
            why = f"it must keep the primary failure, {describe_span(primary[0])}"
        else:
            why = "nothing but cleanup failed beneath it, so it must not be ERROR at all"
        return (
            f"{sess.name} is ERROR with description {desc!r}, which comes from a cleanup failure "
            f"(cause: {_cause(root, source)}); {why}"
        )
    return None


def _failed_before_cleanup(
    sess: RecordedSpan, first: RecordedSpan, subtrees: Sequence[tuple[RecordedSpan, list[RecordedSpan]]]
) -> bool | None:
    """Whether the session shows a failure of its own from before its first cleanup started: ERROR
    when that cleanup started, an exception event older than its start, or a user's interrupt
    (``KeyboardInterrupt``, ``SystemExit``) recorded on the session or in its cleanup. ``None`` when
    the recorder did not see the session's status at that moment (snapshots built by hand)."""
    interrupts = [
        etype
        for span in [sess, *(m for _, members in subtrees for m in members)]
        for etype, _ in span.exceptions
        if _short_type(etype) in _INTERRUPTS
    ]
    if interrupts:
        return True
    start = first.start_time
    for ev in sess.events:
        if ev.name == "exception" and (ev.timestamp is None or start is None or ev.timestamp < start):
            return True
    status = first.status_of_ancestor_at_start(sess)
    if status is None:
        return None
    return status == "ERROR"


def _turned_error_in_cleanup(
    sess: RecordedSpan, subtrees: Sequence[tuple[RecordedSpan, list[RecordedSpan]]]
) -> str:
    """Rule 2's message: the session turned ERROR once cleanup had started, with nothing before."""
    first = subtrees[0][0]
    start = first.start_time or 0
    late = [  # the session's exception events from cleanup's start on: (type, message, timestamp)
        (str(ev.attributes.get("exception.type", "")), str(ev.attributes.get("exception.message", "")), ts)
        for ev in sess.events
        if ev.name == "exception" and (ts := ev.timestamp) is not None and ts >= start
    ]
    failing = next(((root, m) for root, members in subtrees for m in members if m.failed), None)
    if failing is not None:
        cause = _cause(*failing)
    else:
        # Nothing in cleanup recorded the failure (a BaseException such as CancelledError escapes
        # start_as_current_span unrecorded): blame the cleanup run in progress when the session
        # recorded its exception, else the first one.
        root = first
        if late:
            when = late[0][2]
            root = [r for r, _ in subtrees if (r.start_time or 0) <= when][-1]
        cause = f"{describe_span(root)}, which did not record the failure"
    recorded = "; ".join(
        f"{_short_type(etype)}: {_clip(emsg)}" if emsg else _short_type(etype) for etype, emsg, _ in late
    )
    what = f"; the session recorded {recorded}" if recorded else ""
    return (
        f"{sess.name} is ERROR although nothing but cleanup failed beneath it: it was not ERROR when "
        f"{first.name} started and nothing failed before that (cause: {cause}{what}); a cleanup failure "
        "must not flip the session"
    )


def _legacy_flip(
    sess: RecordedSpan, subtrees: Sequence[tuple[RecordedSpan, list[RecordedSpan]]]
) -> str | None:
    """Rule 2 for snapshots without the recorder's timing (built by hand): an ERROR session with
    neither a description nor an exception of its own, when a cleanup span failed."""
    failed_cleanups = [(root, m) for root, members in subtrees for m in members if m.failed]
    if not failed_cleanups:
        return None
    all_msgs = [msg for _, members in subtrees for msg in _failure_messages(members)]
    cleanup_types = {etype for _, members in subtrees for m in members for etype, _ in m.exceptions}
    own = [
        (etype, emsg)
        for etype, emsg in sess.exceptions
        if (_derived(emsg, all_msgs) is None if emsg else etype not in cleanup_types)
    ]
    if sess.status_description or own:
        return None
    return (
        f"{sess.name} is ERROR although nothing but cleanup failed beneath it (cause: "
        f"{_cause(*failed_cleanups[0])}); a cleanup failure must not flip the session"
    )


def cleanup_never_flips(
    spans: Sequence[RecordedSpan], session: Patterns = DEFAULT_SESSION, cleanup: Patterns = DEFAULT_CLEANUP
) -> list[Violation]:
    """A cleanup failure must never decide a session span's status.

    For every span named like ``session`` whose status is ERROR, with at least one cleanup span
    beneath it (``R1`` is the first to start):

    1. its status description must not come from a cleanup failure: it must not equal or contain the
       ERROR description or an exception message of any span in a cleanup subtree beneath it;
    2. if nothing but cleanup failed beneath it (no primary failure), it must have failed on its own
       before ``R1`` started: it was ERROR when ``R1`` started, or it has an exception event older
       than ``R1``'s start, or a ``KeyboardInterrupt``/``SystemExit`` is recorded on it or in its
       cleanup. Otherwise it turned ERROR at or after cleanup started: a flip, whether or not any
       cleanup span recorded an error (a ``BaseException`` such as ``asyncio.CancelledError`` escapes
       ``start_as_current_span`` unrecorded).

    Rule 2 needs the session's status when ``R1`` started, which the recorder notes on every span it
    records (``RecordedSpan.ancestors_at_start``). For snapshots without it (built by hand) rule 2 is
    the older, weaker one: a failed cleanup span and a session with neither a description nor an
    exception of its own.

    Sessions with status UNSET or OK always pass, and so do sessions without a cleanup span beneath
    them. No session span at all is a violation, never a vacuous pass.
    """
    name = "cleanup_never_flips"
    sp, cp = as_patterns(session), as_patterns(cleanup)
    sessions = [s for s in spans if matches(s.name, sp)]
    if not sessions:
        return [_no_session(name, sp, spans)]
    found: list[Violation] = []
    for sess in sessions:
        if not sess.failed:
            continue
        subtrees, others = _cleanup_subtrees(spans, sess, cp)
        if not subtrees:
            continue
        primary = [s for s in others if s.failed]
        message = _copied_description(sess, subtrees, primary)
        if message is None and not primary:
            before = _failed_before_cleanup(sess, subtrees[0][0], subtrees)
            if before is None:
                message = _legacy_flip(sess, subtrees)
            elif not before:
                message = _turned_error_in_cleanup(sess, subtrees)
        if message is not None:
            found.append(Violation(name, sess, message))
    return found


def cleanup_at_most(
    spans: Sequence[RecordedSpan],
    n: int = 1,
    session: Patterns = DEFAULT_SESSION,
    cleanup: Patterns = DEFAULT_CLEANUP,
) -> list[Violation]:
    """Cleanup ran at most ``n`` times beneath each session span.

    Counts the outermost cleanup spans beneath the session (a cleanup span nested in another cleanup
    span is part of the same run). No session span at all is a violation.
    """
    if n < 0:
        raise ValueError(f"cleanup_at_most needs n >= 0, got {n}")
    name = "cleanup_at_most"
    sp, cp = as_patterns(session), as_patterns(cleanup)
    sessions = [s for s in spans if matches(s.name, sp)]
    if not sessions:
        return [_no_session(name, sp, spans)]
    found: list[Violation] = []
    for sess in sessions:
        runs = [root for root, _ in _cleanup_subtrees(spans, sess, cp)[0]]
        if len(runs) > n:
            listed = "; ".join(describe_span(r) for r in runs)
            found.append(
                Violation(
                    name,
                    sess,
                    f"{sess.name} ran cleanup {len(runs)} times, at most {n} allowed: {listed}",
                )
            )
    return found


def all_spans_ended(spans: Sequence[RecordedSpan]) -> list[Violation]:
    """Every recorded span has ended; each open span is one violation."""
    return [
        Violation("all_spans_ended", s, f"span {s.name} (span id {s.span_id_hex}) started but never ended")
        for s in spans
        if not s.ended
    ]


def check_all(
    spans: Sequence[RecordedSpan],
    session: Patterns = DEFAULT_SESSION,
    cleanup: Patterns = DEFAULT_CLEANUP,
    max_cleanups: int = 1,
    *,
    must_end: Sequence[RecordedSpan] | None = None,
) -> list[Violation]:
    """Every invariant: :func:`cleanup_never_flips`, :func:`cleanup_at_most` (``max_cleanups``) and
    :func:`all_spans_ended`. ``must_end`` limits the last check to those spans (default: all)."""
    return [
        *cleanup_never_flips(spans, session, cleanup),
        *cleanup_at_most(spans, max_cleanups, session, cleanup),
        *all_spans_ended(spans if must_end is None else must_end),
    ]
