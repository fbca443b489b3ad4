"""``mcp_sidecar`` markers compose (module, class, function) and ini keys set the run's defaults,
exercised through pytester the way users load the plugin."""

from __future__ import annotations

import pytest


def test_module_class_and_function_markers_compose(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import httpx, pytest
        from pytest_mcpfaults import Status, Trigger

        pytestmark = pytest.mark.mcp_sidecar(
            era="session", patience=3.0, faults=[Status(500, when=Trigger("health", times=1))]
        )

        @pytest.mark.mcp_sidecar(faults=["status(code=502)@health[times=1]"], patience=2.0)
        def test_function_and_module(mcp_sidecar):
            # both faults; the closer marker's first, so it fires first
            assert [str(f) for f in mcp_sidecar.plan] == [
                "status(code=502)@health[times=1]", "status(code=500)@health[times=1]"
            ]
            codes = [httpx.get(mcp_sidecar.health_url).status_code for _ in range(3)]
            assert codes == [502, 500, 200]
            assert mcp_sidecar.era == "session"  # from the module: the function did not say
            assert mcp_sidecar.patience == 2.0  # the closest marker that says wins

        @pytest.mark.mcp_sidecar(era="auto")
        class TestInAClass:
            @pytest.mark.mcp_sidecar(faults=["absent"])
            def test_three_levels(self, mcp_sidecar):
                assert [f.kind for f in mcp_sidecar.plan] == ["absent", "status"]
                assert mcp_sidecar.era == "auto"  # the class is closer than the module
                assert mcp_sidecar.patience == 3.0

        def test_module_only(mcp_sidecar):
            assert [f.kind for f in mcp_sidecar.plan] == ["status"]
        """
    )
    run_plugin().assert_outcomes(passed=3)


def test_a_bad_marker_anywhere_fails_collection_naming_it(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.mcp_sidecar(era="modern")

        @pytest.mark.mcp_sidecar(faults=["absent"])
        def test_it(mcp_sidecar):
            pass
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*mcp_sidecar: *era must be one of*got 'modern'*"])


def test_a_test_marked_for_a_fixture_it_does_not_use_fails_collection(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    """A test's own marker configures its fixture: without the fixture its faults never fired and the test
    passed (the factory's sidecars take their options as arguments). A module's or a class's marker, or a
    fixture asked for through another fixture, stays fine."""
    fine = """
        import httpx, pytest

        pytestmark = pytest.mark.mcp_sidecar(era="session")

        def test_module_marker_only():
            pass

        @pytest.fixture
        def harness(mcp_sidecar):
            return mcp_sidecar

        @pytest.mark.mcp_sidecar(faults=["status@health"])
        def test_through_a_fixture(harness):
            assert httpx.get(harness.health_url).status_code == 503
        """
    pytester.makepyfile(
        fine
        + """
        @pytest.mark.mcp_sidecar(faults=["status@health"])
        def test_factory_only(mcp_sidecar_factory):
            assert httpx.get(mcp_sidecar_factory().health_url).status_code == 200
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(
        [
            "*test_factory_only: @pytest.mark.mcp_sidecar configures the mcp_sidecar fixture, which this "
            "test does not use: add mcp_sidecar to its arguments (mcp_sidecar_factory(...) takes the "
            "options itself)"
        ]
    )
    pytester.makepyfile(fine)  # the same module without the test that is wrong
    run_plugin().assert_outcomes(passed=2)


def test_ini_keys_set_era_reply_tool_sets_and_patience_for_both_fixtures(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    pytester.makeini(
        """
        [pytest]
        mcpfaults_era = session
        mcpfaults_reply = sse
        mcpfaults_tool_sets = basic
        mcpfaults_patience = 1.5
        """
    )
    pytester.makepyfile(
        """
        import httpx, pytest

        INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

        def check(sidecar, era):
            assert (sidecar.era, sidecar.patience) == (era, 1.5)
            r = httpx.post(sidecar.mcp_url, json=INIT,
                           headers={"Accept": "application/json, text/event-stream"})
            assert r.headers["content-type"].startswith("text/event-stream")
            sid = r.headers["mcp-session-id"]
            listed = httpx.post(sidecar.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                headers={"Accept": "application/json, text/event-stream",
                                         "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
            assert "echo" in listed.text and "create_session" not in listed.text  # basic only
            httpx.delete(sidecar.mcp_url, headers={"Mcp-Session-Id": sid})  # ends it (session hygiene)

        def test_fixture(mcp_sidecar):
            check(mcp_sidecar, "session")

        def test_factory(mcp_sidecar_factory):
            with mcp_sidecar_factory() as sidecar:
                check(sidecar, "session")

        @pytest.mark.mcp_sidecar(era="auto")
        def test_marker_wins(mcp_sidecar):
            assert mcp_sidecar.era == "auto"
        """
    )
    run_plugin().assert_outcomes(passed=3)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("mcpfaults_era", "modern", "*ini option mcpfaults_era = 'modern': *era must be one of*"),
        ("mcpfaults_reply", "xml", "*ini option mcpfaults_reply = 'xml': *reply*"),
        ("mcpfaults_tool_sets", "basic, nope", "*ini option mcpfaults_tool_sets = 'basic, nope': *nope*"),
    ],
)
def test_a_bad_ini_default_is_a_usage_error_naming_the_key(
    pytester: pytest.Pytester, run_plugin, key: str, value: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    pytester.makeini(f"[pytest]\n{key} = {value}\n")
    pytester.makepyfile("def test_x(): pass")
    result = run_plugin()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
