"""Patience verdicts end to end, through pytester with ``-p mcpfaults`` the way users load the plugin.

Each scenario runs twice: a patient client (no timeout of its own) fails in about the budget with the
verdict, and a bounded client passes. Budgets are 0.5-1.5 s: nothing here waits for a client's 300 s.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from docs_quotes import assert_quote_is_output, masked, quoted_block

ROOT = Path(__file__).resolve().parent.parent
# the child run is bounded at 240 s (_run_in_a_process); about 20 s alone, a test outlasts the suite's
# 120 s when six busy processes share the cores with it
pytestmark = pytest.mark.timeout(300)
HANGS = ROOT / "docs" / "examples" / "hangs_test.py"
SERVER_REQUESTS = ROOT / "docs" / "examples" / "server_requests_test.py"

# Prints each test's record so the outer test can read what the CI report reads.
RECORD_CONFTEST = """
import json
import pytest
from pytest_mcpfaults._pytest.records import record_for

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown":
        data = {"nodeid": item.nodeid, "violations": record_for(item).patience_violations}
        print("RECORD " + json.dumps(data))
    return report
"""


def _records(result: pytest.RunResult) -> dict[str, list[dict[str, object]]]:
    out = {}
    for line in result.outlines:
        if "RECORD {" in line:  # may follow a progress dot on the same line
            data = json.loads(line[line.index("RECORD {") + len("RECORD ") :])
            out[data["nodeid"].split("::")[-1]] = data["violations"]
    return out


#: How every run here loads the plugin and its async settings (``-s``: the records are printed).
_ARGS = ("-p", "mcpfaults", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
         "-o", "asyncio_default_fixture_loop_scope=function", "-s")  # fmt: skip


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The plugin's run, in this process (a child pytest cost about 1 s of CPU a run to start and
    import the plugin, the SDK and the example; the interrupt works in-process: the test runs on the
    main thread, xdist's workers' too). Modules a test imported itself are not rewritten again."""
    return pytester.runpytest(*_ARGS, "-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def _run_in_a_process(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The plugin's run in a child pytest, as a user runs it: where the verdict's "blocked at" frames
    are compared with a page's quote (in-process, the outer test's own frames are the harness's too)."""
    return pytester.runpytest_subprocess(*_ARGS, *args, timeout=240)


# -- mcp 2.x, session era, sidecar frozen before the client closes -------------------------------------


def test_docs_example_frozen_delete_fails_patient_client_and_passes_bounded(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(RECORD_CONFTEST)
    path = pytester.path / "test_hangs.py"
    path.write_text(HANGS.read_text())
    result = _run_in_a_process(pytester, "--runxfail", str(path))
    result.assert_outcomes(passed=5, failed=4)
    result.stdout.fnmatch_lines(
        [
            "*_ test_patient_client_waits_out_a_frozen_delete _*",
            "PatienceError: 1 held request outlived the patience budget at http://127.0.0.1:*:",
            "1. the client waited 1 s (the whole budget) on a frozen `DELETE /mcp` (session era), never "
            "answered (no status line was sent), and never closed the connection; without the budget it "
            "would have waited as long as its own read timeout allows (if it has one, it is longer than 1 s)",
            "   held by `freeze`; when the 1 s budget (the sidecar's patience) ran out the sidecar aborted "
            "connection #* (RST); the client never closed it",
            "   client seen: User-Agent python-httpx2/*, MCP-Protocol-Version *",
            "   hint: if this is the mcp 2.x SDK (it sends this User-Agent): it sends this DELETE when the "
            "client closes*",
            "   journal of connection #* (127.0.0.1:*):",
            "*POST tools/call echo*status=200*",
            "*DELETE /mcp*status=None*hold=patience waited=1.*s",
            "Bound the client*say so: @pytest.mark.mcp_expect_hang*",
            "FAILED test_hangs.py::test_patient_client_waits_out_a_frozen_delete*",
        ]
    )
    # not a traceback through the plugin's hooks
    result.stdout.no_fnmatch_line("*_pytest/sidecar.py*")
    records = _records(result)
    (patient,) = records["test_patient_client_waits_out_a_frozen_delete"]
    assert patient["request"] == "DELETE /mcp"
    assert patient["era"] == "session"
    assert patient["fault"] == "freeze"
    assert patient["budget"] == 1.0
    assert patient["expected"] is False
    assert patient["client_closed"] is False
    assert records["test_bounded_client_gives_up_on_a_frozen_delete"] == []
    (expected,) = records["test_waiting_it_out_is_what_we_pin_here"]
    assert expected["expected"] is True
    assert expected["budget"] == 0.5
    assert records["test_probe_releases_a_stalled_health_body"] == []
    (wedged,) = records["test_wedged_client_after_die"]
    assert wedged["kind"] == "no_progress"
    assert wedged["fault"] == "die@tool:delete_session"
    assert wedged["request"] == "POST tools/call delete_session"
    # the same run: the docs example runs once here
    _assert_docs_quote_is_the_real_output(result, "PatienceError: 1 held", "Bound the client")
    _assert_docs_quote_is_the_real_output(
        result, "PatienceError: the test made no", "The test was interrupted"
    )
    (idle,) = records["test_harness_waiting_on_itself"]
    assert (idle["kind"], idle["fault"], idle["request"]) == ("idle", None, "POST initialize")
    assert records["test_a_ttl_expires_between_two_calls"] == []
    _assert_docs_quote_is_the_real_output(
        result,
        "PatienceError: the test made no",
        "The test was interrupted",
        test="test_harness_waiting_on_itself",
    )
    # a blackhole: the connection went silent under the reused pooled connection's call
    (silent,) = records["test_pooled_connection_gone_silent"]
    assert (silent["request"], silent["fault"], silent["budget"]) == (
        "POST tools/call echo",
        "blackhole(idle=0.2)@tools/call",
        1.0,
    )
    assert records["test_bounded_client_calls_again_on_a_fresh_connection"] == []
    _assert_docs_quote_is_the_real_output(
        result,
        "PatienceError: 1 held",
        "Bound the client",
        test="test_pooled_connection_gone_silent",
        section="## A connection that goes silent",
    )


def _assert_docs_quote_is_the_real_output(
    result: pytest.RunResult,
    first: str,
    last: str,
    page_name: str = "hangs.md",
    test: str = "",
    section: str = "",
) -> None:
    """docs/hangs.md (or ``page_name``) quotes the verdicts of the docs examples (from ``first`` to the
    line starting ``last``); each must match what runs, but for what no quote can pin (ports, times,
    connection numbers, the client's release: tests/docs_quotes.py); with ``test``, the verdict of that
    test, quoted in the page's block whose first line is that verdict's (``section``: the first such
    block after that heading)."""
    out = result.stdout.lines
    header = next(
        (i for i, line in enumerate(out) if test and f" {test} " in line and line.startswith("_")), 0
    )
    start = next(i for i in range(header, len(out)) if out[i].startswith(first))
    end = next(i for i in range(start, len(out)) if out[i].startswith(last))
    page = (ROOT / "docs" / page_name).read_text()
    page = page[page.index(section) :] if section else page
    quoted = quoted_block(page, first, last)
    while quoted is not None and masked(quoted.splitlines()[0]) != masked(out[start]):  # the next one
        page = page[page.index(quoted) + len(quoted) :]
        quoted = quoted_block(page, first, last)
    assert quoted is not None, f"docs/{page_name} must quote the verdict {first!r} in a ```text block"
    assert_quote_is_output(quoted, "\n".join(out[start : end + 1]), f"docs/{page_name}")


# -- mcp 2.x, a harness that never answers the tool's elicitation/create ------------------------------


def test_docs_example_a_harness_that_never_answers_fails_in_the_budget_with_the_headline(
    pytester: pytest.Pytester,
) -> None:
    """The harness with an elicitation callback that never returns fails in about the budget (1 s) plus
    the interrupt's grace, with the headline naming the server's request; the ones that answer (or
    refuse at once) pass."""
    pytester.makeconftest(RECORD_CONFTEST)
    path = pytester.path / "test_server_requests_doc.py"
    path.write_text(SERVER_REQUESTS.read_text())
    result = _run(pytester, "--runxfail", "--durations=0", "--durations-min=0", str(path))
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_harness_that_never_answers _*",
            "PatienceError: 1 held request outlived the patience budget at http://127.0.0.1:*:",
            "1. the client never answered the server's `elicitation/create` (sent at *.* s during tools/call "
            "ask_user): it waited 1 s (the whole budget) with the tool call's answer stream open (* bytes "
            "sent) and never closed it*",
            "   no fault: the tool awaited the client's answer to its `elicitation/create`; when the 1 s "
            "budget (the sidecar's patience) ran out the sidecar aborted connection #* (RST)*",
            "   hint: the harness received the server's `elicitation/create` and never answered it*",
            "FAILED test_server_requests_doc.py::test_harness_that_never_answers*",
        ]
    )
    (took,) = [
        float(line.split("s", 1)[0])
        for line in result.outlines
        if re.match(r"[\d.]+s call .*::test_harness_that_never_answers$", line)
    ]
    # bounded, not fast: the budget and the interrupt's grace (2 s), not the client's 300 s; the room
    # between is for a loaded machine (six busy processes beside the suite)
    assert took < 1.0 + 1.0 + 13.0
    records = _records(result)
    (never,) = records["test_harness_that_never_answers"]
    assert (never["request"], never["fault"], never["budget"]) == (
        "POST tools/call ask_user",
        "elicitation/create",
        1.0,
    )
    assert str(never["message"]).startswith("the client never answered the server's `elicitation/create`")
    assert all(records[name] == [] for name in records if name != "test_harness_that_never_answers")
    _assert_docs_quote_is_the_real_output(
        result, "PatienceError: 1 held", "Bound the client", "server-requests.md"
    )


