"""The sidecar's OTLP/HTTP trace receiver, over real sockets: real exporters in child processes, and
bodies built by hand (protobuf and the OTLP JSON mapping), answered as the OTLP specification says."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults import Sidecar, SpanRecorder
from pytest_mcpfaults.spans import SpanLookupError

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}

#: A child harness: its own provider, batch processor and OTLP/HTTP exporter (endpoint from the env).
CHILD = textwrap.dedent(
    """
    import os, random, sys
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if os.environ.get("SEED"):
        random.seed(int(os.environ["SEED"]))  # the SDK draws ids from `random`: repeat them on purpose
    service = os.environ.get("SERVICE", "child-harness")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("harness")
    for _ in range(int(os.environ.get("SESSIONS", "1"))):
        if os.environ.get("SEED"):
            random.seed(int(os.environ["SEED"]))
        try:
            with tracer.start_as_current_span("Agent.Session", attributes={"run": service}):
                with tracer.start_as_current_span("Agent.Run", attributes={"tools": ["echo", "sleep"]}):
                    pass
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    if os.environ.get("FLIP"):
                        raise RuntimeError("Service is no longer alive")
        except RuntimeError:
            pass
    provider.shutdown()
    """
)


def run_child(sidecar: Sidecar, tmp_path: Path, **env: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, **sidecar.otel_env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def in_process_tree(flip: bool) -> str:
    """The same session traced in this process, as the recorder prints it."""
    recorder = SpanRecorder()
    tracer = recorder.attach(TracerProvider()).get_tracer("harness")
    try:
        with tracer.start_as_current_span("Agent.Session", attributes={"run": "child-harness"}):
            with tracer.start_as_current_span("Agent.Run", attributes={"tools": ["echo", "sleep"]}):
                pass
            with tracer.start_as_current_span("MCP.DeleteSession"):
                if flip:
                    raise RuntimeError("Service is no longer alive")
    except RuntimeError:
        pass
    return recorder.tree()


# -- a real exporter in a child process ---------------------------------------------------------------


def test_a_child_processs_spans_arrive_with_their_resource_and_the_same_tree(tmp_path: Path) -> None:
    with Sidecar() as sc:
        run_child(sc, tmp_path, FLIP="1")
        [session] = sc.wait_for_span("Agent.Session", timeout=10)
        rec = sc.span_recorder
        assert session.resource["service.name"] == "child-harness"
        assert session.resource["telemetry.sdk.language"] == "python"
        assert rec.tree() == in_process_tree(flip=True)
        [violation] = rec.check()
        assert violation.invariant == "cleanup_never_flips"
        assert violation.message == in_process_message(flip=True)
        # the journal has the export: POST /v1/traces answered 200, by the exporter's user agent
        [req] = [r for r in sc.journal.requests if r.path == "/v1/traces"]
        assert (req.method, req.status, req.error_by) == ("POST", 200, None)
        assert (req.user_agent or "").startswith("OTel-OTLP-Exporter-Python")


def in_process_message(flip: bool) -> str:
    recorder = SpanRecorder()
    tracer = recorder.attach(TracerProvider()).get_tracer("harness")
    try:
        with tracer.start_as_current_span("Agent.Session"), tracer.start_as_current_span("MCP.DeleteSession"):
            if flip:
                raise RuntimeError("Service is no longer alive")
    except RuntimeError:
        pass
    [violation] = recorder.check()
    return violation.message


def test_the_hardened_child_passes_and_gzip_bodies_are_accepted(tmp_path: Path) -> None:
    with Sidecar() as sc:
        run_child(sc, tmp_path, OTEL_EXPORTER_OTLP_TRACES_COMPRESSION="gzip")
        sc.wait_for_span("Agent.Session", timeout=10)
        assert sc.span_recorder.check() == []
        assert sc.span_recorder.names() == ["Agent.Session", "Agent.Run", "MCP.DeleteSession"]
        # the body really was gzip on the wire: the exporter says so in Content-Encoding (aiohttp
        # inflates it before the receiver reads it); a gzip body posted by hand is read the same way
        body = request_with_spans().SerializeToString()
        r = httpx.post(
            sc.otlp_url, content=gzip.compress(body), headers={**PROTOBUF, "Content-Encoding": "gzip"}
        )
        assert r.status_code == 200
        assert "Hand.Made" in sc.span_recorder.names()


def test_ids_repeated_by_two_processes_and_within_one_stay_apart(tmp_path: Path) -> None:
    """Two children seeded alike send the same ids (each from its own process: the SDK's resource
    carries a service.instance.id per process); one child runs two sessions with the same ids. Every
    session keeps its own children."""
    with Sidecar() as sc:
        run_child(sc, tmp_path, SEED="7", SERVICE="a", FLIP="1")
        run_child(sc, tmp_path, SEED="7", SERVICE="a", SESSIONS="2")
        sessions = sc.wait_for_span("Agent.Session", timeout=10, count=3)
        rec = sc.span_recorder
        assert len({(s.trace_id, s.span_id) for s in sessions}) == 1  # the same ids, three times
        assert len({s.uid for s in sessions}) == 3
        kids = [[c.name for c in rec.children(s)] for s in sessions]
        assert kids == [["Agent.Run", "MCP.DeleteSession"]] * 3
        assert [s.status_code for s in sessions] == ["ERROR", "UNSET", "UNSET"]
        [violation] = rec.check()
        assert violation.span == sessions[0]


# -- bodies built by hand -----------------------------------------------------------------------------

TRACE = "5b8efff798038103d269b633813fc60c"
ROOT, CHILD_ID = "eee19b7ec3c1b174", "eee19b7ec3c1b173"


def request_with_spans() -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    attr = rs.resource.attributes.add()
    attr.key, attr.value.string_value = "service.name", "by-hand"
    span = rs.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes.fromhex(TRACE), bytes.fromhex(ROOT), "Hand.Made"
    span.start_time_unix_nano, span.end_time_unix_nano = 1_000, 2_000
    return req


def json_export(spans: list[dict[str, Any]], service: str = "json-harness") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "harness"}, "spans": spans}],
            }
        ]
    }


JSON_SESSION = {
    "traceId": TRACE,
    "spanId": ROOT,
    "name": "Agent.Session",
    "kind": "SPAN_KIND_INTERNAL",  # an enum by name
    "startTimeUnixNano": "1700000000000000000",  # int64 as a string
    "endTimeUnixNano": "1700000000900000000",
    "status": {"code": "STATUS_CODE_ERROR", "message": "RuntimeError: Service is no longer alive"},
    "attributes": [
        {"key": "attempt", "value": {"intValue": "3"}},
        {"key": "ratio", "value": {"doubleValue": 0.5}},
        {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"boolValue": True}]}}},
    ],
    "unknownFieldFromTheFuture": {"ignored": True},
}
JSON_DELETE = {
    "traceId": TRACE,
    "spanId": CHILD_ID,
    "parentSpanId": ROOT,
    "name": "MCP.DeleteSession",
    "kind": 1,  # an enum by number
    "startTimeUnixNano": 1700000000500000000,  # int64 as a number
    "endTimeUnixNano": "1700000000600000000",
    "status": {"code": 2, "message": "RuntimeError: Service is no longer alive"},
    "events": [
        {
            "name": "exception",
            "timeUnixNano": "1700000000550000000",
            "attributes": [
                {"key": "exception.type", "value": {"stringValue": "RuntimeError"}},
                {"key": "exception.message", "value": {"stringValue": "Service is no longer alive"}},
            ],
        }
    ],
}


def test_json_export_hex_ids_enum_names_and_numbers_string_ints() -> None:
    with Sidecar() as sc:
        # the child first, its parent in a later export (exporters send spans as they end)
        for span in (JSON_DELETE, JSON_SESSION):
            r = httpx.post(sc.otlp_url, json=json_export([span]), timeout=10)
            assert (r.status_code, r.headers["Content-Type"].split(";")[0], r.json()) == (
                200,
                "application/json",
                {},
            )
        rec = sc.span_recorder
        session, delete = rec.one("Agent.Session"), rec.one("MCP.DeleteSession")
        assert (session.trace_id_hex, session.span_id_hex, session.parent_id) == (TRACE, ROOT, None)
        assert (delete.parent_id, rec.parent(delete)) == (int(ROOT, 16), session)
        assert (session.start_time, session.end_time) == (1700000000000000000, 1700000000900000000)
        assert delete.start_time == 1700000000500000000
        assert (session.status_code, delete.status_code) == ("ERROR", "ERROR")
        assert dict(session.attributes) == {"attempt": 3, "ratio": 0.5, "tags": ("a", True)}
        assert delete.exceptions == (("RuntimeError", "Service is no longer alive"),)
        assert delete.events[0].timestamp == 1700000000550000000
        assert session.resource == {"service.name": "json-harness"}
        [violation] = rec.check()
        assert "comes from a cleanup failure" in violation.message


def test_protobuf_answer_and_partial_success_for_rejected_spans() -> None:
    req = request_with_spans()
    bad = req.resource_spans[0].scope_spans[0].spans.add()
    bad.trace_id, bad.span_id, bad.name = bytes(16), bytes.fromhex(CHILD_ID), "Zero.Trace"
    with Sidecar() as sc:
        r = httpx.post(sc.otlp_url, content=req.SerializeToString(), headers=PROTOBUF, timeout=10)
        assert (r.status_code, r.headers["Content-Type"]) == (200, "application/x-protobuf")
        answer = ExportTraceServiceResponse.FromString(r.content)
        assert answer.partial_success.rejected_spans == 1
        assert "'Zero.Trace': trace_id must be 16 bytes, not all zero" in answer.partial_success.error_message
        assert sc.span_recorder.names() == ["Hand.Made"]
        # nothing rejected: partial_success left unset, as the specification asks
        r = httpx.post(sc.otlp_url, content=request_with_spans().SerializeToString(), headers=PROTOBUF)
        assert r.status_code == 200 and not ExportTraceServiceResponse.FromString(r.content).HasField(
            "partial_success"
        )


@pytest.mark.parametrize(
    ("headers", "body", "why"),
    [
        (PROTOBUF, b"\xff\xff\xff\xff not protobuf", "not an OTLP ExportTraceServiceRequest in protobuf"),
        (JSON, b"{not json", "body is not JSON"),
        (JSON, json.dumps(json_export([{**JSON_SESSION, "traceId": "W46/95gDgQPSabYzgT/GDA=="}])).encode(),
         "traceId must be 32 hex digits (the OTLP JSON mapping writes ids as hex, not base64)"),
        (JSON, json.dumps({"resourceSpans": "nope"}).encode(), "resourceSpans must be a JSON array, got"),
        ({**PROTOBUF, "Content-Encoding": "gzip"}, b"not gzip", "body does not decode (gzip encoding)"),
    ],
    ids=["protobuf", "json", "base64-id", "json-shape", "gzip"],
)  # fmt: skip
def test_a_body_that_does_not_decode_is_400_and_the_clients_error(
    headers: dict[str, str], body: bytes, why: str
) -> None:
    with Sidecar() as sc:
        r = httpx.post(sc.otlp_url, content=body, headers=headers, timeout=10)
        assert r.status_code == 400
        if headers["Content-Type"] == "application/json":
            status = r.json()
            assert status["code"] == 3 and why in status["message"]
        else:
            status = status_pb2.Status.FromString(r.content)  # a google.rpc.Status, as the spec asks
            assert status.code == 3 and why in status.message
        [req] = sc.journal.requests
        assert (req.path, req.status, req.error_by) == ("/v1/traces", 400, "client")
        assert req.error is not None and why in req.error
        assert sc.errors == []  # the client's mistake, not the sidecar's
        assert sc.span_recorder.spans() == []


U64 = "must be an integer in 0..18446744073709551615"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"startTimeUnixNano": "1" * 5000}, "startTimeUnixNano " + U64),
        ({"events": [{"name": "e", "timeUnixNano": "2" * 5000}]}, "events[0].timeUnixNano " + U64),
        ({"attributes": [{"key": "k", "value": {"intValue": "9" * 5000}}]},
         "value.intValue must be an integer in -9223372036854775808..9223372036854775807"),
        ({"status": {"code": "1" * 5000}}, "status.code must be an integer in -2147483648..2147483647"),
        ({"startTimeUnixNano": str(2**64)}, "startTimeUnixNano " + U64),
        ({"attributes": [{"key": "k", "value": {"intValue": str(2**63)}}]}, "intValue must be an integer in"),
        ({"startTimeUnixNano": "-5", "endTimeUnixNano": -10}, "startTimeUnixNano must be an integer in 0.."),
        ({"endTimeUnixNano": -10}, "endTimeUnixNano must be an integer in 0.."),
    ],
    ids=["start-5000-digits", "event-time-5000-digits", "int-5000-digits", "status-5000-digits",
         "start-2**64", "int-2**63", "negative-start", "negative-end"],
)  # fmt: skip
def test_integers_out_of_their_range_are_400_and_the_clients_error(
    change: dict[str, Any], field: str
) -> None:
    """Python's int() refuses strings over 4,300 digits with a ValueError: such an integer (and any
    outside its OTLP type, or a negative time) is the client's bad export, never a sidecar error."""
    body = json.dumps(json_export([{**JSON_SESSION, **change}])).encode()
    with Sidecar() as sc:
        r = httpx.post(sc.otlp_url, content=body, headers=JSON, timeout=10)
        assert r.status_code == 400, r.text
        assert field in r.json()["message"]
        [req] = sc.journal.requests
        assert (req.status, req.error_by) == (400, "client")
        assert sc.errors == []
        assert sc.span_recorder.spans() == []
        # the largest values of each type still decode
        edge = {"startTimeUnixNano": str(2**64 - 1), "endTimeUnixNano": 2**64 - 1,
                "attributes": [{"key": "k", "value": {"intValue": str(-(2**63))}}]}  # fmt: skip
        body = json.dumps(json_export([{**JSON_SESSION, **edge}])).encode()
        assert httpx.post(sc.otlp_url, content=body, headers=JSON, timeout=10).status_code == 200
        [span] = sc.span_recorder.spans()
        assert (span.start_time, span.attributes["k"]) == (2**64 - 1, -(2**63))


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_a_received_span_with_end_time_zero_has_ended(encoding: str) -> None:
    """docs/spans.md: every received span has ended (it was exported), so all_spans_ended never fires
    on one, whatever its end time says."""
    if encoding == "json":
        body = json.dumps(json_export([{**JSON_SESSION, "endTimeUnixNano": "0"}])).encode()
        headers = JSON
    else:
        req = request_with_spans()
        req.resource_spans[0].scope_spans[0].spans[0].end_time_unix_nano = 0
        body, headers = req.SerializeToString(), PROTOBUF
    with Sidecar() as sc:
        assert httpx.post(sc.otlp_url, content=body, headers=headers, timeout=10).status_code == 200
        [span] = sc.span_recorder.spans()
        assert span.ended and span.end_time == 0
        sc.span_recorder.assert_all_spans_ended()
        assert sc.span_recorder.open_spans() == []


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, gzip", "compress"])
def test_an_encoding_aiohttp_would_decode_or_refuse_itself_is_415_journaled(
    encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp answered br and zstd with its own 400 text/plain before the receiver saw the request
    (unjournaled, a traceback in the log); docs/spans.md says 415."""
    body = request_with_spans().SerializeToString()
    with Sidecar() as sc:
        r = httpx.post(
            sc.otlp_url, content=body, headers={**PROTOBUF, "Content-Encoding": encoding}, timeout=10
        )
        assert r.status_code == 415, r.text
        status = status_pb2.Status.FromString(r.content)
        assert status.code == 12 and f"Content-Encoding {encoding!r} is not supported" in status.message
        [req] = sc.journal.requests
        assert (req.status, req.error_by) == (415, "client")
        assert sc.errors == [] and sc.span_recorder.spans() == []
    assert not [rec for rec in caplog.records if rec.name.startswith("aiohttp")]


def _bomb(mib: int, wbits: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zero = bytes(1 << 20)
    return b"".join(c.compress(zero) for _ in range(mib)) + c.flush()


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 31), ("deflate", 15), ("deflate", -15)])
def test_a_compression_bomb_is_413_and_never_inflated_past_the_limit(encoding: str, wbits: int) -> None:
    """512 MiB of zeros in about 0.5 MB: aiohttp inflated all of it on the loop after the 413 (a second
    of every sidecar's loop per bomb); now the receiver stops at the limit and closes the connection."""
    import socket
    import time

    bomb = _bomb(512, wbits)
    with Sidecar() as sc:
        port = int(sc.otlp_url.rsplit(":", 1)[1].split("/")[0])
        head = (
            f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            f"Content-Encoding: {encoding}\r\nContent-Length: {len(bomb)}\r\n\r\n"
        ).encode()
        cpu = time.process_time()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head + bomb)
            got = b""
            while chunk := s.recv(65536):  # EOF: the sidecar closed the connection after its answer
                got += chunk
        cpu = time.process_time() - cpu
        assert got.startswith(b"HTTP/1.1 413 "), got[:200]
        assert b"request body over 1048576 bytes" in got
        assert cpu < 0.3, f"inflating went on past the limit: {cpu:.2f} s of CPU"  # all of it: ~1 s
        [req] = sc.journal.requests
        assert (req.status, req.error_by) == (413, "client") and sc.errors == []
        # an export compressed the same way still decodes (raw deflate too, as aiohttp took it)
        c = zlib.compressobj(6, zlib.DEFLATED, wbits)
        body = c.compress(request_with_spans().SerializeToString()) + c.flush()
        ok = httpx.post(
            sc.otlp_url, content=body, headers={**PROTOBUF, "Content-Encoding": encoding}, timeout=10
        )
        assert ok.status_code == 200 and sc.span_recorder.names() == ["Hand.Made"]


def test_another_content_type_is_415_and_other_methods_405() -> None:
    with Sidecar() as sc:
        r = httpx.post(sc.otlp_url, content=b"hello", headers={"Content-Type": "text/plain"}, timeout=10)
        assert r.status_code == 415
        assert (
            "application/x-protobuf or application/json, got Content-Type 'text/plain'" in r.json()["message"]
        )
        r = httpx.post(sc.otlp_url, content=b"{}", headers={**JSON, "Content-Encoding": "snappy"}, timeout=10)
        assert r.status_code == 415 and "Content-Encoding 'snappy' is not supported" in r.json()["message"]
        r = httpx.get(sc.otlp_url, timeout=10)
        assert (r.status_code, r.headers["Allow"]) == (405, "POST")
        assert [(q.method, q.status, q.error_by) for q in sc.journal.requests] == [
            ("POST", 415, "client"),
            ("POST", 415, "client"),
            ("GET", 405, "client"),
        ]


# -- faults never reach it ------------------------------------------------------------------------------


def test_faults_never_apply_and_the_receiver_outlives_a_dead_sidecar() -> None:
    body = request_with_spans().SerializeToString()
    with Sidecar(faults=["status(code=503)@POST /v1/traces", "hang"]) as sc:
        # the main port answers the path too, unfaulted, even frozen
        sc.freeze()
        r = httpx.post(sc.url + "/v1/traces", content=body, headers=PROTOBUF, timeout=10)
        assert r.status_code == 200
        sc.release()
        sc.kill()  # the sidecar is dead: its port refuses connections...
        with pytest.raises(httpx.ConnectError):
            httpx.post(sc.url + "/mcp", json={}, timeout=5)
        r = httpx.post(sc.otlp_url, content=body, headers=PROTOBUF, timeout=10)  # ...the receiver's does not
        assert r.status_code == 200
        assert sc.span_recorder.names() == ["Hand.Made", "Hand.Made"]
        assert [(q.path, q.status, q.fault) for q in sc.journal.requests] == [
            ("/v1/traces", 200, None),
            ("/v1/traces", 200, None),
        ]
        assert sc.fired == {"freeze": 1, "die": 1}


def test_off_and_bad_options() -> None:
    with Sidecar(otlp_path=None) as sc:
        assert httpx.post(sc.url + "/v1/traces", content=b"", headers=PROTOBUF, timeout=10).status_code == 404
        with pytest.raises(RuntimeError, match=r"the OTLP receiver is off \(otlp_path=None\)"):
            _ = sc.otel_env
    with Sidecar(otlp_path="/otel/traces") as sc:
        assert sc.otlp_url.endswith("/otel/traces")
    with pytest.raises(ValueError, match="otlp_path must be a path starting with '/'"):
        Sidecar(otlp_path="v1/traces")
    with pytest.raises(ValueError, match="otlp_path must differ from mcp_path and health_path"):
        Sidecar(otlp_path="/health")
    with pytest.raises(ValueError, match=r"span_recorder must be a pytest_mcpfaults\.SpanRecorder or None"):
        Sidecar(span_recorder="mine")  # type: ignore[arg-type]


def test_the_flush_barrier_names_what_arrived_instead() -> None:
    with Sidecar() as sc:
        r = httpx.post(sc.otlp_url, content=request_with_spans().SerializeToString(), headers=PROTOBUF)
        assert r.status_code == 200
        httpx.post(sc.otlp_url, content=b"junk", headers=PROTOBUF, timeout=10)
        with pytest.raises(SpanLookupError) as info:
            sc.wait_for_span("Agent.Session", timeout=0.3)
        text = str(info.value)
        assert "no span named 'Agent.Session' ended within 0.3 s (0 ended, 0 open)" in text
        assert "spans recorded: 'Hand.Made' (1 ended); from services: by-hand" in text
        assert "1 OTLP export(s) received, 1 span(s) recorded; 1 request(s) refused, the last: 400" in text


def test_spans_go_to_the_recorder_given_and_not_while_it_does_not_record() -> None:
    recorder = SpanRecorder(recording=False)
    with Sidecar(span_recorder=recorder) as sc:
        assert sc.span_recorder is recorder
        r = httpx.post(sc.otlp_url, content=request_with_spans().SerializeToString(), headers=PROTOBUF)
        answer = ExportTraceServiceResponse.FromString(r.content)
        assert answer.partial_success.rejected_spans == 1
        assert "not recording" in answer.partial_success.error_message
        recorder.recording = True
        httpx.post(sc.otlp_url, content=request_with_spans().SerializeToString(), headers=PROTOBUF)
        assert recorder.names() == ["Hand.Made"]


def test_stopping_the_sidecar_ends_a_wait_for_spans_at_once() -> None:
    """A control request waiting for spans (``wait_for=``) must not keep ``serve`` from exiting."""
    import threading
    import time

    sc = Sidecar().start()
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            sc.wait_for_span("Agent.Session", timeout=30)
        except SpanLookupError as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)  # let it wait (not a timing assertion: only so the wait has begun)
    t0 = time.monotonic()
    sc.stop()
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    assert time.monotonic() - t0 < 5
    assert len(outcome) == 1
    assert "no span named 'Agent.Session' ended (0 ended, 0 open)" in str(outcome[0])
    assert "; the wait was cancelled before its timeout; the sidecar's OTLP receiver" in str(outcome[0])


