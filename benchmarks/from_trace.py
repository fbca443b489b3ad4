"""from-trace on a 10,000-span trace: reading the export, picking the trace, and inferring the faults.

The trace: one benchmark run (a root span) of 1,000 sessions, each ``Agent.Session`` with a create, six
agent calls, an evaluation and a delete (10 spans per session, and the root: 10,001 spans), one session
in ten with a failed delete ("… is no longer alive") and so a failed session: 100 failures to map. The
clean run has the same shape (1,000 sessions, 9,000 MCP requests, each inside its span): the worst
case for matching, every trace span having a counterpart to find.

Rows, each the median of REPEAT rounds:

* read: ``decode_trace`` of the OTLP/JSON bytes (the receiver's JSON decoder);
* pick: ``pick_trace`` (indexing, the cycle check, the session span check);
* infer: ``infer`` (places, matching, classifying, the faults and their reasons);
* the clean run: ``clean_run_from_detail`` (the footprint, each request placed in its span).

And two hostile rows: ``infer`` on a failed span whose status description is 50 MB, with 9 requests
inside its clean-run span (each rule scanned the whole text, for each request: 13 s for one request);
and the clean run of one session of 9,000 spans, each request after its span ended (each request's span
was looked for among every span before it: 1.8 s, and 6.6 s at 18,000).

Target: inference on a 10,000-span trace under 1 s (issue 38).
Run: ``.venv/bin/python benchmarks/from_trace.py``
"""

from __future__ import annotations

import json
from typing import Any

import _bench

from pytest_mcpfaults.from_trace.footprint import clean_run_from_detail
from pytest_mcpfaults.from_trace.infer import SpanNames, infer
from pytest_mcpfaults.from_trace.read import decode_trace
from pytest_mcpfaults.from_trace.trace import index_spans, pick_trace
from pytest_mcpfaults.spans.records import RecordedSpan

REPEAT = 9
SESSIONS = 1000
TRACE = "6635ef947049886b3b143e621b508cab"
GONE = (
    "Session deletion failed: {'error': 'Error closing session 5788bd81-33f1-471b-9ec2-c75a9110bd02: "
    "Service at http://127.0.0.1:59685 is no longer alive'}"
)
NAMES = SpanNames()
CHILDREN = ("MCP.CreateSession", *(["Agent.Call"] * 6), "Evaluator.Evaluate", "MCP.DeleteSession")
TOOLS = ("create_session", *(["echo"] * 6), "evaluate_session", "delete_session")


def _span(sid: int, name: str, parent: int | None, start: int, end: int, error: str | None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "traceId": TRACE,
        "spanId": f"{sid:016x}",
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "status": {"code": 2, "message": error} if error else {},
    }
    if parent is not None:
        d["parentSpanId"] = f"{parent:016x}"
    if error:
        attrs = [
            {"key": "exception.type", "value": {"stringValue": "RuntimeError"}},
            {"key": "exception.message", "value": {"stringValue": error}},
        ]
        d["events"] = [{"name": "exception", "timeUnixNano": str(end), "attributes": attrs}]
    return d


def trace_bytes() -> bytes:
    spans = [_span(1, "Benchmark.Run", None, 0, 10**15, None)]
    sid = 2
    for i in range(SESSIONS):
        t0, failed = 10**9 * (i + 1), i % 10 == 0
        session = sid
        spans.append(
            _span(session, "Agent.Session", 1, t0, t0 + 10**8, "RuntimeError: " + GONE if failed else None)
        )
        sid += 1
        for n, name in enumerate(CHILDREN):
            error = GONE if failed and name == "MCP.DeleteSession" else None
            spans.append(_span(sid, name, session, t0 + n * 10**7, t0 + n * 10**7 + 5 * 10**6, error))
            sid += 1
    assert len(spans) == 10_001, len(spans)
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(doc).encode()


def clean_detail() -> dict[str, Any]:
    spans: list[dict[str, Any]] = [
        {"id": 1, "parent": None, "name": "Benchmark.Run", "start": 0.0, "end": 1e6}
    ]
    journal: list[dict[str, Any]] = []
    sid = 2
    for i in range(SESSIONS):
        t0 = float(i + 1)
        session = sid
        spans.append({"id": session, "parent": 1, "name": "Agent.Session", "start": t0, "end": t0 + 0.1})
        sid += 1
        for n, (name, tool) in enumerate(zip(CHILDREN, TOOLS, strict=True)):
            start = t0 + n * 0.01
            spans.append({"id": sid, "parent": session, "name": name, "start": start, "end": start + 0.005})
            journal.append(
                {
                    "label": f"POST tools/call {tool}",
                    "server": 0,
                    "start": start + 0.001,
                    "end": start + 0.002,
                }
            )
            sid += 1
    return {"spans": spans, "journal": journal}


