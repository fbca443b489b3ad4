"""Span invariants: pure functions from recorded spans to a list of :class:`Violation`.

Each takes a sequence of :class:`~pytest_mcpfaults.spans.RecordedSpan` (``recorder.spans()``) and
returns the violations found, none when the invariant holds. ``session`` and ``cleanup`` are span-name
globs (one string or a sequence of them).

A "cleanup subtree" is a span beneath the session whose name matches ``cleanup`` together with all of
its descendants; ``R1`` is the first cleanup span to start. The session's *teardown* is its cleanup
subtrees and every other span beneath it that started once ``R1`` had started (a client-close span
after the delete, say). A span is a *cleanup failure* when it lies in the teardown and its status is
ERROR. A span is a *primary failure* when it lies beneath the session, outside every cleanup subtree,
started before ``R1`` did, and its status is ERROR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from pytest_mcpfaults.spans.queries import (
    DEFAULT_CLEANUP,
    DEFAULT_SESSION,
    Patterns,
    as_patterns,
    find_spans,
    matches,
    seen_names,
)
from pytest_mcpfaults.spans.records import (
    RecordedSpan,
    child_index,
    describe_span,
    format_tree,
    one_line,
    span_key,
    subtree,
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
    "gate_violations",
    "results_by_invariant",
    "teardowns",
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
    msgs = {name: [v.message for v in violations if v.invariant == name] for name in names}
    return [(name, not m, "\n".join(dict.fromkeys(m))) for name, m in msgs.items()]


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _per_session(
    invariant: str,
    spans: Sequence[RecordedSpan],
    session: Patterns,
    cleanup: Patterns,
    judge: Callable[[RecordedSpan, tuple[str, ...]], str | None],
) -> list[Violation]:
    """``invariant``'s violations: ``judge(session_span, cleanup)``'s message for each session span;
    no session span at all is one, never a vacuous pass."""
    sp, cp = as_patterns(session), as_patterns(cleanup)
    found = [s for s in spans if matches(s.name, sp)]
    if not found:
        pats = ", ".join(repr(p) for p in sp)
        none = f"no session span was recorded (no span name matches {pats}); span names seen: "
        return [Violation(invariant, None, none + seen_names(spans))]
    return [Violation(invariant, sess, why) for sess in found if (why := judge(sess, cp)) is not None]


def _cleanup_subtrees(
    spans: Sequence[RecordedSpan], session: RecordedSpan, cleanup: tuple[str, ...]
) -> tuple[list[tuple[RecordedSpan, list[RecordedSpan]]], list[RecordedSpan]]:
    """Split what lies beneath ``session``: the outermost cleanup spans, each with its subtree
    (itself included), in the order of ``spans`` (start order), and every other descendant."""
    index = child_index(spans)
    subtrees: list[tuple[RecordedSpan, list[RecordedSpan]]] = []
    others: list[RecordedSpan] = []
    stack = list(reversed(index.get(span_key(session), [])))
    while stack:
        s = stack.pop()
        if matches(s.name, cleanup):
            subtrees.append((s, subtree(index, s)))
        else:
            others.append(s)
            stack.extend(reversed(index.get(span_key(s), [])))
    order = {span_key(s): i for i, s in enumerate(spans)}
    subtrees.sort(key=lambda t: order.get(span_key(t[0]), 0))
    return subtrees, others


def _started_before(span: RecordedSpan, first: RecordedSpan) -> bool:
    """Whether ``span`` started before ``first`` did; true when either start time is unknown (a
    snapshot built by hand), so that such a span keeps counting as the session's own work."""
    if span.start_time is None or first.start_time is None:
        return True
    return span.start_time < first.start_time


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
                out.append(f"{_short_type(etype)}: {emsg}")
    return list(dict.fromkeys(out))


def _own_texts(sess: RecordedSpan, first: RecordedSpan, primary: Sequence[RecordedSpan]) -> list[str]:
    start = first.start_time
    before = [
        str(ev.attributes.get("exception.message", ""))
        for ev in sess.events
        if ev.name == "exception" and ev.timestamp is not None and start is not None and ev.timestamp < start
    ]
    return [*_failure_messages(primary), *filter(None, before)]


def _derived(text: str, messages: Sequence[str], own: Sequence[str] = ()) -> str | None:
    """The cleanup message ``text`` equals or contains that no failure from before cleanup explains
    (a message equal to or contained in one of ``own`` tells nothing of where ``text`` came from),
    the longest if several; ``None`` if none."""
    if not text:
        return None
    for msg in sorted(messages, key=len, reverse=True):
        if (msg == text or msg in text) and not any(msg == o or msg in o for o in own):
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


def _cause(root: RecordedSpan, failing: RecordedSpan) -> str:
    return describe_span(failing) + ("" if failing is root else f" inside {root.name}")


_Subtrees = Sequence[tuple[RecordedSpan, list[RecordedSpan]]]


