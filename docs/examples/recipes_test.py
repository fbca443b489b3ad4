"""Recipes: the same sidecar driven by each kind of client a harness may use."""

import fastmcp
import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import SessionExpired, Stall, Trigger


# --8<-- [start:mcp2]
@pytest.mark.mcp_sidecar(era="session", faults=[SessionExpired(when=Trigger("tools/call", nth=2))])
async def test_mcp2_session_expired_is_not_reinitialised(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:  # auto mode falls back to the session era
        await client.call_tool("echo", {"text": "first"})
        with pytest.raises(MCPError, match="Session not found"):
            await client.call_tool("echo", {"text": "second"})
    methods = [r.mcp_method for r in mcp_sidecar.requests if r.mcp_method]
    assert methods.count("initialize") == 1  # mcp 2.x does not re-initialise after a 404


# --8<-- [end:mcp2]


# --8<-- [start:fastmcp]
@pytest.mark.mcp_sidecar(reply="sse")
async def test_fastmcp_client(mcp_sidecar):
    async with fastmcp.Client(mcp_sidecar.mcp_url) as client:
        result = await client.call_tool("create_session", {"task_id": "task-1"})
    assert '"status": "success"' in result.content[0].text
    assert len(mcp_sidecar.benchmark.live) == 1


# --8<-- [end:fastmcp]


# --8<-- [start:httpx]
@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=5, when="health")])
def test_probe_releases_a_stalled_health_body(mcp_sidecar):
    with httpx.Client(timeout=1.0) as http, http.stream("GET", mcp_sidecar.health_url) as response:
        status = response.status_code  # read the status, then abort: never wait for the body
    assert status == 200
    mcp_sidecar.wait_idle(timeout=2.0)  # the sidecar saw the client close its connection
    mcp_sidecar.assert_client_released(within=1.0, target="health")


# --8<-- [end:httpx]
