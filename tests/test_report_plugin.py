"""The CI gate through pytest (pytester, in-process, ``-p mcpfaults``): the JSON report, the terminal
summary, JUnit properties, the required-kinds gate and the baseline gate.

The suite below runs real sidecars: a matrix over three kinds (``flap`` aims at ``/health``, which the
test never probes, so it never fires), a hang the test expects (reported, not failing), and a hang the
client waits out past its patience budget (a violation; the test is marked xfail so that the run's exit
code is decided by the gates alone).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpfaults.faults import fault_kinds

HELPERS = """
import httpx

def delete_session(sidecar):
    return httpx.post(
        sidecar.mcp_url,
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
              "params": {"name": "delete_session", "arguments": {"session_id": "s-1"}}},
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                 "Mcp-Method": "tools/call", "Mcp-Name": "delete_session"},
        timeout=5,
    )
"""

SUITE = """
import httpx, pytest
from helpers import delete_session

@pytest.mark.mcpfaults_matrix(kinds=["tool_error", "backend_gone", "flap"])
def test_cleanup(mcp_sidecar):
    assert delete_session(mcp_sidecar).status_code == 200

@pytest.mark.mcp_expect_hang
@pytest.mark.mcp_sidecar(faults=["hang@health"], patience=0.2)
def test_expected_hang(mcp_sidecar):
    with pytest.raises(httpx.TransportError):  # the sidecar aborts the held request at 0.2 s
        httpx.get(mcp_sidecar.health_url, timeout=5)

@pytest.mark.xfail(reason="the client waits out the hang (5 s timeout > 0.2 s patience)", strict=True)
@pytest.mark.mcp_sidecar(faults=["hang@health"], patience=0.2)
def test_waits_out_the_hang(mcp_sidecar):
    with pytest.raises(httpx.TransportError):
        httpx.get(mcp_sidecar.health_url, timeout=5)

def test_plain():
    pass
