"""The pytest side of span capture, run the way users load it: ``pytest -p mcpfaults`` via pytester.

Runs that wire the recorder into the process-wide tracer provider use ``runpytest_subprocess``: the
OpenTelemetry global provider can be set only once per process, so in-process runs would leak it into
each other and into this test process. Configuration errors stop the run before anything is wired and
run in-process.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HARNESS = textwrap.dedent(
    '''
    """A tiny harness: one agent session with a run and an MCP session delete."""
    from opentelemetry.trace import Status, StatusCode

    GONE = "Session deletion failed: Service at http://127.0.0.1:59685 is no longer alive"


    class Client:
        def __init__(self, alive):
            self.alive = alive
            self.deletes = 0

        def delete_session(self):
            self.deletes += 1
            if not self.alive:
                raise RuntimeError(GONE)


    def run_buggy(tracer, client):
        with tracer.start_as_current_span("Agent.Session") as session:
            try:
                with tracer.start_as_current_span("Agent.Run"):
                    pass
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    client.delete_session()
            except Exception as exc:
                session.set_status(Status(StatusCode.ERROR, str(exc)))
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    client.alive = True
                    client.delete_session()


    def run_fixed(tracer, client):
        with tracer.start_as_current_span("Agent.Session"):
            with tracer.start_as_current_span("Agent.Run"):
                pass
            with tracer.start_as_current_span("MCP.DeleteSession") as delete:
                try:
                    client.delete_session()
                except RuntimeError as exc:
                    delete.add_event("already_gone", {"error": str(exc)})
    '''
)

# Writes each test's invariant results (from the per-test record) to results.jsonl.
RESULTS_CONFTEST = textwrap.dedent(
    """
    import json, pathlib
    import pytest
    from pytest_mcpfaults._pytest.records import record_for

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(item):
        rec = record_for(item)
        line = {"test": item.name, "invariants": [[r.name, r.ok] for r in rec.invariants]}
        with pathlib.Path(__file__).with_name("results.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\\n")
    """
)


@pytest.fixture(autouse=True)
def _only_this_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs load no installed plugin but ours (``-p mcpfaults``): faster and isolated."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _results(pytester: pytest.Pytester) -> dict[str, list[list[object]]]:
    path = pytester.path / "results.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {d["test"]: d["invariants"] for d in map(json.loads, lines)}


@pytest.fixture
def harness(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(harness=HARNESS)
    pytester.makeconftest(RESULTS_CONFTEST)
    return pytester


ALL_OK = [["cleanup_never_flips", True], ["cleanup_at_most", True], ["all_spans_ended", True]]


# --- the mcp_spans fixture ------------------------------------------------------------------------------


def test_fixture_catches_a_provider_the_harness_creates(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        import pytest
        from opentelemetry.sdk.trace import TracerProvider
        from harness import Client, run_buggy, run_fixed

        def test_fixed(mcp_spans):
            tracer = TracerProvider().get_tracer("app")   # built inside the test: caught
            run_fixed(tracer, Client(alive=False))
            assert mcp_spans.names() == ["Agent.Session", "Agent.Run", "MCP.DeleteSession"]
            mcp_spans.assert_invariants()

        def test_buggy(mcp_spans):
            tracer = TracerProvider().get_tracer("app")
            run_buggy(tracer, Client(alive=False))
            assert [s.name for s in mcp_spans.roots()] == ["Agent.Session"]   # starts empty
            mcp_spans.assert_cleanup_never_flips()
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *SpanInvariantError: 1 span invariant violation:",
            "E *- [[]cleanup_never_flips[]] Agent.Session is ERROR with description 'Session deletion*"
            "(cause: MCP.DeleteSession [[]ERROR: RuntimeError: Session deletion failed*",
            "E *Span tree:",
            "E *Agent.Session [[]ERROR: Session deletion failed: *",
            "E *├── Agent.Run [[]UNSET[]]",
            "E *├── MCP.DeleteSession [[]ERROR: RuntimeError: Session deletion failed*",
            "E *│       ! exception RuntimeError: Session deletion failed*",
            "E *└── MCP.DeleteSession [[]UNSET[]]",
        ]
    )
    assert _results(harness) == {"test_fixed": ALL_OK, "test_buggy": [["cleanup_never_flips", False]]}


def test_fixture_installs_a_global_provider_when_none_is_set(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from harness import Client, run_fixed

        tracer = trace.get_tracer("app")   # a proxy tracer, resolved on first use

        def test_global(mcp_spans):
            assert isinstance(trace.get_tracer_provider(), TracerProvider)
            run_fixed(tracer, Client(alive=True))
            assert mcp_spans.one("Agent.Session").ended
        """
    )
    harness.runpytest_subprocess("-p", "mcpfaults").assert_outcomes(passed=1)


