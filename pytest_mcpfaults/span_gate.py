"""What the span gate checks over one test's spans, without pytest: shared by the ``--mcpfaults-check-spans``
gate and the control endpoint's ``GET /_mcpfaults/check``, so both give the same verdict in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpfaults import invariants
from pytest_mcpfaults.span_queries import Patterns, find_spans
from pytest_mcpfaults.span_records import RecordedSpan

__all__ = ["gate_violations"]


def gate_violations(
    spans: Sequence[RecordedSpan],
    session: Patterns,
    cleanup: Patterns,
    must_end: Sequence[RecordedSpan] | None = None,
    *,
    flip_cleanup: Patterns | None = None,
    count_cleanup: Patterns | None = None,
    max_cleanups: int = 1,
) -> tuple[tuple[str, ...], list[invariants.Violation]]:
    """The invariants the gate checks over ``spans`` and the violations found.

    No spans: nothing is checked. Neither a session nor a cleanup span (say, a readiness check that
    failed before any session): only ``all_spans_ended``. Otherwise every invariant
    (:func:`~pytest_mcpfaults.invariants.check_all`, at most ``max_cleanups`` cleanup runs per
    session). ``must_end`` limits ``all_spans_ended`` to those spans (default: all); ``flip_cleanup``
    and ``count_cleanup`` are the cleanup names of the first two invariants (default: ``cleanup``).
    A test is checked when it has a session span or a span any of the cleanup names match."""
    if not spans:
        return (), []
    ending = spans if must_end is None else must_end
    cleanups = [cleanup, *(p for p in (flip_cleanup, count_cleanup) if p is not None)]
    if not find_spans(spans, session) and not any(find_spans(spans, c) for c in cleanups):
        return ("all_spans_ended",), invariants.all_spans_ended(ending)
    found = invariants.check_all(
        spans,
        session,
        cleanup,
        max_cleanups,
        must_end=ending,
        flip_cleanup=flip_cleanup,
        count_cleanup=count_cleanup,
    )
    return invariants.ALL_INVARIANTS, found
