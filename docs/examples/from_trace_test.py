"""From an incident's trace to a regression run (docs/from-trace.md): the marker's form.

``from_trace/unhardened.json`` is a real export of the example harness's unhardened runner under
``backend_gone`` at its delete. The test below is a clean test of a hardened runner with the same span
names; ``@pytest.mark.mcp_from_trace`` runs it clean, infers the trace's fault against that run (an
``error_payload`` at ``tool:delete_session#1``) and runs it again under it as
``test_the_incident[from-trace:d7e2fdd97b8a19bbd2b927de42ad582c]``: no span invariant breaks (the runner
keeps a failed cleanup off the session span), so the replay is behaviour under fault, not a failure.
"""

import json

import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import TracerProvider


async def run_session(url):
    """A benchmark session, hardened: a failed delete is recorded on its own span, the session's
    outcome kept."""
    tracer = TracerProvider().get_tracer("harness")
    with tracer.start_as_current_span("Agent.Session"):
        async with Client(streamable_http_client(url), mode="legacy") as client:
            created = await client.call_tool("create_session", {"task_id": "task-1"})
            sid = json.loads(created.content[0].text)["session_id"]
            await client.call_tool("echo", {"text": "the agent's work"})
            try:
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    deleted = await client.call_tool("delete_session", {"session_id": sid})
            except Exception:
                return "cleanup failed"
    return "cleanup failed" if deleted.is_error or "error" in deleted.content[0].text else "ok"


# --8<-- [start:marker]
@pytest.mark.mcp_from_trace("from_trace/unhardened.json")  # relative to this file
@pytest.mark.mcp_sidecar(era="session")
async def test_the_incident(mcp_sidecar, mcp_spans):
    assert await run_session(mcp_sidecar.mcp_url) == "ok"
    mcp_spans.assert_invariants()


# --8<-- [end:marker]