def test_fixture_adds_to_a_global_sdk_provider_set_at_import(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from harness import Client, run_fixed

        PROVIDER = TracerProvider()
        trace.set_tracer_provider(PROVIDER)
        tracer = trace.get_tracer("app")

        def test_global(mcp_spans):
            assert trace.get_tracer_provider() is PROVIDER
            assert mcp_spans.is_attached(PROVIDER)
            run_fixed(tracer, Client(alive=True))
            assert mcp_spans.names() == ["Agent.Session", "Agent.Run", "MCP.DeleteSession"]
        """
    )
    harness.runpytest_subprocess("-p", "mcpfaults").assert_outcomes(passed=1)


def test_what_the_fixture_does_not_catch_and_attach(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        import pytest
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from harness import Client, run_fixed

        EARLY = TracerProvider()   # built at import, never made global

        @pytest.fixture
        def early_tracer():
            return TracerProvider().get_tracer("fixture")   # built before mcp_spans starts

        def test_early_provider_is_missed(early_tracer, mcp_spans):
            run_fixed(EARLY.get_tracer("app"), Client(alive=True))
            run_fixed(early_tracer, Client(alive=True))
            assert mcp_spans.spans() == []

        def test_attach_catches_it(mcp_spans):
            mcp_spans.attach(EARLY)
            run_fixed(EARLY.get_tracer("app"), Client(alive=True))
            assert len(mcp_spans.find("Agent.Session")) == 1

        def test_set_tracer_provider_during_the_test_is_caught(mcp_spans):
            late = TracerProvider.__new__(TracerProvider)   # construction not watched below
            TracerProvider.__init__.__wrapped__(late)
            trace.set_tracer_provider(late)   # refused as global (ours is set), still recorded
            run_fixed(late.get_tracer("app"), Client(alive=True))
            assert len(mcp_spans.find("Agent.Session")) == 1

        def test_watch_ends_with_the_test():
            assert not hasattr(TracerProvider.__init__, "__wrapped__")
        """
    )
    harness.runpytest_subprocess("-p", "mcpfaults").assert_outcomes(passed=4)


def test_fixture_is_listed_with_its_docstring(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "mcpfaults", "--fixtures")
    result.stdout.fnmatch_lines(["mcp_spans -- *", "*Record the OpenTelemetry spans of this test*"])


