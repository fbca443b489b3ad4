"""Explore beyond one ``mcp_sidecar`` (pytester, in process): sidecars made with
``mcp_sidecar_factory`` (each step names its sidecar when there are several; a fault goes to the
sidecar its step was on), parametrized tests (each parametrization explored as its own test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_explore_plugin import HARNESS as _PLUGIN_HARNESS
from test_explore_plugin import _ids, _run

HARNESS = _PLUGIN_HARNESS.replace("timeout=0.5", "timeout=2.0")  # the same harness, a roomier call timeout
assert HARNESS != _PLUGIN_HARNESS


def _runs(pytester: pytest.Pytester) -> dict[str, dict[str, str]]:
    """Each explored test's runs and their verdicts, from the JSON report."""
    data = json.loads(Path(pytester.path, "report.json").read_text())
    return {e["nodeid"]: {r["id"]: r["verdict"] for r in e["runs"]} for e in data["explore"]}


FACTORY = """
import httpx, pytest
from hypothesis import given, settings, strategies as st
from explore_harness import call

KEEP = []


@pytest.mark.mcp_explore(kinds=["status"])
def test_two(mcp_sidecar_factory):
    primary = mcp_sidecar_factory(era="stateless")
    with mcp_sidecar_factory(era="stateless") as mirror:
        call(primary, "echo", {"text": "hi"})  # the primary's failure escapes: a violation
        try:
            call(mirror, "echo", {"text": "hi"})
        except httpx.HTTPError:
            pass  # the mirror's is survived
        assert [str(f) for f in mirror.plan] == [str(f) for f in mirror.plan if "echo" in str(f)]


def test_leaks(mcp_sidecar_factory):
    sidecar = mcp_sidecar_factory(era="stateless")
    client = httpx.Client()  # kept open on the failure path: a connection left behind
    reply = client.post(sidecar.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}}},
        headers={"Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2026-07-28"})
    if reply.status_code != 200 or reply.json()["result"].get("isError"):
        KEEP.append(client)
    else:
        client.close()


@settings(max_examples=2, database=None)
@given(st.integers())
def test_given(mcp_sidecar_factory, n):
    with mcp_sidecar_factory(era="stateless") as sidecar:
        call(sidecar, "echo", {"text": str(n)})
"""


def test_the_factorys_sidecars_are_explored_each_fault_on_the_sidecar_its_step_was_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_factory=FACTORY)
    result = _run(
        pytester,
        "--mcpfaults-explore",
        "-o",
        "mcpfaults_explore=kinds=status,tool_error",
        "-q",
        "-rfEx",
        "--mcpfaults-report",
        "report.json",
        "--mcpfaults-html",
        "page.html",
    )
    out = result.stdout.str()
    runs = _runs(pytester)
    # the page's journal of a violation names each request's sidecar when there are several, as the
    # steps do (test_two's primary failed first: its mirror saw nothing); test_leaks's has one
    page = Path(pytester.path, "page.html").read_text()
    assert page.count("<td>sidecar1/#0</td>") == 1 and "<td>#0</td>" in page
    # two sidecars: every step names its sidecar, in the order the test made them
    assert runs["test_factory.py::test_two"] == {
        "explore:status-at-sidecar1.tool:echo[1]": "violation",
        "explore:status-at-sidecar2.tool:echo[1]": "ok",  # fired (else: unreached) and survived
    }
    assert "FAILED test_factory.py::test_two[explore:status-at-sidecar1.tool:echo[1]]" in out
    assert "exception:HTTPStatusError" in out
    # the plan to paste goes to the factory's call for that sidecar
    assert 'sidecar 1: mcp_sidecar_factory(faults=["status@tool:echo[nth=1]"])' in out
    # one sidecar: its steps name none; the left-open oracle sees the factory's sidecars too
    assert runs["test_factory.py::test_leaks"] == {
        "explore:status-at-tool:echo[1]": "violation",
        "explore:tool_error-at-tool:echo[1]": "violation",
    }
    assert "ERROR test_factory.py::test_leaks[explore:tool_error-at-tool:echo[1]]" in out
    assert "the harness left connections open" in out
    plan = 'explore:tool_error-at-tool:echo[1]: left_open\n      mcp_sidecar_factory(faults=["tool_error'
    assert plan in out
    # a Hypothesis test's examples each make their own sidecars: not explored under the flag
    assert "test_factory.py::test_given" not in runs
    assert "test_given[" not in out
    result.assert_outcomes(passed=6, failed=1, errors=2)  # the leaks error at teardown


