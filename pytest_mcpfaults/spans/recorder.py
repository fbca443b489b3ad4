"""The span recorder: an OpenTelemetry span processor that keeps every span it sees, open or ended,
wired into the process the way DESIGN §5 describes, with its queries and invariant assertions.

This module imports nothing from OpenTelemetry at import time: importing the package must not cost the
SDK import, let alone touch the global tracer provider. For the same reason :class:`SpanRecorder`
implements the SDK ``SpanProcessor`` interface without inheriting from it at runtime (the SDK calls
processors by method, it never checks their type).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import operator
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_mcpfaults.options.validation import is_count, is_finite_number
from pytest_mcpfaults.spans.queries import (
    DEFAULT_CLEANUP,
    DEFAULT_SESSION,
    Patterns,
    SpanLookupError,
    as_patterns,
    find_spans,
)
from pytest_mcpfaults.spans.records import (
    NO_RESOURCE,
    UIDS,
    Received,
    RecordedEvent,
    RecordedSpan,
    link_received,
)
from pytest_mcpfaults.spans.views import ResultSink, SpanQueries

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.trace import TracerProvider as ApiTracerProvider

    _ProcessorBase = SpanProcessor
else:
    _ProcessorBase = object

_P = TypeVar("_P", bound="TracerProvider")


class SpanWiringWarning(UserWarning):
    """The recorder could not be wired into the global tracer provider."""


@functools.cache
def _sdk() -> tuple[Callable[..., Any], type]:
    """``(get_current_span, ReadableSpan)``, imported on first use (only the SDK calls ``on_start``, so
    it is loaded by then) and kept for the hot path."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan

    return (trace.get_current_span, ReadableSpan)


class _Entry:
    """One recorded span: the SDK span object itself (its identity), and what was resolved at start."""

    __slots__ = (
        "ancestor_descriptions_at_start",
        "ancestors_at_start",
        "ids",
        "parent",
        "seq",
        "snapshot",
        "span",
        "uid",
    )

    def __init__(self, span: Any, uid: int, parent: _Entry | None, seq: int) -> None:
        self.span = span  # kept until clear(): ``id(span)`` cannot be reused while the entry lives
        self.uid = uid
        self.seq = seq  # its position in the recording (what mark() counts)
        self.parent = parent
        ctx = span.get_span_context()
        self.ids: tuple[int, int] = (ctx.trace_id, ctx.span_id) if ctx is not None else (0, 0)
        self.snapshot: RecordedSpan | None = None  # set when the span ends
        chain = []
        while parent is not None:
            chain.append((parent.uid, *parent.status()))
            parent = parent.parent
        self.ancestors_at_start = tuple((uid, code) for uid, code, _ in chain)
        self.ancestor_descriptions_at_start = tuple((uid, desc) for uid, _, desc in chain)

    def status(self) -> tuple[str, str | None]:
        if self.snapshot is not None:
            return self.snapshot.status_code, self.snapshot.status_description
        return str(self.span.status.status_code.name), self.span.status.description

    def take(self) -> RecordedSpan:
        """The frozen snapshot of an ended span, or a snapshot of the open span as it is now."""
        return self.snapshot if self.snapshot is not None else self.freeze(self.span)

    def freeze(self, span: ReadableSpan) -> RecordedSpan:
        """A snapshot of ``span`` (this entry's span or the SDK's read-only copy of it)."""
        parent = span.parent
        attrs: dict[str, Any] = {}
        for _ in range(3):  # another thread may set an attribute on an open span while we copy
            try:
                attrs = dict(span.attributes or {})
                break
            except RuntimeError:  # pragma: no cover - needs a concurrent writer
                continue
        # The SDK's resource attributes are immutable: a read-only view, not a copy, is enough.
        resource = getattr(getattr(span, "resource", None), "attributes", None)
        return RecordedSpan(
            name=span.name,
            trace_id=self.ids[0],
            span_id=self.ids[1],
            parent_id=parent.span_id if parent is not None else None,
            status_code=span.status.status_code.name,
            status_description=span.status.description,
            attributes=MappingProxyType(attrs),
            events=tuple(
                RecordedEvent(e.name, MappingProxyType(dict(e.attributes or {})), e.timestamp)
                for e in span.events
            ),
            start_time=span.start_time,
            end_time=span.end_time,
            uid=self.uid,
            parent_uid=self.parent.uid if self.parent is not None else None,
            ancestors_at_start=self.ancestors_at_start,
            resource=MappingProxyType(resource) if resource else NO_RESOURCE,
            ancestor_descriptions_at_start=self.ancestor_descriptions_at_start,
            kind=span.kind.name,
        )


