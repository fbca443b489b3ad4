"""Span capture for agent-harness tests.

:class:`SpanRecorder` is an OpenTelemetry span processor that keeps every span it sees, open or ended,
and hands out immutable :class:`RecordedSpan` snapshots. It is wired into the process the way
DESIGN §5 describes (:func:`install_recorder`, :meth:`SpanRecorder.attach`,
:meth:`SpanRecorder.watch_providers`), answers queries (:meth:`SpanRecorder.find`,
:meth:`SpanRecorder.one`, parents, children, ...) and prints the span tree that every invariant failure
shows (:func:`format_tree`).

This module imports nothing from OpenTelemetry at import time: importing the package must not cost the
SDK import, let alone touch the global tracer provider. The SDK is imported inside the functions that
need it. For the same reason :class:`SpanRecorder` implements the SDK ``SpanProcessor`` interface
without inheriting from it at runtime (the SDK calls processors by method, it never checks their type).
"""

from __future__ import annotations

import fnmatch
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, TypeVar

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.trace import TracerProvider as ApiTracerProvider

    from pytest_mcpfaults.invariants import Violation

    _ProcessorBase = SpanProcessor
else:
    _ProcessorBase = object

__all__ = [
    "DEFAULT_CLEANUP",
    "DEFAULT_SESSION",
    "Patterns",
    "RecordedEvent",
    "RecordedSpan",
    "SpanLookupError",
    "SpanRecorder",
    "SpanWiringWarning",
    "ancestors",
    "children",
    "descendants",
    "describe_span",
    "find_spans",
    "format_tree",
    "global_recorder",
    "install_recorder",
    "matches",
    "one_span",
    "parent_of",
    "roots",
]

#: Default span-name globs of a harness session span and of its cleanup spans.
DEFAULT_SESSION: tuple[str, ...] = ("Agent.Session",)
DEFAULT_CLEANUP: tuple[str, ...] = ("MCP.DeleteSession",)

#: One glob or a sequence of globs, matched against span names with :func:`fnmatch.fnmatchcase`.
Patterns: TypeAlias = str | Sequence[str]

_P = TypeVar("_P", bound="TracerProvider")
ResultSink = Callable[[str, bool, str], None]


class SpanLookupError(AssertionError):
    """A query that needs exactly one span found none or several."""


class SpanWiringWarning(UserWarning):
    """The recorder could not be wired into the global tracer provider."""


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
# Queries over a sequence of snapshots
# --------------------------------------------------------------------------------------------------


def _as_patterns(patterns: Patterns) -> tuple[str, ...]:
    if isinstance(patterns, str):
        patterns = (patterns,)
    result = tuple(patterns)
    if not result:
        raise ValueError("expected at least one span name pattern, got an empty sequence")
    for p in result:
        if not isinstance(p, str) or not p.strip():
            raise ValueError(f"span name patterns must be non-blank strings, got {p!r}")
    return result


def matches(name: str, patterns: Patterns) -> bool:
    """Whether ``name`` matches one of ``patterns`` (case-sensitive globs; a plain name matches itself)."""
    return any(fnmatch.fnmatchcase(name, p) for p in _as_patterns(patterns))


def find_spans(
    spans: Iterable[RecordedSpan], pattern: Patterns, *, exact: bool = False, status: str | None = None
) -> list[RecordedSpan]:
    """Spans whose name matches ``pattern`` (globs; names compared literally with ``exact=True``).

    ``status`` ("UNSET", "OK" or "ERROR") keeps only spans with that status. Order is start order.
    """
    pats = _as_patterns(pattern)
    found = [s for s in spans if (s.name in pats if exact else matches(s.name, pats))]
    if status is not None:
        found = [s for s in found if s.status_code == status.upper()]
    return found


def _seen_names(spans: Iterable[RecordedSpan]) -> str:
    names = list(dict.fromkeys(s.name for s in spans))
    return ", ".join(repr(n) for n in names) if names else "none"


