"""The CI gate under pytest-xdist: one suite run serially and with ``-n 2 --dist loadgroup`` (both in
subprocesses, as CI runs them) gives the same merged report, one summary, and the same gate verdicts.

One pair of runs carries every assertion: xdist start-up is the slow part. The suite has a fault matrix
(``flap`` never fires: the required-kinds gate fails naming it), a harness whose cleanup flips its
session span to ERROR (the real span gate records ``cleanup_never_flips`` violated; the test is xfail,
so only the baseline gate fails the run on it), a hang the test expects, and tests that use nothing.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

HARNESS = textwrap.dedent(
    """
    from opentelemetry.trace import Status, StatusCode

    def run(tracer, fixed):
        with tracer.start_as_current_span("Agent.Session") as session:
            try:
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    raise RuntimeError("Service at http://127.0.0.1:59685 is no longer alive")
            except RuntimeError as exc:
                if not fixed:
                    session.set_status(Status(StatusCode.ERROR, str(exc)))  # the cleanup flip
    """
)

SUITE = textwrap.dedent(
    """
    import httpx, pytest
    from opentelemetry.sdk.trace import TracerProvider
    from harness import run

    def delete_session(sidecar):
        return httpx.post(
            sidecar.mcp_url,
            json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                  "params": {"name": "delete_session", "arguments": {"session_id": "s-1"}}},
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                     "Mcp-Method": "tools/call", "Mcp-Name": "delete_session"},
            timeout=5,
        )

    @pytest.mark.mcpfaults_matrix(kinds=["tool_error", "jsonrpc_error", "backend_gone", "flap"])
    def test_cleanup(mcp_sidecar):
        assert delete_session(mcp_sidecar).status_code == 200

    @pytest.mark.xfail(reason="known cleanup flip", strict=True)
    def test_buggy():
        run(TracerProvider().get_tracer("app"), fixed=False)

    def test_fixed():
        run(TracerProvider().get_tracer("app"), fixed=True)

    @pytest.mark.mcp_expect_hang
    @pytest.mark.mcp_sidecar(faults=["hang@health"], patience=0.2)
    def test_expected_hang(mcp_sidecar):
        with pytest.raises(httpx.TransportError):
            httpx.get(mcp_sidecar.health_url, timeout=5)

    @pytest.mark.parametrize("n", range(4))
    def test_plain(n):
        pass
    """
)

CLEAN = {"schema": "pytest-mcpfaults/report", "version": 2, "tests": []}


def _comparable(path: Path) -> dict[str, Any]:
    """The report without what differs from run to run: timings and the sidecars' ports."""
    data: dict[str, Any] = json.loads(path.read_text())
    for test in data["tests"]:
        test.pop("duration")
        for sc in test["sidecars"]:
            sc.pop("url")
        for pv in test["patience_violations"]:
            for key in ("waited", "sidecar", "message", "details", "connection"):
                pv.pop(key, None)
    return data


def test_serial_and_xdist_runs_give_the_same_report_and_gates(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # only xdist and ours: faster start-up
    pytester.makepyfile(harness=HARNESS, test_suite=SUITE)
    (pytester.path / "clean.json").write_text(json.dumps(CLEAN))
    gates = [
        "--mcpfaults-check-spans",
        "--mcpfaults-require=tool_error,flap",
        "--mcpfaults-baseline=clean.json",
    ]
    serial = pytester.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-report=serial.json", *gates)
    xdist = pytester.runpytest_subprocess(
        "-p",
        "xdist",
        "-p",
        "mcpfaults",
        "-n",
        "2",
        "--dist",
        "loadgroup",
        "--mcpfaults-report=xdist.json",
        *gates,
    )

    for result in (serial, xdist):
        result.assert_outcomes(passed=10, xfailed=1)  # every test passed: the gates fail the run
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        out = result.stdout.str()
        assert out.count("mcpfaults: fault coverage") == 1  # one summary, on the controller
        result.stdout.fnmatch_lines(
            [
                "hang *  1 *  1 *  1 *  0",
                "flap *  1 *  0 *  0 *  0  never fired",
                "violations (1):",
                "  test_suite.py::test_buggy: invariant cleanup_never_flips: *",
                "mcpfaults: 5 kinds, 4 fired, 1 violation (1 expected hang); missing: flap",
                "mcpfaults gate FAILED: required fault kind never fired: flap (required: tool_error, flap)",
                "mcpfaults gate FAILED: 1 new violation not in baseline *clean.json:",
                "  regressed: test_suite.py::test_buggy: invariant cleanup_never_flips: *",
            ]
        )
    xdist.stdout.fnmatch_lines(["created: 2/2 workers", "2 workers ?11 items?"])  # it really ran on workers

    serial_report = _comparable(pytester.path / "serial.json")
    xdist_report = _comparable(pytester.path / "xdist.json")
    assert xdist_report == serial_report
    nodeids = [t["nodeid"] for t in serial_report["tests"]]
    assert nodeids == [
        "test_suite.py::test_buggy",
        "test_suite.py::test_cleanup[backend_gone]",
        "test_suite.py::test_cleanup[flap]",
        "test_suite.py::test_cleanup[jsonrpc_error@tool:delete_session]",
        "test_suite.py::test_cleanup[tool_error@tool:delete_session]",
        "test_suite.py::test_expected_hang",
        "test_suite.py::test_fixed",
    ]
    assert serial_report["totals"]["fired"] == {
        "backend_gone": 1,
        "hang": 1,
        "jsonrpc_error": 1,
        "tool_error": 1,
    }
    assert serial_report["gates"]["missing_required"] == ["flap"]
    assert [(v["nodeid"], v["name"]) for v in serial_report["gates"]["new_violations"]] == [
        ("test_suite.py::test_buggy", "cleanup_never_flips")
    ]


def test_bad_markers_are_collection_errors_under_xdist_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Markers are validated while collecting, which xdist does on the workers: each bad marker is
    reported by the controller as its module's collection error, naming the argument (a usage error
    raised on a worker crashed it: INTERNALERROR and no message)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        test_sidecar_marker="""
            import pytest

            @pytest.mark.mcp_sidecar(era="bogus")
            def test_it(mcp_sidecar):
                raise AssertionError("must not run")
        """,
        test_matrix_marker="""
            import pytest

            @pytest.mark.mcpfaults_matrix(kinds=["nope"])
            def test_it(mcp_sidecar):
                raise AssertionError("must not run")
        """,
        test_fine="def test_fine(): pass",
    )
    result = pytester.runpytest_subprocess("-p", "xdist", "-p", "mcpfaults", "-n", "2")
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    result.stdout.fnmatch_lines_random(
        [
            "*ERROR collecting test_sidecar_marker.py*",
            "test_sidecar_marker.py::test_it: @pytest.mark.mcp_sidecar: Sidecar: era must be one of "
            "'auto', 'stateless', 'session', got 'bogus'",
            "*ERROR collecting test_matrix_marker.py*",
            "test_matrix_marker.py::test_it: @pytest.mark.mcpfaults_matrix: *'nope'*",
        ]
    )
    result.stdout.no_fnmatch_line("*must not run*")
    assert result.ret != pytest.ExitCode.OK
