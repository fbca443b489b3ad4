"""The official mcp SDK's streamable HTTP client leaving a tool call unresolved when its read times
out in the middle of the tool's event stream (modelcontextprotocol/python-sdk issues #1811 and
#3441), as the idle verdict: a hang with no fault, the sidecar up and idle, the test waiting on its
own client. The affected release gets the verdict, naming the call it is blocked in, within the
budget + 2 s of the call's answer and with no outside timeout; the fixed release raises and passes.
No LLM. Run: ``tox -e fw-mcp-unresolved-call``.

The env installs the fixed release (:data:`FIXED`, the first 2.x: PR #3047); the affected one
(:data:`AFFECTED`, the last 1.x, which never got the fix) goes into a directory of its own with its
dependencies (``pip install --target``: mcp 1.x reads through httpx, 2.x through httpx2) put first on
the case's ``PYTHONPATH``. Each release runs the one case in mcp_unresolved_call.py in a pytest of
its own, with pytest-timeout disabled.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from beside import install_beside, run_case

AFFECTED, FIXED = "1.30.0", "2.0.0"
BUDGET = 2.0  # the case's patience
CASE = Path(__file__).with_name("mcp_unresolved_call.py")


@pytest.fixture(scope="session")
def affected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mcp :data:`AFFECTED` and its dependencies, installed on their own, for the case's ``PYTHONPATH``."""
    return install_beside(tmp_path_factory, f"mcp=={AFFECTED}", deps=True)


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, path: Path | None) -> pytest.RunResult:
    """The case in a pytest of its own, no outside timeout."""
    return run_case(pytester, monkeypatch, CASE, path, "-p", "no:timeout")


def test_the_affected_release_waits_for_ever_and_gets_the_idle_verdict(pytester, monkeypatch, affected):
    result = run(pytester, monkeypatch, affected)
    out = result.stdout.str()
    print(f"\n{out}")
    assert f"mcp {AFFECTED}: calling" in out
    assert f"mcp {AFFECTED}: call_tool" not in out  # it never came back
    result.assert_outcomes(failed=1)
    headline = re.search(
        r"PatienceError: the test made no progress for (\d+\.\d) s after its last MCP request "
        r"`POST tools/call progress` \(#\d+\) ended, and no fault fired: the sidecar at "
        r"http://127\.0\.0\.1:\d+ is up and idle",
        out,
    )
    assert headline is not None, out
    waited = float(headline[1])
    assert BUDGET <= waited < BUDGET + 2.0, waited  # the verdict, timed from the call's answer
    assert "hint: the harness is waiting on itself, not on the sidecar" in out
    # where: the test's asyncio.run, and in its loop the task awaiting the tool call
    blocked = out.index("the test's thread is blocked at")
    assert out.index("outcome = asyncio.run(call(mcp_sidecar.mcp_url))", blocked) > blocked, out
    assert re.search(r"in its event loop, task '[^']+' is waiting at:", out), out
    assert out.index("result = await session.call_tool(", blocked) > blocked, out
    assert "The test was interrupted: mcpfaults cancelled every task of its event loop" in out


def test_the_fixed_release_raises_and_passes(pytester, monkeypatch):
    assert importlib.metadata.version("mcp") == FIXED
    result = run(pytester, monkeypatch, None)
    out = result.stdout.str()
    print(f"\n{out}")
    assert f"mcp {FIXED}: call_tool raised MCPError: SSE stream ended" in out, out
    result.assert_outcomes(passed=1)
    assert "made no progress" not in out
