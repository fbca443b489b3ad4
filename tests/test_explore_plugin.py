"""Explore through pytest (pytester, in process, with the cache on): the clean run and its footprint,
the campaign items and their ids, the oracles, the cache's second run, depth 2, the report."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
from docs_quotes import assert_quoted_lines_occur

HARNESS = """
import httpx

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


def call(sidecar, tool, arguments, timeout=0.5):
    # One stateless-era tools/call; an HTTP error or a JSON-RPC error raises.
    reply = httpx.post(
        sidecar.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": tool, "arguments": arguments}},
        headers={**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": tool},
        timeout=timeout,
    )
    reply.raise_for_status()
    body = reply.json()
    if "error" in body:
        raise RuntimeError(body["error"]["message"])
    return body["result"]
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "mcpfaults",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        *args,
    )


def _ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::", 1)[1] for line in result.outlines if "::" in line and "[" in line]


SIMPLE = """
import pytest
from explore_harness import call

@pytest.mark.mcp_sidecar(era="stateless", patience=2.0)
def test_flow(mcp_sidecar):
    out = call(mcp_sidecar, "echo", {"text": "hi"})
    try:
        assert out["content"][0]["text"] == "hi"
    finally:
        try:
            call(mcp_sidecar, "delete_session", {"session_id": "s-1"})
        except Exception:
            pass  # cleanup failures are logged, not raised

def test_no_sidecar():
    pass
"""


def test_first_run_records_then_explores_and_the_second_collects_the_campaign(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    first = _run(
        pytester, "--mcpfaults-explore", "--collect-only", "-q", "--mcpfaults-html=page.html",
        "--mcpfaults-report=r.json",
    )  # fmt: skip
    assert _ids(first) == ["test_flow[explore:clean]"]  # nothing cached yet: the clean run only
    # no test ran: no page (a page of no runs would read "no finding"), no report, and the summary says so
    assert not (pytester.path / "page.html").exists() and not (pytester.path / "r.json").exists()
    first.stdout.fnmatch_lines(
        [
            "mcpfaults explore page not written: --collect-only ran no test",
            "mcpfaults report not written: --collect-only ran no test",
        ]
    )

    ran = _run(
        pytester, "--mcpfaults-explore", "-q", "-rx", "-o", "mcpfaults_explore=kinds=status,tool_error,die"
    )
    # the clean run, then per step (echo#1, delete_session#1) each kind that applies (3 each)
    # the clean run, then per step (echo#1, delete_session#1) each kind that applies (3 each): a failed
    # echo escapes the test (a violation), but a tool error is an answer its own assert sees
    ran.assert_outcomes(passed=5, failed=2, xfailed=1)  # test_no_sidecar too
    out = ran.stdout.str()
    assert (
        "2 steps × 3 kinds → 6 runs (where the kind applies), 0 pruned, 0 over budget; "
        "6 ran: 2 violations, 1 behaviour" in out
    )
    assert "XFAIL test_flow.py::test_flow[explore:tool_error-at-tool:echo[1]] - behaviour under fault" in out
    assert "exception:ReadError" in out and "exception:HTTPStatusError" in out

    again = _run(
        pytester, "--mcpfaults-explore", "--collect-only", "-q", "-o", "mcpfaults_explore=kinds=status,die"
    )
    assert _ids(again) == [
        "test_flow[explore:clean]",
        "test_flow[explore:die-at-tool:echo[1]]",
        "test_flow[explore:status-at-tool:echo[1]]",
        "test_flow[explore:die-at-tool:delete_session[1]]",
        "test_flow[explore:status-at-tool:delete_session[1]]",
    ]
    # -k selects campaign items like any others
    picked = _run(
        pytester,
        "--mcpfaults-explore",
        "-q",
        "-k",
        "status and delete_session",
        "-o",
        "mcpfaults_explore=kinds=status,die",
    )
    picked.assert_outcomes(passed=1, deselected=5)
    # without the option, nothing changes
    plain = _run(pytester, "--collect-only", "-q")
    assert _ids(plain) == [] and "2 tests collected" in plain.stdout.str()


@pytest.mark.parametrize(
    "footprint",
    [
        [
            {"target": "tool:echo", "nth": 1, "label": "POST tools/call echo", "method": "tools/call"}
        ],  # old keys
        [{"target": "tool:echo", "label": "POST tools/call echo", "endpoint": "mcp"}],  # no nth
        "tool:echo#1",  # not a list of steps
    ],
)
def test_a_footprint_cached_by_another_version_is_recorded_again(
    pytester: pytest.Pytester, footprint: object
) -> None:
    """A cache written by another version of the plugin (or edited) must not break collection: the
    test is collected as if nothing were cached, and its clean run records the footprint again."""
    from pytest_mcpfaults.explore.summary import cache_key

    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    entry = pytester.path / ".pytest_cache" / "v" / cache_key("nodeid", "test_flow.py::test_flow")
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"nodeid": "test_flow.py::test_flow", "footprint": footprint}))
    result = _run(pytester, "--mcpfaults-explore", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert _ids(result) == ["test_flow[explore:clean]"]


def test_a_campaign_left_out_with_the_cache_off_is_not_promised_to_the_next_run(
    pytester: pytest.Pytester,
) -> None:
    """With ``-p no:cacheprovider`` nothing is kept for a next run: under xdist (or ``-k``) the summary
    said "run again to explore it", and a CI job that runs ``-n 2`` without the cache never explored."""
    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    result = _run(pytester, "--mcpfaults-explore", "-q", "-p", "no:cacheprovider", "-k", "explore:clean")
    out = result.stdout.str()
    assert "the campaign did not run in this session" in out
    assert "the cache is off (-p no:cacheprovider): no footprint is kept for the next run" in out, out


def test_kinds_apply_by_their_own_attributes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    _run(pytester, "--mcpfaults-explore", "-q", "-k", "explore:clean")
    ids = _ids(_run(pytester, "--mcpfaults-explore", "--collect-only", "-q"))
    kinds = {i.split(":", 1)[1].split("-at-")[0] for i in ids if "clean" not in i}
    # health kinds (default target /health) never aim at a tool call; tool kinds and every http kind do
    assert "flap" not in kinds and "absent" not in kinds
    assert {"tool_error", "backend_gone", "die", "hang", "jsonrpc_error", "session_expired"} <= kinds
    # error_payload once per error text of its explore_cells
    assert {k for k in kinds if k.startswith("error_payload.")} == {
        "error_payload.gone",
        "error_payload.gone_upper",
        "error_payload.not_found",
        "error_payload.failed",
    }
    assert len(ids) == 1 + 2 * (16 + 4)


def test_the_oracles(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS)
    pytester.makepyfile(
        test_oracles="""
        import httpx, pytest
        from explore_harness import call

        @pytest.mark.mcp_explore(kinds=["status"])
        @pytest.mark.mcp_sidecar(era="stateless")
        def test_escapes(mcp_sidecar):
            call(mcp_sidecar, "echo", {"text": "hi"})  # an HTTP error escapes: a violation

        @pytest.mark.mcp_explore(kinds=["tool_error"], own_asserts="must_hold")
        @pytest.mark.mcp_sidecar(era="stateless")
        def test_must_hold(mcp_sidecar):
            out = call(mcp_sidecar, "echo", {"text": "hi"})
            assert not out.get("isError")

        KEEP = []

        @pytest.mark.mcp_explore(kinds=["tool_error"])
        @pytest.mark.mcp_sidecar(era="stateless")
        def test_leaks(mcp_sidecar):
            client = httpx.Client()  # kept open on the failure path: a connection left behind
            out = client.post(mcp_sidecar.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}}},
                headers={"Accept": "application/json, text/event-stream",
                         "MCP-Protocol-Version": "2026-07-28"}).json()
            if out["result"].get("isError"):
                KEEP.append(client)
            else:
                client.close()

        @pytest.mark.mcp_explore(kinds=["status"])
        @pytest.mark.mcp_sidecar(era="stateless")
        def test_clean_fails(mcp_sidecar):
            assert False, "broken already"
        """
    )
    result = _run(pytester, "-q", "-rfEsx", "--junitxml=j.xml", "--mcpfaults-report=r.json")
    out = result.stdout.str()
    # JUnit's properties say what the JSON report says of each run: its violations, explore's too
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    json_says = {t["nodeid"]: ",".join(f"{v['kind']}:{v['name']}" for v in t["violations"]) for t in tests}
    junit_says = {
        f"{case.get('classname')}.py::{case.get('name')}": ",".join(
            p.get("value") for p in case.iter("property") if p.get("name") == "mcpfaults.violations"
        )
        for case in ElementTree.parse(pytester.path / "j.xml").iter("testcase")
    }
    assert {n: junit_says[n] for n in json_says} == json_says
    assert json_says["test_oracles.py::test_leaks[explore:tool_error-at-tool:echo[1]]"] == "explore:left_open"
    assert "FAILED test_oracles.py::test_escapes[explore:status-at-tool:echo[1]]" in out
    assert "exception:HTTPStatusError" in out
    assert "FAILED test_oracles.py::test_must_hold[explore:tool_error-at-tool:echo[1]]" in out
    assert "own_assert" in out
    assert "ERROR test_oracles.py::test_leaks[explore:tool_error-at-tool:echo[1]]" in out
    assert "the harness left connections open" in out
    assert "the clean run did not pass (AssertionError: broken already" in out
    assert "test_clean_fails[explore:status" not in out  # not explored
    assert '@pytest.mark.mcp_sidecar(faults=["status@tool:echo[nth=1]"])' in out


BAD = {
    "test_depth": (
        "depth=3",
        "test_depth: @pytest.mark.mcp_explore: depth must be 1 (one fault per run) or 2",
    ),
    "test_kind": ('kinds=["explode"]', "kinds: unknown fault kind 'explode'; valid kinds: die, freeze"),
    "test_unknown": ("budget=3", "unknown option 'budget'; valid options: kinds, exclude, steps, depth"),
    "test_own": ('own_asserts="maybe"', "own_asserts must be 'behaviour' (the test's own failed asserts"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_options_are_collection_errors_naming_them(pytester: pytest.Pytester, name: str) -> None:
    option, message = BAD[name]
    pytester.makepyfile(
        **{
            name: f"""
            import pytest

            @pytest.mark.mcp_explore({option})
            def {name}(mcp_sidecar):
                pass
            """
        }
    )
    out = _run(pytester, "-q").stdout.str()
    assert message in out


def test_a_marker_on_a_test_without_a_sidecar_and_a_bad_ini_are_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_nothing="""
        import pytest

        @pytest.mark.mcp_explore()
        def test_nothing():
            pass
        """
    )
    out = _run(pytester, "-q").stdout.str()
    assert "test_nothing: @pytest.mark.mcp_explore: the test uses no sidecar fixture" in out
    bad_ini = _run(pytester, "-q", "-o", "mcpfaults_explore=max_runs=0")
    assert bad_ini.ret == pytest.ExitCode.USAGE_ERROR
    err = bad_ini.stderr.str()
    assert "ini option mcpfaults_explore = 'max_runs=0': max_runs must be a positive number" in err


RETRY = """
import httpx, pytest
from explore_harness import call

@pytest.mark.mcp_explore(kinds=["status", "hang"], depth=2)
@pytest.mark.mcp_sidecar(era="stateless", patience=1.5)
def test_retry(mcp_sidecar):
    try:
        call(mcp_sidecar, "echo", {"text": "hi"}, timeout=0.3)
    except (httpx.HTTPError, RuntimeError):
        try:
            call(mcp_sidecar, "echo", {"text": "hi"}, timeout=None)  # the retry forgot its timeout
        except (httpx.HTTPError, RuntimeError):
            pass
"""


def test_depth_two_finds_a_bug_on_the_path_a_first_fault_opened(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_retry=RETRY)
    result = _run(pytester, "-q", "-rfE", "--mcpfaults-report", "report.json")
    out = result.stdout.str()
    # one fault anywhere is survived; a hang at the retry (echo#2, reached only after a first fault)
    # is waited out past the patience budget
    result.assert_outcomes(passed=4, failed=1)
    assert "FAILED test_retry.py::test_retry[explore:hang-at-tool:echo[1]+hang-at-tool:echo[2]]" in out
    # status@echo#1 looked to the client like hang@echo#1 (no exception, the same journal): its pairs
    # are pruned; the first fault alone is survived
    assert "status-at-tool:echo[1]+" not in out
    line = '@pytest.mark.mcp_sidecar(faults=["hang@tool:echo[nth=1]", "hang@tool:echo[nth=2]"])'
    assert line in out
    assert "1 steps × 2 kinds → 6 runs (where the kind applies), 2 pruned, 0 over budget; 4 ran" in out
    data = json.loads(Path(pytester.path, "report.json").read_text())
    [entry] = data["explore"]
    assert entry["nodeid"] == "test_retry.py::test_retry"
    assert [v["plan"] for v in entry["violations"]] == [line]
    assert entry["verdicts"]["violation"] == 1
    assert [p["run"] for p in entry["pruned"]] == [
        "explore:status-at-tool:echo[1]+hang-at-tool:echo[2]",
        "explore:status-at-tool:echo[1]+status-at-tool:echo[2]",
    ]
    assert (
        "whose outcome (exception and journal) was that of explore:hang-at-tool:echo[1]"
        in entry["pruned"][0]["why"]
    )


def test_a_shard_on_a_fresh_runner_runs_the_pairs_of_its_first_runs(pytester: pytest.Pytester) -> None:
    """A pair is planned from its first run's observation, which only that run's shard has: it is dealt
    with its first run (with pairs dealt by their own id, three fresh shards ran neither pair)."""
    from pytest_mcpfaults.explore.shard import shard_of

    pytester.makepyfile(explore_harness=HARNESS, test_retry=RETRY)
    k = shard_of("test_retry.py::test_retry::explore:hang-at-tool:echo[1]", 3)
    result = _run(pytester, "-q", "-rfE", "-p", "no:cacheprovider", f"--mcpfaults-shard={k}/3")
    assert "FAILED test_retry.py::test_retry[explore:hang-at-tool:echo[1]+hang-at-tool:echo[2]]" in (
        result.stdout.str()
    )


def test_depth_one_alone_misses_that_bug(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_retry=RETRY.replace("depth=2", "depth=1"))
    result = _run(pytester, "-q")
    result.assert_outcomes(passed=3)  # the clean run and one fault at each step: all survived


def test_the_cached_campaign_runs_on_xdist_workers_with_the_same_findings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    args = (
        "--mcpfaults-explore",
        "-q",
        "-p",
        "mcpfaults",
        "-o",
        "mcpfaults_explore=kinds=status,die,tool_error",
    )
    recording = pytester.runpytest_subprocess(*args, "-p", "xdist", "-n", "2", timeout=120)
    recording.assert_outcomes(passed=2)  # under xdist a first run records the footprint only
    assert "the campaign did not run in this session (under xdist a first run only records" in (
        recording.stdout.str()
    )
    first = pytester.runpytest_subprocess(*args, "-rfx", timeout=120)
    spread = pytester.runpytest_subprocess(*args, "-rfx", "-p", "xdist", "-n", "2", timeout=120)

    def found(result: pytest.RunResult) -> list[str]:
        return sorted(
            line.split(" - ")[0] for line in result.outlines if line.startswith(("FAILED", "XFAIL"))
        )

    assert found(first) == found(spread) and len(found(first)) == 3
    spread.assert_outcomes(failed=2, passed=5, xfailed=1)  # the whole campaign, collected up front
    assert "6 ran: 2 violations, 1 behaviour under fault" in spread.stdout.str()  # the controller's summary
    # --lf reruns exactly the violations, from the cache
    last = pytester.runpytest_subprocess(*args, "--lf", timeout=120)
    last.assert_outcomes(failed=2)
    assert "explore:status-at-tool:echo[1]" in last.stdout.str()


STDIO = """
import asyncio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError


async def run_harness(server):
    params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
    async with Client(params, mode="legacy", read_timeout_seconds=2) as client:
        try:
            result = await client.call_tool("echo", {"text": "hello"})
        except MCPError as exc:
            return f"failed: {exc}"
        return result.content[0].text


@pytest.mark.mcp_explore(kinds=["jsonrpc_error", "tool_error", "die"])
@pytest.mark.mcp_stdio(patience=3.0)
def test_stdio(mcp_stdio_server):
    assert asyncio.run(run_harness(mcp_stdio_server)) == "hello"
"""


def test_the_same_campaign_over_stdio(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_explore_over_stdio=STDIO)
    result = _run(pytester, "-q", "-rfEx", "-p", "no:cacheprovider")
    out = result.stdout.str()
    # the stdio child's footprint: initialize, the initialized notification, the tool call (the SDK
    # sends no tools/list first over stdio); http-only kinds do not apply, stdio kinds do
    assert "test_stdio[explore:jsonrpc_error-at-initialize[1]]" in out
    assert (
        "XFAIL test_explore_over_stdio.py::test_stdio[explore:tool_error-at-tool:echo[1]] - "
        "behaviour under fault" in out
    )
    assert (
        "XFAIL test_explore_over_stdio.py::test_stdio[explore:jsonrpc_error-at-tool:echo[1]] - "
        "behaviour under fault" in out
    )
    assert "notifications/initialized#1" in out
    # a failed initialize escapes the harness (the SDK raises before the call it guards)
    assert "FAILED test_explore_over_stdio.py::test_stdio[explore:die-at-initialize[1]]" in out
    assert '@pytest.mark.mcp_stdio(faults=["die@initialize[nth=1]"])' in out


PROXIED = """
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError


@pytest.mark.mcp_explore(kinds=["die", "tool_error", "status"], steps=["tool:*"])
async def test_add(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy", read_timeout_seconds=2) as client:
        try:
            result = (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text
        except MCPError:
            result = None
    assert result == "3"
"""


def test_the_same_campaign_in_proxy_mode_in_front_of_the_sdk_server(pytester: pytest.Pytester) -> None:
    tests = Path(__file__).resolve().parent
    for name in ("sdk_upstream.py", "proxied_upstream.py"):
        (pytester.path / name).write_text((tests / name).read_text())
    pytester.makepyfile(test_proxied=PROXIED)
    pytester.syspathinsert()  # -p proxied_upstream, in this process
    result = pytester.runpytest(
        "-p",
        "mcpfaults",
        "-p",
        "proxied_upstream",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        "-q",
        "-rfx",
    )
    out = result.stdout.str()
    # every run really went through the SDK server (its add ran for the clean run and each survived fault)
    assert "proxied upstream served: add x" in out
    for kind in ("tool_error", "status"):
        assert f"test_proxied.py::test_add[explore:{kind}-at-tool:add[1]] - behaviour under fault" in out
    # the sidecar dying at the call: the SDK client's exit (its DELETE) raises out of the test
    assert "FAILED test_proxied.py::test_add[explore:die-at-tool:add[1]]" in out
    assert "explore:die-at-tool:add[1]: exception:ExceptionGroup" in out
    assert "6 steps × 3 kinds → 3 runs (where the kind applies)" in out  # steps=["tool:*"] selects one


def test_a_written_fault_scenario_is_not_explored_unless_marked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_written="""
        import pytest

        @pytest.mark.mcp_sidecar(faults=["die@tool:echo"])
        def test_written(mcp_sidecar):
            pass

        @pytest.mark.mcpfaults_matrix(kinds=["die"])
        def test_matrix(mcp_sidecar):
            pass

        @pytest.mark.mcp_explore(kinds=["status"])
        @pytest.mark.mcp_sidecar(faults=["delay(seconds=0)"])
        def test_marked(mcp_sidecar):
            assert [str(f) for f in mcp_sidecar.plan][-1] == "delay(seconds=0)"  # kept after explore's
        """
    )
    ids = _ids(_run(pytester, "--mcpfaults-explore", "--collect-only", "-q"))
    assert ids == ["test_matrix[die@tool:delete_session]", "test_marked[explore:clean]"]


FLIP = """
import pytest
from opentelemetry import trace
from explore_harness import call

tracer = trace.get_tracer("harness")


@pytest.mark.mcp_explore(kinds=["status", "delay"], steps=["tool:delete_session#*"])
@pytest.mark.mcp_sidecar(era="stateless")
def test_flip(mcp_sidecar, mcp_spans):
    with tracer.start_as_current_span("Agent.Session") as session:
        call(mcp_sidecar, "echo", {"text": "x"})
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                call(mcp_sidecar, "delete_session", {"session_id": "s-1"})
        except Exception as exc:  # the incident's bug: the cleanup's failure flips the session
            session.set_status(trace.Status(trace.StatusCode.ERROR, f"cleanup failed: {exc}"))
"""


def test_the_html_page_shows_the_grid_and_each_violations_timeline(pytester: pytest.Pytester) -> None:
    from html.parser import HTMLParser

    pytester.makepyfile(explore_harness=HARNESS, test_flip=FLIP)
    result = _run(pytester, "-q", "--mcpfaults-html", "out/explore.html")
    result.assert_outcomes(passed=2, failed=1)
    assert "mcpfaults explore page: " in result.stdout.str()
    page = (pytester.path / "out" / "explore.html").read_text()

    class Seen(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, dict[str, str | None]]] = []
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append((tag, dict(attrs)))

        def handle_data(self, data: str) -> None:
            self.text.append(data)

    seen = Seen()
    seen.feed(page)
    cells = [a for t, a in seen.tags if t == "td" and "cell" in (a.get("class") or "")]
    by_run = {str(a["title"]).split(":")[0] + ":" + str(a["title"]).split(":")[1]: a for a in cells}
    assert "violation" in (by_run["explore:status-at-tool"]["class"] or "")
    assert "ok" in (by_run["explore:delay-at-tool"]["class"] or "")
    bars = [a for t, a in seen.tags if t == "div" and "bar" in (a.get("class") or "").split()]
    assert {"ERROR"} <= {c for a in bars for c in (a.get("class") or "").split()}
    text = " ".join(seen.text)
    assert "Agent.Session" in text and "MCP.DeleteSession" in text
    assert [a for t, a in seen.tags if t == "div" and a.get("class") == "fault"]  # the fault's moment
    assert "status@tool:delete_session[nth=1]" in text
    assert [a for t, a in seen.tags if t == "tr" and a.get("class") == "faulted"]  # its journal row
    assert "POST tools/call delete_session" in text
    # self-contained: nothing to fetch
    assert not [a for t, a in seen.tags if t in ("script", "link", "img") or "src" in a]


