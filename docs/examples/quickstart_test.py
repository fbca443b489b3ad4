"""Quick start: a sidecar per test, a fault aimed at one MCP tool, and what both sides saw."""

import json

import httpx
import pytest
from mcp.client import Client

from pytest_mcpfaults import BackendGone, Status, Trigger


async def test_list_and_call(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hello"})
    assert "create_session" in {t.name for t in tools.tools}
    assert result.content[0].text == "hello"
    assert mcp_sidecar.journal.sequence() == [
        "POST server/discover",
        "POST tools/list",
        "POST tools/call echo",
    ]


@pytest.mark.mcp_sidecar(faults=[BackendGone()])
async def test_backend_gone_at_delete(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        created = await client.call_tool("create_session", {"task_id": "task-1"})
        session_id = json.loads(created.content[0].text)["session_id"]
        deleted = await client.call_tool("delete_session", {"session_id": session_id})
    assert deleted.content[0].text == (
        f'{{"error": "Error closing session {session_id}: Service at {mcp_sidecar.url} is no longer alive"}}'
    )
    assert mcp_sidecar.fired == {"backend_gone": 1}


@pytest.mark.mcp_sidecar(faults=[Status(503, when=Trigger("health", times=3))])
def test_runner_starting_up(mcp_sidecar):
    statuses = [httpx.get(mcp_sidecar.health_url).status_code for _ in range(4)]
    assert statuses == [503, 503, 503, 200]
