"""The patience verdict survives a ``BaseException``: a harness whose client call is cut by the verdict's
reset and lets the mcp SDK's ``CancelledError`` out of the test (its own anyio cancel scope around the
call, the client's close errors suppressed, as a harness that "never fails at cleanup" does) still shows
the verdict, with the ``CancelledError`` below it; explore files such a run as ``patience``, not as
``exception:CancelledError``. A real Ctrl-C stays one (tests/test_patience_interrupt.py)."""

from __future__ import annotations

import json

import pytest

HARNESS = """
import contextlib

import anyio
from mcp.client import Client


async def echo(url, text):
    # The harness's call: its own deadline (an anyio cancel scope) around a real MCP client call; the
    # client's close errors are suppressed, so whatever the call raised is what leaves.
    client = Client(url, mode="legacy")
    await client.__aenter__()
    try:
        with anyio.move_on_after(30):
            return await client.call_tool("echo", {"text": text})
    finally:
        with contextlib.suppress(Exception):
            await client.__aexit__(None, None, None)
"""

TEST = """
import pytest
from cancel_harness import echo

@pytest.mark.mcp_sidecar(era="session", patience=0.5{faults})
async def test_echo(mcp_sidecar):
    await echo(mcp_sidecar.mcp_url, "hi")
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "mcpfaults",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-p",
        "no:randomly",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *args,
    )


def test_a_cancelled_error_after_the_verdict_does_not_hide_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(cancel_harness=HARNESS, test_cancel=TEST.format(faults=', faults=["hang@tool:echo"]'))
    result = _run(pytester, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "PatienceError: 1 held request outlived the patience budget" in text
    assert "on a hung `POST /mcp` (tools/call echo)" in text
    # what the harness raised afterwards is kept below the verdict
    also = "The call phase also failed (often the client reacting to the abort):\n"
    assert also + "asyncio.exceptions.CancelledError: Cancelled via cancel scope" in text
    assert "FAILED test_cancel.py::test_echo - PatienceError" in text


def test_explore_files_that_run_as_patience(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(cancel_harness=HARNESS, test_cancel=TEST.format(faults=""))
    report = pytester.path / "report.json"
    result = _run(
        pytester,
        "--mcpfaults-explore",
        "-o",
        "mcpfaults_explore=kinds=hang steps=tool:echo#1 patience=0.5",
        f"--mcpfaults-report={report}",
    )
    result.assert_outcomes(passed=1, failed=1)
    (entry,) = json.loads(report.read_text())["explore"]
    (run,) = entry["runs"]
    assert run["plan"][0]["fault"].startswith("hang(")
    assert (run["verdict"], run["found"]) == ("violation", ["patience"])
    assert "PatienceError" in result.stdout.str()
    assert "exception:CancelledError" not in result.stdout.str()
