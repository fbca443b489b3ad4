"""Fuzzing a harness's teardown path: fault plans from Hypothesis, a fresh sidecar per example."""

import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, note, settings
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).parent))
from fuzzing_harness import HarnessError, Runner

# --8<-- [start:property]
from pytest_mcpfaults import BackendGone, format_plan
from pytest_mcpfaults.spans import SpanRecorder
from pytest_mcpfaults.strategies import fault_plans

recorder = SpanRecorder()
tracer = recorder.attach(TracerProvider()).get_tracer("harness")
client = httpx.Client(timeout=2.0)  # one client for every example: cheap examples

# Blocking faults end by the sidecar's patience (0.1 s); this property is about spans, not timeouts.
plans = fault_plans(max_faults=2, patience=0.02, expect_hang=True)


def session_never_flips(mcp_sidecar_factory, plan, *, hardened):
    recorder.clear()
    with mcp_sidecar_factory(faults=plan) as sidecar:  # a fresh sidecar per example
        try:
            Runner(client, sidecar.mcp_url, tracer, hardened=hardened).run()
        except HarnessError:
            pass  # the session may fail under faults; it must not flip
    note(f"plan: {format_plan(plan) or '(no fault)'}")
    recorder.assert_cleanup_never_flips()  # fails with the span tree


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(plan=plans)
def test_hardened_runner_never_flips(mcp_sidecar_factory, plan):
    session_never_flips(mcp_sidecar_factory, plan, hardened=True)


# --8<-- [end:property]


# --8<-- [start:unhardened]
@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(plan=plans)
def unhardened_runner_never_flips(mcp_sidecar_factory, plan):
    session_never_flips(mcp_sidecar_factory, plan, hardened=False)


def test_fuzzing_finds_the_flip_and_shrinks_it(mcp_sidecar_factory):
    with pytest.raises(AssertionError) as failure:
        unhardened_runner_never_flips(mcp_sidecar_factory)
    notes = "\n".join(failure.value.__notes__)
    assert "plan=[BackendGone(when=Trigger('tool:delete_session'))]" in notes  # one fault, at the delete
    assert "plan: backend_gone\n" in notes + "\n"


# --8<-- [end:unhardened]


def test_the_shrunk_plan_is_a_single_backend_gone_at_delete():
    assert format_plan([BackendGone()]) == "backend_gone"
    assert BackendGone().trigger.target == "tool:delete_session"