"""

WAITS = "test_suite.py::test_waits_out_the_hang"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(helpers=HELPERS, test_suite=SUITE)
    return pytester


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_report_summary_and_junit(suite: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    result = run_plugin("--mcpfaults-report=out/report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=5, xfailed=1)
    assert result.ret == 0

    data = _json(suite.path / "out" / "report.json")
    assert (data["schema"], data["version"]) == ("pytest-mcpfaults/report", 2)
    tests = {t["nodeid"]: t for t in data["tests"]}
    assert sorted(tests) == [
        "test_suite.py::test_cleanup[backend_gone]",
        "test_suite.py::test_cleanup[flap]",
        "test_suite.py::test_cleanup[tool_error@tool:delete_session]",
        "test_suite.py::test_expected_hang",
        WAITS,
    ]  # test_plain did not use the plugin
    cell = tests["test_suite.py::test_cleanup[tool_error@tool:delete_session]"]
    assert cell["matrix"] == "tool_error@tool:delete_session"
    assert cell["plans"] == [["tool_error@tool:delete_session"]]
    assert cell["fired"] == {"tool_error": 1}
    assert cell["outcome"] == "passed"
    assert cell["sidecars"][0]["requests"] == 1
    assert cell["sidecars"][0]["url"].startswith("http://127.0.0.1:")
    assert tests["test_suite.py::test_cleanup[flap]"]["fired"] == {}
    waits = tests[WAITS]
    assert waits["outcome"] == "xfailed"
    assert [(p["fault"], p["expected"]) for p in waits["patience_violations"]] == [("hang@health", False)]
    assert [(v["kind"], v["name"]) for v in waits["violations"]] == [("patience", "hang@health")]
    hang = tests["test_suite.py::test_expected_hang"]
    assert [(p["fault"], p["expected"]) for p in hang["patience_violations"]] == [("hang@health", True)]
    assert hang["violations"] == []

    totals = data["totals"]
    assert totals["tests"] == 5
    assert totals["fired"] == {"backend_gone": 1, "hang": 2, "tool_error": 1}
    assert totals["kinds"] == ["hang", "flap", "tool_error", "backend_gone"]
    assert totals["missing"] == ["flap"]
    assert totals["violations"] == totals["patience_violations"] == 1
    assert totals["patience_violations_expected"] == 1
    assert totals["outcomes"]["xfailed"] == 1
    assert data["gates"]["failed"] is False

    result.stdout.fnmatch_lines(
        [
            "*= mcpfaults: fault coverage =*",
            "fault kind    tests  fired in  times  failed",
            "-*",
            "hang              2         2      2       0",
            "flap              1         0      0       0  never fired",
            "tool_error        1         1      1       0",
            "backend_gone      1         1      1       0",
            "",
            "5 tests used the plugin (5 sidecars, 0 failed)",
            "violations (1):",
            f"  {WAITS}: patience hang@health: the client waited 0.2 s*",
            "mcpfaults: 4 kinds, 3 fired, 1 violation (1 expected hang); missing: flap",
            "mcpfaults report: *out/report.json",
            "*= 5 passed, 1 xfailed in *",
        ]
    )

    cases = ET.parse(suite.path / "junit.xml").getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert props["test_cleanup[tool_error@tool:delete_session]"] == {
        "mcpfaults.matrix": "tool_error@tool:delete_session",
        "mcpfaults.fired": "tool_error:1",
        "mcpfaults.plan": "tool_error@tool:delete_session",
    }
    assert props["test_waits_out_the_hang"] == {
        "mcpfaults.fired": "hang:1",
        "mcpfaults.plan": "hang@health",
        "mcpfaults.violations": "patience:hang@health",
    }
    assert props["test_plain"] == {}


def test_quiet_when_the_plugin_is_not_used(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass")
    result = run_plugin()
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*fault coverage*")
    result.stdout.no_fnmatch_line("mcpfaults:*")


def test_required_kinds_gate(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(helpers=HELPERS)
    pytester.makepyfile(
        """
        import pytest
        from helpers import delete_session

        @pytest.mark.mcpfaults_matrix(kinds=["tool_error", "flap"])
        def test_cleanup(mcp_sidecar):
            delete_session(mcp_sidecar)
        """
    )
    missing = run_plugin("--mcpfaults-require=tool_error", "--mcpfaults-require", "flap,tool_error")
    missing.assert_outcomes(passed=2)  # every test passed, the gate failed the run
    assert missing.ret == pytest.ExitCode.TESTS_FAILED
    missing.stdout.fnmatch_lines(
        ["mcpfaults gate FAILED: required fault kind never fired: flap (required: tool_error, flap)"]
    )

    pytester.makeini("[pytest]\nmcpfaults_require = tool_error\n")
    ok = run_plugin()
    assert ok.ret == 0
    ok.stdout.fnmatch_lines(["mcpfaults gate passed: every required fault kind fired (tool_error)"])

    everything = run_plugin("--mcpfaults-require=all")  # the option replaces the ini value
    assert everything.ret == pytest.ExitCode.TESTS_FAILED
    kinds = list(fault_kinds())  # every kind, in the catalogue's order, but the one that fired
    never = ", ".join(k for k in kinds if k != "tool_error")
    everything.stdout.fnmatch_lines(
        [f"*required fault kinds never fired: {never} (required: {', '.join(kinds)})"]
    )


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (
            ["--mcpfaults-require=die,explode"],
            "",
            "*--mcpfaults-require: unknown fault kind 'explode'; valid kinds: die*",
        ),
        (
            [],
            "mcpfaults_require = die nope",
            "*mcpfaults_require: unknown fault kind 'nope'; valid kinds: die*",
        ),
        (
            ["--mcpfaults-baseline=missing.json"],
            "",
            "*--mcpfaults-baseline: cannot read report '*missing.json'*",
        ),
        (["--mcpfaults-baseline=test_x.py"], "", "*--mcpfaults-baseline: report '*test_x.py' is not JSON*"),
        (
            ["--mcpfaults-baseline=latin1.json"],
            "",
            "*--mcpfaults-baseline: report '*latin1.json' is not UTF-8*",
        ),
        # an empty path (an unset CI variable) turned the gate or the report off without a word
        (["--mcpfaults-baseline="], "", "ERROR: --mcpfaults-baseline= is an empty path*"),
        (["--mcpfaults-report", " "], "", "ERROR: --mcpfaults-report=  is an empty path*"),
        (["--mcpfaults-html="], "", "ERROR: --mcpfaults-html= is an empty path*"),
        (
            ["--mcpfaults-require="],
            "",
            "ERROR: --mcpfaults-require= names no fault kind*or leave the option out",
        ),
        (
            ["--mcpfaults-require=die", "--mcpfaults-require", " , "],
            "",
            "ERROR: --mcpfaults-require= ,  names*",
        ),
        (  # version 1 (before explore's findings, no release wrote it): every finding would be new
            ["--mcpfaults-baseline=v1.json"],
            "",
            "*--mcpfaults-baseline: report '*v1.json': report schema version 1 is not supported (this "
            "pytest-mcpfaults reads version 2)",
        ),
        (  # an invariant without its name: a KeyError at the end of the run
            ["--mcpfaults-baseline=inv.json"],
            "",
            "*--mcpfaults-baseline: report '*inv.json': t: invariants[[]0[]] has no 'name' (a string)",
        ),
    ],
)
def test_bad_gate_settings_are_usage_errors(
    pytester: pytest.Pytester,
    run_plugin,  # type: ignore[no-untyped-def]
    args: list[str],
    ini: str,
    message: str,
) -> None:
    pytester.makepyfile(test_x="def test_x(): raise AssertionError('must not run')")
    (pytester.path / "latin1.json").write_bytes(b'{"schema": "caf\xe9"}')
    v1 = {"schema": "pytest-mcpfaults/report", "version": 1, "tests": [], "explore": [{"nodeid": "t"}]}
    v1["explore"][0]["violations"] = [{"found": ["left_open"]}]
    (pytester.path / "v1.json").write_text(json.dumps(v1))
    inv = {"schema": "pytest-mcpfaults/report", "version": 2, "tests": [{"nodeid": "t", "invariants": [{}]}]}
    (pytester.path / "inv.json").write_text(json.dumps(inv))
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = run_plugin(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_baseline_gate(suite: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    # A clean baseline: the run without the violating test.
    clean = run_plugin("-k", "not waits_out", "--mcpfaults-report=clean.json")
    assert clean.ret == 0
    assert _json(suite.path / "clean.json")["totals"]["violations"] == 0

    # The same clean run against its clean baseline: exit 0.
    same = run_plugin("-k", "not waits_out", "--mcpfaults-baseline=clean.json")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["mcpfaults baseline *clean.json: no new violations (0 in the baseline)"])

    # A new violation: exit 1, naming the test and what regressed (xfail keeps pytest's own verdict at 0).
    new = run_plugin("--mcpfaults-baseline=clean.json", "--mcpfaults-report=full.json")
    new.assert_outcomes(passed=5, xfailed=1)
    assert new.ret == pytest.ExitCode.TESTS_FAILED
    new.stdout.fnmatch_lines(
        [
            "mcpfaults gate FAILED: 1 new violation not in baseline *clean.json:",
            f"  regressed: {WAITS}: patience hang@health: the client waited 0.2 s*",
        ]
    )
    gates = _json(suite.path / "full.json")["gates"]
    assert gates["failed"] is True
    assert [(v["nodeid"], v["kind"], v["name"]) for v in gates["new_violations"]] == [
        (WAITS, "patience", "hang@health")
    ]

    # The violation is known once it is in the baseline: exit 0.
    known = run_plugin("--mcpfaults-baseline=full.json")
    assert known.ret == 0
    known.stdout.fnmatch_lines(["mcpfaults baseline *full.json: no new violations (1 in the baseline)"])


RUNNER = """
import os

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from pytest_mcpfaults.spans import install_recorder

