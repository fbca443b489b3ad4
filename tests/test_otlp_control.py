"""``serve``'s span routes: a harness in another process exports its spans to the OTLP receiver, and
anyone asks the control endpoint for the tree (``GET /_mcpfaults/spans``) and the verdict
(``GET /_mcpfaults/check``), worded as the pytest gate words it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_cli import Served, serve

from pytest_mcpfaults import RecordedSpan, Sidecar, SpanRecorder, install_recorder
from pytest_mcpfaults.invariants import ALL_INVARIANTS, format_violations, gate_violations
from pytest_mcpfaults.spans import SpanLookupError
from pytest_mcpfaults.transports.control import Control

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "docs" / "examples" / "remote_spans_harness.py"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def run_harness(s: Served, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **{k: v for k, v in s.info.items() if k.startswith("OTEL_")}}
    cmd = [sys.executable, str(HARNESS), s.info["MCPFAULTS_MCP_URL"], *flags]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def check(s: Served, **params: Any) -> httpx.Response:
    return s.control("GET", "/check", params=params)


def normalised(text: str) -> str:
    """Two sidecars name different benchmark sessions (uuid4) and ports: everything else must match."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<session>", text)
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)


def in_process_verdict(hardened: bool) -> str:
    """The same harness code run in this process against a sidecar with the same fault: the text the
    pytest gate prints after its prefix."""
    sys.path.insert(0, str(HARNESS.parent))
    try:
        import remote_spans_harness as harness
    finally:
        sys.path.remove(str(HARNESS.parent))
    # the global provider, as the child sets it: the mcp SDK's own spans are recorded too
    recorder = install_recorder()
    recorder.clear()
    tracer = trace.get_tracer_provider().get_tracer("harness")
    try:
        with Sidecar(faults=["backend_gone"]) as sc, contextlib.suppress(RuntimeError):  # unhardened: escapes
            asyncio.run(harness.run_session(tracer, sc.mcp_url, hardened))
        spans = recorder.spans()
    finally:
        recorder.recording = False
        recorder.clear()
    _, found = gate_violations(spans, recorder.session_patterns, recorder.cleanup_patterns)
    return format_violations(found, spans) if found else ""


def test_check_catches_the_subprocess_flip_in_the_gates_words_and_passes_the_hardened_one() -> None:
    with serve("--fault", "backend_gone") as s:
        proc = run_harness(s)
        assert proc.returncode == 1, proc.stderr
        assert "session failed: Error closing session" in proc.stderr
        r = check(s, wait_for="Agent.Session")
        assert r.status_code == 200, r.text
        verdict = r.json()
        assert verdict["ok"] is False
        assert verdict["checked"] == list(ALL_INVARIANTS)
        names = [x["name"] for x in s.control("GET", "/spans", params={"format": "json"}).json()["spans"]]
        assert verdict["span_count"] == len(names)  # the harness's 3 and the mcp SDK's own (MCP send ...)
        assert {"Agent.Session", "Agent.Run", "MCP.DeleteSession"} <= set(names)
        assert any(n.startswith("MCP send tools/call") for n in names)
        [violation] = verdict["violations"]
        assert violation["invariant"] == "cleanup_never_flips"
        assert violation["span"]["name"] == "Agent.Session"
        assert violation["span"]["resource"]["service.name"] == "subprocess-harness"
        assert verdict["text"].startswith(
            "1 span invariant violation:\n- [cleanup_never_flips] Agent.Session"
        )
        assert normalised(verdict["text"]) == normalised(in_process_verdict(hardened=False))

        cleared = s.control("DELETE", "/spans")
        assert cleared.json() == {"cleared": len(names)}
        empty = check(s).json()
        assert (empty["ok"], empty["checked"], empty["span_count"]) == (True, [], 0)  # nothing to check

        assert run_harness(s, "--hardened").returncode == 0
        verdict = check(s, wait_for="Agent.Session", timeout="10").json()
        assert (verdict["ok"], verdict["violations"], verdict["text"]) == (True, [], "")
        assert verdict["checked"] == list(ALL_INVARIANTS)
        assert in_process_verdict(hardened=True) == ""


