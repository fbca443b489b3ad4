"""openai-agents calling a tool on a pooled connection that went silent (no FIN, no RST), the class of
openai-agents PR #580 ("Prevent MCP ClientSession hang"): the affected release (0.0.12: no read timeout
on its ``ClientSession``) waits for ever, the sidecar's patience verdict says the connection went
silent; the fixed one (0.0.13: ``client_session_timeout_seconds``, 5 s by default) raises, cleans up and
exits, no verdict. No LLM. Run: ``tox -e fw-openai-agents-silent``.

The env installs the fixed release (:data:`FIXED`); the affected one (:data:`AFFECTED`, the same
dependencies) goes into a directory of its own (``pip install --no-deps --target``) that the harness
process puts first on its ``PYTHONPATH``. The budget is longer than the fixed release's 5 s, so only a
client with no bound of its own outlives it.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from beside import install_beside

from pytest_mcpfaults import HarnessProcessError
from pytest_mcpfaults.faults import Blackhole
from pytest_mcpfaults.verdicts.patience import patience_verdict

AFFECTED, FIXED = "0.0.12", "0.0.13"
BUDGET = 8.0  # longer than 0.0.13's 5 s default
IDLE = 1.0  # the NAT's idle timeout, scaled down: the harness idles 1.5 s between its two requests
HARNESS = str(Path(__file__).with_name("openai_agents_silent_harness.py"))
SILENT = Blackhole(idle=IDLE, when="tool:echo", expect_hang=True)  # recorded, not failed: we pin it


@pytest.fixture(scope="session")
def affected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """openai-agents :data:`AFFECTED`, installed on its own, for the harness's ``PYTHONPATH``."""
    return install_beside(tmp_path_factory, f"openai-agents=={AFFECTED}")


@pytest.mark.mcp_sidecar(transport="sse", patience=BUDGET, faults=[SILENT])
def test_the_affected_release_waits_for_ever_and_gets_the_verdict(mcp_sidecar, mcp_harness_process, affected):
    proc = mcp_harness_process(
        [sys.executable, HARNESS, mcp_sidecar.sse_url, str(IDLE + 0.5)], env={"PYTHONPATH": str(affected)}
    )
    mcp_sidecar.journal.wait_for(lambda: bool(mcp_sidecar.patience_violations), BUDGET + 30, "the verdict")
    (v,) = mcp_sidecar.patience_violations
    text = patience_verdict(mcp_sidecar, [v])
    print(f"\n{text}")
    assert "on a blackholed `POST /messages` (tools/call echo)" in text
    assert "went silent as it came (no FIN, no RST" in text
    assert v.waited < BUDGET + 2.0
    with pytest.raises(HarnessProcessError, match="still running after the 3 s wait") as raised:
        proc.wait(timeout=3)  # the reset did not end the call: it still waits
    print(f"\n{raised.value}")
    where = str(raised.value)  # where the harness is blocked: its threads' stacks (faulthandler)
    assert "in run_until_complete" in where and "openai_agents_silent_harness.py" in where, where
    assert f"openai-agents {AFFECTED}" in proc.stdout
    assert "call failed" not in proc.stdout and "result:" not in proc.stdout


@pytest.mark.mcp_sidecar(transport="sse", patience=BUDGET, faults=[SILENT])
def test_the_fixed_release_times_out_and_exits(mcp_sidecar, mcp_harness_process):
    assert importlib.metadata.version("openai-agents") == FIXED
    proc = mcp_harness_process([sys.executable, HARNESS, mcp_sidecar.sse_url, str(IDLE + 0.5)])
    assert proc.wait(timeout=BUDGET + 10) == 0
    assert f"openai-agents {FIXED}" in proc.stdout
    assert "call failed: McpError: Timed out while waiting for response" in proc.stdout, proc.stdout
    assert "exited" in proc.stdout
    mcp_sidecar.wait_idle(3)
    assert mcp_sidecar.fired == {"blackhole": 1}
    (held,) = mcp_sidecar.held_requests("tools/call")
    assert held.hold == "client_closed"  # its cleanup closed the silent connection
    assert mcp_sidecar.patience_violations == ()