PROVIDER = TracerProvider()  # the runner's own, built at import: no watch catches it


def test_runner_checks_its_own_spans():
    recorder = install_recorder()
    recorder.attach(PROVIDER)
    tracer = PROVIDER.get_tracer("runner")
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                raise RuntimeError("Service is no longer alive")
        except RuntimeError as exc:
            if os.environ.get("FLIP") == "1":
                session.set_status(Status(StatusCode.ERROR, str(exc)))
    recorder.assert_invariants()
"""


def test_install_recorder_checks_reach_the_report_and_the_baseline_with_the_gate_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --mcpfaults-check-spans and without mcp_spans, a runner's own
    ``install_recorder().assert_invariants()`` is a check like any other: in the record, the JSON
    report, the summary and the baseline gate."""
    pytester.makepyfile(test_runner=RUNNER)
    clean = pytester.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-report=clean.json")
    clean.assert_outcomes(passed=1)
    [entry] = _json(pytester.path / "clean.json")["tests"]
    assert [(i["name"], i["ok"]) for i in entry["invariants"]] == [
        ("cleanup_never_flips", True),
        ("cleanup_at_most", True),
        ("all_spans_ended", True),
    ]
    clean.stdout.fnmatch_lines(["1 test used the plugin (0 sidecars, 3 invariant checks, 0 failed)"])

    monkeypatch.setenv("FLIP", "1")
    flip = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "--mcpfaults-baseline=clean.json", "--mcpfaults-report=flip.json"
    )
    flip.assert_outcomes(failed=1)
    [entry] = _json(pytester.path / "flip.json")["tests"]
    [failed] = [i for i in entry["invariants"] if not i["ok"]]
    assert failed["name"] == "cleanup_never_flips"
    assert "Agent.Session is ERROR with description 'Service is no longer alive'" in failed["message"]
    flip.stdout.fnmatch_lines(
        [
            "mcpfaults gate FAILED: 1 new violation not in baseline *clean.json:",
            "  regressed: test_runner.py::test_runner_checks_its_own_spans: invariant cleanup_never_flips:"
            " Agent.Session is ERROR*",
        ]
    )