def test_fixture_uses_the_ini_span_names(harness: pytest.Pytester) -> None:
    harness.makeini(
        """
        [pytest]
        mcpfaults_session_spans =
            Harness.*
        mcpfaults_cleanup_spans =
            mcp.close
            mcp.delete
        """
    )
    harness.makepyfile(
        test_app="""
        from opentelemetry.sdk.trace import TracerProvider

        def test_names(mcp_spans):
            t = TracerProvider().get_tracer("app")
            with t.start_as_current_span("Harness.Episode"):
                with t.start_as_current_span("mcp.close"):
                    pass
                with t.start_as_current_span("mcp.delete"):
                    pass
                with t.start_as_current_span("mcp.delete"):  # a name repeats: a second cleanup run
                    pass
            assert mcp_spans.session_patterns == ("Harness.*",)
            mcp_spans.assert_cleanup_at_most(1)
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Harness.Episode ran cleanup 2 times, at most 1 allowed*"])


# --- the gate --------------------------------------------------------------------------------------------

GATE_TESTS = """
import pytest
from opentelemetry.sdk.trace import TracerProvider
from harness import Client, run_buggy, run_fixed

def test_buggy():
    run_buggy(TracerProvider().get_tracer("app"), Client(alive=False))

def test_fixed():
    run_fixed(TracerProvider().get_tracer("app"), Client(alive=False))

def test_no_spans():
    pass
"""


def test_gate_fails_a_violating_test_and_passes_a_clean_one(harness: pytest.Pytester) -> None:
    harness.makepyfile(test_app=GATE_TESTS)
    result = harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "mcpfaults span gate: on (session spans: Agent.Session; cleanup spans: MCP.DeleteSession)",
            "*_ test_buggy _*",
            "mcpfaults span gate (--mcpfaults-check-spans): 2 span invariant violations:",
            "- [[]cleanup_never_flips[]] Agent.Session is ERROR *cause: MCP.DeleteSession*",
            "- [[]cleanup_at_most[]] Agent.Session ran cleanup 2 times, at most 1 allowed*",
            "Span tree:",
            "Agent.Session [[]ERROR: Session deletion failed*",
            "*FAILED test_app.py::test_buggy*",
        ]
    )
    assert _results(harness) == {
        "test_buggy": [["cleanup_never_flips", False], ["cleanup_at_most", False], ["all_spans_ended", True]],
        "test_fixed": ALL_OK,
        "test_no_spans": [],
    }


HYPOTHESIS_TESTS = """
from hypothesis import given, settings, strategies as st
from opentelemetry.sdk.trace import TracerProvider

tracer = TracerProvider().get_tracer("harness")   # at import, as the issue's reproduction has it

@settings(max_examples=10, database=None, derandomize=True)
@given(steps=st.integers(0, 3))
def test_one_cleanup_per_session(steps):
    with tracer.start_as_current_span("Agent.Session"):
        for _ in range(steps):
            with tracer.start_as_current_span("Agent.Call"):
                pass
        with tracer.start_as_current_span("MCP.DeleteSession"):
            pass

@settings(max_examples=10, database=None, derandomize=True)
@given(steps=st.integers(0, 3))
def test_deletes_twice_when_it_took_three_steps(steps):
    with tracer.start_as_current_span("Agent.Session", attributes={"steps": steps}):
        for _ in range(steps):
            with tracer.start_as_current_span("Agent.Call"):
                pass
        with tracer.start_as_current_span("MCP.DeleteSession", attributes={"attempt": 1}):
            pass
        if steps == 3:
            with tracer.start_as_current_span("MCP.DeleteSession", attributes={"attempt": 2}):
                pass
"""


def test_gate_under_hypothesis_sees_each_example_as_its_own_session(harness: pytest.Pytester) -> None:
    """Hypothesis reseeds ``random`` for every example and the SDK draws span ids from it: the same ids
    repeat across examples. The gate must neither merge the examples' trees (a false cleanup_at_most)
    nor miss a real double delete in one of them."""
    harness.makepyfile(test_app=HYPOTHESIS_TESTS)
    result = harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_deletes_twice_when_it_took_three_steps _*",
            "mcpfaults span gate (--mcpfaults-check-spans): 1 span invariant violation:",
            "- [[]cleanup_at_most[]] Agent.Session ran cleanup 2 times, at most 1 allowed: "
            "MCP.DeleteSession [[]UNSET[]]; MCP.DeleteSession [[]UNSET[]]",
            "Span tree:",
            "Agent.Session [[]UNSET[]]  steps=3",
            "├── Agent.Call [[]UNSET[]]",
            "├── Agent.Call [[]UNSET[]]",
            "├── Agent.Call [[]UNSET[]]",
            "├── MCP.DeleteSession [[]UNSET[]]  attempt=1",
            "└── MCP.DeleteSession [[]UNSET[]]  attempt=2",
            "PASSED test_app.py::test_one_cleanup_per_session",
            "FAILED test_app.py::test_deletes_twice_when_it_took_three_steps*",
        ]
    )
    assert "ran cleanup 3 times" not in result.stdout.str()  # no two examples merged
    assert _results(harness)["test_one_cleanup_per_session"] == ALL_OK


COUNTED_TESTS = """
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode


def flip(t, message="no longer alive"):
    with t.start_as_current_span("Agent.Session") as s:
        try:
            with t.start_as_current_span("MCP.DeleteSession"):
                raise RuntimeError(message)
        except RuntimeError as e:
            s.set_status(Status(StatusCode.ERROR, str(e)))


def test_one_flip_checked_twice(mcp_spans):
    flip(TracerProvider().get_tracer("h"))
    assert len(mcp_spans.check()) == 1
    mcp_spans.assert_invariants()


def test_two_flips(mcp_spans):
    t = TracerProvider().get_tracer("h")
    flip(t, "first")
    flip(t, "second")
    try:
        mcp_spans.assert_cleanup_never_flips()
    except AssertionError:
        pass
    mcp_spans.assert_cleanup_never_flips()
"""


def test_gate_and_assert_invariants_count_each_violation_once(harness: pytest.Pytester) -> None:
    """The issue's double count: with the gate on, a test that also calls assert_invariants() reported
    one flip as "2 violations" and its 3 checks as "6 invariant checks"."""
    harness.makepyfile(test_app=COUNTED_TESTS)
    result = harness.runpytest_subprocess(
        "-p", "mcpfaults", "--mcpfaults-check-spans", "--mcpfaults-report=report.json"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "2 tests used the plugin (0 sidecars, 6 invariant checks, 2 failed)",
            "violations (3):",
            "  test_app.py::test_one_flip_checked_twice: invariant cleanup_never_flips: *'no longer alive'*",
            "  test_app.py::test_two_flips: invariant cleanup_never_flips: *'first'*",
            "  test_app.py::test_two_flips: invariant cleanup_never_flips: *'second'*",
            "mcpfaults: 0 kinds, 0 fired, 3 violations",
        ]
    )
    out = result.stdout.str()
    # The gate does not repeat what the test's own assertion already raised.
    assert "mcpfaults span gate (--mcpfaults-check-spans)" not in out
    assert out.count("- [cleanup_never_flips] Agent.Session is ERROR with description 'no longer alive'") == 1
    report = json.loads((harness.path / "report.json").read_text())
    assert report["totals"]["invariants_checked"] == 6
    assert report["totals"]["invariant_violations"] == 3
    [one, two] = report["tests"]
    assert [(i["name"], i["ok"], len(i["violations"])) for i in one["invariants"]] == [
        ("cleanup_never_flips", False, 1),
        ("cleanup_at_most", True, 0),
        ("all_spans_ended", True, 0),
    ]
    assert [(i["name"], i["ok"], len(i["violations"])) for i in two["invariants"]] == [
        ("cleanup_never_flips", False, 2),
        ("cleanup_at_most", True, 0),
        ("all_spans_ended", True, 0),
    ]


def test_gate_adds_a_note_only_for_violations_the_test_did_not_raise(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        from opentelemetry.sdk.trace import TracerProvider

        def test_leaks_and_doubles(mcp_spans):
            t = TracerProvider().get_tracer("h")
            with t.start_as_current_span("Agent.Session"):
                with t.start_as_current_span("MCP.DeleteSession"):
                    pass
                with t.start_as_current_span("MCP.DeleteSession"):
                    pass
            t.start_span("Leaked")
            mcp_spans.assert_cleanup_at_most(1)
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert out.count("ran cleanup 2 times") == 2  # once raised, once in the summary; no repeat in a note
    result.stdout.fnmatch_lines(
        [
            "E *mcpfaults span gate (--mcpfaults-check-spans): 1 span invariant violation:",
            "E *- [[]all_spans_ended[]] span Leaked (span id *) started but never ended",
            "1 test used the plugin (0 sidecars, 3 invariant checks, 1 failed)",
            "mcpfaults: 0 kinds, 0 fired, 2 violations",
        ]
    )


def test_gate_off_changes_nothing(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app=GATE_TESTS
        + """
def test_global_provider_untouched():
    from opentelemetry import trace
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert not hasattr(TracerProvider.__init__, "__wrapped__")
"""
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults")
    result.assert_outcomes(passed=4)
    assert "span gate" not in result.stdout.str()
    assert _results(harness) == {
        "test_buggy": [],
        "test_fixed": [],
        "test_no_spans": [],
        "test_global_provider_untouched": [],
    }


def test_gate_from_ini_with_custom_names(harness: pytest.Pytester) -> None:
    harness.makeini(
        """
        [pytest]
        mcpfaults_check_spans = true
        mcpfaults_session_spans = Harness.*
        mcpfaults_cleanup_spans = mcp.close
        """
    )
    harness.makepyfile(
        test_app="""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.trace import Status, StatusCode

        def test_flip():
            t = TracerProvider().get_tracer("app")
            with t.start_as_current_span("Harness.Episode") as ep:
                try:
                    with t.start_as_current_span("mcp.close"):
                        raise OSError("sidecar gone")
                except OSError as exc:
                    ep.set_status(Status(StatusCode.ERROR, str(exc)))

        def test_session_names_that_match_nothing():
            t = TracerProvider().get_tracer("app")
            with t.start_as_current_span("Agent.Session"), t.start_as_current_span("mcp.close"):
                pass

        def test_no_session_and_no_cleanup():   # say, a readiness check that failed before any session
            t = TracerProvider().get_tracer("app")
            with t.start_as_current_span("Sidecar.WaitReady"):
                pass
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*Harness.Episode is ERROR with description 'sidecar gone'*cause: mcp.close*",
            "*no session span was recorded (no span name matches 'Harness.*');"
            " span names seen: 'Agent.Session', 'mcp.close'",
        ]
    )
    # Spans, but neither a session nor a cleanup span: only all_spans_ended applies.
    assert _results(harness)["test_no_session_and_no_cleanup"] == [["all_spans_ended", True]]