def test_the_marker_on_a_hypothesis_test_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_given="""
        import pytest
        from hypothesis import given, strategies as st

        @pytest.mark.mcp_explore()
        @given(st.integers())
        def test_given(mcp_sidecar_factory, n):
            pass
        """
    )
    result = _run(pytester, "-q")
    result.stdout.fnmatch_lines(
        ["*test_given: @pytest.mark.mcp_explore: cannot be combined with Hypothesis*"]
    )


PARAMS = """
import httpx, pytest
from explore_harness import call


@pytest.mark.parametrize("times", [1, 2], ids=["one", "two"])
@pytest.mark.mcp_explore(kinds=["status"])
@pytest.mark.mcp_sidecar(era="stateless")
def test_p(mcp_sidecar, times):
    try:
        call(mcp_sidecar, "echo", {"text": "first"})
    except httpx.HTTPError:
        pass  # the first call's failure is survived
    if times == 2:
        call(mcp_sidecar, "echo", {"text": "second"})  # the second's escapes: a violation
"""


def test_each_parametrization_is_explored_as_its_own_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_p=PARAMS)
    assert _ids(_run(pytester, "--collect-only", "-q")) == [
        "test_p[one-explore:clean]",
        "test_p[two-explore:clean]",
    ]
    first = _run(pytester, "-q", "-rf", "--mcpfaults-report", "report.json")
    first.assert_outcomes(passed=4, failed=1)
    # each parametrization's own footprint: "one" made one call, "two" two
    assert _runs(pytester) == {
        "test_p.py::test_p[one]": {"explore:status-at-tool:echo[1]": "ok"},
        "test_p.py::test_p[two]": {
            "explore:status-at-tool:echo[1]": "ok",
            "explore:status-at-tool:echo[2]": "violation",
        },
    }
    out = first.stdout.str()
    assert "FAILED test_p.py::test_p[two-explore:status-at-tool:echo[2]]" in out
    assert "test_p.py::test_p[two]\n  2 steps × 1 kinds → 2 runs" in out
    # the second run collects each parametrization's campaign up front, and only its own
    again = _run(pytester, "--collect-only", "-q")
    assert _ids(again) == [
        "test_p[one-explore:clean]",
        "test_p[one-explore:status-at-tool:echo[1]]",
        "test_p[two-explore:clean]",
        "test_p[two-explore:status-at-tool:echo[1]]",
        "test_p[two-explore:status-at-tool:echo[2]]",
    ]
    # the explore parameter's values are the union of the parametrizations' runs: the one planned
    # for "two" only is deselected for "one"
    assert "5/6 tests collected (1 deselected)" in again.stdout.str()
    # -k selects by parametrization and run, as for any parametrized test
    picked = _run(pytester, "-q", "-k", "two-explore and echo")
    picked.assert_outcomes(passed=1, failed=1, deselected=4)


INPROCESS = """
import httpx, pytest
from pytest_mcpfaults.inprocess import mock_sidecar

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


def call(side, tool):
    reply = httpx.post(side.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": "hi"}}}, headers=HEADERS, timeout=2.0)
    reply.raise_for_status()
    return reply.json()


def test_inproc(mcpfaults_explore):  # asking for explore's fixture: its mock_sidecar is explored
    with mock_sidecar(era="stateless") as side:
        call(side, "echo")  # a failure escapes: a violation
        try:
            call(side, "delete_session")
        except httpx.HTTPError:
            pass
        assert "error" not in call(side, "echo")  # an error answer: behaviour under fault


@pytest.mark.asyncio
@pytest.mark.mcp_explore(kinds=["status"])
async def test_async(mcpfaults_explore):
    with mock_sidecar(base_url="http://two.test", era="stateless", faults=["delay(seconds=0)"]) as side:
        assert [str(f) for f in side.plan][-1] == "delay(seconds=0)"  # its own faults stay after explore's
        async with httpx.AsyncClient() as client:
            reply = await client.post(side.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}}, headers=HEADERS)
        reply.raise_for_status()  # escapes: a violation


def test_plain():  # no explore fixture: mock_sidecar is not explored
    with mock_sidecar(base_url="http://three.test", era="stateless") as side:
        assert call(side, "echo")["result"]
"""


