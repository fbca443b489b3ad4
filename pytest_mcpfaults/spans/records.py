"""Recorded span snapshots, the parent/child relations between them, and the tree text every invariant
failure and lookup error shows. Nothing here imports OpenTelemetry at runtime.

A span received from another process arrives ended, often before its parent (exporters send spans as
they end, in batches), and its ids may repeat (forked ``random`` state, custom id generators, a
reseeded ``random``): so its parent is not fixed when it arrives, and :func:`link_received` resolves
every received span's parent from the whole set, the same way whatever order they arrived in, by the
rules docs/spans.md ("Identity and parents of received spans") states.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

UIDS = itertools.count(1)
"""Source of every ``RecordedSpan.uid`` the recorder gives (in-process and received spans alike):
unique in the process (``next`` on an ``itertools.count`` is atomic under the GIL)."""


class _EventFields(NamedTuple):
    name: str
    attributes: Mapping[str, Any]


class RecordedEvent(_EventFields):
    """Snapshot of one span event: its name and a read-only copy of its attributes, a ``(name,
    attributes)`` pair; ``timestamp`` is when the event happened (nanoseconds since the epoch, ``None``
    when unknown). The timestamp is not part of the pair: equality and unpacking see name and
    attributes only."""

    def __new__(cls, name: str, attributes: Mapping[str, Any], timestamp: int | None = None) -> RecordedEvent:
        self = super().__new__(cls, name, attributes)
        object.__setattr__(self, "_timestamp", timestamp)
        return self

    @property
    def timestamp(self) -> int | None:
        """When the event was added to its span (nanoseconds since the epoch), if known."""
        ts: int | None = self.__dict__.get("_timestamp")
        return ts

    def __getnewargs__(self) -> tuple[str, Mapping[str, Any], int | None]:
        return (self.name, self.attributes, self.timestamp)


NO_RESOURCE: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, eq=True)
class RecordedSpan:
    """Immutable snapshot of one span, taken when it ended (or when queried, if it is still open).

    Ids are the integer OpenTelemetry ids (``parent_id`` ``None`` for a root); ``status_code`` is
    ``"UNSET"``, ``"OK"`` or ``"ERROR"``; times are nanoseconds since the epoch (``end_time`` ``None``
    while open). OpenTelemetry ids repeat in practice, so the recorder gives each span its own
    identity: ``uid`` (unique in the process, increasing in start order) and ``parent_uid`` (the
    recorded span it started under; ``None`` for a root or an unrecorded parent), which the relation
    functions follow (the ids only for snapshots built by hand, ``uid`` ``None``).
    ``ancestors_at_start`` and ``ancestor_descriptions_at_start`` are ``(uid, status_code)`` and
    ``(uid, status_description)`` of each recorded ancestor, nearest first, when this span started.
    ``resource``: the attributes of the resource (the process) that produced it; empty when unknown.
    Equality compares every field; the hash uses ``uid`` and the ids.
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
    uid: int | None = None
    parent_uid: int | None = None
    ancestors_at_start: tuple[tuple[int, str], ...] = ()
    resource: Mapping[str, Any] = field(default_factory=lambda: NO_RESOURCE)
    ancestor_descriptions_at_start: tuple[tuple[int, str | None], ...] = ()
    #: The span's kind as OpenTelemetry names it (``'CLIENT'``, ``'SERVER'``, ``'INTERNAL'``, ...):
    #: session hygiene reads a client's call spans by it. ``'INTERNAL'`` (the API's default) for a
    #: span received or built by hand.
    kind: str = "INTERNAL"

    def __hash__(self) -> int:
        return hash((self.uid, self.trace_id, self.span_id))

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

    def status_of_ancestor_at_start(self, ancestor: RecordedSpan) -> str | None:
        """``ancestor``'s status code when this span started, or ``None`` if the recorder did not see
        it (not a recorded ancestor, or a snapshot built by hand)."""
        if ancestor.uid is None:
            return None
        return next((code for uid, code in self.ancestors_at_start if uid == ancestor.uid), None)

    def ancestor_at_start(self, ancestor: RecordedSpan) -> tuple[str, str | None] | None:
        """``(status_code, status_description)`` of ``ancestor`` when this span started, or ``None``
        if the recorder did not see it (not a recorded ancestor, a received span, a snapshot built by
        hand)."""
        code = self.status_of_ancestor_at_start(ancestor)
        if code is None:
            return None
        desc = next((d for uid, d in self.ancestor_descriptions_at_start if uid == ancestor.uid), None)
        return code, desc


# --------------------------------------------------------------------------------------------------
# Relations within a sequence of snapshots
# --------------------------------------------------------------------------------------------------


_Key = tuple[str, int, int]


def span_key(span: RecordedSpan) -> _Key:
    """The ids only for a snapshot built by hand (no ``uid``)."""
    if span.uid is not None:
        return ("uid", span.uid, 0)
    return ("ids", span.trace_id, span.span_id)


def _parent_key(span: RecordedSpan) -> _Key | None:
    if span.uid is not None:
        return None if span.parent_uid is None else ("uid", span.parent_uid, 0)
    return None if span.parent_id is None else ("ids", span.trace_id, span.parent_id)


def parent_of(spans: Sequence[RecordedSpan], span: RecordedSpan) -> RecordedSpan | None:
    """The recorded parent of ``span``, or ``None`` for a root or a parent that was not recorded."""
    want = _parent_key(span)
    if want is None:
        return None
    return next((s for s in spans if span_key(s) == want), None)