def test_json_protobuf_field_names_every_value_kind_and_partial_success() -> None:
    span = {
        "trace_id": TRACE,  # the protobuf names are read too
        "span_id": ROOT,
        "name": "Snake.Case",
        "start_time_unix_nano": "5",
        "end_time_unix_nano": "6",
        "status": {"code": "STATUS_CODE_OK"},
        "attributes": [
            {"key": "b", "value": {"bytesValue": "aGk="}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"intValue": 1}}]}}},
            {"key": "nan", "value": {"doubleValue": "NaN"}},
            {"key": "empty", "value": {}},
        ],
    }
    bad_status = {
        **JSON_SESSION,
        "spanId": CHILD_ID,
        "name": "Bad.Status",
        "status": {"code": "STATUS_CODE_MAYBE"},
    }
    zero = {**JSON_SESSION, "traceId": "0" * 32, "name": "Zero.Trace"}
    with Sidecar() as sc:
        r = httpx.post(
            sc.otlp_url, json={"resource_spans": [{"scope_spans": [{"spans": [span, bad_status, zero]}]}]}
        )
        assert r.status_code == 200
        part = r.json()["partialSuccess"]
        assert part["rejectedSpans"] == "2"  # an int64, as a string
        assert "'Bad.Status': unknown status code \"STATUS_CODE_MAYBE\"" in part["errorMessage"]
        assert "'Zero.Trace': trace_id must be 16 bytes, not all zero" in part["errorMessage"]
        [got] = sc.span_recorder.spans()
        assert (got.name, got.status_code, got.start_time, got.end_time) == ("Snake.Case", "OK", 5, 6)
        attrs = dict(got.attributes)
        assert attrs["b"] == b"hi" and dict(attrs["kv"]) == {"x": 1} and attrs["empty"] is None
        assert attrs["nan"] != attrs["nan"]  # NaN
        bad = httpx.post(sc.otlp_url, json=json_export([{**JSON_SESSION, "startTimeUnixNano": "soon"}]))
        assert bad.status_code == 400
        assert "spans[0].startTimeUnixNano must be an integer" in bad.json()["message"]


