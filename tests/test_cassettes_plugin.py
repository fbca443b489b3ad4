"""Cassettes through the plugin: ``--mcpfaults-record`` with the marker's ``cassette`` key beside an
upstream, a test failing fast with the nearest exchange when its request was never recorded, and the
example harness's teardown matrix replayed offline from a cassette of the mcp SDK's own server with
the same verdicts as against the live proxied server (tests/test_proxy_plugin.py) and the fake."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from example_matrix_runs import outcomes, run_matrices
from mcp.client import Client
from sdk_upstream import serve
from test_example_suite import HARMLESS, MATRIX

from pytest_mcpfaults import Sidecar


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest with the plugin, in this process: the inner runs share the imports (mcp, aiohttp, the
    plugin), so each costs its tests, not a Python's start."""
    return pytester.runpytest(
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function", *args,
    )  # fmt: skip


THROUGH_A_CASSETTE = """
import pytest
from mcp.client import Client


@pytest.mark.mcp_sidecar(upstream=URL, cassette="cassettes/sdk.jsonl")
async def test_add(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
        assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
    print("REPLAYED" if mcp_sidecar.replay is not None else "RECORDED", flush=True)
"""


def test_record_modes_record_once_then_replay_and_none_never_records(pytester: pytest.Pytester) -> None:
    with serve() as up:  # the SDK's server, for every run below
        pytester.makepyfile(test_through=THROUGH_A_CASSETTE.replace("URL", repr(up.url)))
        cassette = pytester.path / "cassettes" / "sdk.jsonl"
        result = _run(pytester, "-s", "--mcpfaults-record=none")
        result.assert_outcomes(errors=1)  # none: replay only, and there is nothing to replay
        result.stdout.fnmatch_lines(["*cassette cassettes/sdk.jsonl: no such file*"])
        assert not cassette.exists()
        assert up.calls == []
        result = _run(pytester, "-s")  # once (the default): no cassette yet, so it records
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*RECORDED*"])
        tools = [json.loads(line).get("tool") for line in cassette.read_text().splitlines()[1:]]
        assert "add" in tools
        assert up.calls == ["add"]
        first = cassette.read_text()
        result = _run(pytester, "-s")  # once, again: the cassette exists, so it replays
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*REPLAYED*"])
        assert cassette.read_text() == first
        assert up.calls == ["add"]  # the server was not asked again
        result = _run(pytester, "-s", "--mcpfaults-record=all")  # all: records again, over it
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*RECORDED*"])
        assert up.calls == ["add", "add"]
        result = _run(pytester, "-s", "--mcpfaults-record=new_episodes")  # adds only what is new: nothing
        result.assert_outcomes(passed=1)
        assert [json.loads(x).get("tool") for x in cassette.read_text().splitlines()[1:]].count("add") == 1
        assert up.calls == ["add", "add", "add"]  # every request goes to the upstream (docs: unlike vcrpy)


UNMATCHED = """
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

@pytest.mark.mcp_sidecar(cassette=CASSETTE, patience=30)
async def test_a_call_never_recorded(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
        try:
            await client.call_tool("add", {"a": 40, "b": 2})
        except MCPError:
            pass  # a harness that swallows the error: the test still fails
"""


def test_an_unmatched_request_fails_the_test_fast_naming_the_nearest_exchange(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    path = tmp_path / "add.jsonl"
    with serve() as up, Sidecar(upstream=up.url, record=str(path)) as sc:

        async def call() -> None:
            async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as client:
                await client.call_tool("add", {"a": 1, "b": 2})

        asyncio.run(call())
    pytester.makepyfile(test_unmatched=UNMATCHED.replace("CASSETTE", repr(str(path))))
    result = _run(pytester, "--durations=1", "-vv")
    result.assert_outcomes(passed=1, errors=1)  # the body passed; its teardown fails with the miss
    result.stdout.fnmatch_lines(
        [
            f"*cassette {path} has no recorded answer for tools/call add "
            '{"a": 40, "b": 2}; nearest: line *, tools/call add {"a": 1, "b": 2}: argument \'a\' differs: '
            "recorded 1, sent 40*",
        ]
    )
    durations = re.findall(r"^([\d.]+)s (?:call|setup|teardown) ", result.stdout.str(), re.M)
    assert durations and max(map(float, durations)) < 5.0  # well under the 30 s patience budget


# -- the example harness's teardown matrix, replayed offline -------------------------------------------


@pytest.mark.timeout(400)
def test_the_example_matrix_replayed_from_a_cassette_gives_the_live_servers_verdicts() -> None:
    out: dict[str, str] = {}
    for variant, (stdout, stderr) in run_matrices("replayed_upstream").items():
        out[variant] = stdout
        assert "replayed cassette: " in stdout and "(stopped), tools/call create_session, echo" in stdout, (
            stdout + stderr
        )
    hardened, unhardened = out["hardened"], out["unhardened"]
    assert outcomes(hardened) == dict.fromkeys(MATRIX, "PASSED"), hardened
    assert outcomes(unhardened) == {f: "PASSED" if f in HARMLESS else "FAILED" for f in MATRIX}, unhardened
    for fault in set(MATRIX) - HARMLESS:  # each failure is the flip, as against the live server
        entry = f"examples/test_example_matrix.py::test_cleanup_under_every_fault[{fault}]"
        assert f"{entry}: invariant cleanup_never_flips: Agent.Session is ERROR" in unhardened, unhardened
    assert "CassetteError" not in hardened + unhardened  # every request the runner made was recorded
