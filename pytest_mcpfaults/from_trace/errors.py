"""The one error of reading a trace: :class:`TraceError`, whose message names the file (or span) and
says what is valid."""

from __future__ import annotations

__all__ = ["TraceError"]


class TraceError(ValueError):
    """A trace export that cannot be replayed: not a trace, empty, too big, an unknown or missing
    ``trace_id``, no session span, a cycle in its parentage. The message names the source and what is
    valid."""
