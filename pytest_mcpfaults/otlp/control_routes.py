"""The span routes of the ``serve`` control endpoint (docs/spans.md): the recorded spans and the
invariants' verdict over HTTP, so a harness in any language can assert the span invariants.

Only the routing runs on the sidecar's loop: the answers (seconds over 100k spans) are computed on
threads of their own, and each ``wait_for=`` wait on one more, at most :data:`MAX_WAITS` at once, so a
wait never delays a control action, an answer, or the sidecar's own traffic.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web
from multidict import MultiMapping

from pytest_mcpfaults.invariants import gate_violations
from pytest_mcpfaults.spans.queries import SpanLookupError, as_patterns
from pytest_mcpfaults.spans.records import RecordedSpan, format_tree
from pytest_mcpfaults.transports.loop import WorkerPool

if TYPE_CHECKING:
    from pytest_mcpfaults.spans.recorder import SpanRecorder
    from pytest_mcpfaults.transports.server import Sidecar

#: The longest ``timeout=`` a control request may wait for spans, in seconds.
MAX_WAIT = 60.0
#: How many ``wait_for=`` waits may be pending at once; one more is answered 503.
MAX_WAITS = 32
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
_D = TypeVar("_D", tuple[str, ...], None)
T = TypeVar("T")


class Query:
    """A control request's query parameters, as a route reads them before it acts: the names it reads
    are the ones it takes (:meth:`unknown` names any other)."""

    def __init__(self, given: MultiMapping[str]) -> None:
        self._given, self.names = given, dict[str, None]()  # read, in order

    def get(self, name: str) -> str | None:
        self.names[name] = None
        return self._given.get(name)

    def getall(self, name: str) -> list[str]:
        self.names[name] = None
        return self._given.getall(name, [])

    def unknown(self) -> str | None:
        """The refusal of the first parameter given that the route did not read; ``None``: none was."""
        extra = sorted(set(self._given) - self.names.keys())
        if not extra:
            return None
        return f"unknown query parameter {extra[0]!r}; valid: {', '.join(self.names) or 'none'}"


#: A route: reads its parameters from the query (refusing a bad one) and gives the handler that acts.
Route = Callable[[Query], Handler]


class SpanWork:
    """The threads the span routes run on: the answers', and the waits' (at most ``max_waits``)."""

    def __init__(self, max_waits: int = MAX_WAITS) -> None:
        self.max_waits = max_waits
        self.answers = WorkerPool("mcpfaults-span-answers", max_workers=2)  # submit on the loop
        self._waits = WorkerPool("mcpfaults-span-waits", max_workers=max_waits)
        self._slots = threading.BoundedSemaphore(max_waits)

    def wait(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run the wait ``fn()`` on a wait thread of its own; refused (503) when ``max_waits`` are
        pending (a wait abandoned by its client still counts until its timeout ends it)."""
        if not self._slots.acquire(blocking=False):
            raise Refused(
                503, f"{self.max_waits} span waits (wait_for=) are pending already: retry when "
                "one ends (each ends by its timeout at the latest)",
            )  # fmt: skip

        def run() -> T:
            try:
                return fn()
            finally:
                self._slots.release()

        return self._waits.submit(run)


class Refused(Exception):
    """A control request refused: answered ``status`` with the message (503: with ``Retry-After``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, default=_plain, allow_nan=False) + "\n"


def _body_json(status: int, body: bytes) -> web.Response:
    """A JSON answer of bytes encoded on an answer thread (tens of MB over many spans)."""
    return web.Response(body=body, status=status, content_type="application/json", charset="utf-8")


def _value(value: Any) -> Any:
    """An attribute value as JSON: non-finite floats as strings, as the OTLP JSON mapping writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, (tuple, list)):
        return [_value(v) for v in value]
    if isinstance(value, Mapping):
        return _attrs(value)
    return value


def _attrs(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _value(v) for k, v in attributes.items()}


def _plain(value: object) -> object:
    return value.hex() if isinstance(value, bytes) else repr(value)


def span_json(span: RecordedSpan) -> dict[str, Any]:
    """One span as JSON: ids in hex (as OTLP writes them), times in nanoseconds since the epoch."""
    return {
        "name": span.name,
        "trace_id": span.trace_id_hex,
        "span_id": span.span_id_hex,
        "parent_id": None if span.parent_id is None else f"{span.parent_id:016x}",
        "uid": span.uid,
        "parent_uid": span.parent_uid,
        "status_code": span.status_code,
        "status_description": span.status_description,
        "attributes": _attrs(span.attributes),
        "events": [
            {"name": e.name, "attributes": _attrs(e.attributes), "timestamp": e.timestamp}
            for e in span.events
        ],
        "start_time": span.start_time,
        "end_time": span.end_time,
        "resource": _attrs(span.resource),
    }


def _patterns(query: Query, name: str, default: _D) -> tuple[str, ...] | _D:
    given = query.getall(name)
    if not given:
        return default
    try:
        return as_patterns(given)
    except ValueError as exc:
        raise Refused(400, f"query parameter {name}: {exc}") from None


