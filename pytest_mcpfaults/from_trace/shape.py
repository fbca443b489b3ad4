"""Whether a replay reproduced the trace's shape: :func:`shape_differences`.

The trace's *shape* is which of its spans were ERROR: a replay reproduces it when every span of the
trace that has a counterpart in the replay (matched by place, as
:mod:`~pytest_mcpfaults.from_trace.match` matches) has the same outcome, ERROR or not, and every span of
the trace has a counterpart. Of several plans that fit a trace, the one to keep is the first whose
replay has no difference. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpfaults.from_trace.match import describe_place, places
from pytest_mcpfaults.from_trace.trace import Trace, index_spans
from pytest_mcpfaults.spans.queries import Patterns
from pytest_mcpfaults.spans.records import RecordedSpan

__all__ = ["MAX_DIFFERENCES", "shape_differences"]

#: Differences listed at most (the count says how many more).
MAX_DIFFERENCES = 10


def _outcome(span: RecordedSpan) -> str:
    return "ERROR" if span.failed else "never ended" if not span.end_time else "not ERROR"


def shape_differences(trace: Trace, replay: Sequence[RecordedSpan], session: Patterns) -> list[str]:
    """How the replay's spans differ from the trace's in outcome (empty: the same shape)."""
    mine = places(trace, session)
    theirs = places(index_spans(0, sorted(replay, key=lambda s: s.start_time or 0)), session)
    out: list[str] = []
    for span in trace.spans:
        place = mine.of.get(span.span_id)
        if place is None:
            continue
        other = theirs.at.get(place)
        if other is None:
            out.append(f"{describe_place(place)}: {_outcome(span)} in the trace, absent from the replay")
        elif _outcome(other) != _outcome(span):
            out.append(
                f"{describe_place(place)}: {_outcome(span)} in the trace, {_outcome(other)} in the replay"
            )
    if len(out) > MAX_DIFFERENCES:
        out = [*out[:MAX_DIFFERENCES], f"… and {len(out) - MAX_DIFFERENCES} more"]
    return out
