"""from-trace, pure: reading trace exports, picking one trace, matching its spans to a clean run's and
inferring the faults, on traces written by hand in the shape of the incident."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from trace_shapes import GONE_TEMPLATE, TRACE, clean_detail, export, incident, incident_bytes, span

from pytest_mcpfaults.from_trace.footprint import Call, CleanRun, clean_run_from_detail, place_calls
from pytest_mcpfaults.from_trace.infer import MAX_CANDIDATES, MAX_PLANS, Inferred, SpanNames, infer
from pytest_mcpfaults.from_trace.read import MAX_TRACE_BYTES, TraceError, decode_trace
from pytest_mcpfaults.from_trace.shape import shape_differences
from pytest_mcpfaults.from_trace.trace import index_spans, pick_trace
from pytest_mcpfaults.otlp.control_routes import span_json

NAMES = SpanNames()
DELETE_FAULT = f'error_payload(message="{GONE_TEMPLATE}")@tool:delete_session[nth=1]'


def inferred(
    data: bytes, names: SpanNames = NAMES, clean: dict[str, Any] | None = None, **kw: Any
) -> Inferred:
    read = decode_trace(data, "trace.json")
    trace = pick_trace(read.spans, "trace.json", names.session, kw.pop("trace_id", None))
    run = clean_run_from_detail(clean or clean_detail(), "clean.json", names.session)
    return infer(trace, run, names, **kw)


# -- the incident ------------------------------------------------------------------------------------


def test_the_incidents_failed_delete_becomes_error_payload_at_the_delete_with_the_runs_own_ids() -> None:
    got = inferred(incident_bytes())

    assert got.trace_id == TRACE
    assert got.plan == (DELETE_FAULT,)
    [first] = [i for i in got.inferences if i.faults]
    assert (first.outcome, first.step, first.span.span_id_hex) == (
        "mapped",
        "tool:delete_session#1",
        "e1" * 8,
    )
    assert first.reason.startswith(f'MCP.DeleteSession (span {"e1" * 8}) recorded "RuntimeError: ')
    assert (
        "is no longer alive'}\" → error_payload at tool:delete_session#1, the request made inside"
        in first.reason
    )
    # the second delete ended UNSET: nothing to replay; the session's ERROR is the symptom
    assert [i.span.span_id_hex for i in got.inferences] == ["e1" * 8]
    assert [s.name for s in got.symptoms] == ["Agent.Session"]


def test_span_names_of_the_harness_are_mapped_through_the_gates_span_settings() -> None:
    names = SpanNames.of("workflow.run")
    data = incident_bytes(session="workflow.run", cleanup="mcp.close")
    got = inferred(data, names, clean_detail(session="workflow.run", cleanup="mcp.close"))
    assert got.plan == (DELETE_FAULT,)
    # under the default settings the trace has no session span: refused, naming what is valid
    with pytest.raises(TraceError, match=r"has no session span \(session span names: Agent.Session\); its "):
        inferred(data)


def test_session_spans_match_by_role_whatever_their_names() -> None:
    names = SpanNames.of(["Agent.Session", "prod.*"])
    got = inferred(incident_bytes(session="prod.session"), names)
    assert got.plan == (DELETE_FAULT,)
    [inf] = got.inferences
    assert "matched by name only" not in inf.reason


def test_a_span_the_clean_run_has_elsewhere_matches_by_name_only_and_says_so() -> None:
    spans = incident()
    spans[3]["parentSpanId"] = "c1" * 8  # the delete under the agent's call in the trace
    got = inferred(json.dumps(export(*spans)).encode())
    assert got.plan == (DELETE_FAULT,)
    assert "matched by name only" in got.inferences[0].reason


# -- the kinds -------------------------------------------------------------------------------------


def one_failure(
    name: str, start: int, end: int | None, error: str | None, parent: str = "a1", **kw: Any
) -> Inferred:
    spans = [
        span("a1", "Agent.Session", None, 1000, 9000, error="x"),
        span("f1", name, parent, start, end, error=error),
    ]
    return inferred(json.dumps(export(*spans)).encode(), **kw)


@pytest.mark.parametrize(
    ("error", "end", "first"),
    [
        (None, None, "hang(patience=5.0)@tool:delete_session[nth=1]"),  # never ended
        ("TimeoutError: timed out", 8000 + 2000, "hang(patience=5.0)@tool:delete_session[nth=1]"),
        ("ReadTimeout: timed out", 8000 + 60000, "hang(patience=5.0)@tool:delete_session[nth=1]"),
        ("ConnectError: [Errno 111] Connection refused", 8100, "die@tool:delete_session[nth=1]"),
        ("RemoteProtocolError: Server disconnected", 8100, "reset@tool:delete_session[nth=1]"),
        ("HTTPStatusError: 404 Not Found", 8100, "session_expired@tool:delete_session[nth=1]"),
        (
            "McpError: code -32001: backend busy",
            8100,
            'jsonrpc_error(code=-32001,message="McpError: code -32001: backend busy")'
            "@tool:delete_session[nth=1]",
        ),
    ],
)
def test_each_kind_of_failure_maps_to_its_catalogue_fault(
    error: str | None, end: int | None, first: str
) -> None:
    got = one_failure("MCP.DeleteSession", 8000, end, error)
    assert got.plan == (first,)


def test_a_plain_error_text_fits_two_kinds_and_both_are_planned_in_turn() -> None:
    got = one_failure(
        "MCP.DeleteSession", 8000, 8100, "ToolFailed: quota exceeded for http://10.0.0.7:8080/x"
    )
    [inf] = got.inferences
    assert inf.outcome == "ambiguous"
    assert inf.faults == (
        'error_payload(message="quota exceeded for {service_url}/x")@tool:delete_session[nth=1]',
        'tool_error(text="quota exceeded for http://10.0.0.7:8080/x")@tool:delete_session[nth=1]',
    )
    assert got.plans() == [(f,) for f in inf.faults]
    assert "also fits: tool_error" in inf.reason


def test_an_error_text_braces_survive_as_literal_braces_in_the_template() -> None:
    got = one_failure("MCP.DeleteSession", 8000, 8100, "E: {'error': 'bad {x}'}")
    assert got.plan == ('error_payload(message="bad {{x}}")@tool:delete_session[nth=1]',)


def test_a_failure_outside_mcp_is_not_reproducible_by_the_sidecar() -> None:
    clean = clean_detail()
    clean["spans"].append({"id": 9, "parent": 1, "name": "Agent.Think", "start": 103.0, "end": 104.0})
    got = one_failure("Agent.Think", 3000, 6000, "TimeoutError: agent timed out", clean=clean)
    [inf] = got.inferences
    assert (inf.outcome, inf.faults) == ("not_reproducible", ())
    assert (
        "made no MCP request inside Agent.Think: a failure outside MCP, not reproducible by the sidecar"
        in inf.reason
    )


def test_a_span_the_clean_run_does_not_have_is_unmatched() -> None:
    got = one_failure("Vendor.Thing", 3000, 6000, "boom")
    [inf] = got.inferences
    assert inf.outcome == "unmatched" and "no span named 'Vendor.Thing' there" in inf.reason


def test_a_failed_span_with_a_failed_span_beneath_it_follows_from_it() -> None:
    spans = incident()
    spans[2]["status"] = {"code": 2, "message": "McpCallError: echo"}  # Agent.Call ERROR
    spans.append(span("d1", "MCP.Echo", "c1", 1400, 1500, error="ConnectError: connection refused"))
    clean = clean_detail()
    clean["spans"].append({"id": 5, "parent": 3, "name": "MCP.Echo", "start": 101.4, "end": 101.6})
    got = inferred(json.dumps(export(*spans)).encode(), clean=clean)
    outcomes = {i.span.name: i.outcome for i in got.inferences}
    # refused: die, or a reset (both fit; die first)
    assert outcomes == {"Agent.Call": "follows", "MCP.Echo": "ambiguous", "MCP.DeleteSession": "mapped"}
    assert got.plan == ("die@tool:echo[nth=1]", DELETE_FAULT)


def test_several_requests_in_one_span_plan_the_last_and_list_the_others_bounded() -> None:
    clean = clean_detail()
    clean["journal"] += [
        {"label": "POST tools/call delete_session", "server": 0, "start": 109.0 + i / 100, "end": None}
        for i in range(2, 9)
    ]
    clean["journal"].sort(key=lambda r: r["start"])
    got = one_failure("MCP.DeleteSession", 8000, 8100, "ConnectError: connection refused", clean=clean)
    [inf] = got.inferences
    assert inf.outcome == "ambiguous" and len(inf.faults) == MAX_CANDIDATES
    assert inf.faults[0] == "die@tool:delete_session[nth=8]"
    assert "the likeliest of the 8 requests made inside that span in the clean run (" in inf.reason
    assert len(got.plans()) <= MAX_PLANS


def test_a_huge_span_text_is_classified_once_at_its_start_and_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5 MB status description was scanned whole by each rule, once per request inside the span (the
    quote and the fault's message only ever show 120 and 300 characters of it)."""
    from pytest_mcpfaults.from_trace import infer as infer_module

    classified: list[bool] = []

    def counting(span: Any, tool_call: bool, budget: float) -> Any:
        classified.append(tool_call)
        return real(span, tool_call, budget)

    real = infer_module.classify
    monkeypatch.setattr(infer_module, "classify", counting)
    clean = clean_detail()
    clean["journal"] += [
        {"label": "POST tools/call delete_session", "server": 0, "start": 109.0 + i / 100, "end": None}
        for i in range(2, 9)
    ]
    clean["journal"].sort(key=lambda r: r["start"])
    body = "x" * 2_500_000
    text = f"RuntimeError: {body} timed out {body} [Errno 111] Connection refused"  # its middle: not read
    got = one_failure("MCP.DeleteSession", 8000, 8100, text, clean=clean)
    [inf] = got.inferences
    assert inf.faults[:2] == ("die@tool:delete_session[nth=8]", "reset@tool:delete_session[nth=8]")
    assert f"(of its {len(text)} characters, the first and last 32768 read) → die at" in inf.reason
    assert len(inf.reason) < 1000
    assert classified == [True]  # the 8 requests are tool calls: one classification serves them all