RERUN = """
import pathlib

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

ATTEMPTS = pathlib.Path(__file__).with_name("attempts")


@pytest.mark.mcp_sidecar(faults=["status(code=503)@health[times=1]"])
def test_flaky(mcp_sidecar):
    first = not ATTEMPTS.exists()
    ATTEMPTS.write_text("tried")
    tracer = trace.get_tracer("runner")
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("MCP.DeleteSession"):
            assert httpx.get(mcp_sidecar.health_url).status_code == 503
        if first:
            session.set_status(Status(StatusCode.ERROR, "flipped on the first attempt only"))
"""


def test_a_rerun_is_judged_and_reported_on_its_own_attempt(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    """pytest-rerunfailures runs a failed test's protocol again within one protocol call: the second
    attempt starts with no spans, sidecars, plans or counts of the first, so its clean run passes the
    span gate and the report holds only what it observed."""
    pytester.makepyfile(test_rerun=RERUN)
    result = run_plugin("--reruns=1", "--mcpfaults-check-spans", "--mcpfaults-report=r.json")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}, result.stdout.str()
    [entry] = _json(pytester.path / "r.json")["tests"]
    assert (entry["outcome"], entry["fired"], entry["plans"]) == (
        "passed",
        {"status": 1},
        [["status@health[times=1]"]],
    )
    assert len(entry["sidecars"]) == 1 and entry["violations"] == []
    assert all(i["ok"] for i in entry["invariants"]), entry["invariants"]
    result.stdout.fnmatch_lines(["mcpfaults: 1 kind, 1 fired, 0 violations"])
