"""Recorded span snapshots and the parent/child relations between them.

:class:`RecordedSpan` (with its :class:`RecordedEvent` list) is the immutable snapshot of one span that
:class:`~pytest_mcpfaults.spans.SpanRecorder` hands out. The functions here walk the tree a sequence of
snapshots forms (:func:`parent_of`, :func:`children`, :func:`descendants`, :func:`ancestors`,
:func:`roots`). Nothing here imports OpenTelemetry at runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "RecordedEvent",
    "RecordedSpan",
    "ancestors",
    "children",
    "descendants",
    "parent_of",
    "roots",
]


class RecordedEvent(NamedTuple):
    """Snapshot of one span event: its name and a read-only copy of its attributes."""

    name: str
    attributes: Mapping[str, Any]


@dataclass(frozen=True, eq=True)
class RecordedSpan:
    """Immutable snapshot of one span, taken when it ended (or when queried, if it is still open).

    Ids are the integer OpenTelemetry ids; ``parent_id`` is ``None`` for a root span. ``status_code`` is
    ``"UNSET"``, ``"OK"`` or ``"ERROR"``. Times are nanoseconds since the epoch; ``end_time`` is ``None``
    for a span that has not ended. Equality compares every field; the hash uses the ids only.
    """

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    status_code: str
    status_description: str | None
    attributes: Mapping[str, Any]
    events: tuple[RecordedEvent, ...]
    start_time: int | None
    end_time: int | None

    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id))

    @property
    def ended(self) -> bool:
        """Whether the span had ended when this snapshot was taken."""
        return self.end_time is not None

    @property
    def failed(self) -> bool:
        """Whether the span's status is ERROR."""
        return self.status_code == "ERROR"

    @property
    def trace_id_hex(self) -> str:
        """The trace id as 32 hex digits, the way exporters print it."""
        return f"{self.trace_id:032x}"

    @property
    def span_id_hex(self) -> str:
        """The span id as 16 hex digits."""
        return f"{self.span_id:016x}"

    @property
    def exceptions(self) -> tuple[tuple[str, str], ...]:
        """``(exception.type, exception.message)`` of each ``exception`` event, in order."""
        return tuple(
            (str(e.attributes.get("exception.type", "")), str(e.attributes.get("exception.message", "")))
            for e in self.events
            if e.name == "exception"
        )

    def event_names(self) -> list[str]:
        """Names of the span's events, in order."""
        return [e.name for e in self.events]


def _snapshot(span: ReadableSpan) -> RecordedSpan:
    ctx = span.get_span_context()
    parent = span.parent
    attrs: dict[str, Any] = {}
    for _ in range(3):  # another thread may set an attribute on an open span while we copy
        try:
            attrs = dict(span.attributes or {})
            break
        except RuntimeError:  # pragma: no cover - needs a concurrent writer
            continue
    return RecordedSpan(
        name=span.name,
        trace_id=ctx.trace_id if ctx is not None else 0,
        span_id=ctx.span_id if ctx is not None else 0,
        parent_id=parent.span_id if parent is not None else None,
        status_code=span.status.status_code.name,
        status_description=span.status.description,
        attributes=MappingProxyType(attrs),
        events=tuple(RecordedEvent(e.name, MappingProxyType(dict(e.attributes or {}))) for e in span.events),
        start_time=span.start_time,
        end_time=span.end_time,
    )


# --------------------------------------------------------------------------------------------------
# Relations within a sequence of snapshots
# --------------------------------------------------------------------------------------------------


def _key(span: RecordedSpan) -> tuple[int, int]:
    return (span.trace_id, span.span_id)


def parent_of(spans: Sequence[RecordedSpan], span: RecordedSpan) -> RecordedSpan | None:
    """The recorded parent of ``span``, or ``None`` for a root or a parent that was not recorded."""
    if span.parent_id is None:
        return None
    for s in spans:
        if s.trace_id == span.trace_id and s.span_id == span.parent_id:
            return s
    return None


def children(spans: Sequence[RecordedSpan], span: RecordedSpan) -> list[RecordedSpan]:
    """Direct children of ``span`` among ``spans``, in start order."""
    return [s for s in spans if s.trace_id == span.trace_id and s.parent_id == span.span_id]


def descendants(spans: Sequence[RecordedSpan], span: RecordedSpan) -> list[RecordedSpan]:
    """Every span beneath ``span`` (children, their children, ...), depth first, in start order."""
    index = _child_index(spans)
    out: list[RecordedSpan] = []
    stack = list(reversed(index.get(_key(span), [])))
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(reversed(index.get(_key(s), [])))
    return out


def ancestors(spans: Sequence[RecordedSpan], span: RecordedSpan) -> list[RecordedSpan]:
    """Recorded ancestors of ``span``, nearest first."""
    by_key = {_key(s): s for s in spans}
    out: list[RecordedSpan] = []
    cur = span
    while cur.parent_id is not None and (cur.trace_id, cur.parent_id) in by_key:
        cur = by_key[(cur.trace_id, cur.parent_id)]
        if cur in out:  # defensive: ids are unique, but never loop
            break
        out.append(cur)
    return out


def roots(spans: Sequence[RecordedSpan]) -> list[RecordedSpan]:
    """Spans without a recorded parent (true roots, and spans whose parent was not recorded)."""
    keys = {_key(s) for s in spans}
    return [s for s in spans if s.parent_id is None or (s.trace_id, s.parent_id) not in keys]


def _child_index(spans: Sequence[RecordedSpan]) -> dict[tuple[int, int], list[RecordedSpan]]:
    index: dict[tuple[int, int], list[RecordedSpan]] = {}
    for s in spans:
        if s.parent_id is not None:
            index.setdefault((s.trace_id, s.parent_id), []).append(s)
    return index
