"""The span gate: with --mcpfaults-check-spans, tests need no span code at all.

Run without the gate, both tests pass; with it, the buggy one fails (it is marked xfail only then).
"""

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

GATE_ON = "config.getoption('mcpfaults_check_spans') or config.getini('mcpfaults_check_spans')"


def close_session(alive):
    if not alive:
        raise RuntimeError("Service is no longer alive")


# --8<-- [start:gate]
def run_session(tracer, sidecar_alive):
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                close_session(sidecar_alive)
        except RuntimeError as exc:
            session.set_status(Status(StatusCode.ERROR, str(exc)))  # the flip


def test_live_sidecar():
    run_session(TracerProvider().get_tracer("harness"), sidecar_alive=True)


@pytest.mark.xfail(GATE_ON, reason="the span gate fails it", strict=True)
def test_dead_sidecar():
    run_session(TracerProvider().get_tracer("harness"), sidecar_alive=False)


# --8<-- [end:gate]


# --8<-- [start:marker]
@pytest.mark.mcpfaults_spans(max_cleanups=2)  # this harness retries its delete once, by design
def test_retrying_cleanup(mcp_spans):
    tracer = TracerProvider().get_tracer("harness")
    with tracer.start_as_current_span("Agent.Session"):
        for _attempt in range(2):
            with tracer.start_as_current_span("MCP.DeleteSession"):
                pass
    assert mcp_spans.max_cleanups == 2
    mcp_spans.assert_cleanup_at_most()  # n: the marker's max_cleanups (the gate uses it too)


# --8<-- [end:marker]