def test_gate_reports_open_spans_of_the_call_phase_only(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        import pytest
        from opentelemetry.sdk.trace import TracerProvider

        @pytest.fixture
        def session_span():
            t = TracerProvider().get_tracer("fixture")
            span = t.start_span("Agent.Session")   # open across the call, ended in teardown
            yield t
            span.end()

        def test_fixture_span_open_during_call_is_fine(session_span):
            with session_span.start_as_current_span("Agent.Run"):
                pass

        def test_leaked_span(session_span):
            session_span.start_span("MCP.CallTool")
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["- [[]all_spans_ended[]] span MCP.CallTool (span id *) started but never ended", "*⟨NOT ENDED⟩*"]
    )
    assert "Agent.Session (span id" not in result.stdout.str()


def test_gate_keeps_the_tests_own_failure_and_adds_a_note(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        from opentelemetry.sdk.trace import TracerProvider
        from harness import Client, run_buggy

        def test_fails_anyway():
            run_buggy(TracerProvider().get_tracer("app"), Client(alive=False))
            assert 1 == 2, "the test's own failure"
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E       AssertionError: the test's own failure",
            "E       assert 1 == 2",
            "E       mcpfaults span gate (--mcpfaults-check-spans): 2 span invariant violations:",
            "E       - [[]cleanup_never_flips[]] Agent.Session is ERROR*",
        ]
    )
    assert _results(harness)["test_fails_anyway"][0] == ["cleanup_never_flips", False]