# -- mcp 2.x, a stalled tools/call body ----------------------------------------------------------------


def test_stalled_tool_call_fails_patient_client_and_passes_bounded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from mcp.client import Client
        from mcp.shared.exceptions import MCPError
        from pytest_mcpfaults import Stall

        STALL = [Stall(after_bytes=10, when="tools/call")]

        @pytest.mark.mcp_sidecar(era="session", patience=1.0, faults=STALL)
        async def test_patient(mcp_sidecar):
            async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
                await client.call_tool("echo", {"text": "hi"})

        @pytest.mark.mcp_sidecar(era="session", patience=1.5, faults=STALL)
        async def test_bounded(mcp_sidecar):
            async with Client(mcp_sidecar.mcp_url, mode="legacy", read_timeout_seconds=0.3) as client:
                with pytest.raises(MCPError, match="timed out"):
                    await client.call_tool("echo", {"text": "hi"})
            mcp_sidecar.assert_client_gave_up(within=1.2, target="tools/call")
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_patient _*",
            "PatienceError: 1 held request outlived the patience budget*",
            "1. the client waited 1 s (the whole budget) on the response to `POST /mcp` (tools/call echo) "
            "(session era), which stalled after the status line (200) and 10 bytes of body, and never "
            "released the connection; without the budget it would have waited as long as its own read "
            "timeout allows (if it has one, it is longer than 1 s)",
            "   held by `stall(after_bytes=10)@tools/call`; when the 1 s budget*",
            "   client seen: User-Agent python-httpx2/*",
            "   hint: if this is the mcp 2.x SDK (it sends this User-Agent): it waits for this reply until "
            "Client(read_timeout_seconds=...) or call_tool(..., read_timeout_seconds=...) runs out, else its "
            "httpx2 read timeout (300 s by default); it did not give up within 1 s, so any such timeout is "
            "longer than that: set one below the budget",
            "*POST tools/call echo*fault=stall(after_bytes=10)@tools/call*hold=patience*",
            # the client's own failure after the RST is kept, below the verdict
            "The call phase also failed (often the client reacting to the abort):",
            "*ExceptionGroup*",
        ]
    )