def children(spans: Sequence[RecordedSpan], span: RecordedSpan) -> list[RecordedSpan]:
    """Direct children of ``span`` among ``spans``, in start order."""
    key = span_key(span)
    return [s for s in spans if _parent_key(s) == key]


def descendants(spans: Sequence[RecordedSpan], span: RecordedSpan) -> list[RecordedSpan]:
    """Every span beneath ``span`` (children, their children, ...), depth first, in start order."""
    return subtree(child_index(spans), span)[1:]


def subtree(index: Mapping[_Key, list[RecordedSpan]], span: RecordedSpan) -> list[RecordedSpan]:
    out: list[RecordedSpan] = []
    seen: set[_Key] = set()
    stack = [span]
    while stack:
        s = stack.pop()
        if span_key(s) in seen:  # defensive: hand-made snapshots may repeat ids; never loop
            continue
        seen.add(span_key(s))
        out.append(s)
        stack.extend(reversed(index.get(span_key(s), [])))
    return out


def ancestors(spans: Sequence[RecordedSpan], span: RecordedSpan) -> list[RecordedSpan]:
    """Recorded ancestors of ``span``, nearest first."""
    out: list[RecordedSpan] = []
    seen = {span_key(span)}
    parent = parent_of(spans, span)
    while parent is not None and span_key(parent) not in seen:
        seen.add(span_key(parent))
        out.append(parent)
        parent = parent_of(spans, parent)
    return out


def roots(spans: Sequence[RecordedSpan]) -> list[RecordedSpan]:
    """Spans without a recorded parent (true roots, and spans whose parent was not recorded)."""
    keys = {span_key(s) for s in spans}
    return [s for s in spans if (p := _parent_key(s)) is None or p not in keys]


def child_index(spans: Sequence[RecordedSpan]) -> dict[_Key, list[RecordedSpan]]:
    index: dict[_Key, list[RecordedSpan]] = {}
    for s in spans:
        p = _parent_key(s)
        if p is not None:
            index.setdefault(p, []).append(s)
    return index


@dataclass(frozen=True)
class Received:
    """``span``'s ``parent_uid`` is not set yet: :func:`link_received` resolves it."""

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
    """``local_ids``: ``(trace_id, span_id) -> uid`` of the most recently started in-process span with
    those ids, for parents propagated from the test process."""
    by_ids: dict[tuple[Hashable, int, int], list[Received]] = {}
    for r in received:
        by_ids.setdefault((r.source, r.span.trace_id, r.span.span_id), []).append(r)
    parents: dict[int, int | None] = {}
    kept: dict[int, RecordedSpan] = {}
    for r in received:
        span = r.span
        assert span.uid is not None
        kept[span.uid] = span
        parent_uid: int | None = None
        if span.parent_id is not None:
            candidates = [c for c in by_ids.get((r.source, span.trace_id, span.parent_id), ()) if c is not r]
            if candidates:
                parent_uid = max(candidates, key=lambda c: _rank(c.span, span, c.seq)).span.uid
            else:
                parent_uid = local_ids.get((span.trace_id, span.parent_id))
        parents[span.uid] = parent_uid
    _cut_cycles(parents)
    return {
        uid: span if parents[uid] is None else dataclasses.replace(span, parent_uid=parents[uid])
        for uid, span in kept.items()
    }


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


def one_line(text: str, limit: int = 160) -> str:
    text = text.replace("\r", "").replace("\n", "⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_span(span: RecordedSpan) -> str:
    """``Name [STATUS: description]`` plus ``NOT ENDED`` for an open span; one line."""
    status = span.status_code
    if span.status_description:
        status += f": {one_line(span.status_description)}"
    text = f"{span.name} [{status}]"
    return text if span.ended else text + " ⟨NOT ENDED⟩"


def _span_lines(span: RecordedSpan, orphan: bool) -> tuple[str, list[str]]:
    head = describe_span(span)
    if span.attributes:
        head += "  " + " ".join(f"{k}={one_line(repr(v), 60)}" for k, v in span.attributes.items())
    if orphan:
        head += f"  (parent {span.parent_id:016x} not recorded)"
    extra: list[str] = []
    for ev in span.events:
        if ev.name == "exception":
            etype = ev.attributes.get("exception.type", "?")
            emsg = ev.attributes.get("exception.message", "")
            extra.append(f"! exception {etype}: {one_line(str(emsg))}")
        else:
            extra.append(f"· event {ev.name}")
    return head, extra


def format_tree(spans: Sequence[RecordedSpan]) -> str:
    """The spans as an indented tree: status and description, attributes, exception events, and
    ``⟨NOT ENDED⟩`` on spans that never ended. Children appear under their parent in start order."""
    if not spans:
        return "(no spans recorded)"
    index = child_index(spans)
    lines: list[str] = []

    def walk(span: RecordedSpan, prefix: str, last: bool, top: bool) -> None:
        # A top-level span is a root of ``spans``: if it has a parent at all, that one was not recorded.
        head, extra = _span_lines(span, top and span.parent_id is not None)
        branch = "" if top else ("└── " if last else "├── ")
        lines.append(prefix + branch + head)
        child_prefix = prefix if top else prefix + ("    " if last else "│   ")
        kids = index.get(span_key(span), [])
        for text in extra:
            lines.append(child_prefix + ("│   " if kids else "    ") + text)
        for i, kid in enumerate(kids):
            walk(kid, child_prefix, i == len(kids) - 1, False)

    for root in roots(spans):
        walk(root, "", True, True)
    return "\n".join(lines)
