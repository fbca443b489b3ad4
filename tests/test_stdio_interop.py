"""Other stdio clients against ``python -m pytest_mcpfaults stdio``: the mcp SDK's low-level
``stdio_client`` + ``ClientSession`` (the API mcp 1.x and 2.x share; ``tox -e mcp1`` runs this module
under mcp 1.x), fastmcp's ``StdioTransport``, and the TypeScript SDK's ``StdioClientTransport`` (where
node is installed: ``docs/examples/ts/stdio_client.mjs``, run from the TypeScript recipe's install).
Each: a tool call, a die mid-call, and the close escalation against a child that ignores EOF and
SIGTERM (measured: the SDKs wait 2 s after closing stdin, then SIGTERM, 2 s more, then SIGKILL;
docs/stdio.md)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from npm_recipe import NPM_CI_TIMEOUT, installed

from pytest_mcpfaults import StdioServer

MCP_MAJOR = int(metadata.version("mcp").split(".")[0])


def params(server: StdioServer) -> StdioServerParameters:
    return StdioServerParameters(command=server.command, args=server.args, env=server.env)


async def sdk_session(server: StdioServer) -> tuple[Any, float]:
    """A tool call over the SDK's stdio_client + ClientSession; (what the call gave, close seconds)."""
    async with stdio_client(params(server)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            try:
                result: Any = (await session.call_tool("echo", {"text": "sdk"})).content[0].text
            except Exception as exc:
                result = exc
        closing = time.monotonic()
    return result, time.monotonic() - closing


def test_the_sdk_stdio_client_calls_a_tool_and_closes_cleanly() -> None:
    with StdioServer() as server:
        result, closed = asyncio.run(asyncio.wait_for(sdk_session(server), 30))
        child = server.wait_exit()
    assert result == "sdk"
    assert closed < 1.0
    assert (child.exit_how, child.exit_code) == ("stdin closed", 0)
    assert server.journal.sequence()[:2] == ["POST initialize", "POST notifications/initialized"]


def test_the_sdk_stdio_client_sees_a_die_as_a_closed_connection() -> None:
    with StdioServer(faults=["die@tools/call"]) as server:
        result, _ = asyncio.run(asyncio.wait_for(sdk_session(server), 30))
        child = server.wait_exit()
    assert type(result).__name__ in ("MCPError", "McpError") and "Connection closed" in str(result)
    assert (child.exit_how, child.exit_code) == ("die fault", 1)


def test_the_sdk_close_escalation_against_a_child_that_ignores_eof_and_sigterm() -> None:
    with StdioServer(faults=["ignore_eof", "ignore_sigterm"], patience=None) as server:
        result, closed = asyncio.run(asyncio.wait_for(sdk_session(server), 30))
        child = server.wait_exit()
    assert result == "sdk"
    assert child.stdin_closed_at is not None and child.ignored_eof
    [term] = child.received("SIGTERM")
    assert term.action == "ignored"
    assert 1.9 < term.at - child.stdin_closed_at < 3.0  # stdin closed, then 2 s, then SIGTERM
    assert child.exited_at is not None and 1.9 < child.exited_at - term.at < 3.0  # 2 s more, then SIGKILL
    assert 3.8 < closed < 5.5 if MCP_MAJOR >= 2 else closed > 1.9


# -- fastmcp ----------------------------------------------------------------------------------------


def test_fastmcp_stdio_transport() -> None:
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp is not installed (it needs mcp 2.x)")
    from fastmcp.client.transports import StdioTransport

    async def go(server: StdioServer) -> tuple[Any, float]:
        transport = StdioTransport(server.command, server.args, env=server.env, keep_alive=False)
        async with fastmcp.Client(transport) as client:
            try:
                result: Any = (await client.call_tool("echo", {"text": "fm"})).content[0].text
            except Exception as exc:
                result = exc
            closing = time.monotonic()
        return result, time.monotonic() - closing

    with StdioServer() as server:
        result, closed = asyncio.run(asyncio.wait_for(go(server), 30))
        child = server.wait_exit()
    assert (result, child.exit_how) == ("fm", "stdin closed")
    assert closed < 1.0
    # it asks server/discover first; the session era refuses it with an error carrying its id
    assert server.journal.sequence()[:2] == ["POST server/discover", "POST initialize"]

    with StdioServer(faults=["die@tools/call"]) as server:
        result, _ = asyncio.run(asyncio.wait_for(go(server), 30))
    assert str(result) == "Connection closed"

    with StdioServer(faults=["ignore_eof", "ignore_sigterm"], patience=None) as server:
        result, closed = asyncio.run(asyncio.wait_for(go(server), 30))
        child = server.wait_exit()
    assert result == "fm" and 3.8 < closed < 5.5  # fastmcp closes through the mcp SDK's stdio_client
    assert [s.action for s in child.received("SIGTERM")] == ["ignored"]


# -- the TypeScript SDK ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_recipe(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """``node`` and the TypeScript recipe's install (tests/npm_recipe.py), holding ``stdio_client.mjs``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(
            f"the TypeScript SDK's StdioClientTransport needs node and npm (node: {node}, npm: {npm})"
        )
    return node, installed(request.config, npm, "stdio_client.mjs")


def ts_client(ts_recipe: tuple[str, Path], server: StdioServer) -> dict[str, Any]:
    node, folder = ts_recipe
    arg = json.dumps({"command": server.command, "args": server.args, "env": server.env})
    proc = subprocess.run(
        [node, str(folder / "stdio_client.mjs"), arg], capture_output=True, text=True, timeout=60, cwd=folder
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)  # the first test that uses the recipe may install it
def test_the_typescript_sdk_stdio_client_transport(ts_recipe: tuple[str, Path]) -> None:
    with StdioServer() as server:
        out = ts_client(ts_recipe, server)
        child = server.wait_exit()
    assert out["text"] == "from node" and out["close_ms"] < 1000
    assert (child.exit_how, child.exit_code) == ("stdin closed", 0)

    with StdioServer(faults=["die@tools/call"]) as server:
        out = ts_client(ts_recipe, server)
    assert out["error"] == "McpError: MCP error -32000: Connection closed"

    with StdioServer(faults=["ignore_eof", "ignore_sigterm"], patience=None) as server:
        out = ts_client(ts_recipe, server)
        child = server.wait_exit()
    assert 3800 < out["close_ms"] < 5500  # stdin end, 2 s, SIGTERM, 2 s, SIGKILL
    [term] = child.received("SIGTERM")
    assert child.stdin_closed_at is not None and 1.9 < term.at - child.stdin_closed_at < 3.0