# -- httpx, a hung /health -------------------------------------------------------------------------------


def test_hung_health_fails_httpx_without_timeout_and_passes_with_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx, pytest
        from pytest_mcpfaults import Hang

        @pytest.mark.mcp_sidecar(patience=0.5, faults=[Hang(when="health")])
        def test_no_timeout(mcp_sidecar):
            try:
                httpx.get(mcp_sidecar.health_url, timeout=None)
            except httpx.TransportError:
                pass  # a harness that swallows probe errors: only the verdict catches the wait

        @pytest.mark.mcp_sidecar(patience=1.5, faults=[Hang(when="health")])
        def test_timeout(mcp_sidecar):
            with pytest.raises(httpx.ReadTimeout):
                httpx.get(mcp_sidecar.health_url, timeout=0.3)
            mcp_sidecar.assert_client_gave_up(within=1.2, target="health")
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_no_timeout _*",
            "1. the client waited 0.5 s (the whole budget) on a hung `GET /health`, never answered (no "
            "status line was sent), and never closed the connection*",
            "   hint: the client did not give up within 0.5 s: if it has a read timeout, it is longer than "
            "that; give this request a timeout below the budget (httpx's default timeout, 5 s, is longer "
            "than this budget)",
            "*GET /health*fault=hang@health*hold=patience*",
            "FAILED test_hung_health_fails_httpx_without_timeout_and_passes_with_one.py::test_no_timeout*",
        ]
    )
    result.stdout.no_fnmatch_line("*also failed*")  # the test itself swallowed the error


# -- tests that expect the hang: reported, not failed --------------------------------------------------