def hostile_description() -> tuple[Any, Any]:
    """A trace whose failed delete's description is 50 MB; a clean run with 9 deletes inside its span."""
    text = "RuntimeError: " + "x" * 50_000_000 + " [Errno 111] Connection refused"
    spans = [
        RecordedSpan("Agent.Session", 7, 1, None, "ERROR", "x", {}, (), 10**9, 10**10),
        RecordedSpan("MCP.DeleteSession", 7, 2, 1, "ERROR", text, {}, (), 2 * 10**9, 3 * 10**9),
    ]
    detail: dict[str, Any] = {
        "spans": [
            {"id": 1, "parent": None, "name": "Agent.Session", "start": 1.0, "end": 10.0},
            {"id": 2, "parent": 1, "name": "MCP.DeleteSession", "start": 2.0, "end": 3.0},
        ],
        "journal": [
            {"label": "POST tools/call delete_session", "server": 0, "start": 2.0 + i / 10, "end": None}
            for i in range(1, 10)
        ],
    }
    return index_spans(7, spans), clean_run_from_detail(detail, "clean", NAMES.session)


def one_long_session(n: int = 9000) -> dict[str, Any]:
    """A clean run of one session of ``n`` spans, one after another, each request after its span."""
    spans: list[dict[str, Any]] = [
        {"id": 1, "parent": None, "name": "Agent.Session", "start": 0.0, "end": 1e6}
    ]
    spans += [
        {"id": i + 2, "parent": 1, "name": "Agent.Call", "start": i + 0.1, "end": i + 0.5} for i in range(n)
    ]
    journal = [
        {"label": "POST tools/call echo", "server": 0, "start": i + 0.7, "end": None} for i in range(n)
    ]
    return {"spans": spans, "journal": journal}


def main() -> None:
    data, detail = trace_bytes(), clean_detail()
    read = decode_trace(data, "bench.json")
    trace = pick_trace(read.spans, "bench.json", NAMES.session)
    clean = clean_run_from_detail(detail, "clean", NAMES.session)
    got = infer(trace, clean, NAMES)
    mapped = [i for i in got.inferences if i.faults]
    assert len(mapped) == SESSIONS // 10, len(mapped)
    m = {
        "read": _bench.median(_bench.timed(lambda: decode_trace(data, "bench.json"), REPEAT, 1)),
        "pick": _bench.median(
            _bench.timed(lambda: pick_trace(read.spans, "bench.json", NAMES.session), REPEAT, 1)
        ),
        "infer": _bench.median(_bench.timed(lambda: infer(trace, clean, NAMES), REPEAT, 1)),
        "clean": _bench.median(
            _bench.timed(lambda: clean_run_from_detail(detail, "clean", NAMES.session), REPEAT, 1)
        ),
    }
    big_trace, big_clean = hostile_description()
    assert infer(big_trace, big_clean, NAMES).plan == ("die@tool:delete_session[nth=9]",)
    m["hostile text"] = _bench.median(_bench.timed(lambda: infer(big_trace, big_clean, NAMES), REPEAT, 1))
    long = one_long_session()
    m["hostile clean"] = _bench.median(
        _bench.timed(lambda: clean_run_from_detail(long, "clean", NAMES.session), REPEAT, 1)
    )
    labels = {
        "read": f"read: decode_trace, OTLP/JSON, {len(data) / 1e6:.1f} MB",
        "pick": "pick: pick_trace (index, cycles, session)",
        "infer": f"infer: {len(got.inferences)} failed spans, {len(mapped)} mapped",
        "clean": f"the clean run: {len(clean.calls)} requests placed in {len(clean.trace.spans)} spans",
        "hostile text": "infer: a failed span's 50 MB status description, 9 requests inside it",
        "hostile clean": "the clean run: one session of 9,000 spans, each request after its span",
    }
    rows = [[label, _bench.fmt_s(m[k])] for k, label in labels.items()]
    _bench.table(
        f"from-trace on a {len(trace.spans):,}-span trace (median of {REPEAT})", rows, ["", "median"]
    )
    print()
    print(
        _bench.verdict(
            m["infer"] < 1.0, f"inference on a 10,000-span trace under 1 s: {_bench.fmt_s(m['infer'])}"
        )
    )
    whole = m["read"] + m["pick"] + m["clean"] + m["infer"]
    print(f"read + pick + clean run + infer: {_bench.fmt_s(whole)}")


if __name__ == "__main__":
    main()