def test_the_baseline_gates_findings_not_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    opts = ("--mcpfaults-explore", "-q", "-rfx", "-o", "mcpfaults_explore=kinds=status,die,tool_error")
    first = _run(pytester, *opts, "--mcpfaults-report", "base.json")
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # two violations: a failed echo escapes the test
    keys = [f["key"] for f in json.loads((pytester.path / "base.json").read_text())["findings"]]
    assert keys == [
        "exception:ReadError at explore_harness.py in call",
        "exception:HTTPStatusError at explore_harness.py in call",
    ]
    # a second test reaching the same bug gains the known findings runs: nothing new
    pytester.makepyfile(test_more=SIMPLE.replace("def test_flow", "def test_more"))
    known = _run(pytester, *opts, "--mcpfaults-baseline", "base.json", "--mcpfaults-report", "again.json")
    assert known.ret == pytest.ExitCode.OK, known.stdout.str()[-3000:]
    out = known.stdout.str()
    known_line = "test_more.py::test_more[explore:die-at-tool:echo[1]] - known finding (in the baseline)"
    assert f"XFAIL {known_line}" in out
    assert "no new finding (2 known, 0 fixed, 0 unstable)" in out
    again = json.loads((pytester.path / "again.json").read_text())
    assert [len(f["runs"]) for f in again["findings"]] == [2, 2]
    assert again["findings_gate"] == {"new": [], "unstable": [], "known": keys, "fixed": [], "failed": False}
    # -k (--lf, --deselect, a shard) leaves the die runs out: their finding was not looked for, not fixed
    some = _run(pytester, *opts, "-k", "status", "--mcpfaults-baseline", "base.json")
    assert "no new finding (1 known, 0 fixed, 0 unstable)" in some.stdout.str(), some.stdout.str()[-3000:]
    # a new bug is a new finding: the gate fails on it
    pytester.makepyfile(
        test_more=SIMPLE.replace("def test_flow", "def test_more").replace(
            'assert out["content"][0]["text"] == "hi"',
            'if out["content"][0]["text"] != "hi":\n            raise ValueError("tool error read as text")',
        )
    )
    new = _run(pytester, *opts, "--mcpfaults-baseline", "base.json")
    assert new.ret == pytest.ExitCode.TESTS_FAILED
    assert "mcpfaults explore gate FAILED: 1 new finding(s)" in new.stdout.str()
    assert "  new: ValueError escapes the harness from test_more(): 1 run" in new.stdout.str()
    # the harness is fixed: those findings are gone, and the gate says so
    pytester.makepyfile(test_more="")
    pytester.makepyfile(
        test_flow=SIMPLE.replace(
            'out = call(mcp_sidecar, "echo", {"text": "hi"})', 'out = {"content": [{"text": "hi"}]}'
        )
    )
    fixed = _run(pytester, *opts, "--mcpfaults-baseline", "base.json")
    assert "no new finding (0 known, 2 fixed, 0 unstable)" in fixed.stdout.str()
    assert (
        "  fixed (in the baseline, no longer found): ReadError escapes the harness from call(): 1 run "
        "(exception:ReadError at explore_harness.py in call)" in fixed.stdout.str()
    )