def test_expected_hangs_pass_and_stay_in_the_record_and_report(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORD_CONFTEST)
    pytester.makepyfile(
        """
        import httpx, pytest
        from pytest_mcpfaults import Hang

        def probe(sc):
            with pytest.raises(httpx.TransportError):
                httpx.get(sc.health_url, timeout=None)

        @pytest.mark.mcp_expect_hang
        @pytest.mark.mcp_sidecar(patience=0.5, faults=[Hang(when="health")])
        def test_marker(mcp_sidecar):
            probe(mcp_sidecar)

        @pytest.mark.mcp_sidecar(patience=0.5, expect_hang=True, faults=[Hang(when="health")])
        def test_sidecar_kwarg(mcp_sidecar):
            probe(mcp_sidecar)

        @pytest.mark.mcp_sidecar(faults=[Hang(when="health", patience=0.5, expect_hang=True)])
        def test_fault_option(mcp_sidecar):
            probe(mcp_sidecar)

        def test_factory_with_marker_default(mcp_sidecar_factory):
            with mcp_sidecar_factory(patience=0.5, faults=["hang(expect_hang=true)@health"]) as sc:
                probe(sc)

        @pytest.mark.mcp_sidecar(patience=0.5, faults=[Hang(when="health")])
        def test_unexpected(mcp_sidecar):
            probe(mcp_sidecar)
        """
    )
    report = pytester.path / "report.json"
    result = _run(pytester, "-rP", f"--mcpfaults-report={report}")
    result.assert_outcomes(passed=4, failed=1)
    records = _records(result)
    for name in (
        "test_marker",
        "test_sidecar_kwarg",
        "test_fault_option",
        "test_factory_with_marker_default",
    ):
        (v,) = records[name]
        assert v["expected"] is True, name
        assert v["request"] == "GET /health", name
        assert v["budget"] == 0.5, name
    assert records["test_fault_option"][0]["budget_from"] == "fault"
    assert records["test_marker"][0]["budget_from"] == "sidecar"
    (unexpected,) = records["test_unexpected"]
    assert unexpected["expected"] is False
    # -rP shows the expected violation's verdict with the passing test
    result.stdout.fnmatch_lines(["*mcpfaults patience (expected)*", "*a hung `GET /health`*"])
    data = json.loads(report.read_text())
    tests = {t["nodeid"].split("::")[-1]: t for t in data["tests"]}
    assert tests["test_marker"]["outcome"] == "passed"
    assert tests["test_marker"]["expected_hang"] is True
    assert tests["test_marker"]["violations"] == []
    assert tests["test_marker"]["patience_violations"][0]["expected"] is True
    assert tests["test_unexpected"]["outcome"] == "failed"
    assert [v["kind"] for v in tests["test_unexpected"]["violations"]] == ["patience"]


# -- where the budget comes from -------------------------------------------------------------------------