def test_gate_catches_a_provider_built_in_an_initial_conftest(harness: pytest.Pytester) -> None:
    """pytest imports its initial conftests (the root's, and those of the ``test*`` directories beside
    it, such as ``tests/conftest.py``) before ``pytest_configure``: the gate's watch starts before them,
    so a harness's provider built there is caught (it was missed, and the buggy harness passed)."""
    provider = "from opentelemetry.sdk.trace import TracerProvider\nPROVIDER = TracerProvider()\n"
    harness.makeconftest(RESULTS_CONFTEST + provider)
    harness.mkdir("tests").joinpath("conftest.py").write_text(provider.replace("PROVIDER", "TESTS_PROVIDER"))
    harness.path.joinpath("tests", "test_app.py").write_text(
        textwrap.dedent(
            """
            from harness import Client, run_buggy

            def conftest(request, *where):
                path = request.config.rootpath.joinpath(*where, "conftest.py")
                return request.config.pluginmanager.getplugin(str(path))

            def test_root_conftest(request):
                provider = conftest(request).PROVIDER
                run_buggy(provider.get_tracer("app"), Client(alive=False))

            def test_tests_conftest(request):
                provider = conftest(request, "tests").TESTS_PROVIDER
                run_buggy(provider.get_tracer("app"), Client(alive=False))
            """
        )
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans", "--rootdir", ".")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*- [[]cleanup_never_flips[]] Agent.Session is ERROR*"])


