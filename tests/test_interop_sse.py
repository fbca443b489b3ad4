"""The mcp SDK's legacy HTTP+SSE client (``mcp.client.sse.sse_client`` + ``ClientSession``) against a
sidecar serving ``transport='sse'`` or ``'both'``: initialize, list tools, call a tool, the
benchmark-session tools, close. The same file runs with mcp 2.x (the main environment) and mcp 1.x
(``tox -e mcp1``): both SDKs ship this client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from pytest_mcpfaults import BackendGone, Sidecar


def field(obj: Any, snake: str, camel: str) -> Any:
    """A result field under its mcp 2.x (snake_case) or mcp 1.x (camelCase) name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def session_run(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with sse_client(url, timeout=5) as (read, write):  # noqa: SIM117
        async with ClientSession(read, write) as session:
            seen["init"] = await session.initialize()
            seen["tools"] = await session.list_tools()
            seen["echo"] = await session.call_tool("echo", {"text": "hello"})
            tasks = await session.call_tool("list_tasks", {})
            task = json.loads(tasks.content[0].text)["tasks"][0]  # type: ignore[union-attr]
            created = await session.call_tool("create_session", {"task_id": task})
            sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
            evaluated = await session.call_tool("evaluate_session", {"session_id": sid})
            deleted = await session.call_tool("delete_session", {"session_id": sid})
            seen["bench"] = [json.loads(r.content[0].text) for r in (created, evaluated, deleted)]  # type: ignore[union-attr]
    return seen


@pytest.mark.parametrize("transport", ["sse", "both"])
async def test_sse_client_initializes_lists_calls_and_runs_a_benchmark_session(transport: str) -> None:
    with Sidecar(transport=transport) as sc:
        seen = await asyncio.wait_for(session_run(sc.sse_url), 30)
        sc.wait_idle(5)
        assert field(seen["init"], "server_info", "serverInfo").name == "mcpfaults-sidecar"
        assert field(seen["init"], "protocol_version", "protocolVersion") in ("2024-11-05", "2025-11-25")
        names = {t.name for t in seen["tools"].tools}
        assert names >= {
            "echo",
            "sleep",
            "list_tasks",
            "create_session",
            "evaluate_session",
            "delete_session",
        }
        assert seen["echo"].content[0].text == "hello"
        assert field(seen["echo"], "is_error", "isError") is False
        assert [b["status"] for b in seen["bench"]] == ["success", "success", "success"]
        assert sc.benchmark.live == []
        seq = sc.journal.sequence()
        assert seq[:3] == ["GET /sse", "POST initialize", "POST notifications/initialized"], seq
        calls = [s for s in seq if s.startswith("POST tools/call")]
        tools = ("echo", "list_tasks", "create_session", "evaluate_session", "delete_session")
        assert calls == ["POST tools/call " + t for t in tools]
        stream, *posts = sc.requests
        assert stream.status == 200 and stream.client_closed
        assert all(p.status == 202 and p.path == "/messages" and p.era == "session" for p in posts)
        [mcp_session] = {p.session_id for p in posts[1:]}  # every message after initialize: one MCP session
        assert sc.sessions == () and sc.ended_sessions == (mcp_session,)  # ended with its stream


async def test_a_backend_gone_delete_reaches_sse_client_as_the_tool_result() -> None:
    with Sidecar(transport="sse", faults=[BackendGone(when="tool:delete_session")]) as sc:

        async def delete() -> Any:
            async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("delete_session", {"session_id": "b-1"})

        result = await asyncio.wait_for(delete(), 30)
        payload = json.loads(result.content[0].text)
        assert payload == {"error": f"Error closing session b-1: Service at {sc.url} is no longer alive"}
        assert sc.fired == {"backend_gone": 1}
        assert [r.status for r in sc.requests if r.tool == "delete_session"] == [202]


async def test_a_die_between_the_202_and_the_reply_ends_the_call_with_connection_closed() -> None:
    with Sidecar(transport="sse", faults=["die@tool:echo"]) as sc:

        async def call() -> Any:
            async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("echo", {"text": "x"})

        with pytest.raises(BaseException) as caught:  # noqa: PT011 - anyio's ExceptionGroup around it
            await asyncio.wait_for(call(), 20)
        assert "Connection closed" in repr(caught.value)  # McpError (1.x) / MCPError (2.x), -32000
        assert (sc.requests[-1].label, sc.requests[-1].status, sc.state) == (
            "POST tools/call echo",
            202,
            "dead",
        )


async def test_sse_client_waits_past_its_own_read_timeout_for_an_endpoint_event_that_never_comes() -> None:
    """Measured in mcp 1.30 and 2.x: when the stream times out (or is reset) before the endpoint event,
    ``sse_client`` hands the error to a stream nobody reads yet and never returns; only a bound around
    it (here ``asyncio.wait_for``) ends the wait."""
    with Sidecar(transport="sse", faults=["stall@GET /sse"], patience=None) as sc:

        async def connect() -> None:
            async with sse_client(sc.sse_url, timeout=5, sse_read_timeout=0.3):
                pass  # pragma: no cover - never connected

        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(connect(), 2.0)
        sc.wait_for(lambda reqs: reqs[0].hold == "client_closed", 5)  # its read timeout closed the stream
        [stream] = sc.requests
        assert (stream.status, stream.bytes_sent, stream.client_closed) == (200, 0, True)


async def test_the_patience_verdict_names_the_stream_while_sse_client_is_still_waiting() -> None:
    with Sidecar(transport="sse", faults=["stall@GET /sse"], patience=0.5, expect_hang=True) as sc:

        async def connect() -> None:
            async with sse_client(sc.sse_url, timeout=5):
                pass  # pragma: no cover - never connected

        with pytest.raises(asyncio.TimeoutError):  # reset at 0.5 s, and sse_client still waits
            await asyncio.wait_for(connect(), 2.0)
        [v] = sc.patience_violations
        assert (v.request.label, v.request.hold, v.kind, v.budget) == ("GET /sse", "patience", "stall", 0.5)
        assert "on the response to `GET /sse`, which stalled after the status line (200) and 0 bytes" in (
            v.describe()
        )


async def test_a_malformed_reply_event_is_dropped_by_sse_client_and_the_call_waits_on() -> None:
    """Measured in mcp 1.30 and 2.x: an ``event: message`` whose data is not JSON is logged and
    dropped; the call it answered is never resolved, so only the caller's own timeout ends it."""
    with Sidecar(transport="sse", faults=["malformed_json@tool:echo[times=1]"]) as sc:
        async with sse_client(sc.sse_url, timeout=5) as (read, write):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(session.call_tool("echo", {"text": "x"}), 1.5)
                again = await asyncio.wait_for(session.call_tool("echo", {"text": "y"}), 10)  # it goes on
        assert again.content[0].text == "y"
        assert sc.fired == {"malformed_json": 1}
