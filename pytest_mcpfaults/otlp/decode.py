"""OTLP/HTTP trace bodies in and out: an export request (protobuf or the OTLP JSON mapping) to recorder
spans, and the answers the OTLP specification asks for.

Protobuf bodies are decoded with the official ``opentelemetry-proto`` messages
(``ExportTraceServiceRequest``), imported on first use, never at import of this module; JSON bodies by
:mod:`pytest_mcpfaults.otlp.decode_json`, into the same spans. A span whose ids are not valid
(:func:`~pytest_mcpfaults.otlp.export.span_id_problem`) or whose status code is unknown is rejected and
counted in the answer's ``partial_success``; the other spans of the request are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pytest_mcpfaults.otlp.decode_json import decode_json
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

__all__ = [
    "INVALID_ARGUMENT",
    "JSON",
    "PROTOBUF",
    "UNIMPLEMENTED",
    "LazyAttributes",
    "decode_export",
    "encode_response",
    "encode_status",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


# -- the request -------------------------------------------------------------------------------------


def decode_export(body: bytes, media_type: str) -> Decoded:
    """Decode an export request body; ``media_type`` is :data:`PROTOBUF` or :data:`JSON`.
    Raises :class:`OtlpDecodeError` for a body that does not decode."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    if media_type != PROTOBUF:
        return decode_json(body)
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not an OTLP ExportTraceServiceRequest in protobuf: {exc}") from None
    return _convert(request)


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
    ids = span_id_problem(sp.name, bytes(sp.trace_id), bytes(sp.span_id), bytes(sp.parent_span_id))
    return ids or f"span {sp.name!r}: unknown status code {sp.status.code}"


def _events(events: Sequence[Any]) -> tuple[RecordedEvent, ...]:
    return tuple(
        RecordedEvent(
            e.name,
            LazyAttributes(e.attributes) if len(e.attributes) else EMPTY,
            e.time_unix_nano or None,
        )
        for e in events
    )


def _convert(request: Any) -> Decoded:
    out = Decoded()
    frombytes, uids, statuses = int.from_bytes, UIDS, STATUS_CODES
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
                        LazyAttributes(attrs) if len(attrs) else EMPTY,
                        _events(events) if len(events) else (),
                        sp.start_time_unix_nano or None,
                        sp.end_time_unix_nano,  # ended, whatever the time says (0 too)
                        next(uids),
                        None,
                        (),
                        resource,
                    )
                )
        if spans:
            out.batches.append(Batch(source_key(resource), resource, spans))
    return out


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
