"""A trace export's bytes to spans (:data:`FORMATS`). Pure. The OTLP forms go through the receiver's
decoders (:mod:`pytest_mcpfaults.otlp.decode`), so a trace file reads as the sidecar would have received
it; every refusal is a :class:`TraceError` naming the source and what is valid.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pytest_mcpfaults.otlp.decode import EMPTY, STATUS_CODES
from pytest_mcpfaults.spans.records import RecordedEvent, RecordedSpan

#: The largest trace file read (64 MiB: an OTLP/JSON export of some 100,000 spans).
MAX_TRACE_BYTES = 64 * 1024 * 1024
#: What a trace file may be, as the errors name it.
FORMATS = (
    "an OTLP/JSON ExportTraceServiceRequest (an object with resourceSpans; one per line as the OTel "
    "collector's file exporter writes them), an OTLP/protobuf ExportTraceServiceRequest, or the "
    "plugin's span JSON (an object with spans, as GET /_mcpfaults/spans?format=json writes it)"
)
#: The OTLP/JSON exports of other signals (a collector's file exporter shared by their pipelines).
_OTHER_SIGNALS = ("resourceMetrics", "resourceLogs", "resource_metrics", "resource_logs")
_HEX = re.compile(r"[0-9a-fA-F]{1,32}")


class TraceError(ValueError):
    """A trace export that cannot be replayed: not a trace, empty, too big, an unknown or missing
    ``trace_id``, no session span, a cycle in its parentage. The message names the source and what is
    valid."""


@dataclass(frozen=True)
class Read:
    """The spans of one export, its format, and how many spans the decoder refused (the first reasons)."""

    spans: tuple[RecordedSpan, ...]
    format: str
    rejected: int = 0
    reasons: tuple[str, ...] = ()

    def summary(self, spans: int, duplicates: int = 0) -> str:
        """The format, the picked trace's ``spans`` count, the spans refused and the ``duplicates`` left out
        (as both front ends say)."""
        note = f", {self.rejected} spans refused ({'; '.join(self.reasons)})" if self.rejected else ""
        if duplicates:
            note += f", {duplicates} spans with a span id seen before left out (the first kept)"
        return f"{self.format}, {spans} spans{note}"


def decode_trace(data: bytes, source: str) -> Read:
    """The spans in ``data`` (the bytes of ``source``, a file name for the messages)."""
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{source}: over {MAX_TRACE_BYTES} bytes, the largest trace file read")
    for magic, tool in ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd")):  # no protobuf starts so
        if data.startswith(magic):
            raise TraceError(
                f"{source}: {tool}-compressed: decompress it first ({tool} -d); valid: {FORMATS}"
            )
    # JSON an editor saved with a byte order mark (UTF-16: PowerShell 5's `>`); no protobuf starts so
    if data.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            data = data.decode(json.detect_encoding(data)).lstrip("\ufeff").encode()
        except UnicodeDecodeError as exc:
            raise TraceError(
                f"{source}: not text in the encoding its byte order mark names ({exc})"
            ) from None
    text = data.lstrip()
    if not text:
        raise TraceError(f"{source}: the file is empty; valid: {FORMATS}")
    read = _json(text, source) if text[:1] in (b"{", b"[") else _otlp(data, source, as_json=False)
    if not read.spans and read.rejected:
        raise TraceError(f"{source}: every span refused ({read.rejected}): {'; '.join(read.reasons)}")
    return read


def _json(data: bytes, source: str) -> Read:
    try:
        docs: list[tuple[bytes, Any]] = [(data, json.loads(data))]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise TraceError(f"{source}: not JSON ({exc}); valid: {FORMATS}") from None
        docs = _json_lines(data, source)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{source}: not JSON ({exc}); valid: {FORMATS}") from None
    spans: list[RecordedSpan] = []
    rejected, others, fmt = 0, 0, "plugin span JSON"
    reasons: list[str] = []
    for n, (raw, doc) in enumerate(docs, 1):
        where = f"{source}, export {n}" if len(docs) > 1 else source
        if isinstance(doc, dict) and ("resourceSpans" in doc or "resource_spans" in doc):
            got = _otlp(raw, where, as_json=True)
            spans += got.spans
            rejected += got.rejected
            reasons += got.reasons
            fmt = "OTLP/JSON"
        elif isinstance(doc, dict) and isinstance(doc.get("spans"), list):
            spans += plugin_spans(doc["spans"], where)
        elif isinstance(doc, dict) and any(k in doc for k in _OTHER_SIGNALS):
            others += 1  # not a trace: skipped
        else:
            raise TraceError(
                f"{where}: not a trace (neither resourceSpans nor spans in it); valid: {FORMATS}"
            )
    if others == len(docs):
        raise TraceError(
            f"{source}: no trace in it, only OTLP metrics or logs ({others} exports); valid: {FORMATS}"
        )
    return Read(tuple(spans), fmt, rejected, tuple(reasons[:5]))


def _json_lines(data: bytes, source: str) -> list[tuple[bytes, Any]]:
    docs = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            docs.append((line, json.loads(line)))
        except (ValueError, RecursionError) as exc:
            raise TraceError(f"{source}, line {n}: not JSON ({exc}); valid: {FORMATS}") from None
    return docs


def _otlp(data: bytes, where: str, as_json: bool) -> Read:
    from pytest_mcpfaults.otlp.decode import PROTOBUF, OtlpDecodeError, decode_export, decode_json

    try:
        decoded = decode_json(data) if as_json else decode_export(data, PROTOBUF)
    except OtlpDecodeError as exc:
        why = f"not an OTLP/JSON trace export: {exc}" if as_json else f"not a trace ({exc}); valid: {FORMATS}"
        raise TraceError(f"{where}: {why}") from None
    spans = tuple(s for _, batch in decoded.batches for s in batch)
    if not spans and not decoded.rejected and not as_json:
        raise TraceError(
            f"{where}: no spans read as OTLP/protobuf: an empty export, or not a trace; valid: {FORMATS}"
        )
    return Read(spans, "OTLP/JSON" if as_json else "OTLP/protobuf", decoded.rejected, tuple(decoded.reasons))


def plugin_spans(raw: Sequence[Any], where: str) -> list[RecordedSpan]:
    """The spans of the plugin's span JSON (its ``spans`` list)."""
    return [_plugin_span(s, f"{where}: spans[{i}]") for i, s in enumerate(raw)]