_SEQ = operator.attrgetter("seq")


class SpanRecorder(SpanQueries, _ProcessorBase):
    """A span processor that records the spans of every provider it is added to, open ones too (it
    implements ``on_start``). Queries return immutable :class:`RecordedSpan` snapshots in start order.

    Spans are recorded by identity (the span object), never by their OpenTelemetry ids, which repeat in
    practice (Hypothesis reseeds ``random``, which the SDK draws ids from). A span's parent is resolved
    when it starts: the recorded span object in its parent context, else (a propagated context) the
    latest recorded span with the parent's ids, open ones first. After :meth:`clear`, a span that
    started before is ignored even when it ends later. Spans of other processes join ended, through
    :meth:`add_received` (the OTLP receiver calls it).

    ``session`` and ``cleanup``: the invariant methods' default span-name globs (``session_patterns``,
    ``cleanup_patterns``); ``flip_cleanup_patterns`` / ``count_cleanup_patterns``, when set, replace
    ``cleanup_patterns`` for ``cleanup_never_flips`` / ``cleanup_at_most`` alone; ``max_cleanups``
    (default 1) is what ``cleanup_at_most`` allows. While ``recording`` is false, spans that start are
    ignored. ``received_limit`` bounds the received spans kept (:meth:`set_received_limit`): past it the
    oldest are dropped, counted in :attr:`dropped_received`; in-process spans are never dropped.
    """

    _linked: dict[int, RecordedSpan] | None

    def __init__(
        self,
        *,
        session: Patterns = DEFAULT_SESSION,
        cleanup: Patterns = DEFAULT_CLEANUP,
        recording: bool = True,
        received_limit: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.recording = recording
        self.received_limit: int | None = None
        self.dropped_received = 0  # received spans dropped by the limit since the recorder was made
        self._changed = threading.Condition(self._lock)  # notified when a span ends or is received
        self._version = 0  # moves whenever a span ends, arrives or is forgotten: what waits re-check
        self._forget()
        self._providers: weakref.WeakSet[TracerProvider] = weakref.WeakSet()
        self._sink: ResultSink | None = None
        self.session_patterns: tuple[str, ...] = as_patterns(session)
        self.cleanup_patterns: tuple[str, ...] = as_patterns(cleanup)
        # Cleanup names of cleanup_never_flips / cleanup_at_most alone (None: cleanup_patterns).
        self.flip_cleanup_patterns: tuple[str, ...] | None = None
        self.count_cleanup_patterns: tuple[str, ...] | None = None
        # The cleanup runs a session may have, unless a check is told otherwise.
        self.max_cleanups = 1
        self.set_received_limit(received_limit)

    def set_received_limit(self, limit: int | None) -> None:
        """Keep at most ``limit`` received spans, dropping the oldest (``None``: keep every one)."""
        if limit is not None and not is_count(limit, minimum=1):
            raise ValueError(
                f"SpanRecorder: received_limit must be a positive integer or None, got {limit!r}"
            )
        with self._lock:
            self.received_limit = limit
            self._enforce_limit()

    # -- SpanProcessor interface -------------------------------------------------------------------

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        """Record a span that just started and resolve its recorded parent (SDK hook)."""
        if not self.recording:
            return
        get_current_span, sdk_span = _sdk()
        parent_ids = span.parent  # the parent's SpanContext, None for a root
        # The SDK calls on_start synchronously from start_span, so the parent context (None: the
        # current one) still holds the span object the new span was started under.
        parent_obj = get_current_span(parent_context) if parent_ids is not None else None
        uid = next(UIDS)
        with self._lock:
            parent = self._resolve_parent(parent_obj, parent_ids, sdk_span)
            entry = _Entry(span, uid, parent, self._appended)
            self._appended += 1
            self._entries.append(entry)
            if self._received:
                self._linked = None  # a received span's parent may be this one (a propagated context)
            self._by_id[id(span)] = self._by_id[id(span.get_span_context())] = entry
            self._by_ids.setdefault(entry.ids, []).append(entry)

    def _resolve_parent(self, parent_obj: Any, parent_ids: Any, sdk_span: type) -> _Entry | None:
        """The recorded entry a span started under (called with the lock held)."""
        if parent_ids is None:
            return None
        if parent_obj is not None:
            entry = self._by_id.get(id(parent_obj))
            if entry is not None and entry.span is parent_obj:
                return entry
            if isinstance(parent_obj, sdk_span):
                # A real span object the recorder did not record (started before a clear, or by a
                # provider it is not attached to): its ids may equal a recorded span's, but it is not one.
                return None
        # Only the ids are known (a NonRecordingSpan, e.g. a propagated context): the most recently
        # started recorded span with those ids that is still open, else the most recent one.
        same = self._by_ids.get((parent_ids.trace_id, parent_ids.span_id), [])
        return next((e for e in reversed(same) if e.snapshot is None), same[-1] if same else None)

    def _on_ending(self, span: Any) -> None:
        """An SDK hook (just before ``on_end``): nothing to do."""

    def on_end(self, span: ReadableSpan) -> None:
        """Freeze the snapshot of a span that just ended (SDK hook). Spans not seen starting are ignored.

        The SDK passes a read-only copy here, not the span object; the copy shares the span's
        ``SpanContext`` object, which identifies the entry (ids alone would not)."""
        with self._lock:
            entry = self._by_id.get(id(span.get_span_context()))
        if entry is None or entry.span.get_span_context() is not span.get_span_context():
            return
        snap = entry.freeze(span)
        with self._lock:
            entry.snapshot = snap
            self._version += 1
            self._changed.notify_all()

    def shutdown(self) -> None:
        """Called when a provider shuts down. The recorder keeps its spans (other providers may use it)."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered; always ``True``."""
        return True

    # -- lifecycle -----------------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every recorded span. Spans already started are ignored even if they end later."""
        with self._lock:
            self._forget()
            self._version += 1

    def _forget(self) -> None:
        """The recording's state, empty (lock held, or at construction)."""
        self._appended = 0  # entries recorded since the last clear (dropped ones included): mark()
        self._entries: list[_Entry | Received] = []  # start order (received ones: arrival order)
        self._received = 0  # received entries among _entries
        self._linked = None  # received uid -> linked snapshot (a cache)
        # id(span object) and id(its SpanContext object) -> entry: both live as long as the entry does
        self._by_id: dict[int, _Entry] = {}
        self._by_ids: dict[tuple[int, int], list[_Entry]] = {}  # (trace_id, span_id) -> entries, in order

    def mark(self) -> int:
        """A position in the recording: pass it to ``spans(since=...)`` to get only later spans."""
        with self._lock:
            return self._appended

    @property
    def count(self) -> int:
        """How many spans are recorded now (open ones included; spans dropped by the limit not)."""
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

    # -- queries -------------------------------------------------------------------------------------

    def spans(self, *, since: int = 0) -> list[RecordedSpan]:
        """Snapshots of the recorded spans in start order (open spans are snapshotted now).

        Received spans (:meth:`add_received`) are merged in by start time; ``since`` counts them in
        arrival order (a mark taken before they arrived includes them)."""
        with self._lock:
            entries = self._entries[bisect.bisect_left(self._entries, since, key=_SEQ) :]
            linked = self._link() if self._received else {}
        local = [e.take() for e in entries if isinstance(e, _Entry)]
        received = [linked[e.span.uid] for e in entries if isinstance(e, Received) and e.span.uid is not None]
        if not received:
            return local
        received.sort(key=lambda s: (s.start_time or 0, s.uid or 0))
        return list(heapq.merge(local, received, key=lambda s: s.start_time or 0))

    def _link(self) -> dict[int, RecordedSpan]:
        """The received spans with their parents resolved (called with the lock held; cached until the
        next span starts or arrives)."""
        if self._linked is None:
            rec = [e for e in self._entries if isinstance(e, Received)]
            local = {e.ids: e.uid for e in self._entries if isinstance(e, _Entry)}
            self._linked = link_received(rec, local)
        return self._linked

    # -- spans from other processes ------------------------------------------------------------------

    def add_received(self, spans: Sequence[RecordedSpan], source: Hashable) -> int:
        """Record spans that another process exported (ended; each with its own ``uid``, no
        ``parent_uid``), all from ``source`` (their resource: spans resolve parents only among spans of
        the same source, or in-process spans with the parent's ids). Returns how many were recorded:
        none while ``recording`` is false. Wakes :meth:`wait_for_span`."""
        if not self.recording or not spans:
            return 0
        with self._lock:
            first = self._appended
            self._entries.extend(Received(s, source, first + i) for i, s in enumerate(spans))
            self._appended += len(spans)
            self._received += len(spans)
            self._linked = None
            self._enforce_limit()
            self._version += 1
            self._changed.notify_all()
        return len(spans)

    def _enforce_limit(self) -> None:
        """Drop the oldest received spans beyond ``received_limit`` (lock held)."""
        limit = self.received_limit
        if limit is None or self._received <= limit:
            return
        excess = self._received - limit
        if self._received == len(self._entries):  # only received spans (serve): the oldest come first
            del self._entries[:excess]
        else:
            oldest = {id(e) for e in [e for e in self._entries if isinstance(e, Received)][:excess]}
            self._entries = [e for e in self._entries if id(e) not in oldest]
        self._received -= excess
        self.dropped_received += excess
        self._linked = None

    def wait_for_span(
        self,
        pattern: Patterns,
        *,
        timeout: float = 10.0,
        count: int = 1,
        exact: bool = False,
        cancel: threading.Event | None = None,
    ) -> list[RecordedSpan]:
        """Wait until at least ``count`` spans whose name matches ``pattern`` have ended (in this
        process or received from another), at most ``timeout`` seconds; returns them (ended ones, in
        start order). A flush barrier for exporters that batch. On timeout raises
        :class:`SpanLookupError` naming what was recorded instead; so it does as soon as ``cancel``
        (if given) is set."""
        as_patterns(pattern)
        if count < 1:
            raise ValueError(f"wait_for_span: count must be >= 1, got {count!r}")
        if not is_finite_number(timeout):  # NaN never passes a deadline: it would wait for ever
            raise ValueError(f"wait_for_span: timeout must be a finite number of seconds, got {timeout!r}")
        deadline = time.monotonic() + timeout
        seen = -1
        while True:
            with self._lock:
                version = self._version
            if version != seen:  # looked for again only when something changed (50k spans: ms)
                seen = version
                found = [s for s in find_spans(self.spans(), pattern, exact=exact) if s.ended]
                if len(found) >= count:
                    return found
            left = deadline - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                break
            with self._lock:
                # re-checked under the lock: a span that ended since the query above woke nobody
                if self._version == seen:
                    self._changed.wait(min(left, 0.1 if cancel is not None else 0.5))
        text = _wait_failure(pattern, count, timeout, self.spans())
        if cancel is not None and cancel.is_set():
            text = text.replace(f" within {timeout:g} s", "", 1)
            text += "; the wait was cancelled before its timeout"
        raise SpanLookupError(text)


def _wait_failure(pattern: Patterns, count: int, timeout: float, spans: Sequence[RecordedSpan]) -> str:
    what = f"{pattern!r}" if isinstance(pattern, str) else f"any of {list(pattern)!r}"
    want = "no span" if count == 1 else f"fewer than {count} spans"
    found = find_spans(spans, pattern)
    ended = sum(1 for s in found if s.ended)
    parts: dict[str, list[int]] = {}
    for s in spans:
        parts.setdefault(s.name, [0, 0])[0 if s.ended else 1] += 1
    seen = ", ".join(
        f"{name!r} ({ended_n} ended" + (f", {open_n} open)" if open_n else ")")
        for name, (ended_n, open_n) in parts.items()
    )
    services = sorted({str(s.resource.get("service.name")) for s in spans if s.resource.get("service.name")})
    head = f"{want} named {what} ended within {timeout:g} s ({ended} ended, {len(found) - ended} open)"
    tail = f"; from services: {', '.join(services)}" if services else ""
    return f"{head}; spans recorded: {seen or 'none'}{tail}"


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
