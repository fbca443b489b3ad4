"""Parents of spans received from other processes (over OTLP), resolved from the spans alone.

A span exported by another process arrives ended, often before its parent (exporters send spans as they
end, children first, in batches), and its ids may repeat: across processes (forked ``random`` state,
custom id generators) and within one (a reseeded ``random``). So a received span's parent is not fixed
when it arrives; :func:`link_received` resolves every received span's parent from the whole set, the same
way whatever order the spans arrived in:

* only among spans of the same *source* (the same exporting resource: service, process, ...);
* among the spans with the parent's ids, the one whose time span contains the child's, else one that
  started no later than the child, else any; the most recently received of the best;
* a parent found in no received span of the source may be a span of the test process itself (a context
  propagated to the child process): the most recently started recorded in-process span with those ids;
* otherwise the span has no recorded parent (the tree shows ``(parent … not recorded)``).

Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from pytest_mcpfaults.span_records import RecordedSpan

__all__ = ["Received", "link_received"]


@dataclass(frozen=True)
class Received:
    """One received span as the recorder keeps it: its snapshot (``uid`` set, ``parent_uid`` not yet),
    the source it came from, and its arrival order."""

    span: RecordedSpan
    source: Hashable
    seq: int


def _rank(parent: RecordedSpan, child: RecordedSpan, seq: int) -> tuple[bool, bool, int]:
    ps, pe, cs, ce = parent.start_time, parent.end_time, child.start_time, child.end_time
    starts_before = ps is not None and cs is not None and ps <= cs
    contains = starts_before and pe is not None and ce is not None and ce <= pe
    return (contains, starts_before, seq)


def link_received(
    received: Sequence[Received], local_ids: Mapping[tuple[int, int], int]
) -> dict[int, RecordedSpan]:
    """``uid -> snapshot with parent_uid set`` for every received span (see the module docstring).

    ``local_ids`` maps ``(trace_id, span_id)`` of the in-process spans to the ``uid`` of the most
    recently started one, for parents propagated from the test process.
    """
    by_ids: dict[tuple[Hashable, int, int], list[Received]] = {}
    for r in received:
        by_ids.setdefault((r.source, r.span.trace_id, r.span.span_id), []).append(r)
    parents: dict[int, int | None] = {}
    for r in received:
        span = r.span
        assert span.uid is not None
        parent_uid: int | None = None
        if span.parent_id is not None:
            candidates = [c for c in by_ids.get((r.source, span.trace_id, span.parent_id), ()) if c is not r]
            if candidates:
                best = max(candidates, key=lambda c: _rank(c.span, span, c.seq))
                parent_uid = best.span.uid
            else:
                parent_uid = local_ids.get((span.trace_id, span.parent_id))
        parents[span.uid] = parent_uid
    _cut_cycles(parents)
    out: dict[int, RecordedSpan] = {}
    for r in received:
        uid = r.span.uid
        assert uid is not None
        parent = parents[uid]
        out[uid] = r.span if parent is None else dataclasses.replace(r.span, parent_uid=parent)
    return out


def _cut_cycles(parents: dict[int, int | None]) -> None:
    """Spans whose ids make them each other's parents (crafted or repeated ids) would form a loop that
    no tree walk ends: the span through which a walk comes back to itself loses its parent."""
    done: set[int] = set()
    for uid in parents:
        path: list[int] = []
        on_path: set[int] = set()
        cur: int | None = uid
        while cur is not None and cur in parents and cur not in done:
            if cur in on_path:
                parents[path[-1]] = None  # the link that closes the loop
                break
            path.append(cur)
            on_path.add(cur)
            cur = parents[cur]
        done.update(path)
