"""The incident's cleanup flip, caught over the legacy HTTP+SSE transport as over Streamable HTTP: the
example harness (``examples/harness``) runs a benchmark session against a sidecar whose backend is gone
at ``delete_session``; the unhardened runner lets that cleanup failure flip ``Agent.Session`` and
``cleanup_never_flips`` names ``MCP.DeleteSession`` as the cause, whatever the transport; the hardened
runner passes. Over SSE the harness's MCP client is the mcp SDK's ``sse_client`` + ``ClientSession``
(one connection per operation, as its Streamable HTTP client does)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from example_modules import load
from mcp import ClientSession
from mcp.client.sse import sse_client
from opentelemetry.trace import Tracer

from pytest_mcpfaults import BackendGone, Sidecar, Trigger
from pytest_mcpfaults.invariants import cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder

harness = load("examples/harness")


class SseTools(harness.McpTools):  # type: ignore[misc, name-defined]
    """The harness's MCP client over the legacy transport: the same calls, one SSE session each."""

    async def _call(self, tool: str, arguments: dict[str, Any]) -> Any:
        async with sse_client(self.mcp_url, timeout=self.read_timeout) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write, read_timeout_seconds=self.read_timeout) as session:
                await session.initialize()
                result = await session.call_tool(tool, arguments)
        text = result.content[0].text if result.content else ""
        if result.is_error:
            raise harness.McpCallError(f"{tool}: tool error: {text}")
        try:
            return json.loads(text)
        except ValueError:
            return text


def run_session(tracer: Tracer, transport: str, *, hardened: bool) -> tuple[Any, Sidecar]:
    faults = [BackendGone(when=Trigger("tool:delete_session", times=1))]
    with Sidecar(transport=transport, era="session", faults=faults) as sc:
        url = sc.mcp_url if transport == "streamable_http" else sc.sse_url
        config = harness.RunnerConfig(mcp_url=url, health_url=sc.health_url, health_interval=0.05)
        runner = harness.Runner(config, hardened=hardened, tracer=tracer)
        if transport == "sse":
            runner.tools = SseTools(url, read_timeout=5.0, call_timeout=15.0, hardened=hardened)
        [result] = asyncio.run(asyncio.wait_for(runner.run(["task-1"]), 60))
    return result, sc


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_backend_gone_at_delete_flips_the_unhardened_session_over_each_transport(
    recorder: SpanRecorder, tracer: Tracer, transport: str
) -> None:
    result, sc = run_session(tracer, transport, hardened=False)

    assert sc.fired == {"backend_gone": 1}
    deletes = [r for r in sc.requests if r.tool == "delete_session"]
    assert len(deletes) == 2  # the failed cleanup, then the runner's second delete
    assert {r.path for r in sc.requests if r.mcp_method} == (
        {"/mcp"} if transport == "streamable_http" else {"/messages"}
    )
    assert result.outcome == "failed" and "no longer alive" in result.error
    [violation] = cleanup_never_flips(recorder.spans())
    assert violation.span.name == "Agent.Session"
    assert (
        "(cause: MCP.DeleteSession [ERROR: SessionDeletionError: Session deletion failed: "
        in violation.message
    )
    assert "nothing but cleanup failed beneath it, so it must not be ERROR at all" in violation.message


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_the_hardened_runner_keeps_the_same_failure_on_its_cleanup_span_over_each_transport(
    recorder: SpanRecorder, tracer: Tracer, transport: str
) -> None:
    result, sc = run_session(tracer, transport, hardened=True)

    assert sc.fired == {"backend_gone": 1}
    assert (result.outcome, result.cleanup) == ("completed", "already_gone")
    assert recorder.one("Agent.Session").status_code == "UNSET"
    assert cleanup_never_flips(recorder.spans()) == []
    recorder.assert_invariants()