def test_budget_precedence_fault_over_marker_over_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmcpfaults_patience = 0.5\n")
    pytester.makeconftest(RECORD_CONFTEST)
    pytester.makepyfile(
        """
        import httpx, pytest
        from pytest_mcpfaults import Hang

        def probe(sc):
            with pytest.raises(httpx.TransportError):
                httpx.get(sc.health_url, timeout=None)

        @pytest.mark.mcp_expect_hang
        @pytest.mark.mcp_sidecar(faults=[Hang(when="health")])
        def test_ini(mcp_sidecar):
            assert mcp_sidecar.patience == 0.5
            probe(mcp_sidecar)

        @pytest.mark.mcp_expect_hang
        @pytest.mark.mcp_sidecar(patience=0.7, faults=[Hang(when="health")])
        def test_marker(mcp_sidecar):
            probe(mcp_sidecar)

        @pytest.mark.mcp_expect_hang
        @pytest.mark.mcp_sidecar(patience=1.5, faults=[Hang(when="health", patience=0.6)])
        def test_fault(mcp_sidecar):
            probe(mcp_sidecar)
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=3)
    records = _records(result)
    budgets = {name: (v[0]["budget"], v[0]["budget_from"]) for name, v in records.items()}
    assert budgets == {
        "test_ini": (0.5, "sidecar"),
        "test_marker": (0.7, "sidecar"),
        "test_fault": (0.6, "fault"),
    }


def test_ini_none_means_no_budget(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makeini("[pytest]\nmcpfaults_patience = none\n")
    pytester.makepyfile(
        """
        def test_it(mcp_sidecar):
            assert mcp_sidecar.patience is None
        """
    )
    run_plugin().assert_outcomes(passed=1)


# -- budgets are validated at the earliest moment -----------------------------------------------------


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan"])
def test_bad_ini_budget_is_a_usage_error(pytester: pytest.Pytester, run_plugin, raw: str) -> None:  # type: ignore[no-untyped-def]
    pytester.makeini(f"[pytest]\nmcpfaults_patience = {raw}\n")
    pytester.makepyfile("def test_x(): pass")
    result = run_plugin()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*ini option mcpfaults_patience must be a positive number of seconds or 'none', got {raw!r}*"]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            "mcp_sidecar(patience='x')",
            "*Sidecar: patience must be a positive number of seconds or None, got 'x'*",
        ),
        (
            "mcp_sidecar(patience=0)",
            "*Sidecar: patience must be a positive number of seconds or None, got 0*",
        ),
        (
            "mcp_sidecar(faults=['hang(patience=-1)'])",
            "*Hang: patience must be a finite positive number of seconds*-1*",
        ),
    ],
)
def test_bad_marker_budget_fails_at_collection(
    pytester: pytest.Pytester, run_plugin, marker: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}
        def test_it(mcp_sidecar):
            raise AssertionError("must not run")
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the module's collection failed
    result.stdout.fnmatch_lines(["*ERROR collecting*", "*test_it: @pytest.mark.mcp_sidecar: " + message])


def test_bad_fault_budget_fails_the_module_at_collection(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import pytest
        from pytest_mcpfaults import Hang

        @pytest.mark.mcp_sidecar(faults=[Hang(patience=-1)])
        def test_it(mcp_sidecar):
            raise AssertionError("must not run")
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ValueError: Hang: patience must be a finite positive number of seconds or None, got -1"]
    )


# -- a client closed in a fixture: the hang happens during teardown ------------------------------------


def test_hang_in_fixture_teardown_gets_the_verdict_at_teardown(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORD_CONFTEST)
    pytester.makepyfile(
        """
        import httpx, pytest
        from pytest_mcpfaults import Hang

        @pytest.fixture
        def harness(mcp_sidecar):
            yield mcp_sidecar
            try:  # the harness's shutdown probe, after the test body
                httpx.get(mcp_sidecar.health_url, timeout=None)
            except httpx.TransportError:
                pass

        @pytest.mark.mcp_sidecar(patience=0.5)
        def test_it(harness):
            assert httpx.get(harness.health_url).status_code == 200
            harness.inject(Hang(when="health"))
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_it*",
            "PatienceError: 1 held request outlived the patience budget*",
            "1. the client waited 0.5 s (the whole budget) on a hung `GET /health`, never answered*",
            "*#1 *GET /health*fault=hang@health*hold=patience*",
        ]
    )
    (v,) = _records(result)["test_it"]
    assert v["request"] == "GET /health"
    assert v["expected"] is False


# -- every verdict renders -------------------------------------------------------------------------------

GC_DURING_RENDERING = """
import ast, gc
import httpx, pytest
from pytest_mcpfaults import Hang

class Finalized:
    '''Cyclic garbage whose finalizer parses Python (as CPython 3.11's traceback module does for its
    carets, e.g. when an unclosed client's task logs its exception).'''
    def __init__(self):
        self.me = self
    def __del__(self):
        ast.parse("def f(x):\\n    return [y for y in x if y]\\n" * 5)

@pytest.fixture(autouse=True)
def garbage():
    gc.set_threshold(50, 1, 1)  # collect often: collections then happen while pytest renders
    yield
    for _ in range(2000):  # left behind by this test, as the unclosed clients of a verdict test are
        Finalized()

@pytest.mark.parametrize("n", range(4))
@pytest.mark.mcp_sidecar(patience=0.2, faults=[Hang(when="health")])
def test_verdict(mcp_sidecar, n):
    try:
        httpx.get(mcp_sidecar.health_url, timeout=None)
    except httpx.TransportError:
        pass
"""


def test_several_verdicts_render_in_one_process_with_garbage_collected_while_rendering(
    pytester: pytest.Pytester,
) -> None:
    """Issue 13: on CPython 3.11 the second verdict of a run stopped pytest with ``INTERNALERROR
    SystemError: AST constructor recursion depth mismatch`` (a garbage collection inside pytest's
    ``ast`` parse of the plugin's source ran finalizers that parsed again). This run recreates that
    condition; with the old report hook it stops with the INTERNALERROR at the first verdict here."""
    pytester.makepyfile(GC_DURING_RENDERING)
    result = _run(pytester, "-v")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.assert_outcomes(failed=4)
    for n in range(4):
        result.stdout.fnmatch_lines([f"*_ test_verdict[[]{n}[]] _*", "PatienceError: 1 held request*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
