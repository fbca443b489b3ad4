"""The incident's cleanup flip, caught by the same invariant over both transports: a server that exits
under ``delete_session`` (HTTP: the sidecar dies; stdio: the child exits with status 1), the mcp 2.x
client, and a runner that copies whatever escaped its cleanup onto ``Agent.Session``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer

from pytest_mcpfaults import Die, Sidecar, StdioServer
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
