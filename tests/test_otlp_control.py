"""``serve``'s span routes: a harness in another process exports its spans to the OTLP receiver, and
anyone asks the control endpoint for the tree (``GET /_mcpfaults/spans``) and the verdict
(``GET /_mcpfaults/check``), worded as the pytest gate words it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_cli import Served, serve

from pytest_mcpfaults import Sidecar, format_violations, install_recorder
from pytest_mcpfaults.invariants import ALL_INVARIANTS
from pytest_mcpfaults.span_gate import gate_violations

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "docs" / "examples" / "remote_spans_harness.py"


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