def one_span(spans: Sequence[RecordedSpan], pattern: Patterns, *, exact: bool = False) -> RecordedSpan:
    """The single span matching ``pattern``; :class:`SpanLookupError` if there are none or several."""
    found = find_spans(spans, pattern, exact=exact)
    if len(found) == 1:
        return found[0]
    what = f"{pattern!r}" if isinstance(pattern, str) else f"any of {list(pattern)!r}"
    if not found:
        raise SpanLookupError(f"no span named {what} was recorded; span names seen: {_seen_names(spans)}")
    raise SpanLookupError(
        f"{len(found)} spans named {what} were recorded, expected exactly one:\n{format_tree(spans)}"
    )


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


# --------------------------------------------------------------------------------------------------
# Tree text
# --------------------------------------------------------------------------------------------------

_MAX_TEXT = 160


def _one_line(text: str, limit: int = _MAX_TEXT) -> str:
    text = text.replace("\r", "").replace("\n", "⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_span(span: RecordedSpan) -> str:
    """``Name [STATUS: description]`` plus ``NOT ENDED`` for an open span; one line."""
    status = span.status_code
    if span.status_description:
        status += f": {_one_line(span.status_description)}"
    text = f"{span.name} [{status}]"
    return text if span.ended else text + " ⟨NOT ENDED⟩"


def _span_lines(span: RecordedSpan, orphan: bool) -> tuple[str, list[str]]:
    head = describe_span(span)
    if span.attributes:
        head += "  " + " ".join(f"{k}={_one_line(repr(v), 60)}" for k, v in span.attributes.items())
    if orphan:
        head += f"  (parent {span.parent_id:016x} not recorded)"
    extra: list[str] = []
    for ev in span.events:
        if ev.name == "exception":
            etype = ev.attributes.get("exception.type", "?")
            emsg = ev.attributes.get("exception.message", "")
            extra.append(f"! exception {etype}: {_one_line(str(emsg))}")
        else:
            extra.append(f"· event {ev.name}")
    return head, extra


def format_tree(spans: Sequence[RecordedSpan]) -> str:
    """The spans as an indented tree: status and description, attributes, exception events, and
    ``⟨NOT ENDED⟩`` on spans that never ended. Children appear under their parent in start order."""
    if not spans:
        return "(no spans recorded)"
    index = _child_index(spans)
    keys = {_key(s) for s in spans}
    lines: list[str] = []

    def walk(span: RecordedSpan, prefix: str, last: bool, top: bool) -> None:
        orphan = span.parent_id is not None and (span.trace_id, span.parent_id) not in keys
        head, extra = _span_lines(span, orphan and top)
        branch = "" if top else ("└── " if last else "├── ")
        lines.append(prefix + branch + head)
        child_prefix = prefix if top else prefix + ("    " if last else "│   ")
        kids = index.get(_key(span), [])
        for text in extra:
            lines.append(child_prefix + ("│   " if kids else "    ") + text)
        for i, kid in enumerate(kids):
            walk(kid, child_prefix, i == len(kids) - 1, False)

    for root in roots(spans):
        walk(root, "", True, True)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# The recorder
# --------------------------------------------------------------------------------------------------


class _Entry:
    __slots__ = ("live", "snapshot")

    def __init__(self, live: ReadableSpan) -> None:
        self.live: ReadableSpan | None = live
        self.snapshot: RecordedSpan | None = None


class SpanRecorder(_ProcessorBase):
    """A span processor that records the spans of every provider it is added to.

    It implements the SDK ``SpanProcessor`` interface (``on_start``, ``on_end``, ``shutdown``,
    ``force_flush``), so spans that never end are visible too. All state is guarded by a lock; queries
    return immutable :class:`RecordedSpan` snapshots in start order.

    Spans are recorded from the moment the recorder sees them start. After :meth:`clear`, a span that
    started before the clear is ignored even when it ends later, so each test sees only its own spans.

    ``session`` and ``cleanup`` are the default span-name globs of the invariant methods. While
    ``recording`` is false, spans that start are ignored (the recorder stays attached but costs nothing
    and keeps nothing).
    """

    def __init__(
        self,
        *,
        session: Patterns = DEFAULT_SESSION,
        cleanup: Patterns = DEFAULT_CLEANUP,
        recording: bool = True,
    ) -> None:
        self._lock = threading.Lock()
        self.recording = recording
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._providers: weakref.WeakSet[TracerProvider] = weakref.WeakSet()
        self._sink: ResultSink | None = None
        self.session_patterns: tuple[str, ...] = _as_patterns(session)
        self.cleanup_patterns: tuple[str, ...] = _as_patterns(cleanup)

    # -- SpanProcessor interface -------------------------------------------------------------------

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        """Record a span that just started (SDK hook)."""
        if not self.recording:
            return
        ctx = span.get_span_context()
        with self._lock:
            self._entries[(ctx.trace_id, ctx.span_id)] = _Entry(span)

    def _on_ending(self, span: Any) -> None:
        """SDK hook called just before ``on_end``; nothing to do."""

    def on_end(self, span: ReadableSpan) -> None:
        """Freeze the snapshot of a span that just ended (SDK hook). Spans not seen starting are ignored."""
        ctx = span.get_span_context()
        if ctx is None:  # pragma: no cover - SDK spans always have a context
            return
        snap = _snapshot(span)
        with self._lock:
            entry = self._entries.get((ctx.trace_id, ctx.span_id))
            if entry is not None:
                entry.snapshot, entry.live = snap, None

    def shutdown(self) -> None:
        """Called when a provider shuts down. The recorder keeps its spans (other providers may use it)."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered; always ``True``."""
        return True

    # -- lifecycle -----------------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every recorded span. Spans already started are ignored even if they end later."""
        with self._lock:
            self._entries.clear()

    def mark(self) -> int:
        """A position in the recording: pass it to ``spans(since=...)`` to get only later spans."""
        with self._lock:
            return len(self._entries)

    def attach(self, provider: _P) -> _P:
        """Add the recorder to an SDK ``TracerProvider`` (once; later calls are no-ops). Returns it."""
        from opentelemetry.sdk.trace import TracerProvider

        if not isinstance(provider, TracerProvider):
            raise TypeError(
                f"SpanRecorder.attach() needs an opentelemetry.sdk.trace.TracerProvider, got "
                f"{type(provider).__module__}.{type(provider).__qualname__}"
            )
        with self._lock:
            if provider in self._providers:
                return provider
            self._providers.add(provider)
        provider.add_span_processor(self)
        return provider

    def is_attached(self, provider: ApiTracerProvider) -> bool:
        """Whether the recorder was added to ``provider`` through :meth:`attach` (or the wiring)."""
        with self._lock:
            return provider in self._providers

    @contextmanager
    def watch_providers(self) -> Iterator[None]:
        """While active, attach the recorder to every SDK ``TracerProvider`` constructed (subclasses
        included, as long as they run ``TracerProvider.__init__``) and to every provider passed to
        ``opentelemetry.trace.set_tracer_provider`` (called through the module attribute).

        Reentrant and nestable; the patches are removed when the last watch ends.
        """
        _start_watch(self)
        try:
            yield
        finally:
            _stop_watch(self)

    def report_to(self, sink: ResultSink | None) -> None:
        """Call ``sink(invariant_name, ok, message)`` for each invariant the assert methods check."""
        self._sink = sink

    # -- queries -------------------------------------------------------------------------------------

    def spans(self, *, since: int = 0) -> list[RecordedSpan]:
        """Snapshots of the recorded spans in start order (open spans are snapshotted now)."""
        with self._lock:
            entries = list(self._entries.values())[since:]
            pending = [(e.snapshot, e.live) for e in entries]
        out: list[RecordedSpan] = []
        for snap, live in pending:
            if snap is not None:
                out.append(snap)
            elif live is not None:
                out.append(_snapshot(live))
        return out

    def names(self) -> list[str]:
        """Names of the recorded spans in start order (with repeats)."""
        return [s.name for s in self.spans()]

    def find(
        self, pattern: Patterns, *, exact: bool = False, status: str | None = None
    ) -> list[RecordedSpan]:
        """Recorded spans whose name matches ``pattern``; see :func:`find_spans`."""
        return find_spans(self.spans(), pattern, exact=exact, status=status)

    def one(self, pattern: Patterns, *, exact: bool = False) -> RecordedSpan:
        """The single recorded span matching ``pattern``; :class:`SpanLookupError` on none or several."""
        return one_span(self.spans(), pattern, exact=exact)

    def parent(self, span: RecordedSpan) -> RecordedSpan | None:
        """The recorded parent of ``span`` (``None`` for a root or an unrecorded parent)."""
        return parent_of(self.spans(), span)

    def children(self, span: RecordedSpan) -> list[RecordedSpan]:
        """Direct children of ``span``."""
        return children(self.spans(), span)

    def descendants(self, span: RecordedSpan) -> list[RecordedSpan]:
        """Every span beneath ``span``."""
        return descendants(self.spans(), span)

    def roots(self) -> list[RecordedSpan]:
        """Spans without a recorded parent."""
        return roots(self.spans())

    def open_spans(self) -> list[RecordedSpan]:
        """Spans that started and have not ended."""
        return [s for s in self.spans() if not s.ended]

    def tree(self) -> str:
        """The recorded spans as text; see :func:`format_tree`."""
        return format_tree(self.spans())

    # -- invariants ------------------------------------------------------------------------------------

    def check(
        self, *, session: Patterns | None = None, cleanup: Patterns | None = None, max_cleanups: int = 1
    ) -> list[Violation]:
        """All violations of the recorded spans (``invariants.check_all``), without raising."""
        from pytest_mcpfaults import invariants

        return invariants.check_all(
            self.spans(),
            session=self.session_patterns if session is None else session,
            cleanup=self.cleanup_patterns if cleanup is None else cleanup,
            max_cleanups=max_cleanups,
        )

    def assert_invariants(
        self, *, session: Patterns | None = None, cleanup: Patterns | None = None, max_cleanups: int = 1
    ) -> None:
        """Assert every invariant (``check_all``); raises ``SpanInvariantError`` with the span tree."""
        __tracebackhide__ = True
        from pytest_mcpfaults import invariants

        spans = self.spans()
        found = invariants.check_all(
            spans,
            session=self.session_patterns if session is None else session,
            cleanup=self.cleanup_patterns if cleanup is None else cleanup,
            max_cleanups=max_cleanups,
        )
        self._conclude(invariants.ALL_INVARIANTS, found, spans)

    def assert_cleanup_never_flips(
        self, *, session: Patterns | None = None, cleanup: Patterns | None = None
    ) -> None:
        """Assert ``invariants.cleanup_never_flips`` over the recorded spans."""
        __tracebackhide__ = True
        from pytest_mcpfaults import invariants

        spans = self.spans()
        found = invariants.cleanup_never_flips(
            spans,
            session=self.session_patterns if session is None else session,
            cleanup=self.cleanup_patterns if cleanup is None else cleanup,
        )
        self._conclude(("cleanup_never_flips",), found, spans)

    def assert_cleanup_at_most(
        self, n: int = 1, *, session: Patterns | None = None, cleanup: Patterns | None = None
    ) -> None:
        """Assert ``invariants.cleanup_at_most`` (cleanup ran at most ``n`` times per session span)."""
        __tracebackhide__ = True
        from pytest_mcpfaults import invariants

        spans = self.spans()
        found = invariants.cleanup_at_most(
            spans,
            n,
            session=self.session_patterns if session is None else session,
            cleanup=self.cleanup_patterns if cleanup is None else cleanup,
        )
        self._conclude(("cleanup_at_most",), found, spans)

    def assert_all_spans_ended(self) -> None:
        """Assert ``invariants.all_spans_ended``: every recorded span has ended."""
        __tracebackhide__ = True
        from pytest_mcpfaults import invariants

        spans = self.spans()
        self._conclude(("all_spans_ended",), invariants.all_spans_ended(spans), spans)

    def _conclude(
        self, names: Sequence[str], found: Sequence[Violation], spans: Sequence[RecordedSpan]
    ) -> None:
        __tracebackhide__ = True
        from pytest_mcpfaults import invariants

        sink = self._sink
        if sink is not None:
            for name, ok, message in invariants.results_by_invariant(names, found):
                sink(name, ok, message)
        if found:
            raise invariants.SpanInvariantError(found, spans)


# --------------------------------------------------------------------------------------------------
# Wiring
# --------------------------------------------------------------------------------------------------

_GLOBAL_LOCK = threading.Lock()
_GLOBAL_RECORDER: SpanRecorder | None = None


def global_recorder() -> SpanRecorder:
    """The process-wide recorder that :func:`install_recorder` wires, created on first use.

    Unlike :func:`install_recorder` this wires nothing and does not turn recording on: use it to watch
    provider creation before the global provider should be touched.
    """
    global _GLOBAL_RECORDER
    with _GLOBAL_LOCK:
        if _GLOBAL_RECORDER is None:
            _GLOBAL_RECORDER = SpanRecorder(recording=False)
        return _GLOBAL_RECORDER


def install_recorder() -> SpanRecorder:
    """The process-wide recorder, wired into the global tracer provider. Idempotent; call it whenever
    spans are needed (the ``mcp_spans`` fixture and the span gate do, at the start of every test).

    * If the global provider (``opentelemetry.trace.get_tracer_provider()``) is an SDK
      ``TracerProvider``, the recorder is added to it (once).
    * If no global provider is set yet, an SDK ``TracerProvider`` with the recorder is installed as the
      global one. Tracers obtained earlier from the API's proxy provider resolve to it on their next span.
    * Any other global provider (a no-op or non-SDK one) cannot take a span processor: a
      :class:`SpanWiringWarning` is issued and only attached or watched providers are recorded.

    Turns ``recording`` on.
    """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    recorder = global_recorder()
    with _GLOBAL_LOCK:
        current = trace.get_tracer_provider()
        if isinstance(current, trace.ProxyTracerProvider):
            provider = TracerProvider()
            recorder.attach(provider)
            trace.set_tracer_provider(provider)
            current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            recorder.attach(current)
        else:
            warnings.warn(
                f"the global tracer provider is a {type(current).__module__}.{type(current).__qualname__}, "
                "not an opentelemetry.sdk.trace.TracerProvider; its spans cannot be recorded",
                SpanWiringWarning,
                stacklevel=2,
            )
        recorder.recording = True
    return recorder


# --------------------------------------------------------------------------------------------------
# Watching provider creation
# --------------------------------------------------------------------------------------------------

_WATCH_LOCK = threading.Lock()
_WATCHERS: dict[SpanRecorder, int] = {}
_SAVED: dict[str, Any] = {}


def _watchers() -> list[SpanRecorder]:
    with _WATCH_LOCK:
        return list(_WATCHERS)


def _start_watch(recorder: SpanRecorder) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    with _WATCH_LOCK:
        _WATCHERS[recorder] = _WATCHERS.get(recorder, 0) + 1
        if _SAVED:
            return
        original_init = TracerProvider.__init__
        original_set = trace.set_tracer_provider

        def __init__(self: TracerProvider, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            for rec in _watchers():
                rec.attach(self)

        def set_tracer_provider(tracer_provider: ApiTracerProvider) -> None:
            if isinstance(tracer_provider, TracerProvider):
                for rec in _watchers():
                    rec.attach(tracer_provider)
            original_set(tracer_provider)

        __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
        set_tracer_provider.__wrapped__ = original_set  # type: ignore[attr-defined]
        _SAVED.update(init=original_init, set=original_set, new_init=__init__, new_set=set_tracer_provider)
        TracerProvider.__init__ = __init__  # type: ignore[method-assign]
        trace.set_tracer_provider = set_tracer_provider


def _stop_watch(recorder: SpanRecorder) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    with _WATCH_LOCK:
        count = _WATCHERS.get(recorder, 0) - 1
        if count > 0:
            _WATCHERS[recorder] = count
            return
        _WATCHERS.pop(recorder, None)
        if _WATCHERS or not _SAVED:
            return
        # Restore only what is still ours: someone who patched on top of us keeps their patch.
        if TracerProvider.__init__ is _SAVED["new_init"]:
            TracerProvider.__init__ = _SAVED["init"]  # type: ignore[method-assign]
        if trace.set_tracer_provider is _SAVED["new_set"]:
            trace.set_tracer_provider = _SAVED["set"]
        _SAVED.clear()