def _plugin_span(raw: Any, where: str) -> RecordedSpan:
    """One span in ``span_json``'s form (hex ids, nanoseconds) or the report detail's (seconds)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise TraceError(f"{where}: a span is an object with a name, got {str(raw)[:60]!r}")
    try:
        if "span_id" in raw:
            ids = (_hex(raw.get("trace_id") or "1"), _hex(raw["span_id"]), _hex(raw.get("parent_id")))
            status = raw.get("status_code", "UNSET")
            desc = raw.get("status_description")
            times = (_int(raw.get("start_time")), _int(raw.get("end_time")))
            events = _events(raw.get("events", ()))
        else:
            ids = (1, int(raw["id"]), None if raw.get("parent") is None else int(raw["parent"]))
            status, desc, events = raw.get("status", "UNSET"), raw.get("description"), ()
            times = (_ns(raw.get("start")), _ns(raw.get("end")))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise TraceError(f"{where}: span {raw.get('name')!r}: bad ids or times ({exc})") from None
    if status not in STATUS_CODES:
        raise TraceError(
            f"{where}: span {raw['name']!r}: status must be one of {STATUS_CODES}, got {status!r}"
        )
    if desc is not None and not isinstance(desc, str):
        raise TraceError(
            f"{where}: span {raw['name']!r}: its status description must be a string, got {str(desc)[:60]!r}"
        )
    trace_id, span_id, parent = ids
    attrs = raw.get("attributes")
    return RecordedSpan(
        raw["name"], trace_id, span_id, parent, status, desc,
        MappingProxyType(dict(attrs)) if isinstance(attrs, dict) else EMPTY,
        events, times[0], times[1],
    )  # fmt: skip


def _hex(value: Any) -> Any:
    if value is None:
        return None
    if not _HEX.fullmatch(str(value)):
        raise ValueError(f"an id is 1 to 32 hex digits, got {str(value)[:40]!r}")
    return int(str(value), 16)


def _events(raw: Sequence[Any]) -> tuple[RecordedEvent, ...]:
    return tuple(
        RecordedEvent(
            str(e.get("name", "")), MappingProxyType(dict(e.get("attributes") or {})), e.get("timestamp")
        )
        for e in raw
        if isinstance(e, dict)
    )


def _int(nanoseconds: Any) -> int | None:
    return None if nanoseconds is None else int(nanoseconds)


def _ns(seconds: Any) -> int | None:
    return None if seconds is None else int(float(seconds) * 1e9)
