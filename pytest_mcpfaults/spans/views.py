"""What a test asks of recorded spans: queries and the invariant assertions, over :meth:`spans`. The
recorder (``recorder.py``) records and stores; this half only reads its snapshots and its patterns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_mcpfaults import invariants
from pytest_mcpfaults.spans import results as span_results
from pytest_mcpfaults.spans.queries import Patterns, find_spans, one_span
from pytest_mcpfaults.spans.records import RecordedSpan, children, descendants, format_tree, parent_of, roots

ResultSink = Callable[[str, bool, str], None]


class SpanQueries:
    """Queries and invariant assertions (a base of ``SpanRecorder``, which defines :meth:`spans`, the
    default patterns and the sink)."""

    session_patterns: tuple[str, ...]
    cleanup_patterns: tuple[str, ...]
    flip_cleanup_patterns: tuple[str, ...] | None
    count_cleanup_patterns: tuple[str, ...] | None
    max_cleanups: int
    _sink: ResultSink | None

    def spans(self, *, since: int = 0) -> list[RecordedSpan]:  # pragma: no cover - the recorder's
        raise NotImplementedError

    def report_to(self, sink: ResultSink | None) -> None:
        """Call ``sink(invariant_name, ok, message)`` for each invariant the assert methods check."""
        self._sink = sink

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

    def _args(
        self, session: Patterns | None, cleanup: Patterns | None, max_cleanups: int | None = None
    ) -> dict[str, Any]:
        """``check_all``'s arguments, the recorder's where not given: ``cleanup`` given applies to every
        invariant, else an invariant's own cleanup names if set, else the recorder's."""
        own = cleanup is None
        return {
            "session": self.session_patterns if session is None else session,
            "cleanup": self.cleanup_patterns if own else cleanup,
            "max_cleanups": self.max_cleanups if max_cleanups is None else max_cleanups,
            "flip_cleanup": self.flip_cleanup_patterns if own else None,
            "count_cleanup": self.count_cleanup_patterns if own else None,
        }

    def check(
        self,
        *,
        session: Patterns | None = None,
        cleanup: Patterns | None = None,
        max_cleanups: int | None = None,
    ) -> list[invariants.Violation]:
        """All violations of the recorded spans (``invariants.check_all``), without raising. Defaults:
        the recorder's patterns and ``max_cleanups``; ``cleanup`` given applies to both invariants."""
        return invariants.check_all(self.spans(), **self._args(session, cleanup, max_cleanups))

    def assert_invariants(
        self,
        *,
        session: Patterns | None = None,
        cleanup: Patterns | None = None,
        max_cleanups: int | None = None,
    ) -> None:
        """Assert every invariant (``check_all``); raises ``SpanInvariantError`` with the span tree."""
        __tracebackhide__ = True
        spans = self.spans()
        found = invariants.check_all(spans, **self._args(session, cleanup, max_cleanups))
        self._conclude(invariants.ALL_INVARIANTS, found, spans)

    def assert_cleanup_never_flips(
        self, *, session: Patterns | None = None, cleanup: Patterns | None = None
    ) -> None:
        """Assert ``invariants.cleanup_never_flips`` over the recorded spans."""
        __tracebackhide__ = True
        spans = self.spans()
        args = self._args(session, cleanup)
        flip = args["cleanup"] if args["flip_cleanup"] is None else args["flip_cleanup"]
        found = invariants.cleanup_never_flips(spans, args["session"], flip)
        self._conclude(("cleanup_never_flips",), found, spans)

    def assert_cleanup_at_most(
        self, n: int | None = None, *, session: Patterns | None = None, cleanup: Patterns | None = None
    ) -> None:
        """Assert ``invariants.cleanup_at_most`` (at most ``n`` cleanup runs per session span; default:
        the recorder's ``max_cleanups``)."""
        __tracebackhide__ = True
        spans = self.spans()
        args = self._args(session, cleanup, n)
        cleanup = args["cleanup"] if args["count_cleanup"] is None else args["count_cleanup"]
        found = invariants.cleanup_at_most(spans, args["max_cleanups"], args["session"], cleanup)
        self._conclude(("cleanup_at_most",), found, spans)

    def assert_all_spans_ended(self) -> None:
        """Assert ``invariants.all_spans_ended``: every recorded span has ended."""
        __tracebackhide__ = True
        spans = self.spans()
        self._conclude(("all_spans_ended",), invariants.all_spans_ended(spans), spans)

    def _conclude(
        self, names: Sequence[str], found: Sequence[invariants.Violation], spans: Sequence[RecordedSpan]
    ) -> None:
        """Tell the sinks (the recorder's and the running test's) what was checked; raise on a violation."""
        __tracebackhide__ = True
        if self._sink is not None:
            for name, ok, message in invariants.results_by_invariant(names, found):
                self._sink(name, ok, message)
        running = span_results.running_sink()
        if running is not None:
            running(names, found)
        if found:
            raise invariants.SpanInvariantError(found, spans)
