"""Microsoft Agent Framework calling a lost session again (the class of microsoft/agent-framework
PR #5206: after a server restart, ``McpError: Session terminated`` skipped the tool's reconnect), as a
session hygiene verdict: the affected release gets it, naming the session, the ``404`` and the call on
the dead id, within the budget + 2 s; the fixed release re-initialises and passes. No LLM.
Run: ``tox -e fw-agent-framework-session``.

The env installs the fixed release (:data:`FIXED`, with mcp 1.x, which both releases require); the
affected one (:data:`AFFECTED`, the same dependencies) goes into a directory of its own (``pip install
--no-deps --target``) put first on the case's ``PYTHONPATH``. Each release runs the one case in
agent_framework_lost_session.py in a pytest of its own.
"""

from __future__ import annotations

import importlib.metadata
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import beside
import pytest

AFFECTED, FIXED = "1.7.0", "1.8.0"
BUDGET = 2.0  # the case's patience
CASE = Path(__file__).with_name("agent_framework_lost_session.py")


@pytest.fixture(scope="session")
def affected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """agent-framework-core :data:`AFFECTED`, installed on its own, for the case's ``PYTHONPATH``."""
    return beside.install_beside(tmp_path_factory, f"agent-framework-core=={AFFECTED}")


def run_case(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, path: Path | None):
    """The case in a pytest of its own (``path`` first on its ``PYTHONPATH``): its result and the
    seconds its test took, setup to teardown (the verdict included)."""
    xml = pytester.path / "case.xml"
    result = beside.run_case(pytester, monkeypatch, CASE, path, f"--junitxml={xml}")
    took = sum(float(c.get("time", 0)) for c in ET.parse(xml).getroot().iter("testcase"))
    return result, took


def test_the_affected_release_calls_the_lost_session_again_and_gets_the_verdict(
    pytester, monkeypatch, affected
):
    result, took = run_case(pytester, monkeypatch, affected)
    out = result.stdout.str()
    print(f"\n{out}\n(the case took {took:.2f} s, the verdict included)")
    calls = "'raised Session terminated', 'raised Session terminated'; 1 initialize(s), DELETEs [404]"
    assert f"agent-framework-core {AFFECTED}: {calls}" in out
    result.assert_outcomes(passed=1, errors=1)  # the test's body passed; the verdict came at teardown
    assert "SessionHygieneError: mcpfaults: session hygiene at http://127.0.0.1:" in out
    lost = re.search(
        r"session \S+ was lost \(`POST tools/call echo` #(\d+) was answered 404\) and the client kept "
        r"calling it instead of sending a new `initialize`: `POST tools/call echo` \(#(\d+)\)",
        out,
    )
    assert lost is not None, out
    assert int(lost[2]) > int(lost[1])
    assert "hint: on a 404 for its session id, open a new session" in out
    assert took < BUDGET + 2.0, took


def test_the_fixed_release_reinitialises_and_passes(pytester, monkeypatch):
    assert importlib.metadata.version("agent-framework-core") == FIXED
    result, took = run_case(pytester, monkeypatch, None)
    out = result.stdout.str()
    print(f"\n{out}\n(the case took {took:.2f} s)")
    # a new session; the lost one's DELETE is answered 404, the new one's ends it
    assert f"agent-framework-core {FIXED}: 'hi', 'hi'; 2 initialize(s), DELETEs [404, 200]" in out
    result.assert_outcomes(passed=1)
    assert "session hygiene" not in out
