"""The fixtures, markers and ini options, exercised through pytester the way users load the plugin."""

from __future__ import annotations

import pytest


def test_mcp_sidecar_fixture_serves_and_is_configured_by_the_marker(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import httpx, pytest

        @pytest.mark.mcp_sidecar(health_path="/healthz", era="session")
        def test_it(mcp_sidecar):
            assert mcp_sidecar.health_url.endswith("/healthz")
            assert httpx.get(mcp_sidecar.health_url).json() == {"status": "ok"}
            probe = {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}
            assert httpx.post(mcp_sidecar.mcp_url, json=probe).status_code == 400

        def test_default(mcp_sidecar):
            assert mcp_sidecar.era == "auto" and mcp_sidecar.url.startswith("http://127.0.0.1:")
        """
    )
    result = run_plugin()
    result.assert_outcomes(passed=2)


def test_fixtures_are_listed_with_their_docs(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    """In-process, with this process's plugins (autoloaded); the next test runs a child pytest with
    autoload off, as every pytester child of this suite is (tests/conftest.py)."""
    pytester.makepyfile("def test_x(): pass")
    result = run_plugin("--fixtures")
    result.stdout.fnmatch_lines(
        [
            "mcp_sidecar*",
            "*A started fake MCP sidecar*",
            "mcp_sidecar_factory*",
            "*factory of started sidecars*",
        ]
    )


def test_fixtures_are_listed_with_plugin_autoload_disabled(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "--fixtures")
    result.stdout.fnmatch_lines(["mcp_sidecar*", "mcp_sidecar_factory*"])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("mcp_sidecar(colour='red')", "*unknown argument 'colour'*valid arguments*host, port*"),
        ("mcp_sidecar(port=70000)", "*port must be an integer in 0..65535*got 70000*"),
        ("mcp_sidecar(host='10.1.2.3')", "*host '10.1.2.3' is not a loopback address*allow_remote=True*"),
        (
            "mcp_sidecar(faults=['stall(after_bytes=-1)'])",
            "*after_bytes must be a non-negative integer, got -1*",
        ),
        ("mcp_sidecar('positional')", "*keyword arguments only*"),
    ],
)
def test_bad_marker_arguments_fail_at_collection(
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
    result.stdout.fnmatch_lines(["*ERROR collecting*", message])
    result.stdout.no_fnmatch_line("*must not run*")


def test_bad_patience_ini_is_a_usage_error(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makeini("[pytest]\nmcpfaults_patience = soon\n")
    pytester.makepyfile("def test_x(): pass")
    result = run_plugin()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*mcpfaults_patience must be a positive number of seconds or 'none', got 'soon'*"]
    )


def test_errors_in_tool_handlers_are_reraised_in_the_test(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import httpx
        from pytest_mcpfaults import Tool

        def boom(**kw):
            raise KeyError("handler bug")

        def test_it(mcp_sidecar):
            mcp_sidecar.add_tool("boom", boom, input_schema={"type": "object"})
            params = {"name": "boom", "arguments": {}}
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            r = httpx.post(mcp_sidecar.mcp_url, json=call, headers={"MCP-Protocol-Version": "2026-07-28"})
            assert r.json()["result"]["isError"] is True
        """
    )
    result = run_plugin()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*SidecarError*1 error(s) raised inside the MCP sidecar*", "*KeyError*handler bug*"]
    )


def test_factory_sidecars_are_stopped_when_the_test_ends(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import httpx, pytest

        made = []

        def test_make(mcp_sidecar_factory):
            made.append(mcp_sidecar_factory())
            with mcp_sidecar_factory(era="stateless") as sc:
                assert sc.running
            assert not sc.running
            assert made[0].running

        def test_after():
            assert made[0].state == "stopped"
            with pytest.raises(httpx.ConnectError):
                httpx.get(made[0].health_url)
        """
    )
    run_plugin().assert_outcomes(passed=2)


def test_a_run_that_does_not_use_the_plugin_imports_only_its_glue(pytester: pytest.Pytester) -> None:
    """The plugin costs nothing where it is not used: no sidecar, aiohttp, OpenTelemetry or report code."""
    pytester.makeconftest(
        """
        import sys

        def pytest_unconfigure(config):
            watched = ("pytest_mcpfaults", "aiohttp", "opentelemetry")
            mods = sorted(m for m in sys.modules if m.startswith(watched))
            print("LOADED:" + ",".join(mods))
        """
    )
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-s")
    result.assert_outcomes(passed=1)
    [line] = [ln for ln in result.stdout.lines if ln.startswith("LOADED:")]
    loaded = set(line[len("LOADED:") :].split(","))
    assert loaded == {
        "pytest_mcpfaults",
        "pytest_mcpfaults.lazy",  # the package's lazy __getattr__ (standard library only)
        "pytest_mcpfaults.plugin",
        "pytest_mcpfaults._pytest",
        # the folders of the modules below: an __init__ with a docstring only, or a lazy face
        "pytest_mcpfaults.core",
        "pytest_mcpfaults.explore",
        "pytest_mcpfaults.options",
        "pytest_mcpfaults.spans",
        "pytest_mcpfaults._pytest.records",
        "pytest_mcpfaults._pytest.cassettes",  # --mcpfaults-record and its record modes (pytest and os only)
        "pytest_mcpfaults._pytest.sidecar",
        "pytest_mcpfaults._pytest.settings",  # the ini defaults and marker merging (pytest only)
        "pytest_mcpfaults._pytest.spans",
        # where each test's invariant checks go, set for every test (imports nothing)
        "pytest_mcpfaults.spans.results",
        "pytest_mcpfaults._pytest.report",
        # explore's glue and its report (pytest and the standard library only until a test is explored)
        "pytest_mcpfaults.explore.items",
        "pytest_mcpfaults.explore.summary",
        "pytest_mcpfaults.explore.findings",  # the run order and verdict names summary shares (stdlib only)
        # --mcpfaults-shard (zlib and pytest) and where a failure left the harness (the standard library)
        "pytest_mcpfaults.explore.shard",
        "pytest_mcpfaults.explore.where",
        "pytest_mcpfaults._pytest.from_trace",
        "pytest_mcpfaults._pytest.harness",
        "pytest_mcpfaults._pytest.blocked",  # its own_code: which frames are the harness's (stdlib only)
        # the running tally that keeps crashed/interrupted tests in the report (standard library only)
        "pytest_mcpfaults._pytest.progress",
        "pytest_mcpfaults.core.events",
        # the shared argument predicates the ini options are checked with (standard library only)
        "pytest_mcpfaults.options.validation",
    }
