"""Progress and logging from tools, and the two faults on that path: progress that stops, and a
flood of notifications."""

from __future__ import annotations

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import NotificationFlood, ProgressThenStall


# --8<-- [start:progress]
@pytest.mark.mcp_sidecar(tool_sets=("basic", "client"))
async def test_progress_reaches_the_harness(mcp_sidecar):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total))

    async with Client(mcp_sidecar.mcp_url) as client:
        result = await client.call_tool(
            "progress", {"steps": 3, "interval": 0.05}, progress_callback=on_progress
        )
    assert result.content[0].text == "done after 3 steps"
    assert seen == [(1, 3), (2, 3), (3, 3)]


# --8<-- [end:progress]


# --8<-- [start:logging]
@pytest.mark.mcp_sidecar(tool_sets=("basic", "client"))
async def test_logs_at_the_level_the_harness_asked_for(mcp_sidecar):
    levels = []

    async def on_log(params):
        levels.append(params.level)

    async with Client(mcp_sidecar.mcp_url, logging_callback=on_log, log_level="warning") as client:
        await client.call_tool("log", {"level": "info", "message": "chatty"})  # below: not sent
        await client.call_tool("log", {"level": "error", "message": "disk full"})
    assert levels == ["error"]


# --8<-- [end:logging]


# --8<-- [start:stall]
@pytest.mark.mcp_sidecar(faults=[ProgressThenStall(count=3, interval=0.05)], patience=5.0)
async def test_a_bounded_harness_gives_up_when_progress_stops(mcp_sidecar):
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with Client(mcp_sidecar.mcp_url) as client:
        with pytest.raises(MCPError, match="timed out"):  # mcp 2.x does not reset it on progress
            await client.call_tool(
                "echo", {"text": "hi"}, read_timeout_seconds=0.5, progress_callback=on_progress
            )
    assert seen == [1, 2, 3]
    mcp_sidecar.assert_client_gave_up(within=1.0, target="tools/call")


# --8<-- [end:stall]


# --8<-- [start:flood]
@pytest.mark.mcp_sidecar(faults=[NotificationFlood(count=1000, when="tool:echo")])
async def test_the_harness_survives_a_notification_flood(mcp_sidecar):
    logged = []

    async def on_log(params):
        logged.append(params.data)

    async with Client(mcp_sidecar.mcp_url, logging_callback=on_log) as client:
        result = await client.call_tool("echo", {"text": "still here"})
    assert result.content[0].text == "still here"
    assert len(logged) == 1000 and len(mcp_sidecar.journal.server_messages) == 1000


# --8<-- [end:flood]
