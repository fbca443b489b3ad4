"""Traces written by hand for the from-trace tests: spans in the OTLP JSON mapping, the incident's
shape (``Agent.Session`` ERROR, a first ``MCP.DeleteSession`` ERROR "… is no longer alive", a second
UNSET), and a clean run in explore's ``detail`` form."""

from __future__ import annotations

import json
from typing import Any

TRACE = "6635ef947049886b3b143e621b508cab"
GONE = (
    "Session deletion failed: Session deletion failed: {'error': 'Error closing session "
    "5788bd81-33f1-471b-9ec2-c75a9110bd02: Service at http://127.0.0.1:59685 is no longer alive'}"
)
GONE_TEMPLATE = "Error closing session {session_id}: Service at {service_url} is no longer alive"


def span(
    sid: str,
    name: str,
    parent: str | None,
    start: int,
    end: int | None,
    *,
    error: str | None = None,
    exc: tuple[str, str] | None = None,
    trace: str = TRACE,
) -> dict[str, Any]:
    """One span in the OTLP JSON mapping (``sid``: one hex byte, repeated to 8 bytes); times in ms."""
    d: dict[str, Any] = {
        "traceId": trace,
        "spanId": sid * 8,
        "name": name,
        "startTimeUnixNano": str(start * 1_000_000),
        "endTimeUnixNano": "0" if end is None else str(end * 1_000_000),
        "status": {"code": 2, "message": error} if error else {},
    }
    if parent:
        d["parentSpanId"] = parent * 8
    if exc:
        attrs = [
            {"key": "exception.type", "value": {"stringValue": exc[0]}},
            {"key": "exception.message", "value": {"stringValue": exc[1]}},
        ]
        d["events"] = [
            {"name": "exception", "timeUnixNano": str((end or start) * 1_000_000), "attributes": attrs}
        ]
    return d


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in the OTLP JSON mapping holding ``spans``."""
    res = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    return {"resourceSpans": [{"resource": res, "scopeSpans": [{"spans": list(spans)}]}]}


def incident(session: str = "Agent.Session", cleanup: str = "MCP.DeleteSession") -> list[dict[str, Any]]:
    """The incident's trace: the session ERROR, the first delete ERROR (no longer alive), the second
    UNSET."""
    return [
        span("a1", session, None, 1000, 9000, error="RuntimeError: " + GONE),
        span("b1", "MCP.CreateSession", "a1", 1100, 1200),
        span("c1", "Agent.Call", "a1", 1300, 7000),
        span("e1", cleanup, "a1", 8000, 8100, error="RuntimeError: " + GONE, exc=("RuntimeError", GONE)),
        span("e2", cleanup, "a1", 8200, 8300),
    ]


def incident_bytes(**names: str) -> bytes:
    return json.dumps(export(*incident(**names))).encode()


def clean_detail(session: str = "Agent.Session", cleanup: str = "MCP.DeleteSession") -> dict[str, Any]:
    """A clean run of the same harness (explore's ``detail`` form, times in seconds): its session, a
    create, the agent's call, one delete; the MCP requests inside them."""

    def s(i: int, name: str, parent: int | None, start: float, end: float) -> dict[str, Any]:
        return {"id": i, "parent": parent, "name": name, "status": "UNSET", "description": None,
                "start": start, "end": end}  # fmt: skip

    def r(label: str, start: float) -> dict[str, Any]:
        return {"label": label, "server": 0, "start": start, "end": start + 0.01}

    return {
        "spans": [
            s(1, session, None, 100.0, 110.0),
            s(2, "MCP.CreateSession", 1, 100.1, 100.5),
            s(3, "Agent.Call", 1, 101.0, 102.0),
            s(4, cleanup, 1, 109.0, 109.5),
        ],
        "journal": [
            r("POST initialize", 100.15),
            r("POST notifications/initialized", 100.2),
            r("POST tools/call create_session", 100.3),
            r("POST tools/call echo", 101.5),
            r("POST tools/call delete_session", 109.1),
            r("DELETE /mcp", 109.8),
        ],
    }
