"""A property over fault plans: latency is not failure.

Hypothesis draws plans of latency faults (``delay``, ``drip``) aimed at any step of the session's
lifecycle; a fresh sidecar serves each example. Whatever the plan, the session completes, is evaluated
and is deleted exactly once, and its spans keep every invariant.

Every example is its own ``Agent.Session`` tree. Hypothesis reseeds ``random`` for each example and
OpenTelemetry draws span ids from it, so the examples' span ids repeat; the span gate
(``--mcpfaults-check-spans``) still sees one session, with one cleanup, per example.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, note, settings

from pytest_mcpfaults import format_plan
from pytest_mcpfaults.invariants import check_all
from pytest_mcpfaults.strategies import fault_plans

LATENCY = fault_plans(max_faults=2, kinds=["delay", "drip"])


# make_runner and mcp_spans are function-scoped but hold nothing per example: make_runner builds a new
# runner on each call, and each example checks only the spans recorded since its own mark.
@settings(
    max_examples=5,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(plan=LATENCY)
def test_latency_never_changes_a_session(mcp_sidecar_factory, mcp_spans, make_runner, plan):
    note(f"plan: {format_plan(plan) or '(no fault)'}")
    mark = mcp_spans.mark()
    with mcp_sidecar_factory(era="session", faults=plan) as sidecar:
        [result] = asyncio.run(make_runner(sidecar).run(["task-1"]))
        deletes = sidecar.journal.sequence().count("POST tools/call delete_session")
        live = sidecar.benchmark.live

    spans = mcp_spans.spans(since=mark)
    assert check_all(spans) == [], mcp_spans.tree()
    assert [s.name for s in spans if s.name == "Agent.Session"] == ["Agent.Session"]
    assert (result.outcome, result.score, result.cleanup) == ("completed", 1.0, "deleted")
    assert (deletes, live) == (1, [])  # deleted once, on the sidecar too
