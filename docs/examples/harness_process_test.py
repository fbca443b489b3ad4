"""A harness process that never exits: the harness runs as a child process (``mcp_harness_process``), and
when it outlives the budget after its last MCP traffic the test fails with its threads' stacks, its last
MCP traffic and a hint, then it is killed with its process group. See docs/harness-process.md."""

import sys
from pathlib import Path

import pytest

from pytest_mcpfaults import HarnessProcessError

CLIENT = str(Path(__file__).with_name("harness_process_client.py"))


# --8<-- [start:exits]
@pytest.mark.mcp_sidecar(patience=1.0)
def test_the_harness_exits(mcp_sidecar, mcp_harness_process):
    proc = mcp_harness_process([sys.executable, CLIENT, mcp_sidecar.mcp_url, "--close"])
    assert proc.wait() == 0  # a verdict instead if it outlives 1 s after its last MCP request
    assert "echo" in proc.stdout


# --8<-- [end:exits]


# --8<-- [start:never_exits]
@pytest.mark.mcp_sidecar(patience=1.0)
def test_a_harness_that_never_exits(mcp_sidecar, mcp_harness_process):
    proc = mcp_harness_process([sys.executable, CLIENT, mcp_sidecar.mcp_url])  # no --close
    with pytest.raises(HarnessProcessError) as verdict:
        proc.wait()
    assert "still running 1 s after its last MCP traffic" in str(verdict.value)
    assert "in _shutdown" in str(verdict.value)  # the interpreter's exit, joining the session thread
    assert proc.returncode is not None  # killed, with its process group


# --8<-- [end:never_exits]
