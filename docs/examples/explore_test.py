"""Explore: one clean test, and the plugin runs it again under each catalogue fault at each step.

The harness creates a benchmark session, makes one tool call, and deletes the session in a
``finally``: its cleanup never raises, and every call has a timeout. Its test checks only the clean
path. ``@pytest.mark.mcp_explore`` turns it into a campaign: ``test_session[explore:clean]`` records the
footprint (three ``tools/call`` steps), then one run per (step, kind) follows, such as
``test_session[explore:die-at-tool:echo[1]]``. None of them is a violation: no exception escapes, no
connection is left open, no request outlives its patience. Where the test's own assert no longer
holds (the echo failed) the run is reported as *behaviour under fault* (xfailed), not as a failure.
"""

import httpx
import pytest

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


def call_tool(client, url, name, arguments):
    """One stateless-era MCP tools/call; returns the tool result (raises on any failure)."""
    reply = client.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
        headers={**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": name},
    )
    reply.raise_for_status()
    message = reply.json()
    if "error" in message:
        raise RuntimeError(f"JSON-RPC error {message['error']['code']}")
    return message["result"]


def run_task(url):
    """The harness: create, work, always clean up. Returns what the agent answered, or None."""
    with httpx.Client(timeout=1.0) as client:
        try:
            call_tool(client, url, "create_session", {"task_id": "task-1"})
        except (httpx.HTTPError, ValueError, RuntimeError):
            return None
        try:
            result = call_tool(client, url, "echo", {"text": "done"})
            return None if result.get("isError") else result["content"][0]["text"]
        except (httpx.HTTPError, ValueError, RuntimeError):
            return None
        finally:
            try:
                call_tool(client, url, "delete_session", {"session_id": "task-1"})
            except (httpx.HTTPError, ValueError, RuntimeError):
                pass  # a failed cleanup is logged, never raised


# --8<-- [start:explore]
@pytest.mark.mcp_explore(kinds=["die", "status", "reset", "tool_error", "backend_gone"])
@pytest.mark.mcp_sidecar(era="stateless", patience=3.0)
def test_session(mcp_sidecar):
    assert run_task(mcp_sidecar.mcp_url) == "done"
    # --8<-- [end:explore]
