"""OTLP/HTTP trace bodies in and out: an export request (protobuf or the OTLP JSON mapping) to recorder
spans, and the answers the OTLP specification asks for.

Protobuf bodies are decoded with the official ``opentelemetry-proto`` messages
(``ExportTraceServiceRequest``). JSON bodies follow the OTLP JSON mapping: trace and span ids as hex
strings (not base64), enums by name or number, 64-bit integers as strings or numbers, lowerCamelCase
keys (the protobuf field names are accepted too) and unknown fields ignored; they are parsed into the
same message (``google.protobuf.json_format``) once the ids are turned into bytes, so both encodings go
through one conversion.

A span whose ids are not valid (a trace id that is not 16 bytes or all zero, a span id that is not 8
bytes or zero, a parent span id neither empty nor 8 bytes) or whose status code is unknown is rejected
and counted in the answer's ``partial_success``; the other spans of the request are kept.

``opentelemetry-proto`` is imported on first use, never at import of this module.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_mcpfaults.span_records import UIDS, RecordedEvent, RecordedSpan

__all__ = [
    "INVALID_ARGUMENT",
    "JSON",
    "PROTOBUF",
    "UNIMPLEMENTED",
    "Batch",
    "Decoded",
    "LazyAttributes",
    "OtlpDecodeError",
    "decode_export",
    "encode_response",
    "encode_status",
    "source_key",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_STATUS = ("UNSET", "OK", "ERROR")
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


# -- the request -------------------------------------------------------------------------------------


def decode_export(body: bytes, media_type: str) -> Decoded:
    """Decode an export request body; ``media_type`` is :data:`PROTOBUF` or :data:`JSON`.
    Raises :class:`OtlpDecodeError` for a body that does not decode."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    if media_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise OtlpDecodeError(f"not an OTLP ExportTraceServiceRequest in protobuf: {exc}") from None
    else:
        _parse_json(body, request)
    return _convert(request)


def _parse_json(body: bytes, request: Any) -> None:
    from google.protobuf import json_format

    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise OtlpDecodeError(
            f"an OTLP JSON export is an object with resourceSpans, got {type(data).__name__}"
        )
    _hex_ids_to_base64(data)
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise OtlpDecodeError(f"not an OTLP JSON trace export: {exc}") from None


def _items(obj: Any, *keys: str) -> list[Any]:
    for key in keys:
        value = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(value, list):
            return value
    return []


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """The OTLP JSON mapping writes ids as hex; ``json_format`` reads ``bytes`` fields as base64."""
    for i, rs in enumerate(_items(data, "resourceSpans", "resource_spans")):
        for j, ss in enumerate(_items(rs, "scopeSpans", "scope_spans")):
            for k, span in enumerate(_items(ss, "spans")):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                _fix_ids(span, where)
                for n, link in enumerate(_items(span, "links")):
                    _fix_ids(link, f"{where}.links[{n}]")


_ID_KEYS = (
    ("traceId", "trace_id", 16),
    ("spanId", "span_id", 8),
    ("parentSpanId", "parent_span_id", 8),
)


def _fix_ids(obj: Any, where: str) -> None:
    if not isinstance(obj, dict):
        return
    for camel, snake, size in _ID_KEYS:
        for key in (camel, snake):
            value = obj.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise OtlpDecodeError(f"{where}.{camel} must be a hex string, got {value!r}")
            if value == "" and camel == "parentSpanId":
                continue
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raw = b""
            if len(raw) != size:
                raise OtlpDecodeError(
                    f"{where}.{camel} must be {2 * size} hex digits (the OTLP JSON mapping writes ids "
                    f"as hex, not base64), got {value!r}"
                )
            obj[key] = base64.b64encode(raw).decode("ascii")


# -- the message to spans ----------------------------------------------------------------------------


_SCALARS = frozenset({"string_value", "int_value", "bool_value", "double_value"})


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind in _SCALARS:
        return getattr(v, kind)
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return MappingProxyType(_attributes(v.kvlist_value.values))
    if kind == "bytes_value":
        return bytes(v.bytes_value)
    return None


