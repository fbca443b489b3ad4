"""The span routes of the ``serve`` control endpoint: the recorded spans and the invariants' verdict over
HTTP, so a harness in any language can assert the span invariants in its own test runner.

=========================  =====================================================================
``GET    /spans``          the span tree as text; JSON (``{"spans": [...], "tree": "..."}``) with
                           ``?format=json`` or ``Accept: application/json``
``DELETE /spans``          forget every recorded span (between two scenarios)
``GET    /check``          the verdict: ``{"ok", "violations": [{"invariant", "message", "span"}],
                           "text", "checked", "span_count"}``; ``text`` is what the pytest gate
                           prints after its ``mcpfaults span gate (--mcpfaults-check-spans):``
=========================  =====================================================================

Both ``GET`` routes take ``wait_for=NAME`` (a span-name glob; with ``count=N``, default 1, and
``timeout=SECONDS``, default 10, at most 60): first wait until that many such spans have ended (a flush
barrier), answering 408 with what was recorded instead when they do not. ``/check`` takes
``session=GLOB`` and ``cleanup=GLOB`` (repeatable) for the span names, defaulting to the recorder's,
``flip_cleanup=GLOB`` / ``count_cleanup=GLOB`` (repeatable) for one invariant's cleanup names alone,
and ``max_cleanups=N`` (a whole number, default 1), as the pytest gate's settings.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from pytest_mcpfaults.span_gate import gate_violations
from pytest_mcpfaults.span_queries import SpanLookupError, as_patterns
from pytest_mcpfaults.span_records import RecordedSpan
from pytest_mcpfaults.span_tree import format_tree

if TYPE_CHECKING:
    from pytest_mcpfaults.invariants import Violation
    from pytest_mcpfaults.sidecar.server import Sidecar

__all__ = ["MAX_WAIT", "span_json", "span_routes"]

#: The longest ``timeout=`` a control request may wait for spans, in seconds.
MAX_WAIT = 60.0
Route = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
_D = TypeVar("_D", tuple[str, ...], None)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json(status: int, data: Mapping[str, Any]) -> web.Response:
    text = json.dumps(data, default=_plain) + "\n"
    return web.Response(text=text, status=status, content_type="application/json")


def _plain(value: object) -> object:
    """JSON for attribute values JSON has no form for: bytes as hex, key-value lists as objects."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return dict(value)
    return repr(value)


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
        "attributes": dict(span.attributes),
        "events": [
            {"name": e.name, "attributes": dict(e.attributes), "timestamp": e.timestamp} for e in span.events
        ],
        "start_time": span.start_time,
        "end_time": span.end_time,
        "resource": dict(span.resource),
    }


def _patterns(request: web.BaseRequest, name: str, default: _D) -> tuple[str, ...] | _D:
    given = request.query.getall(name, [])
    if not given:
        return default
    try:
        return as_patterns(given)
    except ValueError as exc:
        raise _Refused(400, f"query parameter {name}: {exc}") from None


def _number(request: web.BaseRequest, name: str, default: float, low: float, high: float) -> float:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # nan fails too
        raise _Refused(400, f"query parameter {name} must be a number in {low:g}..{high:g}, got {raw!r}")
    return value


async def _wait(sidecar: Sidecar, request: web.BaseRequest) -> None:
    name = request.query.get("wait_for")
    if name is None:
        return
    if not name.strip():
        raise _Refused(400, "query parameter wait_for must be a span-name glob, got ''")
    timeout = _number(request, "timeout", 10.0, 0.0, MAX_WAIT)
    count = int(_number(request, "count", 1, 1, 1_000_000))
    try:
        await asyncio.to_thread(sidecar.wait_for_span, name, timeout, count)
    except SpanLookupError as exc:
        raise _Refused(408, str(exc)) from None


def _guarded(route: Route) -> Route:
    """``route``, answering its :class:`_Refused` as a JSON error with that status."""

    async def run(request: web.BaseRequest) -> web.StreamResponse:
        try:
            return await route(request)
        except _Refused as exc:
            return _json(exc.status, {"error": str(exc)})

    return run


def _check_answer(
    names: Sequence[str], found: Sequence[Violation], spans: Sequence[RecordedSpan]
) -> dict[str, Any]:
    """The body of ``GET /check``: the verdict, each violation with its span, the text, what was checked."""
    from pytest_mcpfaults.invariants import format_violations

    return {
        "ok": not found,
        "violations": [
            {
                "invariant": v.invariant,
                "message": v.message,
                "span": None if v.span is None else span_json(v.span),
            }
            for v in found
        ],
        "text": format_violations(found, spans) if found else "",
        "checked": list(names),
        "span_count": len(spans),
    }


def span_routes(sidecar: Sidecar) -> dict[tuple[str, str], Route]:
    """``(method, sub-path) -> handler`` of the span routes, for the control endpoint's routing."""

    async def get_spans(request: web.BaseRequest) -> web.StreamResponse:
        fmt = request.query.get("format")
        if fmt not in (None, "json", "text"):
            raise _Refused(400, f"query parameter format must be 'json' or 'text', got {fmt!r}")
        await _wait(sidecar, request)
        spans = sidecar.span_recorder.spans()
        wants_json = fmt == "json" or (
            fmt is None and "application/json" in request.headers.get("Accept", "")
        )
        if wants_json:
            return _json(200, {"spans": [span_json(s) for s in spans], "tree": format_tree(spans)})
        return web.Response(text=format_tree(spans) + "\n", content_type="text/plain")

    async def delete_spans(request: web.BaseRequest) -> web.StreamResponse:
        recorder = sidecar.span_recorder
        forgot = len(recorder.spans())
        recorder.clear()
        return _json(200, {"cleared": forgot})

    async def check(request: web.BaseRequest) -> web.StreamResponse:
        recorder = sidecar.span_recorder
        session = _patterns(request, "session", recorder.session_patterns)
        cleanup = _patterns(request, "cleanup", recorder.cleanup_patterns)
        flip_cleanup = _patterns(request, "flip_cleanup", None)
        count_cleanup = _patterns(request, "count_cleanup", None)
        max_cleanups = _number(request, "max_cleanups", 1, 0, 1_000_000)
        if max_cleanups != int(max_cleanups):
            raise _Refused(400, f"query parameter max_cleanups must be a whole number, got {max_cleanups:g}")
        await _wait(sidecar, request)
        spans = recorder.spans()
        names, found = gate_violations(
            spans,
            session,
            cleanup,
            flip_cleanup=flip_cleanup,
            count_cleanup=count_cleanup,
            max_cleanups=int(max_cleanups),
        )
        return _json(200, _check_answer(names, found, spans))

    return {
        ("GET", "/spans"): _guarded(get_spans),
        ("DELETE", "/spans"): _guarded(delete_spans),
        ("GET", "/check"): _guarded(check),
    }
