"""Finding recorded spans by name: span-name globs (:data:`Patterns`), :func:`matches`,
:func:`find_spans` and :func:`one_span` (which raises :class:`SpanLookupError` on none or several).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from pytest_mcpfaults.spans.records import RecordedSpan, format_tree

DEFAULT_SESSION: tuple[str, ...] = ("Agent.Session",)
"""Default span-name globs of a harness's session spans (the ``mcpfaults_session_spans`` ini default)."""
DEFAULT_CLEANUP: tuple[str, ...] = ("MCP.DeleteSession",)
"""Default span-name globs of its cleanup spans (the ``mcpfaults_cleanup_spans`` ini default)."""

Patterns: TypeAlias = str | Sequence[str]
"""One glob or a sequence of globs, matched against span names with :func:`fnmatch.fnmatchcase`."""


class SpanLookupError(AssertionError):
    """A query that needs exactly one span found none or several."""


def as_patterns(patterns: Patterns) -> tuple[str, ...]:
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
    return any(fnmatch.fnmatchcase(name, p) for p in as_patterns(patterns))


def find_spans(
    spans: Iterable[RecordedSpan], pattern: Patterns, *, exact: bool = False, status: str | None = None
) -> list[RecordedSpan]:
    """Spans whose name matches ``pattern`` (globs; names compared literally with ``exact=True``).

    ``status`` ("UNSET", "OK" or "ERROR") keeps only spans with that status. Order is start order.
    """
    pats = as_patterns(pattern)
    found = [s for s in spans if (s.name in pats if exact else matches(s.name, pats))]
    if status is not None:
        found = [s for s in found if s.status_code == status.upper()]
    return found


def seen_names(spans: Iterable[RecordedSpan]) -> str:
    names = list(dict.fromkeys(s.name for s in spans))
    return ", ".join(repr(n) for n in names) if names else "none"


def one_span(spans: Sequence[RecordedSpan], pattern: Patterns, *, exact: bool = False) -> RecordedSpan:
    """The single span matching ``pattern``; :class:`SpanLookupError` if there are none or several."""
    found = find_spans(spans, pattern, exact=exact)
    if len(found) == 1:
        return found[0]
    what = f"{pattern!r}" if isinstance(pattern, str) else f"any of {list(pattern)!r}"
    if not found:
        raise SpanLookupError(f"no span named {what} was recorded; span names seen: {seen_names(spans)}")
    raise SpanLookupError(
        f"{len(found)} spans named {what} were recorded, expected exactly one:\n{format_tree(spans)}"
    )
