"""Explore with the in-process backend: a test that opens its own ``mock_sidecar`` asks for the
``mcpfaults_explore`` fixture, and each run's faults reach that sidecar (docs/explore.md, "The
in-process backend"). The harness cleans up in a ``finally`` and never lets a failure escape; the
test checks only the clean path, so under a fault its own assert is *behaviour under fault*.
"""

import httpx
import pytest

from pytest_mcpfaults.inprocess import mock_sidecar

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


def run_harness(url):
    """Work, always clean up. Returns what the agent answered, or None."""
    with httpx.Client(timeout=1.0) as client:
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


# --8<-- [start:inprocess]
@pytest.mark.mcp_explore(kinds=["die", "status", "tool_error"])
def test_session(mcpfaults_explore):
    with mock_sidecar(era="stateless") as side:
        assert run_harness(side.mcp_url) == "done"
    # --8<-- [end:inprocess]
