"""docs/stdio.md: a stdio MCP server that the harness spawns, with faults, as a test sees it.

Run with ``pytest -p mcpfaults docs/examples/stdio_test.py``.
"""

from __future__ import annotations

import asyncio

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError


# --8<-- [start:harness]
async def run_harness(command: str, args: list[str], env: dict[str, str]) -> str:
    """The harness under test: it spawns an MCP server over stdio and calls one tool; a failed call
    is reported, not raised."""
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=5) as client:
        try:
            result = await client.call_tool("echo", {"text": "hello"})
        except MCPError as exc:
            return f"failed: {exc}"
        return result.content[0].text  # type: ignore[union-attr]


# --8<-- [end:harness]


# --8<-- [start:fixture]
def test_the_harness_talks_to_a_stdio_server(mcp_stdio_server):
    assert asyncio.run(
        run_harness(mcp_stdio_server.command, mcp_stdio_server.args, mcp_stdio_server.env)
    ) == ("hello")

    child = mcp_stdio_server.wait_exit()  # the harness closed stdin: the child exited at once
    assert (child.exit_how, child.exit_code) == ("stdin closed", 0)
    assert mcp_stdio_server.journal.sequence() == [
        "POST initialize",
        "POST notifications/initialized",
        "POST tools/call echo",
        "POST tools/list",
    ]


# --8<-- [end:fixture]


# --8<-- [start:die]
@pytest.mark.mcp_stdio(faults=["die@tools/call"])
def test_a_server_that_crashes_mid_call(mcp_stdio_server):
    server = mcp_stdio_server
    assert asyncio.run(run_harness(server.command, server.args, server.env)) == "failed: Connection closed"
    assert server.wait_exit().exit_how == "die fault"  # it exited with status 1 on the call
    assert server.fired == {"die": 1}


# --8<-- [end:die]


# --8<-- [start:close]
@pytest.mark.mcp_expect_hang  # remove it, and this test fails with the verdict below
@pytest.mark.mcp_stdio(faults=["ignore_eof", "ignore_sigterm"], patience=1.0)
def test_a_server_that_will_not_exit(mcp_stdio_server):
    server = mcp_stdio_server
    asyncio.run(run_harness(server.command, server.args, server.env))  # its close waited 1 s, not 4 s

    [violation] = server.patience_violations
    assert violation.describe() == (
        "the client closed stdin and waited 1 s (the whole budget) for a child that ignores EOF; "
        "it never sent SIGTERM"
    )
    assert server.wait_exit(5).exit_how == "patience"  # the test process killed it (SIGKILL)


# --8<-- [end:close]


# --8<-- [start:runtime]
def test_freeze_the_server_mid_session(mcp_stdio_server):
    server = mcp_stdio_server

    async def harness() -> str:
        params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
        async with Client(params, mode="legacy", read_timeout_seconds=0.5) as client:
            server.freeze()  # SIGSTOP: nothing is read or answered
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("echo", {"text": "lost"})
            server.revive()  # SIGCONT: the child reads what waited in its stdin
            return (await client.call_tool("echo", {"text": "back"})).content[0].text  # type: ignore[union-attr]

    assert asyncio.run(harness()) == "back"
    assert [s.name for s in server.child.signals] == ["SIGSTOP", "SIGCONT"]


# --8<-- [end:runtime]
