"""One trace out of the spans of an export, checked and indexed: :func:`pick_trace`. Pure.

A file may hold several traces (an export batch, a collector's file); the one replayed is the one
``trace_id`` names, else the only one, else the only one with a session span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pytest_mcpfaults.from_trace.read import TraceError
from pytest_mcpfaults.spans.queries import Patterns, as_patterns, matches
from pytest_mcpfaults.spans.records import RecordedSpan

#: Trace ids or span names listed at most in one error message.
MAX_LISTED = 10


@dataclass(frozen=True)
class Trace:
    """One trace: its spans in start order, indexed by span id (a repeated span id keeps its first
    span: ``duplicates`` counts the others)."""

    trace_id: int
    spans: tuple[RecordedSpan, ...]
    by_id: dict[int, RecordedSpan] = field(repr=False)
    children: dict[int | None, list[RecordedSpan]] = field(repr=False)
    duplicates: int = 0

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    def parent(self, span: RecordedSpan) -> RecordedSpan | None:
        """The span's parent in this trace (``None``: a root, or a parent the export does not hold)."""
        return None if span.parent_id is None else self.by_id.get(span.parent_id)


def listed(items: Sequence[int | str]) -> str:
    """Trace ids or span names as an error lists them: at most :data:`MAX_LISTED`."""
    shown = [f"{i:032x}" if isinstance(i, int) else i for i in items[:MAX_LISTED]]
    return ", ".join(shown) + (" …" if len(items) > MAX_LISTED else "")


def pick_trace(
    spans: Sequence[RecordedSpan], source: str, session: Patterns, trace_id: str | None = None
) -> Trace:
    """The trace ``trace_id`` (32 hex digits) names among ``spans``, or the only one; checked."""
    if not spans:
        raise TraceError(f"{source}: the trace is empty (no spans)")
    ids = sorted({s.trace_id for s in spans})
    if trace_id is None:
        want = ids[0] if len(ids) == 1 else _only_session_trace(spans, source, session, ids)
    else:
        try:
            want = int(trace_id.removeprefix("0x"), 16)
        except ValueError:
            raise TraceError(
                f"trace_id={trace_id!r}: a trace id is 32 hex digits; {source} has: {listed(ids)}"
            ) from None
        if want not in ids:
            raise TraceError(f"{source}: no trace with trace_id={trace_id}; it has: {listed(ids)}")
    mine = sorted((s for s in spans if s.trace_id == want), key=lambda s: s.start_time or 0)
    trace = index_spans(want, mine)
    check_trace(trace, source, session)
    return trace


def _only_session_trace(spans: Sequence[RecordedSpan], source: str, session: Patterns, ids: list[int]) -> int:
    """Of several traces, the only one with a session span (a readiness probe is a trace of its own)."""
    patterns = as_patterns(session)
    with_session = sorted({s.trace_id for s in spans if matches(s.name, patterns)})
    if len(with_session) == 1:
        return with_session[0]
    which = f"{len(with_session)} with a session span" if with_session else "none with a session span"
    among = listed(with_session or ids)
    raise TraceError(f"{source}: {len(ids)} traces in the file, {which}; name one with trace_id=: {among}")


def check_trace(trace: Trace, source: str, session: Patterns) -> None:
    """Refuse a trace whose parentage has a cycle, or with no session span."""
    _check_cycles(trace, source)
    want, patterns = trace.trace_id, as_patterns(session)
    if not any(matches(s.name, patterns) for s in trace.spans):
        names = listed(sorted({s.name for s in trace.spans}))
        what = f"trace {want:032x}" if want else "the clean run"
        raise TraceError(
            f"{source}: {what} has no session span (session span names: {', '.join(patterns)}); "
            f"its span names: {names}; set the session span names (ini mcpfaults_session_spans, --session)"
        )


def index_spans(trace_id: int, spans: Sequence[RecordedSpan]) -> Trace:
    """``spans`` (in start order) as a :class:`Trace`. A decoded span (its ``uid`` set, its ``parent_uid``
    not) is linked to its parent by ``uid``, so the invariants see the tree as the ids draw it."""
    by_id: dict[int, RecordedSpan] = {}
    for s in spans:
        by_id.setdefault(s.span_id, s)
    kept: list[RecordedSpan] = []
    for s in spans:
        if by_id[s.span_id] is not s:
            continue
        parent = by_id.get(s.parent_id) if s.parent_id is not None else None
        if s.uid is not None and s.parent_uid is None and parent is not None and parent.uid is not None:
            s = by_id[s.span_id] = replace(s, parent_uid=parent.uid)
        kept.append(s)
    children: dict[int | None, list[RecordedSpan]] = {}
    for s in kept:
        children.setdefault(s.parent_id if s.parent_id in by_id else None, []).append(s)
    return Trace(trace_id, tuple(kept), by_id, children, len(spans) - len(kept))


def _check_cycles(trace: Trace, source: str) -> None:
    done: set[int] = set()
    for span in trace.spans:
        on_path: set[int] = set()
        node: RecordedSpan | None = span
        while node is not None and node.span_id not in done:
            if node.span_id in on_path:
                raise TraceError(
                    f"{source}: span {node.name!r} (span {node.span_id:016x}) is its own ancestor: the "
                    "trace's parentage has a cycle; every span's parent_span_id must lead to a root"
                )
            on_path.add(node.span_id)
            node = trace.parent(node)
        done.update(on_path)
