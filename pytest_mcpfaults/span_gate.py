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
) -> tuple[tuple[str, ...], list[invariants.Violation]]:
    """The invariants the gate checks over ``spans`` and the violations found.

    No spans: nothing is checked. Neither a session nor a cleanup span (say, a readiness check that
    failed before any session): only ``all_spans_ended``. Otherwise every invariant
    (:func:`~pytest_mcpfaults.invariants.check_all`, at most one cleanup per session). ``must_end``
    limits ``all_spans_ended`` to those spans (default: all)."""
    if not spans:
        return (), []
    ending = spans if must_end is None else must_end
    if not find_spans(spans, session) and not find_spans(spans, cleanup):
        return ("all_spans_ended",), invariants.all_spans_ended(ending)
    found = invariants.check_all(spans, session, cleanup, 1, must_end=ending)
    return invariants.ALL_INVARIANTS, found