def test_gate_and_fixture_together_record_setup_spans(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        import pytest
        from opentelemetry.sdk.trace import TracerProvider

        @pytest.fixture
        def tracer():
            t = TracerProvider().get_tracer("fixture")
            with t.start_as_current_span("Harness.Setup"):
                pass
            return t

        def test_setup_span_kept(tracer, mcp_spans):
            with tracer.start_as_current_span("Agent.Session"):
                pass
            assert mcp_spans.names() == ["Harness.Setup", "Agent.Session"]
        """
    )
    harness.runpytest_subprocess("-p", "mcpfaults", "--mcpfaults-check-spans").assert_outcomes(passed=1)


# --- configuration errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        (
            "mcpfaults_session_spans =",
            "ERROR: mcpfaults_session_spans: needs at least one span-name glob, got []",
        ),
        (
            "mcpfaults_cleanup_spans =",
            "ERROR: mcpfaults_cleanup_spans: needs at least one span-name glob, got []",
        ),
        ("mcpfaults_check_spans = maybe", "ERROR: mcpfaults_check_spans: expected a boolean*'maybe'*"),
        (
            "mcpfaults_max_cleanups = -1",
            "ERROR: mcpfaults_max_cleanups: expected a whole number >= 0 (cleanup runs *), got '-1'",
        ),
        (
            "mcpfaults_max_cleanups = two",
            "ERROR: mcpfaults_max_cleanups: expected a whole number >= 0 (cleanup runs *), got 'two'",
        ),
    ],
)
def test_bad_ini_is_a_usage_error(pytester: pytest.Pytester, ini: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    result = pytester.runpytest("-p", "mcpfaults")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_blank_pattern_in_a_toml_list_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        mcpfaults_session_spans = ["Agent.Session", " "]
        """
    )
    result = pytester.runpytest("-p", "mcpfaults")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: mcpfaults_session_spans: blank span-name glob ' ' in ['Agent.Session', ' ']"]
    )


TEARDOWN_TESTS = """
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode


def teardown(t, *names, fail=None):
    with t.start_as_current_span("Agent.Session") as session:
        for name in names:
            with t.start_as_current_span(name) as span:
                if name == fail:
                    span.set_status(Status(StatusCode.ERROR, "closed twice"))
        if fail:
            session.set_status(Status(StatusCode.ERROR, "closed twice"))


def test_delete_then_close():
    teardown(TracerProvider().get_tracer("app"), "MCP.DeleteSession", "MCP.Close")


def test_two_teardowns():
    teardown(TracerProvider().get_tracer("app"), "MCP.DeleteSession", "MCP.Close", "MCP.DeleteSession")


@pytest.mark.mcpfaults_spans(max_cleanups=2)
def test_two_teardowns_allowed():
    teardown(TracerProvider().get_tracer("app"), "MCP.DeleteSession", "MCP.DeleteSession")


@pytest.mark.mcpfaults_spans(count_cleanup="MCP.DeleteSession")
def test_closes_not_counted(mcp_spans):
    teardown(TracerProvider().get_tracer("app"), "MCP.DeleteSession", "MCP.Close", "MCP.Close")
    assert mcp_spans.count_cleanup_patterns == ("MCP.DeleteSession",)
    mcp_spans.assert_cleanup_at_most()


def test_a_failed_close_copied_is_a_flip():
    teardown(TracerProvider().get_tracer("app"), "MCP.DeleteSession", "MCP.Close", fail="MCP.Close")
"""