def test_raises_names_the_harness_own_failure_modes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(explore_harness=HARNESS, test_flow=SIMPLE)
    opts = ("--mcpfaults-explore", "-q", "-rfx", "-k", "explore:clean or echo")
    result = _run(pytester, *opts, "-o", "mcpfaults_explore=kinds=status,die raises=HTTPStatusError")
    out = result.stdout.str()
    # the 503 raises httpx.HTTPStatusError, named: behaviour; the reset raises httpx.ReadError, not named
    assert (
        "XFAIL test_flow.py::test_flow[explore:status-at-tool:echo[1]] - "
        "behaviour under fault: HTTPStatusError" in out
    )
    assert "FAILED test_flow.py::test_flow[explore:die-at-tool:echo[1]]" in out
    # matched along the class hierarchy: httpx.HTTPError covers both
    both = _run(pytester, *opts, "-o", "mcpfaults_explore=kinds=status,die raises=HTTPError")
    both.assert_outcomes(passed=1, xfailed=2, deselected=3)  # test_no_sidecar and the delete runs


def test_the_pages_quoted_report_is_what_its_example_prints(pytester: pytest.Pytester) -> None:
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "explore.md").read_text()
    quoted = page.split("Its report:\n\n```text\n")[1].split("```")[0].splitlines()
    example = root / "docs" / "examples" / "explore_test.py"
    (pytester.path / "explore_test.py").write_text(example.read_text())
    result = pytester.runpytest(  # in-process
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", "explore_test.py", "-q",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    quote = "\n".join(line.replace("docs/examples/", "") for line in quoted)
    assert_quoted_lines_occur(quote, result.stdout.lines, "docs/explore.md")


FLAKY_FIRST_ATTEMPT = """
import pathlib

import httpx
import pytest


@pytest.mark.mcp_explore(kinds=["status"])
@pytest.mark.mcp_sidecar(era="stateless", patience=2.0)
def test_flow(mcp_sidecar, request):
    tried = pathlib.Path(__file__).with_name("tried-" + request.node.name)
    first = not tried.exists()
    tried.write_text("yes")
    httpx.get(mcp_sidecar.health_url, timeout=1)
    if first:
        raise KeyError("flaky on its first attempt")
"""


def test_a_clean_run_that_passes_on_its_rerun_has_its_campaign_explored(pytester: pytest.Pytester) -> None:
    """Under pytest-rerunfailures the clean run's last attempt stands, as its outcome does: a first
    attempt that failed does not leave the campaign "not explored" once the rerun passed."""
    pytester.makepyfile(test_flaky=FLAKY_FIRST_ATTEMPT)
    _run(pytester).assert_outcomes(failed=1)  # the first session records the footprint (no reruns)
    for tried in pytester.path.glob("tried-*"):
        tried.unlink()
    result = _run(pytester, "--reruns=1", "--mcpfaults-report=r.json")
    assert result.parseoutcomes() == {"passed": 2, "rerun": 2}, result.stdout.str()
    [entry] = json.loads((pytester.path / "r.json").read_text())["explore"]
    assert (entry["clean"], entry["verdicts"]["ok"], entry["verdicts"]["not explored"]) == ("ok", 1, 0)
