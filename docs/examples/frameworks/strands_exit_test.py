"""strands-agents' managed ``MCPClient`` hanging at interpreter exit (issue #1732), as a harness process:
the affected release gets the verdict, naming the client's join, within the budget + 2 s after its last
MCP traffic; the fixed release exits, no verdict. No LLM. Run: ``tox -e fw-strands-exit``.

The env installs the fixed release (:data:`FIXED`); the affected one (:data:`AFFECTED`, the same
dependencies) goes into a directory of its own (``pip install --no-deps --target``) that the harness
process puts first on its ``PYTHONPATH``. The hang needs Python 3.13 (the env's Python): measured, on
3.11 the join at exit returns and the affected release exits too.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from beside import install_beside

from pytest_mcpfaults import HarnessProcessError

AFFECTED, FIXED = "1.29.0", "1.30.0"
BUDGET = 2.0
HARNESS = str(Path(__file__).with_name("strands_exit_harness.py"))

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 13), reason="the exit-time join hangs on Python 3.13 (on 3.11 it returns)"
)


@pytest.fixture(scope="session")
def affected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """strands-agents :data:`AFFECTED`, installed on its own, for the harness's ``PYTHONPATH``."""
    return install_beside(tmp_path_factory, f"strands-agents=={AFFECTED}")


def since_last_traffic(sidecar) -> float:
    """Seconds since the sidecar's last request ended."""
    last = max(r.ended_at or r.started_at for r in sidecar.journal.requests)
    return sidecar.journal.now() - last


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_the_affected_release_never_exits_and_gets_the_verdict(mcp_sidecar, mcp_harness_process, affected):
    proc = mcp_harness_process(
        [sys.executable, HARNESS, mcp_sidecar.mcp_url], env={"PYTHONPATH": str(affected)}
    )
    with pytest.raises(HarnessProcessError) as raised:
        proc.wait()
    took = since_last_traffic(mcp_sidecar)
    print(f"\n{raised.value}\n(verdict {took:.2f} s after the last MCP traffic)")
    assert f"strands-agents {AFFECTED}:" in proc.stdout
    text = str(raised.value)
    assert f"it was still running {BUDGET:g} s after its last MCP traffic" in text
    assert "`POST tools/list`" in text  # the managed client's last request
    # the interpreter's garbage collector, in the agent's __del__, in the client's stop(), joining
    assert text.index("Garbage-collecting") < text.index(" in join") < text.index("mcp_client.py")
    assert text.index("mcp_client.py") < text.index("in stop") < text.index("in __del__")
    assert "hint: a thread is joined without a timeout at exit" in text
    assert took < BUDGET + 2.0, took


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_the_fixed_release_exits(mcp_sidecar, mcp_harness_process):
    assert importlib.metadata.version("strands-agents") == FIXED
    proc = mcp_harness_process([sys.executable, HARNESS, mcp_sidecar.mcp_url])
    assert proc.wait() == 0
    assert f"strands-agents {FIXED}:" in proc.stdout
    assert proc.verdict is None
