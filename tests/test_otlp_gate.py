"""The span gate on spans from another process: a harness run as a subprocess (its own TracerProvider,
BatchSpanProcessor and OTLP/HTTP exporter, pointed at the sidecar by ``otel_env``) that flips its session
fails the test under ``--mcpfaults-check-spans`` with the same message as the same harness run in-process;
the hardened one passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "docs" / "examples" / "remote_spans_harness.py"

TESTS = """
import asyncio, contextlib, os, subprocess, sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

import remote_spans_harness as harness

FAULTS = dict(faults=["backend_gone"], service_url="http://127.0.0.1:9")


def run_child(sidecar, *flags):
    env = {**os.environ, **sidecar.otel_env}
    cmd = [sys.executable, harness.__file__, sidecar.mcp_url, *flags]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == (0 if flags else 1), proc.stderr
    sidecar.wait_for_span("Agent.Session", timeout=10)


@pytest.mark.mcp_sidecar(**FAULTS)
def test_subprocess_flips(mcp_sidecar):
    run_child(mcp_sidecar)


@pytest.mark.mcp_sidecar(**FAULTS)
def test_subprocess_hardened(mcp_sidecar):
    run_child(mcp_sidecar, "--hardened")


@pytest.mark.mcp_sidecar(**FAULTS)
def test_in_process_flips(mcp_sidecar):
    tracer = TracerProvider().get_tracer("harness")  # built during the test: the gate records it
    with contextlib.suppress(RuntimeError):
        asyncio.run(harness.run_session(tracer, mcp_sidecar.mcp_url, False))


def test_factory_sidecars_feed_the_same_recorder(mcp_sidecar_factory):
    from pytest_mcpfaults.spans import global_recorder

    with mcp_sidecar_factory(**FAULTS) as sidecar:
        assert sidecar.span_recorder is global_recorder()
        run_child(sidecar, "--hardened")
"""


def _failure(result: pytest.RunResult, name: str) -> str:
    [report] = [r for r in result.reprec.getfailures() if r.nodeid.endswith(name)]  # type: ignore[attr-defined]
    return re.sub(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<session>", str(report.longrepr)
    )


def test_the_gate_fails_the_flipping_subprocess_as_it_fails_in_process(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    (pytester.path / "remote_spans_harness.py").write_text(HARNESS.read_text())
    pytester.makepyfile(test_remote=TESTS)
    result = run_plugin("--mcpfaults-check-spans", "-p", "no:randomly", "test_remote.py")
    result.assert_outcomes(passed=2, failed=2)
    remote, local = _failure(result, "test_subprocess_flips"), _failure(result, "test_in_process_flips")
    assert remote.startswith("mcpfaults span gate (--mcpfaults-check-spans): 1 span invariant violation:")
    assert (
        "- [cleanup_never_flips] Agent.Session is ERROR with description 'RuntimeError: Error closing"
        in remote
    )
    assert "Span tree:\nAgent.Session [ERROR: RuntimeError: Error closing session <session>" in remote
    assert remote == local


def test_mcp_spans_gets_the_subprocess_spans_without_the_gate(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    (pytester.path / "remote_spans_harness.py").write_text(HARNESS.read_text())
    pytester.makepyfile(
        test_remote=TESTS
        + """

@pytest.mark.mcp_sidecar(**FAULTS)
def test_with_mcp_spans(mcp_sidecar, mcp_spans):
    assert mcp_sidecar.span_recorder is mcp_spans
    run_child(mcp_sidecar)
    [violation] = mcp_spans.check()
    assert violation.invariant == "cleanup_never_flips"


@pytest.mark.mcp_sidecar(**FAULTS)
def test_without_spans_the_sidecar_keeps_its_own(mcp_sidecar):
    from pytest_mcpfaults.spans import global_recorder

    assert mcp_sidecar.span_recorder is not global_recorder()
    run_child(mcp_sidecar)
    assert len(mcp_sidecar.span_recorder.check()) == 1
"""
    )
    result = run_plugin("-p", "no:randomly", "test_remote.py", "-k", "mcp_spans or own")
    result.assert_outcomes(passed=2)


def test_the_marker_takes_otlp_path_and_refuses_a_bad_one_at_collection(
    pytester: pytest.Pytester,
    run_plugin,  # type: ignore[no-untyped-def]
) -> None:
    pytester.makepyfile(
        test_good="""
import httpx, pytest

@pytest.mark.mcp_sidecar(otlp_path="/otel/v1/traces")
def test_moved(mcp_sidecar):
    assert mcp_sidecar.otel_env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].endswith("/otel/v1/traces")

@pytest.mark.mcp_sidecar(otlp_path=None)
def test_off(mcp_sidecar):
    assert httpx.post(mcp_sidecar.url + "/v1/traces", content=b"").status_code == 404
""",
        test_bad="""
import pytest

@pytest.mark.mcp_sidecar(otlp_path="v1/traces")
def test_never_runs(mcp_sidecar):
    pass
""",
    )
    result = run_plugin("-p", "no:randomly", "--continue-on-collection-errors", "test_good.py", "test_bad.py")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*otlp_path must be a path starting with '/'*got 'v1/traces'*"])


SHAPES = Path(__file__).resolve().parent / "gate_shapes.py"


@pytest.mark.parametrize(
    ("shape", "cleanup", "expected"),
    [
        ("cancelled_flip", "MCP.DeleteSession", ["cleanup_never_flips"]),
        ("masked_by_close", "MCP.DeleteSession", ["cleanup_never_flips"]),
        ("same_text", "MCP.DeleteSession", []),
        ("delete_then_close", ["MCP.DeleteSession", "MCP.Close"], []),
    ],
)
def test_spans_from_another_process_get_the_in_process_verdict(
    shape: str, cleanup: str | list[str], expected: list[str]
) -> None:
    """The same shapes, exported over OTLP by a child process (no status-at-start travels with them:
    the times of the session's exception events decide), and traced in this process."""
    import os
    import subprocess
    import sys

    import gate_shapes
    from opentelemetry.sdk.trace import TracerProvider

    from pytest_mcpfaults import Sidecar, SpanRecorder
    from pytest_mcpfaults.invariants import check_all

    with Sidecar() as sc:
        env = {**os.environ, **sc.otel_env}
        subprocess.run([sys.executable, str(SHAPES), shape], env=env, check=True, timeout=60)
        sc.wait_for_span("Agent.Session", timeout=10)
        remote = check_all(sc.span_recorder.spans(), cleanup=cleanup)
    local_rec = SpanRecorder()
    gate_shapes.SHAPES[shape](local_rec.attach(TracerProvider()).get_tracer("shapes"))
    local = check_all(local_rec.spans(), cleanup=cleanup)
    assert [v.invariant for v in remote] == [v.invariant for v in local] == expected
    if shape == "cancelled_flip":
        assert remote[0].message == (
            "Agent.Session is ERROR although nothing but cleanup failed beneath it: its first exception "
            "event is from after MCP.DeleteSession started (its status then was not exported) and nothing "
            "failed before that (cause: MCP.DeleteSession [UNSET], which did not record the failure; the "
            "session recorded CancelledError: Cancelled via cancel scope 7f00deadbeef); a cleanup failure "
            "must not flip the session"
        )
