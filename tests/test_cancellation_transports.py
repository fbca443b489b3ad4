"""Cancellation on the other transports: the legacy HTTP+SSE transport (a message's reply is made after
its POST's 202, so a ``notifications/cancelled`` posted meanwhile stops it, and the cancel kinds act
there as on Streamable HTTP) and stdio (the core's cancellation, unchanged). Real clients: plain httpx
reading the event stream's bytes, the mcp 2.x ``sse_client`` and ``stdio_client`` with
``ClientSession``, and mcp 1.x's ``sse_client`` through the ``mcp1_client`` fixture."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp1_client import Mcp1Client
from test_cancellation import call, cancel, the
from test_legacy_sse import JSON, Recording, ask, drain, make_core

from pytest_mcpfaults import AnswerAfterCancel, IgnoreCancel, Sidecar, StdioServer, Trigger
from pytest_mcpfaults.core.core import Incoming
from pytest_mcpfaults.verdicts.cancel_checks import check_client_cancelled

CLIENT = {"name": "h", "version": "1"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": CLIENT}}  # fmt: skip
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Stream:
    """A legacy session by hand: the event stream read as it comes, and the message URL to post to."""

    def __init__(self, client: httpx.AsyncClient, lines: AsyncIterator[str], endpoint: str) -> None:
        self.client, self.lines, self.endpoint = client, lines, endpoint

    async def post(self, message: dict[str, Any]) -> httpx.Response:
        return await self.client.post(self.endpoint, json=message)

    async def until(self, rpc_id: int) -> list[dict[str, Any]]:
        """Every message the stream carries up to and with the reply to ``rpc_id`` (bounded: 10 s)."""
        seen: list[dict[str, Any]] = []

        async def read() -> None:
            async for line in self.lines:
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if seen[-1].get("id") == rpc_id:
                        return

        await asyncio.wait_for(read(), 10)
        return seen


@contextlib.asynccontextmanager
async def legacy_session(sc: Sidecar) -> AsyncIterator[Stream]:
    async with httpx.AsyncClient(timeout=10) as client, client.stream("GET", sc.sse_url) as stream:
        lines = stream.aiter_lines()
        endpoint = ""
        async for line in lines:
            if line.startswith("data: "):
                endpoint = sc.url + line[6:]
                break
        s = Stream(client, lines, endpoint)
        assert (await s.post(INIT)).status_code == 202
        await s.until(1)
        await s.post(INITIALIZED)
        yield s


def ids(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("id") for m in messages]


# -- legacy SSE: a cancel stops the call, and no reply is sent for it --------------------------------


async def test_legacy_a_cancel_posted_while_the_call_runs_stops_it_and_no_reply_is_sent() -> None:
    with Sidecar(transport="sse") as sc:
        async with legacy_session(sc) as s:
            posted = await asyncio.wait_for(s.post(call(3, "sleep", {"seconds": 5})), 2)
            assert posted.status_code == 202  # at once: the call runs after its 202
            assert (await s.post(cancel(3))).status_code == 202
            await asyncio.to_thread(sc.wait_for, lambda rs: the(sc, "POST tools/call sleep").done, 3)
            await s.post(call(4, "echo", {"text": "after"}))
            before_echo = await s.until(4)  # the stopped call's reply would have been queued before this
        assert ids(before_echo) == [4] and before_echo[0]["result"]["content"][0]["text"] == "after"
        rec = the(sc, "POST tools/call sleep")
        [c] = sc.cancellations
        assert (c.cancels, c.names, c.in_flight, c.how) == (rec.id, 3, True, "notification")
        assert rec.cancel.outcome == "stopped" and rec.ended_at - rec.started_at < 2.0
        assert (rec.status, rec.bytes_sent) == (202, 8)  # the POST's own answer
        sc.assert_client_cancelled("tool:sleep", within=2.0)


async def test_legacy_mcp2_sse_client_cancels_at_its_read_timeout_and_the_call_is_stopped() -> None:
    with Sidecar(transport="sse") as sc:
        async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                loop = asyncio.get_running_loop()
                started = loop.time()
                with pytest.raises(MCPError, match="timed out"):
                    await session.call_tool("sleep", {"seconds": 5}, read_timeout_seconds=0.3)
                took = loop.time() - started
                again = await session.call_tool("echo", {"text": "on"})  # the session goes on
        assert took < 2.0 and again.content[0].text == "on"
        sc.wait_idle(5)
        rec = the(sc, "POST tools/call sleep")
        [c] = sc.cancellations
        assert (c.cancels, c.in_flight, c.era, c.session_id) == (rec.id, True, "session", rec.session_id)
        assert c.notification == the(sc, "POST notifications/cancelled").id
        assert c.reason is not None and "timed out" in c.reason
        assert rec.cancel.outcome == "stopped" and rec.ended_at - rec.started_at < 2.0
        sc.assert_client_cancelled("tool:sleep", within=2.0)


def test_legacy_mcp1_sse_client_does_not_cancel_and_is_caught(mcp1_client: Mcp1Client) -> None:
    with Sidecar(transport="sse") as sc:
        seen = mcp1_client.call(sc.sse_url, "sleep", {"seconds": 2}, read_timeout=0.5, sse=True)
        assert seen.error is not None and "Timed out" in seen.error
        assert "POST notifications/cancelled" not in sc.journal.sequence() and sc.cancellations == ()
        with pytest.raises(AssertionError) as failed:
            sc.assert_client_cancelled("tool:sleep", within=1.0)
        assert "1 of 1 request(s) matching 'tool:sleep' left in flight were not cancelled within 1 s" in str(
            failed.value
        )
        assert the(sc, "POST tools/call sleep").cancel is None


# -- legacy SSE: the cancel kinds --------------------------------------------------------------------


async def test_legacy_ignore_cancel_runs_the_call_to_its_end_and_sends_its_reply() -> None:
    with Sidecar(transport="sse", faults=[IgnoreCancel(when="tool:sleep")]) as sc:
        async with legacy_session(sc) as s:
            await s.post(call(3, "sleep", {"seconds": 1.0}))
            await s.post(cancel(3))
            [reply] = await s.until(3)
        assert reply["result"]["content"][0]["text"] == "slept 1.0"
        rec = the(sc, "POST tools/call sleep")
        [c] = sc.cancellations
        assert (rec.cancel.outcome, rec.fault) == ("ignored", "ignore_cancel@tool:sleep")
        assert c.in_flight and rec.ended_at - rec.started_at >= 1.0 and rec.ended_at > c.at


async def test_legacy_answer_after_cancel_holds_the_reply_until_the_cancel_then_sends_it() -> None:
    with Sidecar(transport="sse", faults=[AnswerAfterCancel()]) as sc:
        async with legacy_session(sc) as s:
            assert (await s.post(call(3, "echo", {"text": "late"}))).status_code == 202
            await asyncio.to_thread(sc.wait_held, 1)  # the reply is made, and held: not on the stream
            await s.post(cancel(3))
            [reply] = await s.until(3)
        assert reply["result"]["content"][0]["text"] == "late"
        rec = the(sc, "POST tools/call echo")
        [c] = sc.cancellations
        assert (rec.hold, rec.cancel.outcome, rec.status) == ("cancelled", "answered", 202)
        assert rec.ended_at >= c.at and sc.patience_violations == ()


async def test_legacy_answer_after_cancel_without_a_cancel_holds_until_patience() -> None:
    with Sidecar(transport="sse", faults=[AnswerAfterCancel(patience=0.5, expect_hang=True)]) as sc:
        async with legacy_session(sc) as s:
            assert (await s.post(call(3, "echo", {"text": "x"}))).status_code == 202
            with pytest.raises(httpx.HTTPError):  # patience resets the stream the reply was owed on
                await s.until(3)
        [v] = sc.patience_violations
        assert v.kind == "answer_after_cancel" and v.request.label == "POST tools/call echo"
        assert v.request.hold == "patience"


async def test_legacy_mcp2_with_ignore_cancel_times_out_and_the_tool_runs_on() -> None:
    with Sidecar(transport="sse", faults=[IgnoreCancel()]) as sc:
        async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(MCPError, match="timed out"):
                    await session.call_tool("sleep", {"seconds": 1.0}, read_timeout_seconds=0.3)
                await asyncio.to_thread(sc.wait_for, lambda rs: the(sc, "POST tools/call sleep").done, 5)
                again = await session.call_tool("echo", {"text": "next"})  # read after the late reply
        assert again.content[0].text == "next"  # the late reply was ignored
        rec = the(sc, "POST tools/call sleep")
        assert rec.cancel.outcome == "ignored" and rec.ended_at - rec.started_at >= 1.0


async def test_legacy_mcp2_with_answer_after_cancel_gets_the_result_after_its_cancel() -> None:
    with Sidecar(
        transport="sse", faults=[AnswerAfterCancel(patience=5, when=Trigger("tool:echo", times=1))]
    ) as sc:
        async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(MCPError, match="timed out"):
                    await session.call_tool("echo", {"text": "late"}, read_timeout_seconds=0.3)
                await asyncio.to_thread(sc.wait_for, lambda rs: the(sc, "POST tools/call echo").done, 5)
                again = await session.call_tool("echo", {"text": "next"})  # read after the late reply
        assert again.content[0].text == "next"
        recs = [r for r in sc.journal.requests if r.label == "POST tools/call echo"]
        rec = recs[0]
        [c] = sc.cancellations
        assert (rec.hold, rec.cancel.outcome, c.cancels) == ("cancelled", "answered", rec.id)
        assert rec.ended_at >= c.at


# -- stdio: a cancel stops the call there too ---------------------------------------------------------


async def test_stdio_mcp2_client_cancel_stops_the_call() -> None:
    with StdioServer() as server:
        params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
        async with stdio_client(params) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(MCPError, match="timed out"):
                    await session.call_tool("sleep", {"seconds": 5}, read_timeout_seconds=0.3)
                again = await session.call_tool("echo", {"text": "on"})
        assert again.content[0].text == "on"
        rec = the(server, "POST tools/call sleep")
        [c] = server.journal.cancellations
        assert (c.cancels, c.in_flight, rec.cancel.outcome) == (rec.id, True, "stopped")
        assert rec.ended_at - rec.started_at < 2.0 and rec.bytes_sent == 0  # no line was written for it
        [child_cancel] = server.child.cancels
        assert child_cancel.request == rec.id
        check_client_cancelled(server, "tool:sleep", 2.0)


# -- legacy SSE, in the core: a cancel that comes before the reply began ----------------------------


@pytest.mark.parametrize(
    ("fault", "events", "outcome"),
    [(None, 0, "stopped"), (IgnoreCancel(), 1, "ignored")],
)
async def test_core_a_cancel_before_the_legacy_reply_began_still_acts(
    fault: IgnoreCancel | None, events: int, outcome: str
) -> None:
    core, t = make_core([fault] if fault else []), Recording()
    session = (await ask(core, t, "GET", "/sse")).stream
    q = f"session_id={session.id}"
    await ask(core, t, "POST", "/messages", INIT, q)
    await drain(session)
    rid = core.journal.add_request(conn_id=1, method="POST", path="/messages")
    body = json.dumps(call(3, "echo", {"text": "x"})).encode()
    posted = await core.decide(rid, Incoming("POST", "/messages", JSON, list(JSON.items()), body, q), t)
    assert posted is not None and posted.replying is not None  # 202 now, the reply not begun yet
    await ask(core, t, "POST", "/messages", cancel(3), q)  # the cancel overtakes it
    await posted.replying.make(t)  # type: ignore[arg-type]
    assert len(await drain(session)) == events
    assert core.journal.request(rid).cancel.outcome == outcome