def test_max_cleanups_and_each_invariants_cleanup_names_from_ini_and_marker(harness: pytest.Pytester) -> None:
    harness.makeini(
        """
        [pytest]
        mcpfaults_check_spans = true
        mcpfaults_cleanup_spans =
            MCP.DeleteSession
            MCP.Close
        mcpfaults_count_cleanup_spans = MCP.*
        """
    )
    harness.makepyfile(test_app=TEARDOWN_TESTS)
    result = harness.runpytest_subprocess("-p", "mcpfaults", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["test_app.py .F..F *"])  # test_two_teardowns, test_a_failed_close_...
    out = result.stdout.str()
    assert (
        "Agent.Session ran cleanup 2 times, at most 1 allowed: MCP.DeleteSession [UNSET] then MCP.Close"
        " [UNSET]; MCP.DeleteSession [UNSET]"
    ) in out
    assert (
        "Agent.Session is ERROR with description 'closed twice', which comes from a cleanup failure "
        "(cause: MCP.Close [ERROR: closed twice])"
    ) in out
    # With the ini's max_cleanups = 2 the second teardown is allowed; with the flips' own names
    # limited to the delete, the failed close is no cleanup failure of it (but a failure after
    # cleanup started: never a primary one).
    harness.makeini(
        """
        [pytest]
        mcpfaults_check_spans = true
        mcpfaults_max_cleanups = 2
        mcpfaults_flip_cleanup_spans = MCP.DeleteSession
        """
    )
    result = harness.runpytest_subprocess("-p", "mcpfaults", "-p", "no:randomly")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["test_app.py ....F *", "*_ test_a_failed_close_copied_is_a_flip _*"])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("max_cleanups=-1", "*mcpfaults_spans(max_cleanups=): expected a whole number >= 0*got -1"),
        ("max_cleanups=True", "*mcpfaults_spans(max_cleanups=): expected a whole number >= 0*got True"),
        ("flip_cleanup=[]", "*mcpfaults_spans(flip_cleanup=): needs at least one span-name glob, got []"),
        (
            "cleanups='MCP.*'",
            "*mcpfaults_spans got an unknown argument 'cleanups'; valid arguments: session, "
            "cleanup, flip_cleanup, count_cleanup, max_cleanups",
        ),
        ("'MCP.*'", "*mcpfaults_spans takes keyword arguments only*got ('MCP.*',)"),
    ],
)
def test_a_bad_spans_marker_fails_collection_naming_the_argument(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        test_bad=f"""
        import pytest

        @pytest.mark.mcpfaults_spans({marker})
        def test_never_runs():
            pass
        """
    )
    result = pytester.runpytest("-p", "mcpfaults")  # in-process: the error comes before any wiring
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting test_bad.py*", message])


def test_fixture_stops_recording_after_the_test_without_the_gate(harness: pytest.Pytester) -> None:
    harness.makepyfile(
        test_app="""
        from opentelemetry import trace
        from pytest_mcpfaults.spans import global_recorder

        tracer = trace.get_tracer("app")

        def test_uses_spans(mcp_spans):
            with tracer.start_as_current_span("A"):
                pass
            assert mcp_spans.recording
            assert mcp_spans.names() == ["A"]

        def test_later_spans_are_not_kept():
            with tracer.start_as_current_span("B"):
                pass
            assert not global_recorder().recording
            assert global_recorder().spans() == []
        """
    )
    harness.runpytest_subprocess("-p", "mcpfaults").assert_outcomes(passed=2)


# --- the documentation's examples --------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def _copy_examples(pytester: pytest.Pytester) -> list[str]:
    """Copy the span examples into the pytester dir (so the project's own pytest config stays out)."""
    files = sorted(EXAMPLES.glob("spans_*.py"))
    for f in files:
        (pytester.path / f.name).write_text(f.read_text())
    return [f.name for f in files]


def test_span_examples_pass(pytester: pytest.Pytester) -> None:
    names = _copy_examples(pytester)
    assert names == ["spans_attach_test.py", "spans_fixture_test.py", "spans_gate_test.py"]
    result = pytester.runpytest_subprocess("-p", "mcpfaults", *names)
    result.assert_outcomes(passed=7)


def test_span_gate_example_fails_the_buggy_test_under_the_gate(pytester: pytest.Pytester) -> None:
    _copy_examples(pytester)
    result = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "--mcpfaults-check-spans", "-rx", "spans_gate_test.py"
    )
    result.assert_outcomes(passed=2, xfailed=1)
    result.stdout.fnmatch_lines(["XFAIL spans_gate_test.py::test_dead_sidecar - the span gate fails it"])


def test_the_collection_watch_keeps_no_provider_once_stopped_under_a_wrapper_of_its_patch() -> None:
    """The providers built at collection are watched by patching ``TracerProvider.__init__``; a wrapper
    another library put over that patch keeps it in the chain after ``stop()``, which cannot undo it:
    from then on it passes through and keeps nothing (it kept every provider built, for good)."""
    from opentelemetry.sdk.trace import TracerProvider

    from pytest_mcpfaults._pytest.spans import _BuiltAtCollection

    before = TracerProvider.__init__
    built = _BuiltAtCollection()  # the SDK is imported already: the class is patched at once
    ours = TracerProvider.__init__

    def theirs(provider: TracerProvider, *args: object, **kwargs: object) -> None:
        ours(provider, *args, **kwargs)

    TracerProvider.__init__ = theirs  # type: ignore[method-assign]
    try:
        first = TracerProvider()
        assert built.stop() == [first]
        TracerProvider()
        assert built.providers == []
    finally:
        TracerProvider.__init__ = before  # type: ignore[method-assign]
