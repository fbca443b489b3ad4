"""The kinds that send notifications before the answer, with the mcp 2.x client in both eras:
``progress_then_stall`` reports progress ``count`` times on the call's answer stream, then holds
until release, the client's timeout or patience (a verdict saying so); ``notification_flood`` sends
``count`` notifications as fast as they go, then the normal answer.
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import pytest
from mcp import types
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import NotificationFlood, ProgressThenStall, Sidecar

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

ERAS = [("session", "legacy"), ("stateless", "auto")]


class Progress:
    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append(progress)


@pytest.mark.parametrize(("era", "mode"), ERAS, ids=[e for e, _ in ERAS])
async def test_progress_then_stall_reports_then_holds_until_patience_cuts_it(era: str, mode: str) -> None:
    progress = Progress()
    budget = 0.5
    with Sidecar(era=era, faults=[ProgressThenStall(count=3, interval=0.05)], patience=budget) as sc:
        start = time.monotonic()
        with pytest.raises(BaseExceptionGroup):  # the reset, as the harness's exit sees it
            async with Client(sc.mcp_url, mode=mode) as client:  # type: ignore[arg-type]
                await client.call_tool("echo", {"text": "x"}, progress_callback=progress)
        took = time.monotonic() - start
        sc.wait_idle(5)
        (v,) = sc.patience_violations
    assert budget <= took < budget + 2.0
    assert progress.seen == [1, 2, 3]  # the work seemed to go on, then nothing came
    sent = sc.journal.server_messages.records
    assert [m.method for m in sent] == ["notifications/progress"] * 3
    assert all(m.request_id == v.request.id for m in sent)
    assert v.request.tool == "echo" and v.request.hold == "patience" and v.request.status == 200
    assert v.describe().startswith(
        "the client waited 0.5 s (the whole budget) on the answer to `POST /mcp` (tools/call echo) "
        f"({era} era), which reported progress and then went quiet ({v.request.bytes_sent} bytes sent: the "
        "status line and the progress notifications, never the result), and never closed the connection"
    ), v.describe()
    assert sc.fired == {"progress_then_stall": 1}


async def test_progress_then_stall_is_bounded_by_the_clients_timeout_even_with_progress() -> None:
    progress = Progress()
    # progress every 0.05 s for 5 s: a timeout that progress extended would end after that, not at 0.3 s
    with Sidecar(faults=[ProgressThenStall(count=100, interval=0.05)], patience=10.0) as sc:
        async with Client(sc.mcp_url) as client:
            with pytest.raises(MCPError, match="Request 'tools/call' timed out"):
                await client.call_tool(
                    "echo", {"text": "x"}, read_timeout_seconds=0.3, progress_callback=progress
                )
        sc.wait_idle(5)
    assert 1 <= len(progress.seen) < 100  # progress came every 0.05 s, and did not extend the 0.3 s timeout
    call = next(r for r in sc.requests if r.tool == "echo")
    assert call.client_closed and call.client_closed_at is not None
    assert call.client_closed_at - call.started_at < 3.0  # at its own 0.3 s timeout, long before the 5 s
    assert sc.patience_violations == ()


async def test_progress_then_stall_released_answers_the_tool_on_the_same_stream() -> None:
    progress = Progress()
    with Sidecar(era="session", faults=[ProgressThenStall(count=2)], patience=5.0) as sc:
        async with Client(sc.mcp_url) as client:
            task = asyncio.ensure_future(
                client.call_tool("echo", {"text": "late"}, progress_callback=progress)
            )
            await asyncio.to_thread(sc.wait_held, 1, 5)
            sc.release()
            result = await asyncio.wait_for(task, 5)
    assert result.content[0].text == "late"  # type: ignore[union-attr]
    assert progress.seen == [1, 2]
    call = next(r for r in sc.requests if r.tool == "echo")
    assert call.hold == "released" and call.status == 200


def test_progress_then_stall_without_a_progress_token_sends_nothing_and_holds() -> None:
    with Sidecar(era="stateless", faults=["progress_then_stall(patience=0.3)@tool:echo"]) as sc:
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}},
        }
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                   "Mcp-Method": "tools/call", "Mcp-Name": "echo"}  # fmt: skip
        with pytest.raises(httpx.TransportError):
            httpx.post(sc.mcp_url, json=call, headers=headers, timeout=5.0)
        sc.wait_idle(5)
    assert sc.journal.server_messages.records == ()
    (v,) = sc.patience_violations
    assert v.request.hold == "patience" and v.request.bytes_sent == 0


@pytest.mark.parametrize(("era", "mode"), ERAS, ids=[e for e, _ in ERAS])
async def test_notification_flood_sends_count_log_messages_then_the_answer(era: str, mode: str) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with Sidecar(era=era, faults=[NotificationFlood(count=300)]) as sc:
        async with Client(sc.mcp_url, mode=mode, logging_callback=on_log) as client:  # type: ignore[arg-type]
            result = await client.call_tool("echo", {"text": "after"})
        sc.wait_idle(5)
    assert result.content[0].text == "after"  # type: ignore[union-attr]
    assert (
        len(logs) == 300
        and logs[0].data == "notification 1 of 300"
        and logs[-1].data == "notification 300 of 300"
    )
    sent = sc.journal.server_messages.records
    assert len(sent) == 300 and {m.method for m in sent} == {"notifications/message"}
    assert sent[-1].sent_at - sent[0].sent_at < 2.0  # as fast as the connection takes them
    assert sc.fired == {"notification_flood": 1}


async def test_notification_flood_with_a_progress_token_floods_progress() -> None:
    progress = Progress()
    with Sidecar(faults=["notification_flood(count=100)@tool:echo"]) as sc:
        async with Client(sc.mcp_url) as client:
            result = await client.call_tool("echo", {"text": "x"}, progress_callback=progress)
    assert result.content[0].text == "x"  # type: ignore[union-attr]
    assert progress.seen == list(range(1, 101))


async def test_a_bounded_journal_keeps_its_limit_of_server_messages_too() -> None:
    with Sidecar(faults=["notification_flood(count=300)@tool:echo"]) as sc:
        sc.journal.set_limit(50)
        async with Client(sc.mcp_url) as client:
            await client.call_tool("echo", {"text": "x"})
    kept = sc.journal.server_messages.records
    assert len(kept) == 50 and sc.journal.server_messages.dropped == 250
    assert [m.seq for m in kept] == list(range(250, 300))  # the newest, their seq never reused


def test_the_kinds_refuse_bad_parameters_naming_them() -> None:
    with pytest.raises(ValueError, match="ProgressThenStall: count must be a non-negative integer"):
        ProgressThenStall(count=-1)
    with pytest.raises(ValueError, match="NotificationFlood: count must be a positive integer"):
        NotificationFlood(count=0)
    with pytest.raises(ValueError, match="ProgressThenStall: interval"):
        ProgressThenStall(interval=-1.0)