def _copied_description(
    sess: RecordedSpan, teardown: _Subtrees, primary: Sequence[RecordedSpan], own: Sequence[str]
) -> str | None:
    """Rule 1's message (the description comes from the teardown), or ``None``."""
    desc = sess.status_description or ""
    first = teardown[0][0]
    if first.ancestor_at_start(sess) == ("ERROR", sess.status_description):
        return None
    for root, members in teardown:
        msg = _derived(desc, _failure_messages(members), own)
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


def _failed_before_cleanup(sess: RecordedSpan, first: RecordedSpan, teardown: _Subtrees) -> bool | None:
    """Whether the session failed on its own before ``first`` started (rule 2); ``None`` when the
    recorder did not see its status at that moment."""
    spans = [sess, *(m for _, members in teardown for m in members)]
    if any(_short_type(etype) in _INTERRUPTS for span in spans for etype, _ in span.exceptions):
        return True
    start = first.start_time
    if any(
        ev.name == "exception" and (ev.timestamp is None or start is None or ev.timestamp < start)
        for ev in sess.events
    ):
        return True
    status = first.status_of_ancestor_at_start(sess)
    return None if status is None else status == "ERROR"


def _late_exceptions(sess: RecordedSpan, first: RecordedSpan) -> list[tuple[str, str, int]]:
    start = first.start_time or 0
    return [
        (str(ev.attributes.get("exception.type", "")), str(ev.attributes.get("exception.message", "")), ts)
        for ev in sess.events
        if ev.name == "exception" and (ts := ev.timestamp) is not None and ts >= start
    ]


def _turned_error_in_cleanup(
    sess: RecordedSpan, subtrees: _Subtrees, late_spans: _Subtrees, *, by_events: bool
) -> str:
    """Rule 2's message. ``by_events``: the session's status at cleanup's start is unknown and the
    times of its exception events decided."""
    first = subtrees[0][0]
    late = _late_exceptions(sess, first)
    failing = next(((root, m) for root, members in subtrees for m in members if m.failed), None)
    if failing is None:
        # A failed span after cleanup (a client close) is the cause only if what the session
        # recorded is that span's failure, or the session recorded nothing.
        failing = next(
            (
                (root, root)
                for root, _ in late_spans
                if root.failed and (not late or any(m in _failure_messages([root]) for _, m, _ in late))
            ),
            None,
        )
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
        f"{_short_type(etype)}: {one_line(emsg)}" if emsg else _short_type(etype) for etype, emsg, _ in late
    )
    what = f"; the session recorded {recorded}" if recorded else ""
    if by_events:
        when_text = (
            f"its first exception event is from after {first.name} started (its status then was not "
            "exported) and nothing failed before that"
        )
    else:
        when_text = f"it was not ERROR when {first.name} started and nothing failed before that"
    return (
        f"{sess.name} is ERROR although nothing but cleanup failed beneath it: {when_text} "
        f"(cause: {cause}{what}); a cleanup failure must not flip the session"
    )


def _legacy_flip(sess: RecordedSpan, teardown: _Subtrees) -> str | None:
    """Rule 2's older, weaker form, for a session with no status history and no exception event."""
    failed_cleanups = [(root, m) for root, members in teardown for m in members if m.failed]
    if not failed_cleanups:
        return None
    all_msgs = [msg for _, members in teardown for msg in _failure_messages(members)]
    cleanup_types = {etype for _, members in teardown for m in members for etype, _ in m.exceptions}
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


def _flip_message(spans: Sequence[RecordedSpan], sess: RecordedSpan, cp: tuple[str, ...]) -> str | None:
    """Why ``sess`` was flipped by its cleanup, or ``None``."""
    subtrees, others = _cleanup_subtrees(spans, sess, cp)
    if not sess.failed or not subtrees:
        return None
    first = subtrees[0][0]
    primary = [s for s in others if s.failed and _started_before(s, first)]
    late_spans = [(s, [s]) for s in others if not _started_before(s, first)]
    teardown = [*subtrees, *late_spans]
    message = _copied_description(sess, teardown, primary, _own_texts(sess, first, primary))
    if message is not None or primary:
        return message
    before = _failed_before_cleanup(sess, first, teardown)
    if before is None:
        if _late_exceptions(sess, first) and first.start_time is not None:
            return _turned_error_in_cleanup(sess, subtrees, late_spans, by_events=True)
        return _legacy_flip(sess, teardown)
    if not before:
        return _turned_error_in_cleanup(sess, subtrees, late_spans, by_events=False)
    return None