def test_spans_as_text_and_json_and_the_flush_barrier() -> None:
    with serve("--fault", "backend_gone") as s:
        assert run_harness(s, "--hardened").returncode == 0
        r = s.control("GET", "/spans", params={"wait_for": "Agent.Session"})
        assert r.headers["Content-Type"].startswith("text/plain")
        assert r.text.splitlines()[0] == "Agent.Session [UNSET]"
        assert "└── MCP.DeleteSession [ERROR: RuntimeError: Error closing session" in r.text
        assert "    └── MCP send tools/list [UNSET]" in r.text  # the mcp SDK's spans, beneath the harness's
        as_json = s.control("GET", "/spans", params={"format": "json"}).json()
        accept = {**s.auth, "Accept": "application/json"}
        by_accept = httpx.get(f"{s.url}/_mcpfaults/spans", headers=accept, timeout=10).json()
        assert as_json["spans"] == by_accept["spans"]
        assert as_json["tree"] + "\n" == r.text
        mine = ("Agent.Session", "Agent.Run", "MCP.DeleteSession")
        session, run, delete = [x for x in as_json["spans"] if x["name"] in mine]
        assert [session["name"], run["name"], delete["name"]] == [
            "Agent.Session",
            "Agent.Run",
            "MCP.DeleteSession",
        ]
        assert re.fullmatch(r"[0-9a-f]{32}", session["trace_id"]) and session["parent_id"] is None
        assert delete["parent_id"] == session["span_id"] and delete["parent_uid"] == session["uid"]
        assert delete["events"][0]["name"] == "exception"
        assert session["resource"]["service.name"] == "subprocess-harness"

        slow = s.control("GET", "/check", params={"wait_for": "Never.Sent", "timeout": "0.2"})
        assert slow.status_code == 408
        assert "no span named 'Never.Sent' ended within 0.2 s" in slow.json()["error"]
        assert "spans recorded: 'Agent.Session' (1 ended)" in slow.json()["error"]
        for params in ({"timeout": "61", "wait_for": "x"}, {"format": "xml"}, {"session": " "}):
            sub = "/spans" if "format" in params else "/check"
            bad = s.control("GET", sub, params=params)
            assert bad.status_code == 400, params
        assert s.control("POST", "/check").status_code == 405


def test_after_a_die_the_otlp_port_still_takes_spans_and_answers_the_control_endpoint() -> None:
    body = ExportTraceServiceRequest().SerializeToString()
    with serve("--fault", "die@health[times=1]") as s:
        otlp = s.info["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        assert (
            s.info["MCPFAULTS_OTLP_URL"] == otlp
            and s.info["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
        )
        with contextlib.suppress(httpx.HTTPError):  # the sidecar dies answering it
            httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10)
        try:
            httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10)
            raise AssertionError("the sidecar should be dead")
        except httpx.ConnectError:
            pass
        r = httpx.post(otlp, content=body, headers={"Content-Type": "application/x-protobuf"}, timeout=10)
        assert r.status_code == 200
        side = otlp.removesuffix("/v1/traces") + "/_mcpfaults"
        assert httpx.get(side + "/check", headers=s.auth, timeout=10).json()["ok"] is True
        assert httpx.get(side + "/check", timeout=10).status_code == 401  # the token is still required
        assert httpx.post(side + "/revive", headers=s.auth, timeout=10).json() == {"state": "running"}
        assert httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10).status_code == 200
        assert s.terminate() == 0