def _number(query: Query, name: str, default: float, low: float, high: float) -> float:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # nan fails too
        raise Refused(400, f"query parameter {name} must be a number in {low:g}..{high:g}, got {raw!r}")
    return value


def _wait(sidecar: Sidecar, query: Query, work: SpanWork) -> Callable[[], Awaitable[None]]:
    """The ``wait_for=`` wait (with ``timeout=`` and ``count=``) the query asks for, to await."""
    name = query.get("wait_for")
    if name is not None and not name.strip():
        raise Refused(400, "query parameter wait_for must be a span-name glob, got ''")
    timeout = _number(query, "timeout", 10.0, 0.0, MAX_WAIT)
    count = int(_number(query, "count", 1, 1, 1_000_000))
    if name is None and (alone := [n for n in ("timeout", "count") if query.get(n) is not None]):
        raise Refused(400, f"query parameter {alone[0]} is wait_for's: give wait_for=<span-name glob> too")

    async def wait() -> None:
        if name is None:
            return
        try:
            await work.wait(lambda: sidecar.wait_for_span(name, timeout, count))
        except SpanLookupError as exc:
            raise Refused(408, str(exc)) from None

    return wait


def _dropped(recorder: SpanRecorder) -> dict[str, Any]:
    return {"dropped_spans": recorder.dropped_received, "span_limit": recorder.received_limit}


def _spans_json(recorder: SpanRecorder) -> str:
    spans = recorder.spans()
    data = {"spans": [span_json(s) for s in spans], "tree": format_tree(spans), **_dropped(recorder)}
    return _dumps(data)


def _spans_text(recorder: SpanRecorder) -> str:
    text = format_tree(recorder.spans()) + "\n"
    if recorder.dropped_received:
        text += (
            f"({recorder.dropped_received} oldest received span(s) dropped by the span limit, "
            f"{recorder.received_limit})\n"
        )
    return text


def _check_json(
    recorder: SpanRecorder, session: tuple[str, ...], cleanup: tuple[str, ...], gate: Mapping[str, Any]
) -> str:
    from pytest_mcpfaults.invariants import format_violations

    spans = recorder.spans()
    names, found = gate_violations(spans, session, cleanup, **gate)
    violations = [
        {"invariant": v.invariant, "message": v.message, "span": v.span and span_json(v.span)} for v in found
    ]
    return _dumps(
        {
            "ok": not found,
            "violations": violations,
            "text": format_violations(found, spans) if found else "",
            "checked": list(names),
            "span_count": len(spans),
            **_dropped(recorder),
        }
    )


def span_routes(sidecar: Sidecar, work: SpanWork) -> dict[tuple[str, str], Route]:
    """``(method, sub-path) -> handler`` of the span routes; ``work``: the threads they run on."""

    def get_spans(query: Query) -> Handler:
        fmt = query.get("format")
        if fmt not in (None, "json", "text"):
            raise Refused(400, f"query parameter format must be 'json' or 'text', got {fmt!r}")
        wait = _wait(sidecar, query, work)

        async def answer(request: web.BaseRequest) -> web.StreamResponse:
            await wait()
            recorder = sidecar.span_recorder
            wants_json = fmt == "json" or (
                fmt is None and "application/json" in request.headers.get("Accept", "")
            )
            if wants_json:
                return _body_json(200, await work.answers.submit(lambda: _spans_json(recorder).encode()))
            text = await work.answers.submit(lambda: _spans_text(recorder).encode())
            return web.Response(body=text, content_type="text/plain", charset="utf-8")

        return answer

    async def delete_spans(request: web.BaseRequest) -> web.StreamResponse:
        recorder = sidecar.span_recorder
        forgot = recorder.count
        recorder.clear()
        return _body_json(200, _dumps({"cleared": forgot}).encode())

    def check(query: Query) -> Handler:
        recorder = sidecar.span_recorder
        session = _patterns(query, "session", recorder.session_patterns)
        cleanup = _patterns(query, "cleanup", recorder.cleanup_patterns)
        gate: dict[str, Any] = {
            name: _patterns(query, name, None) for name in ("flip_cleanup", "count_cleanup")
        }
        max_cleanups = _number(query, "max_cleanups", 1, 0, 1_000_000)
        if max_cleanups != int(max_cleanups):
            raise Refused(400, f"query parameter max_cleanups must be a whole number, got {max_cleanups:g}")
        gate["max_cleanups"] = int(max_cleanups)
        wait = _wait(sidecar, query, work)

        async def answer(request: web.BaseRequest) -> web.StreamResponse:
            await wait()
            verdict = await work.answers.submit(
                lambda: _check_json(recorder, session, cleanup, gate).encode()
            )
            return _body_json(200, verdict)

        return answer

    return {
        ("GET", "/spans"): get_spans,
        ("DELETE", "/spans"): lambda query: delete_spans,
        ("GET", "/check"): check,
    }