def cleanup_never_flips(
    spans: Sequence[RecordedSpan], session: Patterns = DEFAULT_SESSION, cleanup: Patterns = DEFAULT_CLEANUP
) -> list[Violation]:
    """A cleanup failure must never decide a session span's status (in the module's terms).

    For every ERROR span named like ``session`` with a cleanup span beneath it:

    1. its status description must not come from the teardown. One the session already had when
       ``R1`` started (the recorder notes it) passes; otherwise it must not equal or contain the ERROR
       description or an exception message of a teardown span, unless a failure from before cleanup
       (a primary failure, or an exception the session recorded before ``R1`` started) carries that
       same text too;
    2. with no primary failure, it must have failed on its own before ``R1`` started: ERROR then, an
       exception event older than ``R1``'s start, or a ``KeyboardInterrupt``/``SystemExit`` on it or
       in its teardown. Otherwise it turned ERROR in cleanup: a flip, whether or not a cleanup span
       recorded an error (a ``BaseException`` such as ``asyncio.CancelledError`` escapes
       ``start_as_current_span`` unrecorded).

    Where the session's status at ``R1``'s start is unknown (spans received over OTLP, snapshots built
    by hand), exception events that all come at or after ``R1``'s start are a flip; with no exception
    event at all, the older, weaker rule applies: a failed teardown span and a session with neither a
    description nor an exception of its own. No session span at all is a violation, never a vacuous
    pass. docs/spans.md gives the rules with examples.
    """
    return _per_session("cleanup_never_flips", spans, session, cleanup, partial(_flip_message, spans))


def teardowns(
    spans: Sequence[RecordedSpan], session: RecordedSpan, cleanup: Patterns = DEFAULT_CLEANUP
) -> list[list[RecordedSpan]]:
    """The cleanup runs beneath ``session``, each as its outermost cleanup spans in start order.

    A cleanup span nested in another is part of its run. Outermost cleanup spans that follow one
    another form one run as long as no span name repeats in it: a close after a delete (``cleanup``
    matching both) is one teardown; a second span with a name the run already has (a second delete)
    starts the next run."""
    runs: list[list[RecordedSpan]] = []
    names: set[str] = set()
    for root, _ in _cleanup_subtrees(spans, session, as_patterns(cleanup))[0]:
        if not runs or root.name in names:
            runs.append([])
            names = set()
        runs[-1].append(root)
        names.add(root.name)
    return runs


def cleanup_at_most(
    spans: Sequence[RecordedSpan],
    n: int = 1,
    session: Patterns = DEFAULT_SESSION,
    cleanup: Patterns = DEFAULT_CLEANUP,
) -> list[Violation]:
    """Cleanup ran at most ``n`` times beneath each session span.

    Counts the cleanup runs :func:`teardowns` finds: a cleanup span nested in another cleanup span,
    or following one under another name (a close after the delete), is part of the same run. No
    session span at all is a violation.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"cleanup_at_most needs an int n >= 0, got {n!r}")

    def too_many(sess: RecordedSpan, cp: tuple[str, ...]) -> str | None:
        runs = teardowns(spans, sess, cp)
        if len(runs) <= n:
            return None
        listed = "; ".join(" then ".join(describe_span(r) for r in run) for run in runs)
        times = "once" if len(runs) == 1 else f"{len(runs)} times"
        return f"{sess.name} ran cleanup {times}, at most {n} allowed: {listed}"

    return _per_session("cleanup_at_most", spans, session, cleanup, too_many)


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
    flip_cleanup: Patterns | None = None,
    count_cleanup: Patterns | None = None,
) -> list[Violation]:
    """Every invariant: :func:`cleanup_never_flips`, :func:`cleanup_at_most` (``max_cleanups``) and
    :func:`all_spans_ended`. ``must_end`` limits the last check to those spans (default: all).
    ``flip_cleanup`` and ``count_cleanup`` are the cleanup span names of the first two invariants
    (default: ``cleanup`` for both)."""
    return [
        *cleanup_never_flips(spans, session, cleanup if flip_cleanup is None else flip_cleanup),
        *cleanup_at_most(spans, max_cleanups, session, cleanup if count_cleanup is None else count_cleanup),
        *all_spans_ended(spans if must_end is None else must_end),
    ]


def gate_violations(
    spans: Sequence[RecordedSpan],
    session: Patterns,
    cleanup: Patterns,
    must_end: Sequence[RecordedSpan] | None = None,
    *,
    flip_cleanup: Patterns | None = None,
    count_cleanup: Patterns | None = None,
    max_cleanups: int = 1,
) -> tuple[tuple[str, ...], list[Violation]]:
    """The invariants the span gate checks over ``spans`` and the violations found: shared by the
    ``--mcpfaults-check-spans`` gate and the control endpoint's ``GET /_mcpfaults/check``, so both give
    the same verdict in the same words.

    No spans: nothing is checked. Neither a session nor a cleanup span (say, a readiness check that
    failed before any session): only ``all_spans_ended``. Otherwise every invariant: :func:`check_all`,
    whose arguments these are. A test is checked when it has a session span or a span any of the
    cleanup names match."""
    if not spans:
        return (), []
    cleanups = [cleanup, *(p for p in (flip_cleanup, count_cleanup) if p is not None)]
    if not find_spans(spans, session) and not any(find_spans(spans, c) for c in cleanups):
        return ("all_spans_ended",), all_spans_ended(spans if must_end is None else must_end)
    return ALL_INVARIANTS, check_all(
        spans,
        session,
        cleanup,
        max_cleanups,
        must_end=must_end,
        flip_cleanup=flip_cleanup,
        count_cleanup=count_cleanup,
    )
