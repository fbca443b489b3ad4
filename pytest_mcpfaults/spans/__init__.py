"""The span recorder, its snapshots and queries, the tree text, the span gate's checks.

The names below are this package's face, loaded on first use (``lazy.py``): importing one of its modules
does not load the others. ``from pytest_mcpfaults.spans import ...`` is the documented import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mcpfaults.lazy import lazy_exports

if TYPE_CHECKING:
    from pytest_mcpfaults.spans.queries import (
        DEFAULT_CLEANUP,
        DEFAULT_SESSION,
        Patterns,
        SpanLookupError,
        find_spans,
        matches,
        one_span,
    )
    from pytest_mcpfaults.spans.recorder import (
        SpanRecorder,
        SpanWiringWarning,
        global_recorder,
        install_recorder,
    )
    from pytest_mcpfaults.spans.records import (
        RecordedEvent,
        RecordedSpan,
        ancestors,
        children,
        descendants,
        describe_span,
        format_tree,
        parent_of,
        roots,
    )

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

__getattr__, __dir__ = lazy_exports(globals())
