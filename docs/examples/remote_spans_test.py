"""Spans from another process: a harness run as a subprocess exports its spans to the sidecar's OTLP
receiver, and the test checks them like its own (docs/spans.md, "Spans from other processes")."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).with_name("remote_spans_harness.py")


# --8<-- [start:subprocess]
def run_harness(sidecar, *flags):
    """Run the harness in its own process, exporting its spans to the sidecar."""
    env = {**os.environ, **sidecar.otel_env}  # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, ..._PROTOCOL
    cmd = [sys.executable, str(HARNESS), sidecar.mcp_url, *flags]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.mcp_sidecar(faults=["backend_gone"])  # delete_session: "... is no longer alive"
def test_hardened_harness_keeps_its_session(mcp_sidecar, mcp_spans):
    assert run_harness(mcp_sidecar, "--hardened").returncode == 0
    mcp_sidecar.wait_for_span("Agent.Session", timeout=10)  # the exporter batches: wait for it
    assert mcp_spans.one("Agent.Session").resource["service.name"] == "subprocess-harness"
    assert mcp_spans.one("MCP.DeleteSession").failed
    mcp_spans.assert_invariants()  # the session did not flip


@pytest.mark.mcp_sidecar(faults=["backend_gone"])
def test_unhardened_harness_flips_its_session(mcp_sidecar, mcp_spans):
    assert run_harness(mcp_sidecar).returncode == 1
    mcp_sidecar.wait_for_span("Agent.Session", timeout=10)
    [violation] = mcp_spans.check()
    assert violation.invariant == "cleanup_never_flips"
    assert "comes from a cleanup failure" in violation.message


# --8<-- [end:subprocess]
