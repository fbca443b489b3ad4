"""Whether a replay reproduced the trace's shape: :func:`shape_differences`.

The trace's *shape* is which of its spans were ERROR: a replay reproduces it when every span of the
trace with a counterpart in the replay (matched by place) has the same outcome. Session spans (the
symptom a fixed harness does not show) and spans the replay lacks (a path a fixed harness did not take)
are not the fault's, so the same plan is kept on the broken harness and on the fixed one. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpfaults.from_trace.match import describe_place, places
from pytest_mcpfaults.from_trace.trace import Trace, index_spans
from pytest_mcpfaults.spans.queries import Patterns, as_patterns, matches
from pytest_mcpfaults.spans.records import RecordedSpan

#: Differences listed at most (the count says how many more).
MAX_DIFFERENCES = 10


def _outcome(span: RecordedSpan) -> str:
    return "ERROR" if span.failed else "never ended" if not span.end_time else "not ERROR"


def shape_differences(trace: Trace, replay: Sequence[RecordedSpan], session: Patterns) -> list[str]:
    """How the replay's spans differ from the trace's in outcome (empty: the same shape); the session
    spans, and the spans the replay does not have, are not compared."""
    mine = places(trace, session)
    theirs = places(index_spans(0, sorted(replay, key=lambda s: s.start_time or 0)), session)
    patterns = as_patterns(session)
    out: list[str] = []
    for span in trace.spans:
        place = mine.of.get(span.span_id)
        other = theirs.at.get(place) if place is not None else None
        if place is None or other is None or matches(span.name, patterns):
            continue
        if _outcome(other) != _outcome(span):
            out.append(
                f"{describe_place(place)}: {_outcome(span)} in the trace, {_outcome(other)} in the replay"
            )
    if len(out) > MAX_DIFFERENCES:
        out = [*out[:MAX_DIFFERENCES], f"… and {len(out) - MAX_DIFFERENCES} more"]
    return out
