"""Answer faults end to end: HTTP status on MCP, latency, JSON-RPC error, tool isError, session
expired, benchmark backend gone, a tool's error payload; with the mcp 2.x ``Client`` in both eras and
plain httpx.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import (
    Absent,
    BackendGone,
    Delay,
    ErrorPayload,
    JsonRpcError,
    SessionExpired,
    Status,
    ToolError,
    Trigger,
)

MODES = ["auto", "legacy"]


def text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("code", [500, 502, 503, 429])
async def test_status_on_tools_call(mode: str, code: int) -> None:
    with Sidecar(faults=[Status(code, retry_after=2, when=Trigger("tools/call", times=1))]) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=2.0) as client:
            with pytest.raises(MCPError, match="Server returned an error response"):
                await client.call_tool("echo", {"text": "a"})
            assert text(await client.call_tool("echo", {"text": "b"})) == "b"  # times=1: next call passes
        await asyncio.to_thread(sc.wait_idle, 3)
        calls = [r for r in sc.requests if r.mcp_method == "tools/call"]
        assert [(r.status, r.fault_kind) for r in calls] == [(code, "status"), (200, None)]


def test_status_retry_after_and_body_over_plain_http() -> None:
    with Sidecar(faults=[Status(429, retry_after=7, body="slow down", when="POST /mcp")]) as sc:
        r = httpx.post(sc.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=2.0)
        assert r.status_code == 429
        assert r.headers["Retry-After"] == "7"
        assert r.json() == {"error": "slow down"}
        assert httpx.get(sc.health_url, timeout=2.0).status_code == 200  # only POST /mcp is targeted


@pytest.mark.parametrize("mode", MODES)
async def test_delay_longer_than_the_client_timeout(mode: str) -> None:
    with Sidecar(faults=[Delay(0.6, when=Trigger("tools/call", times=1))]) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=0.2) as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("echo", {"text": "a"})
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.fault_kind == "delay"
        assert not call.held


def test_delay_jitter_is_drawn_from_the_seed() -> None:
    """The nth firing waits ``seconds`` + the nth draw of the seeded generator: the same on every run."""
    import random

    with Sidecar(faults=[Delay(0.0, jitter=0.2, seed=7, when="health")]) as sc:
        with httpx.Client(timeout=2.0) as client:
            for _ in range(3):
                client.get(sc.health_url)
        took = [r.ended_at - r.started_at for r in sc.requests if r.ended_at is not None]
    drawn = [random.Random(7 * 1_000_003 + n).random() * 0.2 for n in (1, 2, 3)]
    assert len(took) == 3
    assert all(t >= d for t, d in zip(took, drawn, strict=False))


@pytest.mark.parametrize("mode", MODES)
async def test_jsonrpc_error(mode: str) -> None:
    with Sidecar(faults=[JsonRpcError(-32001, "backend exploded", when="tools/call")]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            with pytest.raises(MCPError) as exc_info:
                await client.call_tool("echo", {"text": "a"})
            assert (await client.list_tools()).tools  # other methods still answer
        assert (exc_info.value.code, exc_info.value.message) == (-32001, "backend exploded")
        assert sc.fired == {"jsonrpc_error": 1}


@pytest.mark.parametrize("mode", MODES)
async def test_tool_error_is_a_result_not_an_exception(mode: str) -> None:
    with Sidecar(faults=[ToolError(text="disk full", when="tool:echo")]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            failed = await client.call_tool("echo", {"text": "a"})
            other = await client.call_tool("list_tasks", {})
        assert failed.is_error
        assert text(failed) == "disk full"
        assert not other.is_error
        assert json.loads(text(other)) == {"tasks": ["task-1", "task-2", "task-3"]}
        assert [r.tool for r in sc.requests if r.fault_kind == "tool_error"] == ["echo"]


async def test_session_expired_legacy_client(caplog: pytest.LogCaptureFixture) -> None:
    """mcp 2.x: MCPError('Session not found'), no re-initialise; the exit's DELETE gets 404 too and the
    client logs a WARNING it swallows."""
    with Sidecar(faults=[SessionExpired(when=Trigger("tools/call", nth=2))]) as sc:
        with caplog.at_level(logging.WARNING, logger="mcp"):
            async with Client(sc.mcp_url, mode="legacy") as client:
                assert text(await client.call_tool("echo", {"text": "a"})) == "a"
                for _ in range(2):  # the expiring call, then one that only carries the dead session
                    with pytest.raises(MCPError, match="Session not found"):
                        await client.call_tool("echo", {"text": "b"})
        await asyncio.to_thread(sc.wait_idle, 3)
        calls = [r for r in sc.requests if r.mcp_method == "tools/call"]
        assert [(r.status, r.fault_kind) for r in calls] == [
            (200, None),
            (404, "session_expired"),
            (404, None),
        ]
        assert sc.journal.sequence().count("POST initialize") == 1  # no re-initialise
        delete = sc.requests[-1]
        assert delete.label == "DELETE /mcp"
        assert delete.status == 404
        assert sc.sessions == ()
        assert calls[0].session_id in sc.ended_sessions
        assert any("Session termination failed: 404" in r.getMessage() for r in caplog.records)


async def test_session_expired_stateless_client_gets_404_too() -> None:
    with Sidecar(faults=[SessionExpired(when="tools/call")]) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            with pytest.raises(MCPError, match="Session not found"):
                await client.call_tool("echo", {"text": "a"})
        assert sc.requests[-1].status == 404
        assert sc.requests[-1].session_id is None


@pytest.mark.parametrize("mode", MODES)
async def test_backend_gone_on_other_tools(mode: str) -> None:
    url = "http://127.0.0.1:59685"
    with Sidecar(faults=[BackendGone(service_url=url, when="tool:evaluate_session")]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            created = json.loads(text(await client.call_tool("create_session", {"task_id": "task-1"})))
            gone = await client.call_tool("evaluate_session", {"session_id": created["session_id"]})
        assert not gone.is_error  # the real benchmark answers the error inside a successful result
        assert json.loads(text(gone)) == {"error": f"Service at {url} is no longer alive"}


def test_absent_on_the_mcp_endpoint() -> None:
    with Sidecar(faults=[Absent(when="mcp")]) as sc:
        r = httpx.post(sc.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=2.0)
        assert (r.status_code, r.json()) == (404, {"error": "Not Found"})
        assert sc.requests[0].fault_kind == "absent"


# -- a failed delete (or any tool's error payload) with a given reason -----------------------------


async def _create(client: Client) -> str:
    created = json.loads(text(await client.call_tool("create_session", {"task_id": "task-1"})))
    return str(created["session_id"])


@pytest.mark.parametrize("mode", MODES)
async def test_error_payload_stages_a_failed_delete_and_times_1_lets_the_retry_through(mode: str) -> None:
    fault = ErrorPayload(reason="backend timed out", when=Trigger("tool:delete_session", times=1))
    with Sidecar(faults=[fault]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            sid = await _create(client)
            failed = await client.call_tool("delete_session", {"session_id": sid})
            assert [s.session_id for s in sc.benchmark.live] == [sid]  # the tool did not run
            retried = await client.call_tool("delete_session", {"session_id": sid})
        await asyncio.to_thread(sc.wait_idle, 3)
        assert not failed.is_error  # a normal tool result, as a real benchmark sidecar answers it
        assert text(failed) == json.dumps({"error": f"Error closing session {sid}: backend timed out"})
        assert not retried.is_error and json.loads(text(retried)) == {"status": "success"}
        assert [s.session_id for s in sc.benchmark.deleted] == [sid]
        deletes = [r for r in sc.requests if r.label == "POST tools/call delete_session"]
        assert [(r.fault_kind, r.fault, r.status) for r in deletes] == [
            ("error_payload", str(fault), 200),
            (None, None, 200),
        ]
        assert str(fault) == "error_payload@tool:delete_session[times=1]"  # the default reason
        assert sc.fired == {"error_payload": 1}
        # what a test of "a failed delete is not retried" counts:
        assert sc.journal.sequence().count("POST tools/call delete_session") == 2


async def test_error_payload_on_another_tool_with_a_message_template() -> None:
    template = "{tool} failed for {task_id}: {reason} ({nope})"
    with Sidecar(faults=[ErrorPayload("quota exceeded", template, when="tool:create_session")]) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            failed = await client.call_tool("create_session", {"task_id": "task-2"})
            other = await client.call_tool("list_tasks", {})
        assert not failed.is_error
        assert json.loads(text(failed)) == {
            "error": "create_session failed for task-2: quota exceeded ({nope})"
        }
        assert sc.benchmark.sessions == {}  # the tool did not run
        assert json.loads(text(other)) == {"tasks": ["task-1", "task-2", "task-3"]}


def test_error_payload_with_the_default_message_on_other_tools_is_the_reason() -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "evaluate_session", "arguments": {"session_id": "s-1"}},
    }
    with Sidecar(faults=['error_payload(reason="connection reset by peer")@tools/call']) as sc:
        r = httpx.post(sc.mcp_url, json=body, headers={"MCP-Protocol-Version": "2026-07-28"}, timeout=2.0)
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "content": [{"type": "text", "text": '{"error": "connection reset by peer"}'}],
            "isError": False,
            "resultType": "complete",
        },
    }


def test_error_payload_answers_only_tools_call() -> None:
    """At '*' it fires on tools/call only: health, tools/list and notifications are answered normally."""
    with Sidecar(faults=[ErrorPayload(when="*")]) as sc, httpx.Client(timeout=2.0) as c:
        headers = {"MCP-Protocol-Version": "2026-07-28"}
        assert c.get(sc.health_url).json() == {"status": "ok"}
        listed = c.post(sc.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
        assert "delete_session" in listed.text
        call = {"name": "delete_session", "arguments": {"session_id": "s-9"}}
        r = c.post(sc.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                   headers=headers)  # fmt: skip
        assert json.loads(r.json()["result"]["content"][0]["text"]) == {
            "error": "Error closing session s-9: backend timed out"
        }
    assert [r.fault_kind for r in sc.requests] == [None, None, "error_payload"]