def test_a_mock_sidecar_the_test_opens_takes_the_runs_plan_from_explores_fixture(
    pytester: pytest.Pytester,
) -> None:
    from pytest_mcpfaults.explore import explore_kinds
    from pytest_mcpfaults.inprocess import SUPPORTED_KINDS

    pytester.makepyfile(test_inproc=INPROCESS)
    result = _run(pytester, "--mcpfaults-explore", "-q", "-rfx", "--mcpfaults-report", "report.json")
    out = result.stdout.str()
    runs = _runs(pytester)
    assert "test_inproc.py::test_plain" not in runs
    inproc = runs["test_inproc.py::test_inproc"]
    # the kinds that apply: the catalogue's HTTP kinds the in-process backend can answer (no
    # needs_sockets), at the three calls; the /health kinds aim at no tool call
    kinds = {rid.split(":", 1)[1].split("-at-")[0].split(".")[0] for rid in inproc}
    assert kinds == set(explore_kinds()) & set(SUPPORTED_KINDS) - {"flap", "absent"}
    steps = {rid.split("-at-", 1)[1] for rid in inproc}
    assert steps == {"tool:echo[1]", "tool:delete_session[1]", "tool:echo[2]"}
    assert inproc["explore:status-at-tool:echo[1]"] == "violation"  # the fault reached the in-process sidecar
    assert inproc["explore:status-at-tool:delete_session[1]"] == "ok"  # fired (else: unreached), survived
    assert inproc["explore:tool_error-at-tool:echo[2]"] == "ok"  # a tool error is a result, not an error
    assert inproc["explore:jsonrpc_error-at-tool:echo[2]"] == "behaviour"
    assert "FAILED test_inproc.py::test_inproc[explore:status-at-tool:echo[1]]" in out
    assert 'mock_sidecar(faults=["status@tool:echo[nth=1]"])' in out
    # an async test's tasks see the run's plan too (its clean run passed: its campaign ran)
    assert runs["test_inproc.py::test_async"] == {"explore:status-at-tool:echo[1]": "violation"}


MIXED = """
import httpx, pytest
from pytest_mcpfaults.inprocess import mock_sidecar

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


@pytest.mark.mcp_explore(kinds=["status", "reset"])
@pytest.mark.mcp_sidecar(era="stateless")
def test_mixed(mcp_sidecar):
    with mock_sidecar(era="stateless") as side:
        for url in (mcp_sidecar.mcp_url, side.mcp_url):
            httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}}, headers=HEADERS,
                timeout=2.0).raise_for_status()
"""


def test_a_test_that_mixes_backends_gets_each_servers_kinds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mixed=MIXED)
    result = _run(pytester, "-q", "-rf", "--mcpfaults-report", "report.json")
    # reset needs real sockets: the socket sidecar's step gets it, the in-process one's does not
    assert _runs(pytester)["test_mixed.py::test_mixed"] == {
        "explore:status-at-sidecar1.tool:echo[1]": "violation",
        "explore:reset-at-sidecar1.tool:echo[1]": "violation",
        "explore:status-at-sidecar2.tool:echo[1]": "violation",
    }
    out = result.stdout.str()
    assert 'sidecar 1: @pytest.mark.mcp_sidecar(faults=["status@tool:echo[nth=1]"])' in out
    assert 'sidecar 2: mock_sidecar(faults=["status@tool:echo[nth=1]"])' in out


def test_the_docs_in_process_example_explores_with_no_violation(pytester: pytest.Pytester) -> None:
    root = Path(__file__).resolve().parent.parent
    example = root / "docs" / "examples" / "explore_inprocess_test.py"
    (pytester.path / "explore_inprocess_test.py").write_text(example.read_text())
    result = _run(pytester, "-p", "no:cacheprovider", "explore_inprocess_test.py", "-q")
    assert result.ret == 0, result.stdout.str()[-3000:]
    # what docs/explore.md says of it
    assert "2 steps × 3 kinds, has no\nviolation" in (root / "docs" / "explore.md").read_text()
    assert (
        "2 steps × 3 kinds → 6 runs (where the kind applies), 0 pruned, 0 over budget; 6 ran: 0 violations"
        in (result.stdout.str())
    )
