"""The incident's cleanup flip, caught by the same invariant over both transports: a server that exits
under ``delete_session`` (HTTP: the sidecar dies; stdio: the child exits with status 1), the mcp 2.x
client, and a runner that copies whatever escaped its cleanup onto ``Agent.Session``: a minimal one
here, and the example harness's (``examples/harness``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from example_modules import load
from flip_session import one_session
from mcp.client.stdio import StdioServerParameters
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from pytest_mcpfaults import Die, Sidecar, StdioServer, Trigger
from pytest_mcpfaults.invariants import cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder

#: What each transport's client raises out of ``call_tool`` when the server dies under it.
RAISED = {"http": "CancelledError", "stdio": "MCPError"}


def run_against_a_dying_server(transport: str, tracer: Tracer, *, copy: bool) -> tuple[list[str], Any]:
    die = Die(when="tool:delete_session")
    server: Any = Sidecar(era="session", faults=[die]) if transport == "http" else StdioServer(faults=[die])
    with server:
        target = (
            server.mcp_url
            if transport == "http"
            else StdioServerParameters(command=server.command, args=server.args, env=server.env)
        )
        escaped = asyncio.run(
            asyncio.wait_for(one_session(tracer, target, copy_cleanup_error=copy, agent_call=False), 30)
        )
    return escaped, server


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_cleanup_flip_is_caught_over_both_transports(
    transport: str, recorder: SpanRecorder, tracer: Tracer
) -> None:
    escaped, server = run_against_a_dying_server(transport, tracer, copy=True)

    assert escaped[0] == RAISED[transport]
    assert server.fired == {"die": 1}
    assert server.journal.sequence()[-1] == "POST tools/call delete_session"  # it died under the delete
    session = recorder.one("Agent.Session")
    assert session.failed
    [violation] = cleanup_never_flips(recorder.spans())
    assert violation.span == session
    assert violation.message.startswith("Agent.Session is ERROR")
    assert "nothing but cleanup failed beneath it" in violation.message
    assert "MCP.DeleteSession" in violation.message
    with pytest.raises(AssertionError, match=r"MCP\.DeleteSession"):
        recorder.assert_cleanup_never_flips()


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_same_death_kept_on_the_cleanup_span_is_no_flip_over_both_transports(
    transport: str, recorder: SpanRecorder, tracer: Tracer
) -> None:
    escaped, server = run_against_a_dying_server(transport, tracer, copy=False)

    assert escaped[0] == RAISED[transport]
    assert server.fired == {"die": 1}
    assert recorder.one("MCP.DeleteSession").status_code == "ERROR"
    assert recorder.one("Agent.Session").status_code != "ERROR"
    assert cleanup_never_flips(recorder.spans()) == []


# -- the example harness (examples/harness): the same runner, either transport ----------------------------

_harness = load("examples/harness")


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("hardened", [False, True], ids=["unhardened", "hardened"])
def test_the_example_runners_flip_is_caught_over_both_transports(transport: str, hardened: bool) -> None:
    """The example runner with a server that exits under ``delete_session``: the unhardened runner lets
    the cleanup failure escape onto ``Agent.Session`` (a flip), over HTTP and over stdio alike, and
    ``cleanup_never_flips`` says so on both; the hardened one keeps it on its cleanup span."""
    recorder = SpanRecorder()
    provider = recorder.attach(TracerProvider(shutdown_on_exit=False))
    # The server process dies under the first delete; the runner's next connection reaches a fresh one
    # with every session forgotten: over HTTP a restarted sidecar, over stdio the next child it spawns.
    die = Die(when=Trigger("tool:delete_session", times=1))
    server: Any = (
        Sidecar(era="session", faults=[Die(restart=True, when=die.when)])
        if transport == "http"
        else StdioServer(faults=[die])
    )
    with server:
        target = (
            server.mcp_url
            if transport == "http"
            else StdioServerParameters(command=server.command, args=server.args, env=server.env)
        )
        config = _harness.RunnerConfig(mcp_url=target, read_timeout=2.0, call_timeout=10.0)
        runner = _harness.Runner(config, hardened=hardened, tracer=provider.get_tracer("runner"))
        result = asyncio.run(asyncio.wait_for(runner.run_session("task-1"), 60))
    provider.shutdown()

    assert server.fired == {"die": 1}
    assert "POST tools/call delete_session" in server.journal.sequence()
    violations = cleanup_never_flips(recorder.spans())
    if hardened:
        assert (result.outcome, result.cleanup) == ("completed", "failed")
        assert violations == []
    else:
        assert result.outcome == "failed"
        assert result.error is not None and result.error.startswith(
            "Session deletion failed: delete_session: "
        )
        [violation] = violations
        assert violation.span == recorder.one("Agent.Session")
        assert "nothing but cleanup failed beneath it" in violation.message