def test_each_request_is_placed_in_the_innermost_span_open_around_it_as_the_spans_nest() -> None:
    """The sweep that places requests gives what the definition gives: the latest-started span still
    open (ended at or after the request's start, or never) among those started by then."""
    import random

    from pytest_mcpfaults.spans.records import RecordedSpan

    rng = random.Random(7)
    spans = []
    for k in range(300):
        start = rng.randrange(0, 10_000) * 10**6
        end = start + rng.randrange(0, 3_000) * 10**6 if rng.random() < 0.9 else None
        spans.append(RecordedSpan(f"s{k}", 1, k + 1, None, "UNSET", None, {}, (), start, end))
    trace = index_spans(1, sorted(spans, key=lambda s: s.start_time or 0))
    calls = [Call(f"c#{i}", "c", i, "POST c", rng.randrange(-10, 13_000) / 1000) for i in range(400)]
    calls.append(Call("untimed#1", "untimed", 1, "POST untimed"))
    got = place_calls(calls, trace)
    for call, placed in zip(calls, got, strict=True):
        at = None if call.start is None else int(call.start * 1e9)
        open_ = [
            s
            for s in trace.spans
            if at is not None and (s.start_time or 0) <= at and (not s.end_time or s.end_time >= at)
        ]
        assert placed.span == (open_[-1].span_id if open_ else None), call


