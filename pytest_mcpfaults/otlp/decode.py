"""OTLP/HTTP trace bodies in and out: an export request (protobuf or the OTLP JSON mapping) to recorder
spans, and the answers the OTLP specification asks for. A span whose ids or status code are not valid is
rejected (``partial_success``); the other spans of the request are kept.

``opentelemetry-proto`` is imported on first use, never at import. JSON is read directly by the
mapping's rules, not through ``google.protobuf.json_format``, which took about 15x the protobuf decode.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_mcpfaults.spans.records import UIDS, RecordedEvent, RecordedSpan

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: OTLP status codes by number (``STATUS_CODE_UNSET`` = 0, ``_OK`` = 1, ``_ERROR`` = 2).
STATUS_CODES = ("UNSET", "OK", "ERROR")
EMPTY: Mapping[str, Any] = MappingProxyType({})
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


class OtlpDecodeError(ValueError):
    """The body is not an OTLP trace export in the encoding its content type names."""


@dataclass
class Decoded:
    """One decoded export: its batches (``(source, spans)``, one per resource), and the spans rejected,
    with why."""

    batches: list[tuple[Hashable, list[RecordedSpan]]] = field(default_factory=list)
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return sum(len(spans) for _, spans in self.batches)

    def reject(self, reason: str) -> None:
        self.rejected += 1
        if len(self.reasons) < 5:  # enough to say what went wrong; the count says how often
            self.reasons.append(reason)

    def add(self, resource: Mapping[str, Any], spans: list[RecordedSpan]) -> None:
        """Keep a resource's spans, its identity its attributes in order (``repr`` for values that do not
        hash, such as key-value lists)."""
        if spans:
            source = tuple(sorted((k, repr(v)) for k, v in resource.items()))
            self.batches.append((source, spans))


def _problem(name: str, trace_id: bytes, span_id: bytes, parent: bytes, code: object) -> str:
    """Why a span is rejected (``partial_success``), else ``""``; ``code``: its status code if unknown."""
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE:
        return f"span {name!r}: trace_id must be 16 bytes, not all zero, got {trace_id.hex()!r}"
    if len(span_id) != 8 or span_id == _ZERO_SPAN:
        return f"span {name!r}: span_id must be 8 bytes, not all zero, got {span_id.hex()!r}"
    if len(parent) not in (0, 8):
        return f"span {name!r}: parent_span_id must be empty or 8 bytes, got {parent.hex()!r}"
    return "" if code is None else f"span {name!r}: unknown status code {code}"


def _ints(trace_id: bytes, span_id: bytes, parent: bytes) -> tuple[int, int, int | None]:
    parent_id = int.from_bytes(parent, "big") if parent else None
    return int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big"), parent_id


# -- protobuf ----------------------------------------------------------------------------------------


def decode_export(body: bytes, media_type: str) -> Decoded:
    """Decode an export request body; ``media_type`` is :data:`PROTOBUF` or :data:`JSON`.
    Raises :class:`OtlpDecodeError` for a body that does not decode."""
    if media_type != PROTOBUF:
        return decode_json(body)
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not an OTLP ExportTraceServiceRequest in protobuf: {exc}") from None
    out = Decoded()
    for rs in request.resource_spans:
        resource = MappingProxyType(_attributes(rs.resource.attributes))
        spans: list[RecordedSpan] = []
        for ss in rs.scope_spans:
            for sp in ss.spans:
                tid, sid, pid, status = sp.trace_id, sp.span_id, sp.parent_span_id, sp.status
                code = status.code
                # the quick checks first (the hot loop); _problem says which failed
                bad = len(tid) != 16 or len(sid) != 8 or len(pid) not in (0, 8) or not 0 <= code <= 2
                if bad or tid == _ZERO_TRACE or sid == _ZERO_SPAN:
                    out.reject(_problem(sp.name, tid, sid, pid, None if 0 <= code <= 2 else code))
                    continue
                attrs, events = sp.attributes, sp.events
                spans.append(
                    RecordedSpan(
                        sp.name,
                        *_ints(tid, sid, pid),
                        STATUS_CODES[code],
                        status.message or None,
                        LazyAttributes(attrs) if len(attrs) else EMPTY,
                        _events(events) if len(events) else (),
                        sp.start_time_unix_nano or None,
                        sp.end_time_unix_nano,  # ended, whatever its end time says (0 too): it was exported
                        uid=next(UIDS),
                        resource=resource,
                    )
                )
        out.add(resource, spans)
    return out


def _events(events: Sequence[Any]) -> tuple[RecordedEvent, ...]:
    return tuple(
        RecordedEvent(
            e.name, LazyAttributes(e.attributes) if len(e.attributes) else EMPTY, e.time_unix_nano or None
        )
        for e in events
    )


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
        if self._dict is None:
            self._dict = _attributes(self._kvs or ())
            self._kvs = None
        return self._dict

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())


# -- the OTLP JSON mapping ---------------------------------------------------------------------------

_STATUS_NAMES = {f"STATUS_CODE_{name}": i for i, name in enumerate(STATUS_CODES)}
_INT = re.compile(r"-?\d+")
#: Digits read at most: a 64-bit integer has 20 (longer strings are refused before ``int()``, whose own
#: limit, 4,300 digits, raises ``ValueError``).
_MAX_DIGITS = 20
#: The ranges of the mapping's integer kinds: times are ``fixed64`` (unsigned), ``intValue`` ``int64``,
#: a status code an ``int32`` enum.
UINT64 = (0, 2**64 - 1)
INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)
_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _field(obj: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    value = obj.get(camel)
    if value is None:
        value = obj.get(snake, default)
    return default if value is None else value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise OtlpDecodeError(f"{where} must be a JSON object, got {_what(value)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{where} must be a JSON array, got {_what(value)}")
    return value


def _what(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _int(value: Any, where: str, bounds: tuple[int, int]) -> int:
    """An integer of the mapping (a JSON number or a string of digits) within ``bounds``."""
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, str) and _INT.fullmatch(value))
    ):
        raise OtlpDecodeError(
            f"{where} must be an integer (a number or a string of digits), got {_what(value)}"
        )
    if isinstance(value, str) and len(value.lstrip("-").lstrip("0")) > _MAX_DIGITS:
        number = None  # far out of range: not converted at all
    else:
        number = int(value)
    low, high = bounds
    if number is None or not low <= number <= high:
        raise OtlpDecodeError(f"{where} must be an integer in {low}..{high}, got {_what(value)}")
    return number


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{where} must be a string, got {_what(value)}")
    return value


def _id(obj: Mapping[str, Any], camel: str, snake: str, size: int, where: str) -> bytes:
    value = _field(obj, camel, snake, "")
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{where}.{camel} must be a hex string, got {_what(value)}")
    if value == "":
        return b""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise OtlpDecodeError(
            f"{where}.{camel} must be {2 * size} hex digits (the OTLP JSON mapping writes ids as hex, "
            f"not base64), got {value!r}"
        )
    return raw


def _json_value(v: Any, where: str) -> Any:
    v = _object(v, where)
    if "stringValue" in v or "string_value" in v:
        return _str(_field(v, "stringValue", "string_value", ""), where + ".stringValue")
    if "intValue" in v or "int_value" in v:
        return _int(_field(v, "intValue", "int_value", 0), where + ".intValue", INT64)
    if "boolValue" in v or "bool_value" in v:
        b = _field(v, "boolValue", "bool_value", False)
        if not isinstance(b, bool):
            raise OtlpDecodeError(f"{where}.boolValue must be true or false, got {_what(b)}")
        return b
    if "doubleValue" in v or "double_value" in v:
        d = _field(v, "doubleValue", "double_value", 0.0)
        if isinstance(d, str) and d in _FLOATS:
            return _FLOATS[d]
        if isinstance(d, bool) or not isinstance(d, (int, float)):
            raise OtlpDecodeError(f"{where}.doubleValue must be a number, got {_what(d)}")
        return float(d)
    if "arrayValue" in v or "array_value" in v:
        arr = _object(_field(v, "arrayValue", "array_value", {}), where + ".arrayValue")
        return tuple(
            _json_value(x, f"{where}.arrayValue.values[{i}]")
            for i, x in enumerate(_list(arr.get("values"), where))
        )
    if "kvlistValue" in v or "kvlist_value" in v:
        kv = _object(_field(v, "kvlistValue", "kvlist_value", {}), where + ".kvlistValue")
        return MappingProxyType(_json_attributes(kv.get("values"), where + ".kvlistValue.values"))
    if "bytesValue" in v or "bytes_value" in v:
        try:
            return base64.b64decode(_str(_field(v, "bytesValue", "bytes_value", ""), where), validate=True)
        except binascii.Error:
            raise OtlpDecodeError(f"{where}.bytesValue must be base64") from None
    return None


def _json_attributes(kvs: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(_list(kvs, where)):
        kv = _object(kv, f"{where}[{i}]")
        value = _json_value(kv.get("value", {}), f"{where}[{i}].value")
        out[_str(kv.get("key", ""), f"{where}[{i}].key")] = value
    return out


def _attrs_view(kvs: Any, where: str) -> Mapping[str, Any]:
    attrs = _json_attributes(kvs, where)
    return MappingProxyType(attrs) if attrs else EMPTY


def _time(obj: Mapping[str, Any], camel: str, snake: str, where: str) -> int:
    return _int(_field(obj, camel, snake, 0), f"{where}.{camel}", UINT64)


def decode_json(body: bytes) -> Decoded:
    """Decode an OTLP JSON trace export (see the module docstring)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise OtlpDecodeError(f"an OTLP JSON export is an object with resourceSpans, got {_what(data)}")
    out = Decoded()
    try:
        for i, rs in enumerate(_list(_field(data, "resourceSpans", "resource_spans"), "resourceSpans")):
            where = f"resourceSpans[{i}]"
            rs = _object(rs, where)
            res = _object(rs.get("resource", {}), where + ".resource")
            resource = MappingProxyType(
                _json_attributes(res.get("attributes"), where + ".resource.attributes")
            )
            spans: list[RecordedSpan] = []
            for j, ss in enumerate(_list(_field(rs, "scopeSpans", "scope_spans"), where + ".scopeSpans")):
                ss = _object(ss, f"{where}.scopeSpans[{j}]")
                for k, sp in enumerate(_list(ss.get("spans"), f"{where}.scopeSpans[{j}].spans")):
                    at = f"{where}.scopeSpans[{j}].spans[{k}]"
                    span = _json_span(_object(sp, at), at, resource, out)
                    if span is not None:
                        spans.append(span)
            out.add(resource, spans)
    except RecursionError:
        raise OtlpDecodeError("an OTLP JSON export nested too deep") from None
    return out


