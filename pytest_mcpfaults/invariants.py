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

from pytest_mcpfaults.span_queries import _as_patterns, _seen_names
from pytest_mcpfaults.span_records import _child_index, _key
from pytest_mcpfaults.spans import (
    DEFAULT_CLEANUP,
    DEFAULT_SESSION,
    Patterns,
    RecordedSpan,
    describe_span,
    format_tree,
    matches,
)

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
        f"no session span was recorded (no span name matches {pats}); span names seen: {_seen_names(spans)}",
    )


def _cleanup_subtrees(
    spans: Sequence[RecordedSpan], session: RecordedSpan, cleanup: tuple[str, ...]
) -> tuple[list[tuple[RecordedSpan, list[RecordedSpan]]], list[RecordedSpan]]:
    """Split what lies beneath ``session``: the outermost cleanup spans, each with its subtree
    (itself included), and every other descendant."""
    index = _child_index(spans)
    subtrees: list[tuple[RecordedSpan, list[RecordedSpan]]] = []
    others: list[RecordedSpan] = []
    stack = list(reversed(index.get(_key(session), [])))
    while stack:
        s = stack.pop()
        if matches(s.name, cleanup):
            members: list[RecordedSpan] = []
            inner = [s]
            while inner:
                m = inner.pop()
                members.append(m)
                inner.extend(reversed(index.get(_key(m), [])))
            subtrees.append((s, members))
        else:
            others.append(s)
            stack.extend(reversed(index.get(_key(s), [])))
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


def cleanup_never_flips(
    spans: Sequence[RecordedSpan], session: Patterns = DEFAULT_SESSION, cleanup: Patterns = DEFAULT_CLEANUP
) -> list[Violation]:
    """A cleanup failure must never decide a session span's status.

    For every span named like ``session`` whose status is ERROR:

    1. its status description must not come from a cleanup failure: it must not equal or contain the
       ERROR description or an exception message of any span in a cleanup subtree beneath it;
    2. if nothing but cleanup failed beneath it (every ERROR span beneath it is in a cleanup subtree,
       and there is at least one), the ERROR must be the session's own primary failure: a non-empty
       description, or an exception event on the session itself, that does not come from cleanup.

    Sessions with status UNSET or OK always pass (the SDK ignores ``set_status`` after OK and after the
    span ended, so a flip can only happen before the session ends). No session span at all is a
    violation, never a vacuous pass.
    """
    name = "cleanup_never_flips"
    sp, cp = _as_patterns(session), _as_patterns(cleanup)
    sessions = [s for s in spans if matches(s.name, sp)]
    if not sessions:
        return [_no_session(name, sp, spans)]
    found: list[Violation] = []
    for sess in sessions:
        if not sess.failed:
            continue
        subtrees, others = _cleanup_subtrees(spans, sess, cp)
        primary = [s for s in others if s.failed]
        desc = sess.status_description or ""
        for root, members in subtrees:
            msg = _derived(desc, _failure_messages(members))
            if msg is None:
                continue
            source = next((m for m in members if msg in _failure_messages([m])), root)
            cause = describe_span(source) + ("" if source is root else f" inside {root.name}")
            if primary:
                why = f"it must keep the primary failure, {describe_span(primary[0])}"
            else:
                why = "nothing but cleanup failed beneath it, so it must not be ERROR at all"
            found.append(
                Violation(
                    name,
                    sess,
                    f"{sess.name} is ERROR with description {desc!r}, which comes from a cleanup failure "
                    f"(cause: {cause}); {why}",
                )
            )
            break
        else:
            failed_cleanups = [(root, m) for root, members in subtrees for m in members if m.failed]
            if primary or not failed_cleanups:
                continue
            all_msgs = [msg for _, members in subtrees for msg in _failure_messages(members)]
            cleanup_types = {etype for _, members in subtrees for m in members for etype, _ in m.exceptions}
            own = [
                (etype, emsg)
                for etype, emsg in sess.exceptions
                if (_derived(emsg, all_msgs) is None if emsg else etype not in cleanup_types)
            ]
            if desc or own:
                continue
            root, failing = failed_cleanups[0]
            cause = describe_span(failing) + ("" if failing is root else f" inside {root.name}")
            found.append(
                Violation(
                    name,
                    sess,
                    f"{sess.name} is ERROR although nothing but cleanup failed beneath it (cause: {cause}); "
                    "a cleanup failure must not flip the session",
                )
            )
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
    sp, cp = _as_patterns(session), _as_patterns(cleanup)
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
