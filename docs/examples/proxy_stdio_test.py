"""Proxy mode with a stdio server: the sidecar spawns your stdio MCP server (docs/examples/
proxy_stdio_server.py), forwards every request its faults do not answer to it over the child's stdin
and stdout, and kills it at stop."""

import os
import sys
from pathlib import Path

import pytest
from mcp.client import Client

from pytest_mcpfaults.faults import Die, ToolError, Trigger

if sys.version_info < (3, 11):  # the backport that anyio (and so mcp) already installs
    from exceptiongroup import ExceptionGroup

# --8<-- [start:command]
SERVER = [sys.executable, str(Path(__file__).with_name("proxy_stdio_server.py"))]
# --8<-- [end:command]


# --8<-- [start:die]
@pytest.mark.mcp_sidecar(upstream_command=SERVER, faults=[Die(when=Trigger("tools/call", nth=2))])
async def test_your_stdio_server_dies_under_the_second_call(mcp_sidecar):
    with pytest.raises(ExceptionGroup):  # noqa: PT012 - the client sees the connection reset
        async with Client(mcp_sidecar.mcp_url, mode="auto", read_timeout_seconds=10) as client:
            first = await client.call_tool("open_ticket", {"title": "printer on fire"})
            assert '"id": 1' in first.content[0].text
            await client.call_tool("count_tickets", {})
    opened, died = [r for r in mcp_sidecar.requests if r.mcp_method == "tools/call"]
    assert opened.forwarded and opened.upstream.bytes > 0  # your server answered it
    assert died.fault_kind == "die" and not died.forwarded  # it never saw this one


# --8<-- [end:die]


# --8<-- [start:rewrite]
@pytest.mark.mcp_sidecar(
    upstream_command=SERVER, faults=[ToolError(text="db locked", when="tool:open_ticket")]
)
async def test_your_stdio_server_runs_the_tool_the_client_gets_an_error(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto", read_timeout_seconds=10) as client:
        result = await client.call_tool("open_ticket", {"title": "x"})
        assert result.is_error and result.content[0].text == "db locked"
        assert (await client.call_tool("count_tickets", {})).content[0].text == "1"  # it ran


# --8<-- [end:rewrite]


# --8<-- [start:owned]
def test_the_sidecar_owns_the_child(mcp_sidecar_factory):
    sc = mcp_sidecar_factory(upstream_command=SERVER)
    pid = sc.upstream_pid
    os.kill(pid, 0)  # running: spawned at start
    sc.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone: SIGTERM (then SIGKILL) to its process group at stop


# --8<-- [end:owned]
