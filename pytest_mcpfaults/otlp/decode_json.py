"""OTLP JSON trace exports to recorder spans, read directly from the parsed JSON.

Read here, by the OTLP JSON mapping's rules (ids as hex, not base64; enums by name or number; 64-bit
integers as strings or numbers; lowerCamelCase keys, the protobuf names accepted too), without building
protobuf messages: ``google.protobuf.json_format`` took about 15x the protobuf decode for the same
export. A body that does not follow the mapping raises
:class:`~pytest_mcpfaults.otlp.export.OtlpDecodeError` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pytest_mcpfaults.otlp.export import (
    EMPTY,
    STATUS_CODES,
    Batch,
    Decoded,
    OtlpDecodeError,
    source_key,
    span_id_problem,
)
from pytest_mcpfaults.spans.records import UIDS, RecordedEvent, RecordedSpan

__all__ = ["decode_json"]

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


def _value(v: Any, where: str) -> Any:
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
            _value(x, f"{where}.arrayValue.values[{i}]")
            for i, x in enumerate(_list(arr.get("values"), where))
        )
    if "kvlistValue" in v or "kvlist_value" in v:
        kv = _object(_field(v, "kvlistValue", "kvlist_value", {}), where + ".kvlistValue")
        return MappingProxyType(_attributes(kv.get("values"), where + ".kvlistValue.values"))
    if "bytesValue" in v or "bytes_value" in v:
        try:
            return base64.b64decode(_str(_field(v, "bytesValue", "bytes_value", ""), where), validate=True)
        except binascii.Error:
            raise OtlpDecodeError(f"{where}.bytesValue must be base64") from None
    return None


def _attributes(kvs: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(_list(kvs, where)):
        kv = _object(kv, f"{where}[{i}]")
        out[_str(kv.get("key", ""), f"{where}[{i}].key")] = _value(kv.get("value", {}), f"{where}[{i}].value")
    return out


def _attrs_view(kvs: Any, where: str) -> Mapping[str, Any]:
    attrs = _attributes(kvs, where)
    return MappingProxyType(attrs) if attrs else EMPTY


def _time(obj: Mapping[str, Any], camel: str, snake: str, where: str) -> int | None:
    return _int(_field(obj, camel, snake, 0), f"{where}.{camel}", UINT64) or None


def _status(span: Mapping[str, Any], where: str) -> tuple[int | None, str | None]:
    status = _object(span.get("status", {}), where + ".status")
    code = status.get("code", 0)
    if isinstance(code, str) and not _INT.fullmatch(code):
        number = _STATUS_NAMES.get(code)
    else:
        number = _int(code, where + ".status.code", INT32)
        number = number if 0 <= number < len(STATUS_CODES) else None
    message = _str(status.get("message", ""), where + ".status.message")
    return number, message or None


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
            resource = MappingProxyType(_attributes(res.get("attributes"), where + ".resource.attributes"))
            spans: list[RecordedSpan] = []
            for j, ss in enumerate(_list(_field(rs, "scopeSpans", "scope_spans"), where + ".scopeSpans")):
                ss = _object(ss, f"{where}.scopeSpans[{j}]")
                for k, sp in enumerate(_list(ss.get("spans"), f"{where}.scopeSpans[{j}].spans")):
                    at = f"{where}.scopeSpans[{j}].spans[{k}]"
                    span = _convert_span(_object(sp, at), at, resource, out)
                    if span is not None:
                        spans.append(span)
            if spans:
                out.batches.append(Batch(source_key(resource), resource, spans))
    except RecursionError:
        raise OtlpDecodeError("an OTLP JSON export nested too deep") from None
    return out


def _convert_span(
    sp: Mapping[str, Any], at: str, resource: Mapping[str, Any], out: Decoded
) -> RecordedSpan | None:
    name = _str(sp.get("name", ""), at + ".name")
    trace_id = _id(sp, "traceId", "trace_id", 16, at)
    span_id = _id(sp, "spanId", "span_id", 8, at)
    parent = _id(sp, "parentSpanId", "parent_span_id", 8, at)
    code, message = _status(sp, at)
    problem = span_id_problem(name, trace_id, span_id, parent)
    if problem is None and code is None:
        problem = f"span {name!r}: unknown status code {_what(_object(sp['status'], at).get('code'))}"
    if problem is not None:
        out.reject(1, problem)
        return None
    assert code is not None
    events = tuple(
        RecordedEvent(
            _str(ev.get("name", ""), f"{at}.events[{n}].name"),
            _attrs_view(ev.get("attributes"), f"{at}.events[{n}].attributes"),
            _time(ev, "timeUnixNano", "time_unix_nano", f"{at}.events[{n}]"),
        )
        for n, ev in (
            (n, _object(e, f"{at}.events[{n}]"))
            for n, e in enumerate(_list(sp.get("events"), at + ".events"))
        )
    )
    return RecordedSpan(
        name,
        int.from_bytes(trace_id, "big"),
        int.from_bytes(span_id, "big"),
        int.from_bytes(parent, "big") if parent else None,
        STATUS_CODES[code],
        message,
        _attrs_view(sp.get("attributes"), at + ".attributes"),
        events,
        _time(sp, "startTimeUnixNano", "start_time_unix_nano", at),
        # a received span has ended, whatever its end time says (0 included): it was exported
        _int(_field(sp, "endTimeUnixNano", "end_time_unix_nano", 0), at + ".endTimeUnixNano", UINT64),
        next(UIDS),
        None,
        (),
        resource,
    )