def _until_closed(s: socket.socket, trickle: bytes = b"", limit: float = 5.0) -> bytes:
    """Read (trickling a byte every 0.1 s) until the server closes; ``TimeoutError`` past ``limit``."""
    s.settimeout(0.1)
    out, deadline = b"", time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            if trickle:
                with contextlib.suppress(OSError):
                    s.sendall(trickle)
            continue
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk
    raise TimeoutError(f"still open after {limit} s")


def test_the_receivers_own_port_is_bounded_by_idle_timeout() -> None:
    """The OTLP port ignored idle_timeout: idle, slow-header and body-less connections stayed open."""
    with Sidecar(idle_timeout=0.5) as sc:
        port = int(sc.otlp_url.rsplit(":", 1)[1].split("/")[0])
        idle = socket.create_connection(("127.0.0.1", port))
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-a: ")
        bodiless = socket.create_connection(("127.0.0.1", port))
        bodiless.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        kept = httpx.Client()
        try:
            assert kept.post(sc.otlp_url, content=b"{}", headers=JSON).status_code == 200
            assert _until_closed(idle) == b""
            assert _until_closed(slow, trickle=b"a") == b""
            answered = _until_closed(bodiless)
        finally:
            for s in (idle, slow, bodiless):
                s.close()
        sc.journal.wait_for(
            lambda: all(c.closed_at is not None for c in sc.journal.connections), 5.0, "every close"
        )
        kept.close()
        conns = sc.journal.connections
        assert sc.errors == []
    assert answered.startswith(b"HTTP/1.1 408 ") and b"request body not complete within 0.5 s" in answered
    assert sorted((c.requests, c.closed_by) for c in conns) == [
        (0, "sidecar"),  # idle, slow headers: timed out
        (0, "sidecar"),
        (1, "sidecar"),  # the 408 (closed after it, or by the idle bound while aiohttp lingers)
        (1, "sidecar"),  # the kept-alive client, once idle
    ]
    assert [c.timed_out for c in conns if c.requests == 0] == [True, True]
    assert sum(c.timed_out for c in conns) >= 3
