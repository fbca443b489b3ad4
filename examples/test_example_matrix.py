"""The teardown matrix: one test, every fault of the standard catalogue aimed at the runner's cleanup.

``@pytest.mark.mcpfaults_matrix`` parametrizes the test over the catalogue (each fault aimed at
``tools/call delete_session``, the cleanup call); the ``mcp_sidecar`` fixture takes each one. Whatever
cleanup meets, the session the agent completed must stay completed: its span never flips to ERROR,
every span ends, cleanup runs once, and no request outlives the sidecar's patience.
"""

from __future__ import annotations

import pytest

PATIENCE = 5.0


@pytest.mark.mcpfaults_matrix(exclude=["flap", "absent"])  # those two aim at /health, not at cleanup
@pytest.mark.mcp_sidecar(era="session", patience=PATIENCE)
async def test_cleanup_under_every_fault(mcp_sidecar, mcpfaults_fault, mcp_spans, make_runner):
    [result] = await make_runner(mcp_sidecar, read_timeout=2.0, call_timeout=3.0).run(["task-1"])

    mcp_spans.assert_invariants()
    assert result.outcome == "completed"  # the agent's work is not undone by its cleanup
    assert mcp_sidecar.fired.get(mcpfaults_fault.kind, 0) >= 1  # the fault really hit the cleanup