# -- reading ---------------------------------------------------------------------------------------


def test_the_same_trace_reads_the_same_from_otlp_protobuf_and_the_plugins_span_json() -> None:
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    doc = export(*incident())
    for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:  # protobuf's own JSON: ids in base64
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in sp:
                import base64

                sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    proto = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    from_proto = decode_trace(proto, "t.pb")
    assert from_proto.format == "OTLP/protobuf"
    plugin = json.dumps({"spans": [span_json(s) for s in from_proto.spans]}).encode()
    for data in (proto, plugin, incident_bytes()):
        assert inferred(data).plan == (DELETE_FAULT,)


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-32"])
def test_a_json_export_an_editor_saved_with_a_byte_order_mark_is_read(codec: str) -> None:
    """Windows tools write one (PowerShell 5's ``>`` writes UTF-16, Notepad's "UTF-8 with BOM")."""
    data = incident_bytes().decode().encode(codec)
    assert decode_trace(data, "trace.json").format == "OTLP/JSON"
    assert inferred(data).plan == (DELETE_FAULT,)


def test_many_failed_spans_the_clean_run_lacks_are_matched_in_linear_time() -> None:
    """Each span matched by name finds its occurrence of its name from an index: a scan of the name's
    spans per span took minutes on a trace of 100,000 failed deletes (well within the file bound)."""
    from pytest_mcpfaults.from_trace.match import match_span, places
    from pytest_mcpfaults.spans.records import RecordedSpan

    n = 30_000
    spans = []
    for k in range(n):  # a failed delete in each of n sessions; the clean run has one session
        t = 10**9 + k * 10**7
        spans.append(RecordedSpan("Agent.Session", 7, 2 * k + 1, None, "ERROR", "x", {}, (), t, t + 9))
        spans.append(
            RecordedSpan("MCP.DeleteSession", 7, 2 * k + 2, 2 * k + 1, "ERROR", "x", {}, (), t + 1, t + 2)
        )
    trace = index_spans(7, spans)
    clean = clean_run_from_detail(clean_detail(), "clean.json", NAMES.session)
    mine, theirs = places(trace, NAMES.session), places(clean.trace, NAMES.session)
    deletes = [s for s in trace.spans if s.name == "MCP.DeleteSession"]
    started = time.perf_counter()
    found = [match_span(s, mine, theirs, NAMES.session) for s in deletes]
    assert time.perf_counter() - started < 5.0  # about 0.5 s; the scan took 80 s
    assert found[0].how == "place"  # the first session's delete: the clean run's only one
    assert all(m.span is None for m in found[1:])  # the 2nd..nth delete: no counterpart