def test_serve_no_otlp_and_a_bad_otlp_path() -> None:
    with serve("--no-otlp", "--json", json_mode=True) as s:
        assert (s.info["otlp_url"], s.info["otel_env"]) == (None, {})
        r = httpx.post(s.info["url"] + "/v1/traces", content=b"", timeout=10)
        assert r.status_code == 404
    for args, why in (
        (["--otlp-path", "/mcp"], "argument --otlp-path: must differ from --mcp-path and --health-path"),
        (["--otlp-path", "/_mcpfaults/t"], "argument --otlp-path: '/_mcpfaults/t' is reserved"),
        (["--otlp-path", "v1"], "argument --otlp-path: must be a path starting with '/'"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_mcpfaults", "serve", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr


def test_check_takes_each_invariants_cleanup_names_and_max_cleanups_as_the_gate_does() -> None:
    shapes = ROOT / "tests" / "gate_shapes.py"
    with serve() as s:
        env = {**os.environ, **{k: v for k, v in s.info.items() if k.startswith("OTEL_")}}
        subprocess.run([sys.executable, str(shapes), "delete_then_close"], env=env, check=True, timeout=60)
        both = {"cleanup": ["MCP.DeleteSession", "MCP.Close"], "wait_for": "Agent.Session"}
        assert check(s, **both).json()["ok"] is True  # the close after the delete: one teardown
        counted = check(s, **both, count_cleanup="MCP.*", max_cleanups="0").json()
        assert [v["invariant"] for v in counted["violations"]] == ["cleanup_at_most"]
        assert (
            "ran cleanup once, at most 0 allowed: MCP.DeleteSession [UNSET] then MCP.Close"
            in (counted["text"])
        )
        assert check(s, flip_cleanup="MCP.Close", max_cleanups="0").json()["checked"] == list(ALL_INVARIANTS)
        for bad in (
            {"max_cleanups": "-1"},
            {"max_cleanups": "1.5"},
            {"max_cleanups": "x"},
            {"flip_cleanup": " "},
        ):
            r = check(s, **bad)
            assert r.status_code == 400, bad
            assert next(iter(bad)) in r.json()["error"]


# -- hostile input: bounds, and nothing on the sidecar's loop -------------------------------------------

TOKEN = "t" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _export(names: list[str], service: str = "flood", **attrs: Any) -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    spans = rs.scope_spans.add().spans
    for i, name in enumerate(names):
        sp = spans.add()
        sp.trace_id, sp.span_id, sp.name = b"\x01" * 16, (i + 1).to_bytes(8, "big"), name
        sp.start_time_unix_nano, sp.end_time_unix_nano = i + 1, i + 2
        for key, value in attrs.items():
            a = sp.attributes.add()
            a.key, a.value.double_value = key, value
    return req.SerializeToString()


def _controlled(recorder: SpanRecorder | None = None, **kwargs: Any) -> tuple[Sidecar, Control]:
    sc = Sidecar(span_recorder=recorder)
    return sc, Control(sc, TOKEN, **kwargs).mount()


def test_the_span_limit_drops_the_oldest_received_spans_and_says_so() -> None:
    sc, _ = _controlled()
    with sc:
        sc.span_recorder.set_received_limit(100)
        mark = sc.span_recorder.mark()
        for batch in range(3):
            r = httpx.post(sc.otlp_url, content=_export([f"Work.{batch}"] * 50), headers=PROTOBUF, timeout=10)
            assert r.status_code == 200
        rec = sc.span_recorder
        assert (rec.count, rec.dropped_received) == (100, 50)
        assert sorted({s.name for s in rec.spans()}) == ["Work.1", "Work.2"]  # Work.0, the oldest, went
        assert len(rec.spans(since=mark)) == 100 and len(rec.spans(since=rec.mark() - 10)) == 10
        spans = httpx.get(sc.url + "/_mcpfaults/spans?format=json", headers=AUTH, timeout=10).json()
        assert (len(spans["spans"]), spans["dropped_spans"], spans["span_limit"]) == (100, 50, 100)
        text = httpx.get(sc.url + "/_mcpfaults/spans", headers=AUTH, timeout=10).text
        assert text.endswith("(50 oldest received span(s) dropped by the span limit, 100)\n")
        check = httpx.get(sc.url + "/_mcpfaults/check", headers=AUTH, timeout=10).json()
        assert (check["span_count"], check["dropped_spans"]) == (100, 50)
        journal = httpx.get(sc.url + "/_mcpfaults/journal", headers=AUTH, timeout=10).json()
        assert (journal["span_limit"], journal["dropped_spans"]) == (100, 50)
        with pytest.raises(SpanLookupError, match=r"50 oldest received span\(s\) dropped by the span limit"):
            sc.wait_for_span("Work.0", timeout=0.1)
    with pytest.raises(ValueError, match="received_limit must be a positive integer or None, got 0"):
        SpanRecorder(received_limit=0)


def test_serve_span_limit_option_default_and_validation(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_mcpfaults.cli import DEFAULT_SPAN_LIMIT, main

    assert DEFAULT_SPAN_LIMIT == 50_000
    for bad in ("0", "-5", "1e3", "x"):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--span-limit", bad])
        assert exc.value.code == 2
        assert f"argument --span-limit: must be a positive integer (spans kept), got {bad!r}" in (
            capsys.readouterr().err
        )
    with serve("--span-limit", "3") as s:
        body = _export(["A", "B", "C", "D", "E"])
        httpx.post(s.info["MCPFAULTS_OTLP_URL"], content=body, headers=PROTOBUF, timeout=10)
        got = s.control("GET", "/spans", params={"format": "json"}).json()
        assert ([x["name"] for x in got["spans"]], got["dropped_spans"]) == (["C", "D", "E"], 2)


class _BlockingRecorder(SpanRecorder):
    """A recorder whose ``spans()`` blocks until ``go`` is set, once ``blocked`` is (the work of a
    /check over a huge recording, made as long as the test wants)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked, self.go, self.armed = threading.Event(), threading.Event(), False

    def spans(self, *, since: int = 0) -> list[RecordedSpan]:
        if self.armed:
            self.blocked.set()
            assert self.go.wait(30)
        return super().spans(since=since)


@pytest.mark.parametrize("route", ["/check", "/spans?format=json", "/spans"])
def test_check_and_spans_are_computed_off_the_sidecars_loop(route: str) -> None:
    recorder = _BlockingRecorder()
    sc, _ = _controlled(recorder)
    with sc, httpx.Client(timeout=5) as client:
        recorder.armed = True
        answer: list[httpx.Response] = []
        t = threading.Thread(
            target=lambda: answer.append(httpx.get(sc.url + "/_mcpfaults" + route, headers=AUTH, timeout=30))
        )
        t.start()
        try:
            assert recorder.blocked.wait(10)
            # while the answer is being computed, the sidecar (same loop) and its receiver still answer
            assert client.get(sc.health_url).status_code == 200
            assert client.post(sc.otlp_url, content=_export(["X"]), headers=PROTOBUF).status_code == 200
            assert client.get(sc.url + "/_mcpfaults/faults", headers=AUTH).status_code == 200
        finally:
            recorder.go.set()
            t.join(30)
        assert answer[0].status_code == 200


class _CountingRecorder(SpanRecorder):
    """Sets ``all_in`` once ``expected`` threads are waiting in :meth:`wait_for_span`."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected, self.all_in, self._n, self._guard = expected, threading.Event(), 0, threading.Lock()

    def wait_for_span(self, *args: Any, **kwargs: Any) -> list[RecordedSpan]:
        with self._guard:
            self._n += 1
            if self._n >= self.expected:
                self.all_in.set()
        return super().wait_for_span(*args, **kwargs)


def _waiter(url: str) -> threading.Thread:
    """A client waiting 30 s for a span that never comes (stop() ends its wait: the error is expected)."""

    def wait() -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, params={"wait_for": "Never.*", "timeout": "30"}, headers=AUTH, timeout=40)

    return threading.Thread(target=wait)


def test_pending_span_waits_never_delay_a_control_action() -> None:
    """asyncio's default pool has min(32, cpus + 4) threads: that many pending ``wait_for`` waits
    used to queue every /release, /freeze, /revive and fault change behind them until they timed out."""
    pool = min(32, (os.cpu_count() or 1) + 4)
    recorder = _CountingRecorder(pool)
    sc, _ = _controlled(recorder)
    with sc, httpx.Client(timeout=5) as client:
        waits = [_waiter(sc.url + "/_mcpfaults/check") for _ in range(pool)]
        for w in waits:
            w.start()
        assert recorder.all_in.wait(10), "the waits did not all start"
        cu = sc.url + "/_mcpfaults"
        for method, path, body in [
            ("POST", "/faults", {"faults": ["status@health"]}),
            ("DELETE", "/faults", None),
            ("POST", "/freeze", None),
            ("POST", "/release", None),
            ("POST", "/revive", None),
            ("GET", "/check", None),
            ("GET", "/spans", None),
        ]:
            r = client.request(method, cu + path, json=body, headers=AUTH)  # 5 s: never the waits' 30
            assert r.status_code == 200, (path, r.text)
    for w in waits:  # stop() cancels the waits
        w.join(10)
        assert not w.is_alive()


def test_span_waits_beyond_the_bound_get_503() -> None:
    recorder = _CountingRecorder(2)
    sc, _ = _controlled(recorder, max_waits=2)
    with sc:
        params = {"wait_for": "Never.*", "timeout": "30"}
        waits = [_waiter(sc.url + "/_mcpfaults/check") for _ in range(2)]
        for w in waits:
            w.start()
        assert recorder.all_in.wait(10)
        r = httpx.get(sc.url + "/_mcpfaults/spans", params=params, headers=AUTH, timeout=5)
        assert (r.status_code, r.headers["Retry-After"]) == (503, "1")
        assert "2 span waits (wait_for=) are pending already" in r.json()["error"]
        assert httpx.get(sc.url + "/_mcpfaults/check", headers=AUTH, timeout=5).status_code == 200
    for w in waits:
        w.join(10)


def test_nan_and_infinity_attributes_come_back_as_json_strings() -> None:
    def double(key: str, value: str | float) -> dict[str, Any]:
        return {"key": key, "value": {"doubleValue": value}}

    flip = {"code": 2, "message": "RuntimeError: boom"}
    session = {
        "traceId": "01" * 16,
        "spanId": "00000000000000a1",
        "name": "Agent.Session",
        "status": flip,
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "9",
        "attributes": [
            double("ratio", "NaN"),
            double("high", "Infinity"),
            double("low", "-Infinity"),
            double("x", 0.5),
        ],
    }
    delete = {
        "traceId": "01" * 16, "spanId": "00000000000000a2", "parentSpanId": "00000000000000a1",
        "name": "MCP.DeleteSession", "status": flip, "startTimeUnixNano": "2", "endTimeUnixNano": "5",
        "attributes": [
            {"key": "arr", "value": {"arrayValue": {"values": [{"doubleValue": "NaN"}]}}},
            {"key": "kv", "value": {"kvlistValue": {"values": [double("inner", "-Infinity")]}}},
        ],
    }  # fmt: skip
    export = {"resourceSpans": [{"scopeSpans": [{"spans": [session, delete]}]}]}
    sc, _ = _controlled()
    with sc:
        assert httpx.post(sc.otlp_url, json=export, timeout=10).status_code == 200

        def strict(text: str) -> Any:
            def refuse(token: str) -> Any:
                raise ValueError(f"not JSON: {token}")

            return json.loads(text, parse_constant=refuse)

        spans = strict(httpx.get(sc.url + "/_mcpfaults/spans?format=json", headers=AUTH, timeout=10).text)
        got = {x["name"]: x["attributes"] for x in spans["spans"]}
        assert got == {
            "Agent.Session": {"ratio": "NaN", "high": "Infinity", "low": "-Infinity", "x": 0.5},
            "MCP.DeleteSession": {"arr": ["NaN"], "kv": {"inner": "-Infinity"}},
        }
        check = strict(httpx.get(sc.url + "/_mcpfaults/check", headers=AUTH, timeout=10).text)
        assert check["ok"] is False
        assert {"ratio": "NaN", "high": "Infinity", "low": "-Infinity", "x": 0.5} in [
            v["span"]["attributes"] for v in check["violations"] if v["span"]
        ]
