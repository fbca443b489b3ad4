"""A sync user tool on a worker thread under a cancel: the thread cannot be killed, so the call is
stopped (no JSON-RPC response), its record says the handler ran on (``ran_on``, ``ran_until``) and
its late result is not sent; a handler taking ``ctx`` gets a ``SyncToolContext`` whose ``cancelled``
event is set, and returns early. Real clients: the mcp 2.x ``Client`` (both eras), mcp 2.x
``sse_client`` on the legacy transport, and a plain httpx harness reading the answer's bytes."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from sse_events import sse_messages
from test_cancellation import call, cancel, initialize, the

from pytest_mcpfaults import IgnoreCancel, Sidecar, SidecarError, StdioServer, SyncToolContext, Tool

SECONDS = {"type": "object", "properties": {"seconds": {"type": "number"}}}


class Blocking:
    """A sync handler that does not look at any ctx: it blocks until the test lets it go."""

    def __init__(self) -> None:
        self.gate, self.returned = threading.Event(), threading.Event()

    def __call__(self, seconds: float) -> str:
        self.gate.wait(10)  # bounded: the test sets it
        self.returned.set()
        return "late result"


class Polite:
    """A sync handler taking ctx: it waits on ``ctx.cancelled`` where it would sleep."""

    def __init__(self) -> None:
        self.saw: list[bool] = []

    def __call__(self, seconds: float, ctx: SyncToolContext) -> str:
        stopped = ctx.cancelled.wait(seconds)
        self.saw.append(stopped)
        return "stopped early" if stopped else f"slept {seconds}"


def _ran_until(sc: Sidecar, label: str) -> None:
    sc.wait_for(lambda rs: any(r.label == label and r.ran_until is not None for r in rs), 5)


async def test_a_blocking_sync_tool_runs_on_after_the_cancel_its_record_says_so_and_nothing_is_sent() -> None:
    handler = Blocking()
    with Sidecar(reply="sse", tools=[Tool("blocking", handler, SECONDS)]) as sc:
        async with httpx.AsyncClient(timeout=10) as client:
            headers = await initialize(client, sc.mcp_url)
            pending = asyncio.ensure_future(
                client.post(sc.mcp_url, json=call(3, "blocking", {"seconds": 5}), headers=headers)
            )
            await asyncio.to_thread(sc.wait_for, lambda rs: any(r.tool == "blocking" for r in rs))
            await client.post(sc.mcp_url, json=cancel(3), headers=headers)
            answer = await asyncio.wait_for(pending, 5)  # answered (nothing) while the handler still runs
            assert answer.status_code == 200 and sse_messages(answer.text) == []
            rec = the(sc, "POST tools/call blocking")
            assert (rec.cancel.outcome, rec.ran_on, rec.ran_until) == ("stopped", True, None)
            assert not handler.returned.is_set()
            assert "its sync handler still runs (its result is not sent)" in sc.journal.format()
            handler.gate.set()
            await asyncio.to_thread(_ran_until, sc, "POST tools/call blocking")
        rec = the(sc, "POST tools/call blocking")
        assert rec.ran_until is not None and rec.ended_at is not None and rec.ran_until > rec.ended_at
        assert f"its sync handler ran on until {rec.ran_until:.3f}s (its result is not sent)" in (
            sc.journal.format()
        )
        assert rec.bytes_sent == len(answer.content)  # what was sent is what the client got: no result
        assert "late result" not in answer.text and sc.errors == []


async def test_mcp2_session_era_cancel_sets_ctx_cancelled_and_the_sync_handler_returns_early() -> None:
    handler = Polite()
    with Sidecar(tools=[Tool("polite", handler, SECONDS)]) as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("polite", {"seconds": 5}, read_timeout_seconds=0.3)
        await asyncio.to_thread(_ran_until, sc, "POST tools/call polite")
        rec = the(sc, "POST tools/call polite")
        assert handler.saw == [True]  # ctx.cancelled was set: it stopped waiting
        assert (rec.cancel.outcome, rec.ran_on) == ("stopped", True)
        assert rec.ran_until is not None and rec.cancel is not None
        assert rec.ran_until - rec.cancel.at < 1.0  # not the 5 s it would have waited
        sc.assert_client_cancelled("tool:polite", within=2.0)


async def test_mcp2_stateless_era_a_closed_stream_sets_ctx_cancelled() -> None:
    handler = Polite()
    with Sidecar(tools=[Tool("polite", handler, SECONDS)]) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("polite", {"seconds": 5}, read_timeout_seconds=0.3)
        await asyncio.to_thread(_ran_until, sc, "POST tools/call polite")
        rec = the(sc, "POST tools/call polite")
        [c] = sc.cancellations
        assert (c.how, rec.cancel.outcome, rec.ran_on, handler.saw) == ("closed", "stopped", True, [True])


async def test_legacy_sse_client_cancel_sets_ctx_cancelled_of_a_sync_tool() -> None:
    handler = Polite()
    with Sidecar(transport="sse", tools=[Tool("polite", handler, SECONDS)]) as sc:
        async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(MCPError, match="timed out"):
                    await session.call_tool("polite", {"seconds": 5}, read_timeout_seconds=0.3)
                again = await session.call_tool("echo", {"text": "on"})
        assert again.content[0].text == "on"
        await asyncio.to_thread(_ran_until, sc, "POST tools/call polite")
        rec = the(sc, "POST tools/call polite")
        assert (rec.cancel.outcome, rec.ran_on, handler.saw) == ("stopped", True, [True])


async def test_ignore_cancel_leaves_ctx_cancelled_unset_and_sends_the_sync_result() -> None:
    handler = Polite()
    with Sidecar(reply="sse", tools=[Tool("polite", handler, SECONDS)], faults=[IgnoreCancel()]) as sc:
        async with httpx.AsyncClient(timeout=10) as client:
            headers = await initialize(client, sc.mcp_url)
            pending = asyncio.ensure_future(
                client.post(sc.mcp_url, json=call(3, "polite", {"seconds": 0.8}), headers=headers)
            )
            await asyncio.to_thread(sc.wait_for, lambda rs: any(r.tool == "polite" for r in rs))
            await client.post(sc.mcp_url, json=cancel(3), headers=headers)
            answer = await asyncio.wait_for(pending, 5)
        [msg] = sse_messages(answer.text)
        assert msg["result"]["content"][0]["text"] == "slept 0.8" and handler.saw == [False]
        rec = the(sc, "POST tools/call polite")
        assert (rec.cancel.outcome, rec.ran_on, rec.ran_until) == ("ignored", False, None)


async def test_a_sync_tool_past_tool_timeout_is_recorded_as_running_on() -> None:
    handler = Blocking()
    sc = Sidecar(tools=[Tool("blocking", handler, SECONDS)], tool_timeout=0.2).start()
    try:
        async with Client(sc.mcp_url, mode="legacy") as client:
            result = await client.call_tool("blocking", {"seconds": 5})
        assert result.is_error  # the time-out's answer, while the handler runs on
        rec = the(sc, "POST tools/call blocking")
        assert (rec.ran_on, rec.ran_until, rec.error_by) == (True, None, "tool")
        handler.gate.set()
        await asyncio.to_thread(_ran_until, sc, "POST tools/call blocking")
    finally:
        handler.gate.set()
        sc.stop()
    with pytest.raises(SidecarError, match=r"did not finish within tool_timeout=0\.2 s"):
        sc.check_errors()


def test_a_sync_handler_may_take_ctx() -> None:
    tool = Tool("polite", Polite(), SECONDS)
    assert tool.wants_context and not tool.is_async


async def test_stdio_mcp2_client_cancel_sets_ctx_cancelled_of_a_sync_tool() -> None:
    handler = Polite()
    with StdioServer(tools=[Tool("polite", handler, SECONDS)]) as server:
        params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
        async with stdio_client(params) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(MCPError, match="timed out"):
                    await session.call_tool("polite", {"seconds": 5}, read_timeout_seconds=0.3)
                again = await session.call_tool("echo", {"text": "on"})
        assert again.content[0].text == "on"
        await asyncio.to_thread(
            server.journal.wait_for,
            lambda: the(server, "POST tools/call polite").ran_until is not None,
            5,
            "the sync handler's end",
        )
        rec = the(server, "POST tools/call polite")
        assert (rec.cancel.outcome, rec.ran_on, handler.saw, rec.bytes_sent) == ("stopped", True, [True], 0)