def test_a_collector_file_shared_with_metrics_and_logs_pipelines_reads_its_traces() -> None:
    """One file exporter in the traces, metrics and logs pipelines writes the three kinds of lines."""
    metrics = json.dumps({"resourceMetrics": [{"resource": {}, "scopeMetrics": []}]})
    logs = json.dumps({"resourceLogs": [{"resource": {}, "scopeLogs": []}]})
    data = "\n".join([metrics, json.dumps(export(*incident())), logs]).encode()
    assert inferred(data).plan == (DELETE_FAULT,)
    with pytest.raises(TraceError, match=r"t\.json: no trace in it, only OTLP metrics or logs \(2 exports\)"):
        decode_trace(f"{metrics}\n{logs}\n".encode(), "t.json")


def test_json_lines_of_exports_are_read_and_a_file_with_several_traces_needs_a_trace_id() -> None:
    other = "0" * 31 + "7"
    lines = [
        json.dumps(export(*incident())),
        "",
        json.dumps(export(span("99", "Agent.Session", None, 1, 2, trace=other))),
    ]
    data = "\n".join(lines).encode()
    with pytest.raises(
        TraceError,
        match=f"2 traces in the file, 2 with a session span; name one with trace_id=: {other}, {TRACE}",
    ):
        inferred(data)
    assert inferred(data, trace_id=TRACE).plan == (DELETE_FAULT,)
    assert inferred(data, trace_id=other).plan == ()
    with pytest.raises(TraceError, match=f"no trace with trace_id={'ab' * 16}; it has: {other}, {TRACE}"):
        inferred(data, trace_id="ab" * 16)
    with pytest.raises(TraceError, match="trace_id='xyz': a trace id is 32 hex digits"):
        inferred(data, trace_id="xyz")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "t.json: the file is empty; valid: an OTLP/JSON ExportTraceServiceRequest"),
        (b"  \n", "the file is empty"),
        (b'{"hello": 1}', r"t.json: not a trace \(neither resourceSpans nor spans in it\); valid: "),
        (b"[1, 2]", "not a trace"),
        (b"{nope", "t.json: not JSON"),
        (b'{"resourceSpans": 3}', "not an OTLP/JSON trace export: resourceSpans must be a JSON array"),
        (b"hello, I am a text file", "t.json: not a trace"),
        # compressed (gzip; zstd, the collector file exporter's compression): no protobuf starts so
        (b"\x1f\x8b\x08\x00rest", r"t.json: gzip-compressed: decompress it first \(gzip -d\); valid: "),
        (b"\x28\xb5\x2f\xfdrest", r"t.json: zstd-compressed: decompress it first \(zstd -d\); valid: "),
        (b'{"spans": [{"name": "x", "span_id": "zz"}]}', "spans\\[0\\]: span 'x': bad ids or times"),
        # the plugin's span JSON: nanoseconds that are not a number, a description that is not text
        (b'{"spans": [{"name": "x", "span_id": "01", "end_time": "soon"}]}', "span 'x': bad ids or times"),
        # ids are hex digits (as span_json writes them): a sign made "trace -000…1", a test name a SyntaxError
        (b'{"spans": [{"name": "x", "span_id": "01", "trace_id": "-1"}]}', "span 'x': bad ids or times"),
        (b'{"spans": [{"name": "x", "span_id": " 0x1_0"}]}', "span 'x': bad ids or times"),
        (
            b'{"spans": [{"name": "x", "span_id": "01", "status_description": 5}]}',
            "spans\\[0\\]: span 'x': its status description must be a string, got '5'",
        ),
        (b'{"spans": [{"name": "x", "id": 1, "description": ["e"]}]}', "its status description must be"),
    ],
)
def test_what_is_not_a_trace_is_refused_naming_the_file_and_what_is_valid(data: bytes, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        decode_trace(data, "t.json")


def test_an_empty_export_is_an_empty_trace() -> None:
    read = decode_trace(json.dumps(export()).encode(), "t.json")
    with pytest.raises(TraceError, match=r"t\.json: the trace is empty"):
        pick_trace(read.spans, "t.json", NAMES.session)


def test_a_file_over_the_bound_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(TraceError, match=f"over {MAX_TRACE_BYTES} bytes"):
        decode_trace(b"{" + b" " * MAX_TRACE_BYTES, "big.json")


def test_parentage_with_a_cycle_is_refused_naming_a_span_on_it() -> None:
    spans = incident()
    spans[0]["parentSpanId"] = "e2" * 8  # the session under its own second delete
    read = decode_trace(json.dumps(export(*spans)).encode(), "t.json")
    with pytest.raises(
        TraceError, match=r"span '.*' \(span .*\) is its own ancestor: the trace's parentage has a cycle"
    ):
        pick_trace(read.spans, "t.json", NAMES.session)


def test_spans_the_decoder_refuses_are_counted_and_the_rest_kept() -> None:
    spans = [*incident(), {**span("f1", "Bad", "a1", 1, 2), "traceId": "00" * 16}]
    read = decode_trace(json.dumps(export(*spans)).encode(), "t.json")
    assert (len(read.spans), read.rejected) == (5, 1)
    assert "trace_id must be 16 bytes, not all zero" in read.reasons[0]


# -- the clean run -----------------------------------------------------------------------------------


def test_each_request_belongs_to_the_innermost_span_open_around_it() -> None:
    run = clean_run_from_detail(clean_detail(), "clean.json", NAMES.session)
    owners = {c.step: run.trace.by_id[c.span].name if c.span else None for c in run.calls}
    assert owners == {
        "initialize#1": "MCP.CreateSession",
        "notifications/initialized#1": "MCP.CreateSession",
        "tool:create_session#1": "MCP.CreateSession",
        "tool:echo#1": "Agent.Call",
        "tool:delete_session#1": "MCP.DeleteSession",
        "DELETE /mcp#1": "Agent.Session",  # after the delete's span ended
    }
    outside = place_calls([Call("health#1", "health", 1, "GET /health", 50.0)], run.trace)
    assert outside[0].span is None


def test_a_clean_run_file_that_is_not_one_is_refused() -> None:
    with pytest.raises(
        TraceError, match=r"clean\.json: a clean run is an object with spans and journal lists"
    ):
        clean_run_from_detail({"spans": []}, "clean.json", NAMES.session)
    with pytest.raises(TraceError, match=r"clean\.json: the clean run has no session span"):
        clean_run_from_detail({"spans": [{"id": 1, "name": "x"}], "journal": []}, "clean.json", NAMES.session)


def test_a_journal_post_with_no_json_rpc_method_is_left_out_as_footprint_leaves_it_out() -> None:
    """``POST`` alone (no method, no path) is a POST to the MCP path with no JSON-RPC method: footprint
    leaves it out, and so must the pairing of steps with records (it raised on the two lengths)."""
    detail = clean_detail()
    detail["journal"].insert(0, {"label": "POST", "server": 0, "start": 100.0, "end": 100.01})
    assert inferred(incident_bytes(), clean=detail).plan == (DELETE_FAULT,)


def test_a_clean_run_without_requests_maps_nothing() -> None:
    read = decode_trace(incident_bytes(), "t.json")
    trace = pick_trace(read.spans, "t.json", NAMES.session)
    got = infer(trace, CleanRun(index_spans(0, trace.spans), ()), NAMES)
    assert got.plan == ()
    assert [i.outcome for i in got.inferences] == ["not_reproducible"]


def test_a_text_the_server_wrapped_is_its_answer_whatever_it_says() -> None:
    # explore's error_payload cell "not_found": the server's own {"error": ...}, not a 404
    got = one_failure("MCP.DeleteSession", 8000, 8100, "RuntimeError: {'error': 'session not found'}")
    assert got.plan == ('error_payload(message="session not found")@tool:delete_session[nth=1]',)
    assert got.inferences[0].outcome == "mapped"


def test_a_cut_off_wrapped_error_full_of_backslashes_is_classified_at_once() -> None:
    """An exporter cuts long descriptions; escaped twice, a Windows path is runs of backslashes. A backslash
    matched either as an escape or as a character made the search exponential in the run's length (40: some
    40 s; 60: hours) when no closing quote followed."""
    text = "RuntimeError: {'error': 'cannot open C:" + "\\" * 40
    started = time.perf_counter()
    got = one_failure("MCP.DeleteSession", 8000, 8100, text)
    assert time.perf_counter() - started < 1.0
    assert got.inferences[0].faults  # read as a plain error text: error_payload, then tool_error


def test_of_several_traces_the_only_one_with_a_session_span_is_picked() -> None:
    probe = export(span("99", "Sidecar.WaitReady", None, 1, 2, trace="0" * 31 + "7"))  # a trace of its own
    data = "\n".join([json.dumps(probe), json.dumps(export(*incident()))]).encode()
    assert inferred(data).trace_id == TRACE
    with pytest.raises(TraceError, match="2 traces in the file, none with a session span; name one"):
        pick_trace(decode_trace(data, "t.json").spans, "t.json", ("Nope",))


def test_a_replay_has_the_traces_shape_when_the_same_spans_are_error() -> None:
    trace = pick_trace(decode_trace(incident_bytes(), "t.json").spans, "t.json", NAMES.session)
    assert shape_differences(trace, trace.spans, NAMES.session) == []
    spans = incident()
    spans[4]["status"] = {"code": 2, "message": "again"}  # the second delete failed too
    replay = decode_trace(json.dumps(export(*spans)).encode(), "r.json").spans
    assert shape_differences(trace, replay, NAMES.session) == [
        "(session #1) / MCP.DeleteSession #2: not ERROR in the trace, ERROR in the replay",
    ]


def test_a_fixed_harness_has_the_traces_shape_its_session_span_and_its_paths_not_compared() -> None:
    """The session span's ERROR is the symptom, and a span the replay lacks is a path the harness did
    not take: a fixed runner (session UNSET, one delete, no agent call) keeps the broken one's plan."""
    trace = pick_trace(decode_trace(incident_bytes(), "t.json").spans, "t.json", NAMES.session)
    spans = incident()
    spans[0]["status"] = {}
    del spans[4], spans[2]
    replay = decode_trace(json.dumps(export(*spans)).encode(), "r.json").spans
    assert shape_differences(trace, replay, NAMES.session) == []
    spans[2]["status"] = {}  # but a delete the trace had failed succeeding is not the trace's shape
    replay = decode_trace(json.dumps(export(*spans)).encode(), "r.json").spans
    assert shape_differences(trace, replay, NAMES.session) == [
        "(session #1) / MCP.DeleteSession #1: ERROR in the trace, not ERROR in the replay",
    ]


def test_a_trace_whose_every_span_is_refused_says_why() -> None:
    bad = {**span("f1", "Bad", None, 1, 2), "traceId": "00" * 16}
    with pytest.raises(
        TraceError, match=r"t\.json: every span refused \(1\): span 'Bad': trace_id must be 16"
    ):
        decode_trace(json.dumps(export(bad)).encode(), "t.json")


def test_the_regression_module_compiles_whatever_the_trace_files_name() -> None:
    """The trace's file name is in the module's docstring: a backslash or quotes in it broke the module."""
    import ast

    from pytest_mcpfaults.from_trace.render import regression_test

    source = 'inc\\N"""x\'.json'
    module = ast.parse(regression_test(inferred(incident_bytes()), source, "test_m", "test_x", "test_r"))
    assert f"({source})" in (ast.get_docstring(module) or "")
