"""fastmcp's client after one failed call, as session hygiene's third duty (docs/sessions.md): one
``503`` must not poison the client. The affected release's later calls fail in the client without a
request and the test fails at teardown with the verdict naming them; the fixed release sends them and
passes. No LLM. Run: ``tox -e fw-fastmcp-poison``.

The env installs the fixed release (:data:`FIXED`, fastmcp 4.2.3 on mcp 2.3.0); the affected one
(:data:`AFFECTED`, fastmcp 3.4.11, which resolves mcp 1.30.0) goes into a directory of its own with
its dependencies (``pip install --target``) put first on the case's ``PYTHONPATH``. Each release runs
the one case in fastmcp_poison.py in a pytest of its own.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from beside import install_beside, run_case

AFFECTED, FIXED = "3.4.11", "4.2.3"
CASE = Path(__file__).with_name("fastmcp_poison.py")


@pytest.fixture(scope="session")
def affected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fastmcp :data:`AFFECTED` and its dependencies, on their own, for the case's ``PYTHONPATH``."""
    return install_beside(tmp_path_factory, f"fastmcp=={AFFECTED}", deps=True)


def test_the_affected_release_fails_the_later_calls_in_the_client_and_gets_the_verdict(
    pytester, monkeypatch, affected
):
    result = run_case(pytester, monkeypatch, CASE, affected)
    out = result.stdout.str()
    print(f"\n{out}")
    assert f"fastmcp {AFFECTED} on mcp 1." in out
    assert "the sidecar answered echo with [503]" in out  # the later calls never came
    assert "(reset): the sidecar saw echo ['reset@tool:echo[times=1]']" in out
    result.assert_outcomes(passed=2, errors=2)
    verdict = re.search(
        r"after `POST tools/call echo` \(#\d+\) failed \(`status@tool:echo\[times=1\]` fired\), the client's "
        r"later calls failed without reaching the sidecar: `tools/call echo` \(span ERROR: RuntimeError: "
        r"Client is not connected[^)]*\); "
        r"`tools/call echo` \(span ERROR: RuntimeError: Client is not connected",
        out,
    )
    assert verdict is not None, out
    assert "hint: one failed call must not poison the client" in out


def test_the_fixed_release_sends_the_calls_after_a_503_but_not_after_a_reset(pytester, monkeypatch):
    assert importlib.metadata.version("fastmcp") == FIXED
    result = run_case(pytester, monkeypatch, CASE, None)
    out = result.stdout.str()
    print(f"\n{out}")
    assert f"fastmcp {FIXED} on mcp 2." in out
    assert "['MCPError: Server returned an error response', 'answered', 'answered']" in out, out
    assert "the sidecar answered echo with [503, 200, 200]" in out, out
    # a cut connection still poisons it: the later calls fail in the client
    assert "(reset): the sidecar saw echo ['reset@tool:echo[times=1]']" in out, out
    assert "`tools/call echo` (span ERROR: Connection closed)" in out, out
    result.assert_outcomes(passed=2, errors=1)
    assert "ERROR test_case.py::test_three_calls_across_a_reset - SessionHygieneError" in out, out
