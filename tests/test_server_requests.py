"""Server-to-client requests from tools, with the mcp 2.x client in both eras: the ``client`` tool set
and a user tool's ``ctx`` send ``elicitation/create``, ``sampling/createMessage``, ``roots/list`` and
``ping`` on the tool call's own SSE answer stream (session era) or as the input requests of an
``input_required`` result the client retries (stateless era, SEP-2322), await the answer, and journal
both; a client without the callback answers an error the tool gets (session era); a client that never
answers is a patience violation whose headline names the server's request, within the budget.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client import Client

from pytest_mcpfaults import Sidecar, SyncToolContext, Tool
from pytest_mcpfaults.core.errors import SidecarError
from pytest_mcpfaults.inprocess import mock_sidecar
from pytest_mcpfaults.mcp.outbound import ToolContext
from pytest_mcpfaults.verdicts.patience import PatienceError, patience_verdict

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

CLIENT_SETS = ("basic", "client")


async def _elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": f"yes to {params.message}"})


async def _sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    asked = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"model says {asked}"), model="fake"
    )


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])  # type: ignore[arg-type]


async def _never(context: Any, params: Any) -> types.ElicitResult:
    await asyncio.Event().wait()  # a user who never answers, with no bound of the harness's own
    raise AssertionError("unreachable")


def _text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


CALLS = [
    (
        "ask_user",
        {"message": "proceed?"},
        "elicitation/create",
        {"action": "accept", "content": {"answer": "yes to proceed?"}},
    ),
    (
        "ask_model",
        {"prompt": "hi"},
        "sampling/createMessage",
        {"role": "assistant", "content": {"type": "text", "text": "model says hi"}, "model": "fake"},
    ),
    ("list_roots", {}, "roots/list", {"roots": [{"uri": "file:///work", "name": "work"}]}),
    ("ping_client", {}, "ping", {}),
]


@pytest.mark.parametrize(("tool", "arguments", "method", "answer"), CALLS, ids=[c[0] for c in CALLS])
async def test_each_client_tool_sends_its_request_on_the_call_stream_and_answers_the_clients_result(
    tool: str, arguments: dict[str, Any], method: str, answer: dict[str, Any]
) -> None:
    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        async with Client(
            sc.mcp_url, elicitation_callback=_elicit, sampling_callback=_sample, list_roots_callback=_roots
        ) as client:
            result = await client.call_tool(tool, arguments)
        sc.wait_idle(5)
        assert not result.is_error, _text(result)
        if method == "ping":
            assert _text(result) == "pong"
        else:
            assert json.loads(_text(result)) == answer
        (sent,) = sc.journal.server_messages
        call = next(r for r in sc.requests if r.tool == tool)
        assert (sent.method, sent.request_id, sent.tool, sent.outcome) == (method, call.id, tool, "answered")
        assert sent.id is not None and sent.is_request and sent.error is None
        assert sent.result == (answer if method != "sampling/createMessage" else {**answer})
        assert call.started_at <= sent.sent_at <= (sent.answered_at or 0) <= (call.ended_at or 0)
        # the answer came as a POST of its own, accepted with 202 and not a client mistake
        (posted,) = [r for r in sc.requests if r.method == "POST" and r.mcp_method is None]
        assert posted.status == 202 and posted.error is None
        assert call.status == 200 and not call.held and sc.errors == []


async def test_a_client_without_an_elicitation_callback_answers_an_error_the_tool_returns() -> None:
    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url) as client:
            result = await client.call_tool("ask_user", {"message": "proceed?"})
        sc.wait_idle(5)
    assert result.is_error
    assert (
        _text(result)
        == "the client answered `elicitation/create` with error -32600: Elicitation not supported"
    )
    (sent,) = sc.journal.server_messages
    assert sent.outcome == "error" and sent.error == {"code": -32600, "message": "Elicitation not supported"}
    call = next(r for r in sc.requests if r.tool == "ask_user")
    assert call.error_by == "client" and "Elicitation not supported" in (call.error or "")
    assert sc.errors == [] and sc.patience_violations == ()


async def test_a_client_that_never_answers_is_cut_at_the_budget_with_a_verdict_naming_the_request() -> None:
    budget = 0.5
    with Sidecar(era="session", tool_sets=CLIENT_SETS, patience=budget) as sc:
        start = time.monotonic()
        with pytest.raises(BaseExceptionGroup):  # the reset, as the harness's exit sees it
            async with Client(sc.mcp_url, elicitation_callback=_never) as client:
                await client.call_tool("ask_user", {"message": "proceed?"})
        took = time.monotonic() - start
        sc.wait_idle(5)
        (v,) = sc.patience_violations
        with pytest.raises(PatienceError) as err:
            sc.assert_no_patience_violations()
    assert budget <= took < budget + 2.0
    (sent,) = sc.journal.server_messages
    assert sent.outcome == "unanswered" and sent.answered_at is None
    head = v.describe()
    assert head.startswith(
        f"the client never answered the server's `elicitation/create` (sent at {sent.sent_at:.1f} s during "
        "tools/call ask_user): it waited 0.5 s (the whole budget)"
    ), head
    assert v.request.tool == "ask_user" and v.request.hold == "patience" and v.fault == "elicitation/create"
    text = str(err.value)
    assert "1. the client never answered the server's `elicitation/create`" in text
    assert "no fault: the tool awaited the client's answer to its `elicitation/create`" in text
    assert "hint: the harness received the server's `elicitation/create` and never answered it" in text
    assert text == patience_verdict(sc, sc.patience_violations)


async def test_a_user_tool_awaits_ctx_requests_and_sends_them_in_order() -> None:
    async def plan(ctx: ToolContext, goal: str) -> dict[str, Any]:
        await ctx.ping()
        roots = await ctx.list_roots()
        answer = await ctx.elicit(
            f"plan {goal}?", {"type": "object", "properties": {"answer": {"type": "string"}}}
        )
        return {"roots": roots, "answer": answer["content"]["answer"]}

    tool = Tool(
        "plan", plan, {"type": "object", "properties": {"goal": {"type": "string"}}, "required": ["goal"]}
    )
    with Sidecar(era="session", tools=[tool]) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_elicit, list_roots_callback=_roots) as client:
            result = await client.call_tool("plan", {"goal": "x"})
        sc.wait_idle(5)
    assert json.loads(_text(result)) == {
        "roots": [{"uri": "file:///work", "name": "work"}],
        "answer": "yes to plan x?",
    }
    assert [m.method for m in sc.journal.server_messages] == ["ping", "roots/list", "elicitation/create"]
    assert [m.outcome for m in sc.journal.server_messages.requests()] == ["answered"] * 3
    assert len({m.id for m in sc.journal.server_messages}) == 3


def test_a_response_to_no_pending_request_is_the_clients_mistake() -> None:
    with Sidecar(era="session") as sc:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25"},
        }
        headers = {"Accept": "application/json, text/event-stream"}
        sid = httpx.post(sc.mcp_url, json=init, headers=headers).headers["Mcp-Session-Id"]
        stray = {"jsonrpc": "2.0", "id": "mcpfaults-99", "result": {}}
        resp = httpx.post(sc.mcp_url, json=stray, headers={**headers, "Mcp-Session-Id": sid})
        sc.wait_idle(5)
    assert resp.status_code == 202
    rec = sc.requests[-1]
    assert rec.error_by == "client" and "a response to no request the sidecar is awaiting" in (
        rec.error or ""
    )
    assert sc.errors == []


def test_a_handler_taking_ctx_cannot_have_its_schema_declare_ctx() -> None:
    def sync(ctx: SyncToolContext) -> str:  # a sync handler may take ctx: its cancelled event
        return "x"

    async def declared(ctx: ToolContext) -> str:
        return "x"

    assert Tool("sync", sync, {"type": "object"}).wants_context
    for name, handler in (("d", declared), ("s", sync)):
        with pytest.raises(ValueError, match=f"Tool '{name}': input_schema declares an argument 'ctx'"):
            Tool(name, handler, {"type": "object", "properties": {"ctx": {"type": "string"}}})


async def test_ctx_refuses_a_method_it_cannot_send_naming_the_valid_ones() -> None:
    async def bad(ctx: ToolContext) -> Any:
        return await ctx.request("tools/list")

    results: list[types.CallToolResult] = []

    async def run() -> None:
        with Sidecar(era="session", tools=[Tool("bad", bad, {"type": "object"})]) as sc:
            async with Client(sc.mcp_url) as client:
                results.append(await client.call_tool("bad", {}))
            assert sc.journal.server_messages.records == ()

    with pytest.raises(
        SidecarError, match="method must be one of sampling/createMessage, elicitation/create"
    ):
        await run()
    assert results[0].is_error


def _initialize(url: str) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    headers = {"Accept": "application/json, text/event-stream"}
    return {
        **headers,
        "Mcp-Session-Id": httpx.post(url, json=init, headers=headers).headers["Mcp-Session-Id"],
    }


def test_the_in_process_backend_names_why_a_ctx_tool_cannot_run_there() -> None:
    answers: list[dict[str, Any]] = []

    def run() -> None:
        with mock_sidecar(tool_sets=CLIENT_SETS) as mock:
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ping_client"}}
            answers.append(httpx.post(mock.mcp_url, json=call, headers=_initialize(mock.mcp_url)).json())

    with pytest.raises(SidecarError, match="needs the socket sidecar"):
        run()
    assert answers[0]["result"]["isError"] is True


# -- the stateless era: input rounds (SEP-2322) ----------------------------------------------------


@pytest.mark.parametrize(("tool", "arguments", "method", "answer"), CALLS[:3], ids=[c[0] for c in CALLS[:3]])
async def test_stateless_each_request_is_an_input_round_the_client_retries(
    tool: str, arguments: dict[str, Any], method: str, answer: dict[str, Any]
) -> None:
    with Sidecar(tool_sets=CLIENT_SETS) as sc:
        async with Client(
            sc.mcp_url, elicitation_callback=_elicit, sampling_callback=_sample, list_roots_callback=_roots
        ) as client:
            result = await client.call_tool(tool, arguments)
        sc.wait_idle(5)
    assert not result.is_error, _text(result)
    assert json.loads(_text(result)) == answer
    first, retry = [r for r in sc.requests if r.tool == tool]
    assert first.era == retry.era == "stateless" and first.status == retry.status == 200
    (sent,) = sc.journal.server_messages
    assert (sent.method, sent.request_id, sent.outcome, sent.result) == (method, first.id, "answered", answer)
    assert first.ended_at is not None and first.ended_at <= (sent.answered_at or 0) <= (retry.ended_at or 0)
    assert sc.errors == []


async def test_stateless_rounds_carry_on_where_the_handler_left_off() -> None:
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async def two(ctx: ToolContext) -> str:
        await ctx.progress(1, 3)
        first = await ctx.elicit("one?")
        await ctx.progress(2, 3)  # on the retry's answer stream
        second = await ctx.elicit("two?")
        await ctx.progress(3, 3)
        return f"{first['content']['answer']} / {second['content']['answer']}"

    with Sidecar(tools=[Tool("two", two, {"type": "object"})]) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
            result = await client.call_tool("two", {}, progress_callback=on_progress)
        sc.wait_idle(5)
    assert _text(result) == "yes to one? / yes to two?"
    assert progress == [1, 2, 3]
    calls = [r.id for r in sc.requests if r.tool == "two"]
    assert len(calls) == 3  # the call, then one retry per round
    sent = [(m.method, m.request_id) for m in sc.journal.server_messages]
    assert sent == [
        ("notifications/progress", calls[0]),
        ("elicitation/create", calls[0]),
        ("notifications/progress", calls[1]),
        ("elicitation/create", calls[1]),
        ("notifications/progress", calls[2]),
    ]


async def test_stateless_ping_does_not_exist_and_the_tool_says_so() -> None:
    with Sidecar(tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url) as client:
            result = await client.call_tool("ping_client", {})
    assert result.is_error
    assert _text(result).startswith("`ping` does not exist in the stateless era (2026-07-28)")
    assert sc.journal.server_messages.records == () and sc.errors == []


async def test_stateless_a_client_that_never_answers_gets_the_verdict_within_the_budget() -> None:
    budget = 0.5
    with Sidecar(tool_sets=CLIENT_SETS, patience=budget) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_never) as client:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.call_tool("ask_user", {"message": "proceed?"}), budget + 1.0)
            (v,) = sc.patience_violations  # recorded at the budget, while the harness still waited
        sc.wait_idle(5)
    (sent,) = sc.journal.server_messages
    assert v.describe() == (
        f"the client never answered the server's `elicitation/create` (sent at {sent.sent_at:.1f} s during "
        "tools/call ask_user, as an input request of its input_required result): it did not retry the call "
        "with the answer within 0.5 s (the whole budget), and the tool is still waiting for it"
    )
    assert "nothing held (the client's retry never came), so nothing was aborted" in v.details()
    assert v.request.hold is None and v.request.status == 200
    assert sent.outcome == "unanswered"


def test_stateless_a_retry_naming_no_round_is_invalid_params() -> None:
    with Sidecar(tool_sets=CLIENT_SETS) as sc:
        params = {"name": "ask_user", "arguments": {"message": "q"}, "requestState": "nope"}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                   "Mcp-Method": "tools/call", "Mcp-Name": "ask_user"}  # fmt: skip
        resp = httpx.post(sc.mcp_url, json=call, headers=headers)
    assert resp.status_code == 400
    assert resp.json()["error"] == {
        "code": -32602,
        "message": "Invalid params: requestState 'nope' names no input round of this server (unknown, or "
        "answered already)",
    }
    assert sc.requests[-1].error_by == "client"


async def test_the_legacy_sse_transport_names_why_a_ctx_tool_cannot_run_there() -> None:
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    results: list[types.CallToolResult] = []

    async def run() -> None:
        with Sidecar(transport="sse", tool_sets=CLIENT_SETS) as sc:
            async with sse_client(sc.sse_url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                results.append(await session.call_tool("ping_client", {}))

    with pytest.raises(SidecarError, match="needs the Streamable HTTP transport of the socket sidecar"):
        await run()
    assert results[0].is_error