def _attributes(kvs: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scalars = _SCALARS
    for kv in kvs:  # the hot loop: scalar values inline
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = getattr(v, kind) if kind in scalars else _value(v)
    return out


class LazyAttributes(Mapping[str, Any]):
    """A span's (or event's) attributes, read-only, converted from their protobuf form on first use:
    the receiver records an export without converting every value on the sidecar's loop thread; the
    first query (on the test's thread) pays for it, once."""

    __slots__ = ("_dict", "_kvs")

    def __init__(self, kvs: Sequence[Any]) -> None:
        self._kvs: Sequence[Any] | None = kvs
        self._dict: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        d = self._dict
        if d is None:
            kvs = self._kvs
            d = self._dict = _attributes(kvs if kvs is not None else ())
            self._kvs = None
        return d

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())


def _span_problem(sp: Any) -> str:
    """Why a span that failed the quick checks of :func:`_convert` is rejected."""
    if len(sp.trace_id) != 16 or sp.trace_id == _ZERO_TRACE:
        return f"span {sp.name!r}: trace_id must be 16 bytes, not all zero, got {bytes(sp.trace_id).hex()!r}"
    if len(sp.span_id) != 8 or sp.span_id == _ZERO_SPAN:
        return f"span {sp.name!r}: span_id must be 8 bytes, not all zero, got {bytes(sp.span_id).hex()!r}"
    if len(sp.parent_span_id) not in (0, 8):
        got = bytes(sp.parent_span_id).hex()
        return f"span {sp.name!r}: parent_span_id must be empty or 8 bytes, got {got!r}"
    return f"span {sp.name!r}: unknown status code {sp.status.code}"


def _events(events: Sequence[Any]) -> tuple[RecordedEvent, ...]:
    return tuple(
        RecordedEvent(
            e.name,
            LazyAttributes(e.attributes) if len(e.attributes) else _EMPTY,
            e.time_unix_nano or None,
        )
        for e in events
    )


def _convert(request: Any) -> Decoded:
    out = Decoded()
    frombytes, uids, statuses = int.from_bytes, UIDS, _STATUS
    zero_trace, zero_span = _ZERO_TRACE, _ZERO_SPAN
    for rs in request.resource_spans:
        resource = MappingProxyType(_attributes(rs.resource.attributes))
        spans: list[RecordedSpan] = []
        append = spans.append
        for ss in rs.scope_spans:
            for sp in ss.spans:
                tid, sid, pid, status = sp.trace_id, sp.span_id, sp.parent_span_id, sp.status
                code = status.code
                if (
                    len(tid) != 16
                    or len(sid) != 8
                    or len(pid) not in (0, 8)
                    or not 0 <= code <= 2
                    or tid == zero_trace
                    or sid == zero_span
                ):
                    out.reject(1, _span_problem(sp))
                    continue
                attrs, events = sp.attributes, sp.events
                append(
                    RecordedSpan(
                        sp.name,
                        frombytes(tid, "big"),
                        frombytes(sid, "big"),
                        frombytes(pid, "big") if pid else None,
                        statuses[code],
                        status.message or None,
                        LazyAttributes(attrs) if len(attrs) else _EMPTY,
                        _events(events) if len(events) else (),
                        sp.start_time_unix_nano or None,
                        sp.end_time_unix_nano or None,
                        next(uids),
                        None,
                        (),
                        resource,
                    )
                )
        if spans:
            out.batches.append(Batch(source_key(resource), resource, spans))
    return out


_EMPTY: Mapping[str, Any] = MappingProxyType({})


# -- the answers -------------------------------------------------------------------------------------


def encode_response(media_type: str, rejected: int = 0, message: str = "") -> bytes:
    """An ``ExportTraceServiceResponse`` in ``media_type``: ``partial_success`` set only when spans
    were rejected (the specification asks to leave it unset otherwise)."""
    if media_type == JSON:
        if not rejected and not message:
            return b"{}"
        part = {"rejectedSpans": str(rejected), "errorMessage": message}
        return json.dumps({"partialSuccess": part}).encode()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    data: bytes = response.SerializeToString()
    return data


#: ``google.rpc.Code`` values used in error answers.
INVALID_ARGUMENT, UNIMPLEMENTED = 3, 12


def encode_status(media_type: str, code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` (the body the specification asks for with a 4xx answer) in
    ``media_type``. Encoded here (two fields) so that no googleapis package is needed."""
    if media_type == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
