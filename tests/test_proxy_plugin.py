"""Proxy mode through the plugin: the ``upstream`` key of the marker and the factory, the patience
verdict for a ``DELETE`` held in front of the mcp SDK's own server, and the example harness's teardown
matrix run against the proxied SDK server with the same verdicts as against the fake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from example_matrix_runs import outcomes, run_matrices
from test_example_suite import HARMLESS, MATRIX

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "mcpfaults",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *args,
    )


HANG_AT_CLOSE = """
from mcp.client import Client
from sdk_upstream import serve


async def test_the_real_servers_delete_hangs(mcp_sidecar_factory):
    with serve() as up:
        sc = mcp_sidecar_factory(upstream=up.url, faults=["hang@DELETE /mcp"], patience=0.5)
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
        assert up.calls == ["add"]
"""


def test_hang_at_delete_in_front_of_the_sdk_server_fails_with_the_patience_verdict(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "sdk_upstream.py").write_text((TESTS / "sdk_upstream.py").read_text())
    pytester.makepyfile(test_hang=HANG_AT_CLOSE)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "PatienceError: 1 held request outlived the patience budget at http://127.0.0.1:*:",
            "1. the client waited 0.5 s (the whole budget) on a hung `DELETE /mcp` (session era), never "
            "answered (no status line was sent), and never closed the connection*",
            "   held by `hang@DELETE /mcp`; when the 0.5 s budget (the sidecar's patience) ran out the "
            "sidecar aborted connection #* (RST); the client never closed it",
            "   client seen: User-Agent python-httpx2/*",
            "*DELETE /mcp*status=None*fault=hang@DELETE /mcp*hold=patience*",
        ]
    )
    result.stdout.no_fnmatch_line("*phase also failed*")  # the test body's own checks passed


def test_a_bad_upstream_in_the_marker_fails_collection_naming_it(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.mcp_sidecar(upstream="http://10.1.2.3:9000/mcp")
        def test_x(mcp_sidecar):
            pass
        """
    )
    result = run_plugin()
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.mcp_sidecar: Sidecar: upstream names host '10.1.2.3', which is not a loopback "
            "address*allow_remote_upstream=True*",
        ]
    )
    assert result.ret != 0


# -- the example harness's teardown matrix against the proxied SDK server ----------------------------


@pytest.mark.timeout(400)  # two example runs of about 30 s each alone; more on a loaded machine
def test_the_example_matrix_against_the_proxied_sdk_server_gives_the_fakes_verdicts() -> None:
    out: dict[str, str] = {}
    for variant, (stdout, stderr) in run_matrices("proxied_upstream").items():
        out[variant] = stdout
        assert "proxied upstream: the mcp SDK's MCPServer at http://127.0.0.1:" in stdout, stdout + stderr
        # the upstream really served every cell's session: one create_session each
        assert re.search(rf"^proxied upstream served: create_session x{len(MATRIX)}, ", stdout, re.M), stdout
    hardened, unhardened = out["hardened"], out["unhardened"]
    assert outcomes(hardened) == dict.fromkeys(MATRIX, "PASSED"), hardened
    assert re.search(rf"^=+ {len(MATRIX)} passed in ", hardened, re.M), hardened
    assert outcomes(unhardened) == {f: "PASSED" if f in HARMLESS else "FAILED" for f in MATRIX}, unhardened
    failed, passed = len(set(MATRIX) - HARMLESS), len(HARMLESS)
    assert re.search(rf"^=+ {failed} failed, {passed} passed in ", unhardened, re.M), unhardened
    for fault in set(MATRIX) - HARMLESS:  # each failure is the flip, as against the fake
        entry = f"examples/test_example_matrix.py::test_cleanup_under_every_fault[{fault}]"
        assert f"{entry}: invariant cleanup_never_flips: Agent.Session is ERROR" in unhardened, unhardened
