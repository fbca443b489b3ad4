"""The runner that never ends its session (docs/sessions.md): it fails at teardown with the session
hygiene verdict. Not run with the other examples (they are the files directly under docs/examples/);
``tests/test_session_hygiene.py`` runs it."""

from __future__ import annotations

import httpx
import pytest

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
RUNNER = {"name": "runner", "version": "1"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": RUNNER}}  # fmt: skip
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}


# --8<-- [start:leak]
@pytest.mark.mcp_sidecar(era="session")
def test_a_runner_that_never_ends_its_session(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        sid = http.post(mcp_sidecar.mcp_url, json=INIT, headers=HEADERS).headers["Mcp-Session-Id"]
        session = {**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
        http.post(mcp_sidecar.mcp_url, json=CALL, headers=session)
    # returns without `DELETE /mcp`: the session stays open on the server


# --8<-- [end:leak]


# --8<-- [start:lost]
@pytest.mark.mcp_sidecar(era="session", faults=["session_expired@tool:echo[nth=2]"])
def test_a_runner_that_keeps_calling_a_lost_session(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        sid = http.post(mcp_sidecar.mcp_url, json=INIT, headers=HEADERS).headers["Mcp-Session-Id"]
        session = {**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
        for _ in range(3):  # the second call gets 404: the session is gone; the third reuses it anyway
            http.post(mcp_sidecar.mcp_url, json=CALL, headers=session)


# --8<-- [end:lost]


# --8<-- [start:poisoned]
import contextlib  # noqa: E402

from mcp.client import Client  # noqa: E402
from opentelemetry import trace  # noqa: E402

TRACER = trace.get_tracer("runner")


class Runner:
    """Calls tools through one mcp Client, in a span per call that follows OpenTelemetry's MCP
    conventions; after the first error it fails every later call at once (the bug)."""

    def __init__(self, client):
        self.client, self.error = client, None

    async def call(self, tool, arguments):
        attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool}
        with TRACER.start_as_current_span(
            f"tools/call {tool}", kind=trace.SpanKind.CLIENT, attributes=attributes
        ):
            if self.error is not None:
                raise RuntimeError("the MCP connection is broken") from self.error
            try:
                return await self.client.call_tool(tool, arguments)
            except Exception as exc:
                self.error = exc
                raise


@pytest.mark.mcp_sidecar(era="session", faults=["status(code=503)@tool:echo[times=1]"])
async def test_a_runner_that_gives_up_after_one_failed_call(mcp_sidecar, mcp_spans):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        runner = Runner(client)
        for text in ("first", "second"):  # the first is answered 503; the second never leaves the runner
            with contextlib.suppress(Exception):
                await runner.call("echo", {"text": text})


# --8<-- [end:poisoned]
