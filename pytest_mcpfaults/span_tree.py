"""The recorded spans as text: the indented tree every invariant failure and lookup error shows.

:func:`format_tree` prints a sequence of :class:`~pytest_mcpfaults.span_records.RecordedSpan` as a tree
(status, attributes, exception events, spans that never ended); :func:`describe_span` is its one-line
form of a single span.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpfaults.span_records import RecordedSpan, child_index, roots, span_key

__all__ = ["describe_span", "format_tree"]

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
