"""What decoding one OTLP trace export gives, whatever its encoding: its spans per resource
(:class:`Batch`), the spans rejected and why (:class:`Decoded`), and the error for a body that does not
decode (:class:`OtlpDecodeError`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_mcpfaults.spans.records import RecordedSpan

__all__ = ["EMPTY", "STATUS_CODES", "Batch", "Decoded", "OtlpDecodeError", "source_key", "span_id_problem"]

#: OTLP status codes by number (``STATUS_CODE_UNSET`` = 0, ``_OK`` = 1, ``_ERROR`` = 2).
STATUS_CODES = ("UNSET", "OK", "ERROR")
EMPTY: Mapping[str, Any] = MappingProxyType({})
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


class OtlpDecodeError(ValueError):
    """The body is not an OTLP trace export in the encoding its content type names."""


@dataclass(frozen=True)
class Batch:
    """The spans of one resource of an export: where they came from and what they are."""

    source: Hashable
    resource: Mapping[str, Any]
    spans: list[RecordedSpan]


@dataclass
class Decoded:
    """One decoded export: its batches (one per resource), and the spans rejected, with why."""

    batches: list[Batch] = field(default_factory=list)
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return sum(len(b.spans) for b in self.batches)

    def reject(self, count: int, reason: str) -> None:
        self.rejected += count
        if len(self.reasons) < 5:  # enough to say what went wrong; the count says how often
            self.reasons.append(reason)


def source_key(resource: Mapping[str, Any]) -> Hashable:
    """The identity of an exporting resource: its attributes, in order (``repr`` for values that do not
    hash, such as key-value lists)."""
    return tuple(sorted((k, repr(v)) for k, v in resource.items()))


def span_id_problem(name: str, trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str | None:
    """Why a span's ids make it one to reject (``partial_success``), or ``None`` when they are valid."""
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE:
        return f"span {name!r}: trace_id must be 16 bytes, not all zero, got {trace_id.hex()!r}"
    if len(span_id) != 8 or span_id == _ZERO_SPAN:
        return f"span {name!r}: span_id must be 8 bytes, not all zero, got {span_id.hex()!r}"
    if len(parent_span_id) not in (0, 8):
        return f"span {name!r}: parent_span_id must be empty or 8 bytes, got {parent_span_id.hex()!r}"
    return None