def _json_span(
    sp: Mapping[str, Any], at: str, resource: Mapping[str, Any], out: Decoded
) -> RecordedSpan | None:
    name = _str(sp.get("name", ""), at + ".name")
    ids = (
        _id(sp, "traceId", "trace_id", 16, at),
        _id(sp, "spanId", "span_id", 8, at),
        _id(sp, "parentSpanId", "parent_span_id", 8, at),
    )
    status = _object(sp.get("status", {}), at + ".status")
    code = status.get("code", 0)
    if isinstance(code, str) and not _INT.fullmatch(code):
        number = _STATUS_NAMES.get(code)
    else:
        number = _int(code, at + ".status.code", INT32)
        number = number if 0 <= number < len(STATUS_CODES) else None
    message = _str(status.get("message", ""), at + ".status.message")
    problem = _problem(name, *ids, _what(code) if number is None else None)
    if problem:
        out.reject(problem)
        return None
    assert number is not None
    events = tuple(
        RecordedEvent(
            _str(ev.get("name", ""), f"{at}.events[{n}].name"),
            _attrs_view(ev.get("attributes"), f"{at}.events[{n}].attributes"),
            _time(ev, "timeUnixNano", "time_unix_nano", f"{at}.events[{n}]") or None,
        )
        for n, ev in (
            (n, _object(e, f"{at}.events[{n}]"))
            for n, e in enumerate(_list(sp.get("events"), at + ".events"))
        )
    )
    return RecordedSpan(
        name,
        *_ints(*ids),
        STATUS_CODES[number],
        message or None,
        _attrs_view(sp.get("attributes"), at + ".attributes"),
        events,
        _time(sp, "startTimeUnixNano", "start_time_unix_nano", at) or None,
        _time(sp, "endTimeUnixNano", "end_time_unix_nano", at),
        uid=next(UIDS),
        resource=resource,
    )


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
