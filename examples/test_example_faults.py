"""The example harness's fault suite: what a harness team writes with pytest-mcpfaults.

Each test gives the runner a fake MCP sidecar with a fault plan (``@pytest.mark.mcp_sidecar``), runs a
benchmark session, and checks three things: the span invariants (a cleanup failure never flips the
session span, every span ended, cleanup ran at most once), what the runner reported, and what the
sidecar saw (its journal).

Run it against the hardened runner (default) or the incident's runner::

    pytest -p mcpfaults examples/ --runner-variant=unhardened
"""

from __future__ import annotations

import pytest
from harness import SidecarNotReady

from pytest_mcpfaults import BackendGone, Delay, Die, Hang, Stall, Status, Trigger

PATIENCE = 5.0  # seconds the sidecar holds a hung/stalled request before calling it a patience violation


@pytest.mark.mcp_sidecar(era="session", patience=PATIENCE)
async def test_clean_run(mcp_sidecar, mcp_spans, make_runner):
    results = await make_runner(mcp_sidecar).run()

    mcp_spans.assert_invariants()
    assert [r.outcome for r in results] == ["completed"] * 3
    assert [r.cleanup for r in results] == ["deleted"] * 3
    assert len(mcp_spans.find("Agent.Session", status="UNSET")) == 3
    assert mcp_sidecar.benchmark.live == []  # every benchmark session was deleted on the sidecar


@pytest.mark.mcp_sidecar(era="session", patience=PATIENCE, faults=[Die(when="tool:echo")])
async def test_sidecar_dies_after_session_creation(mcp_sidecar, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar).run(["task-1"])

    mcp_spans.assert_invariants()
    session = mcp_spans.one("Agent.Session")
    assert session.status_code == "ERROR"
    assert session.status_description.startswith("McpCallError: echo: ")  # the agent's call
    assert mcp_spans.one("Agent.Call").failed  # the primary failure
    assert (result.outcome, result.cleanup) == ("failed", "already_gone")
    assert mcp_spans.one("MCP.DeleteSession").event_names() == ["mcp.session.already_gone"]
    assert mcp_sidecar.state == "dead"
    assert mcp_sidecar.journal.sequence()[-1] == "POST tools/call echo"  # the delete never reached it


@pytest.mark.mcp_sidecar(
    era="session",
    patience=PATIENCE,
    faults=[BackendGone(when=Trigger("tool:delete_session", times=1))],
)
async def test_backend_gone_at_delete(mcp_sidecar, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar).run(["task-1"])

    mcp_spans.assert_invariants()
    assert mcp_spans.one("Agent.Session").status_code == "UNSET"
    assert (result.outcome, result.score, result.cleanup) == ("completed", 1.0, "already_gone")
    assert mcp_sidecar.journal.sequence().count("POST tools/call delete_session") == 1
    assert mcp_sidecar.fired == {"backend_gone": 1}


@pytest.mark.mcp_sidecar(
    era="session",
    patience=PATIENCE,
    faults=[
        Delay(seconds=10.0, when="tool:echo"),  # the agent's tool call outlives the agent's budget
        BackendGone(when=Trigger("tool:delete_session", times=1)),  # and its backend was reaped
    ],
)
async def test_agent_timeout_with_reaped_backend(mcp_sidecar, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar, agent_timeout=0.5).run(["task-1"])

    mcp_spans.assert_invariants()
    session = mcp_spans.one("Agent.Session")
    assert (session.status_code, session.status_description) == ("ERROR", "Session completed (timeout)")
    assert mcp_spans.one("Agent.Call").exceptions[0][0].endswith("AgentTimeout")
    assert (result.outcome, result.cleanup) == ("timeout", "already_gone")
    echo = next(r for r in mcp_sidecar.requests if r.tool == "echo")
    assert echo.client_closed  # the agent's call was abandoned, not left open


@pytest.mark.mcp_sidecar(era="session", patience=PATIENCE, faults=[Hang(when="health")])
async def test_health_hangs(mcp_sidecar, mcp_spans, make_runner):
    runner = make_runner(mcp_sidecar, health_probes=3, health_timeout=0.2)
    with pytest.raises(SidecarNotReady, match="not ready after 3 probes: timeout, timeout, timeout"):
        await runner.run(["task-1"])

    mcp_spans.assert_all_spans_ended()
    assert mcp_spans.one("Sidecar.WaitReady").failed
    assert mcp_spans.find("Agent.Session") == []  # no session was started, so none to clean up
    mcp_sidecar.assert_client_gave_up(within=2.0, target="health")  # each probe let go of its request
    assert mcp_sidecar.journal.sequence() == ["GET /health"] * 3


@pytest.mark.mcp_sidecar(
    era="session", patience=PATIENCE, faults=[Status(503, when=Trigger("health", times=3))]
)
async def test_slow_start(mcp_sidecar, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar, health_probes=5).run(["task-1"])

    mcp_spans.assert_invariants()
    assert mcp_spans.one("Sidecar.WaitReady").attributes["health.probes"] == 4
    assert result.outcome == "completed"
    health = [r.status for r in mcp_sidecar.requests if r.path == "/health"]
    assert health == [503, 503, 503, 200]


@pytest.mark.mcp_sidecar(era="session", patience=PATIENCE, faults=[Stall(when="health")])
async def test_health_body_stalls(mcp_sidecar, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar).run(["task-1"])

    mcp_spans.assert_invariants()
    assert result.outcome == "completed"
    # The probe read the status line and closed its connection without waiting for the body.
    mcp_sidecar.assert_client_released(within=2.0, target="health")


@pytest.mark.mcp_sidecar(era="session", patience=PATIENCE, faults=[Stall(when="tool:evaluate_session")])
async def test_stalled_tool_body(mcp_sidecar, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar, read_timeout=1.0).run(["task-1"])

    mcp_spans.assert_invariants()
    session = mcp_spans.one("Agent.Session")
    assert session.status_description.startswith("McpCallError: evaluate_session: MCPError")
    assert "timed out" in session.status_description
    assert mcp_spans.one("Evaluator.Evaluate").failed
    assert (result.outcome, result.cleanup) == ("failed", "deleted")
    mcp_sidecar.assert_client_released(within=3.0, target="tool:evaluate_session")
