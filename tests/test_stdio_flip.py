"""The incident's cleanup flip, caught by the same invariant over both transports: a server that exits
under ``delete_session`` (HTTP: the sidecar dies; stdio: the child exits with status 1), the mcp 2.x
client, and a runner that copies whatever escaped its cleanup onto ``Agent.Session``: a minimal one
here, and the example harness's (``examples/harness``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from example_modules import load
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer

from pytest_mcpfaults import Die, Sidecar, StdioServer, Trigger
from pytest_mcpfaults.invariants import cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder

#: What each transport's client raises out of ``call_tool`` when the server dies under it.
RAISED = {"http": "CancelledError", "stdio": "MCPError"}


@pytest.fixture
def recorder() -> SpanRecorder:
    return SpanRecorder()


@pytest.fixture
def tracer(recorder: SpanRecorder) -> Iterator[Tracer]:
    provider = recorder.attach(TracerProvider(shutdown_on_exit=False))
    yield provider.get_tracer("runner")
    provider.shutdown()


async def one_session(tracer: Tracer, target: Any, *, copy_cleanup_error: bool) -> list[str]:
    """One benchmark session over one mcp 2.x client (a URL or stdio parameters); what escaped."""
    escaped: list[str] = []
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            async with Client(target, mode="legacy", read_timeout_seconds=5) as client:
                created = await client.call_tool("create_session", {"task_id": "task-1"})
                sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
                try:
                    with tracer.start_as_current_span("MCP.DeleteSession") as delete:
                        try:
                            await client.call_tool("delete_session", {"session_id": sid})
                        except BaseException as exc:
                            if not copy_cleanup_error:  # hardened: the failure stays on the cleanup span
                                delete.record_exception(exc)
                                delete.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                            raise
                except BaseException as exc:
                    escaped.append(type(exc).__name__)
                    if copy_cleanup_error:  # the unhardened runner's handler
                        session.record_exception(exc)
                        session.set_status(Status(StatusCode.ERROR, f"Session failed: {exc}"))
                    raise
        except BaseException as exc:
            escaped.append(type(exc).__name__)
    return escaped


def run_against_a_dying_server(transport: str, tracer: Tracer, *, copy: bool) -> tuple[list[str], Any]:
    die = Die(when="tool:delete_session")
    server: Any = Sidecar(era="session", faults=[die]) if transport == "http" else StdioServer(faults=[die])
    with server:
        target = (
            server.mcp_url
            if transport == "http"
            else StdioServerParameters(command=server.command, args=server.args, env=server.env)
        )
        escaped = asyncio.run(asyncio.wait_for(one_session(tracer, target, copy_cleanup_error=copy), 30))
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
