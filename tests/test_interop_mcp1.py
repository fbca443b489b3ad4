"""The mcp 1.x client (session era only, ``streamablehttp_client`` + ``ClientSession``) against the
sidecar: initialize, list tools, call a tool, exit with ``DELETE``. Runs in the tox env ``mcp1``
and in ``test_mcp1_env``; where the installed mcp is 2.x (no ``streamablehttp_client``) the suite does not
collect it (conftest), and named on the command line it skips."""

from __future__ import annotations

import pytest

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.verdicts.patience import patience_verdict

streamable_http = pytest.importorskip(
    "mcp.client.streamable_http",
    reason="needs the mcp 1.x client (streamablehttp_client); the installed mcp is 2.x",
)
if not hasattr(streamable_http, "streamablehttp_client"):
    pytest.skip(
        "needs the mcp 1.x client (streamablehttp_client); the installed mcp is 2.x", allow_module_level=True
    )

from mcp import ClientSession  # noqa: E402

streamablehttp_client = streamable_http.streamablehttp_client


@pytest.mark.parametrize("reply", ["json", "sse"])
async def test_mcp1_session_era_initialize_list_call_and_delete(reply: str) -> None:
    with Sidecar(reply=reply) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, get_session_id):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("echo", {"text": "hello"})
                sid = get_session_id()
        assert init.serverInfo.name
        assert {t.name for t in tools.tools} >= {"echo", "sleep", "create_session", "delete_session"}
        assert result.content[0].text == "hello"
        assert not result.isError
        sc.wait_idle(5)
        seq = sc.journal.sequence()
        assert seq[:2] == ["POST initialize", "POST notifications/initialized"], seq
        assert [s for s in seq if s.startswith("POST tools/")] == [
            "POST tools/list",
            "POST tools/call echo",
        ], seq
        assert seq[-1] == "DELETE /mcp", seq
        assert set(seq) <= {*seq[:2], "GET /mcp", "POST tools/list", "POST tools/call echo", "DELETE /mcp"}
        assert sid is not None
        assert {r.session_id for r in sc.requests[1:]} == {sid}
        assert all(r.era == "session" for r in sc.requests if r.mcp_method)
        assert sc.requests[-1].status == 200
        assert sc.sessions == ()
        assert sc.ended_sessions == (sid,)


async def test_mcp1_tool_error_fault_is_seen_as_is_error() -> None:
    with Sidecar(faults=["tool_error(text='boom')@tool:echo"]) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("echo", {"text": "hello"})
        assert result.isError
        assert result.content[0].text == "boom"
        assert sc.fired == {"tool_error": 1}


# -- a stalled tools/call that mcp 1.x never abandons: the verdict interrupts it ------------------------

DURATIONS_CONFTEST = """
import json
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call":
        print("DURATION " + json.dumps({"name": item.name, "duration": call.duration}))
    return report
"""

NEVER_RETURNS = """
from datetime import timedelta

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

from pytest_mcpfaults import Stall

STALL = [Stall(after_bytes=20, when="tools/call")]

@pytest.mark.mcp_sidecar(patience=1.0, faults=STALL)
def test_langchain_style_call_never_returns(mcp_sidecar):
    async def go():
        async with streamablehttp_client(mcp_sidecar.mcp_url) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("echo", {"text": "hi"})  # logs a JSON parse error, never returns

    anyio.run(go)

@pytest.mark.mcp_sidecar(patience=3.0, faults=STALL)
def test_the_hint_bounds_it(mcp_sidecar):
    async def go():
        async with streamablehttp_client(mcp_sidecar.mcp_url) as (read, write, _):
            async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=0.5)) as session:
                await session.initialize()
                with pytest.raises(McpError, match="Timed out"):
                    await session.call_tool("echo", {"text": "hi"})

    anyio.run(go)
    mcp_sidecar.assert_client_gave_up(within=1.5, target="tools/call")
"""


def test_mcp1_call_that_never_returns_fails_in_about_the_budget_without_an_outside_timeout(
    pytester: pytest.Pytester,
) -> None:
    """Issue 13: mcp 1.x (langchain-mcp-adapters' client) on a stalled ``tools/call``: the sidecar cuts the
    connection at the budget, mcp 1.x only logs "Error parsing JSON response" and ``call_tool()`` never
    returns. With no pytest-timeout the test fails with the verdict at about budget + grace (1 s + 1 s);
    the subprocess timeout only bounds this test if that regresses."""
    import json

    pytester.makeconftest(DURATIONS_CONFTEST)
    pytester.makepyfile(test_never_returns=NEVER_RETURNS)
    result = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:timeout", "-s", timeout=120
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_langchain_style_call_never_returns _*",
            "PatienceError: 1 held request outlived the patience budget*",
            "1. the client waited 1 s (the whole budget) on the response to `POST /mcp` (tools/call echo) "
            "(session era), which stalled after the status line (200) and 20 bytes of body*",
            "   client seen: User-Agent python-httpx/*, MCP-Protocol-Version *",
            "   hint: if this is the mcp 1.x SDK*'Error parsing JSON response'*"
            "ClientSession(read, write, read_timeout_seconds=timedelta(seconds=...))*",
            "The test was still blocked 1 s after the verdict at test_never_returns.py:* in go: mcpfaults "
            "cancelled every task of its event loop*",
        ]
    )
    result.stdout.no_fnmatch_line("*Client(read_timeout_seconds*")  # no such API in mcp 1.x
    result.stdout.fnmatch_lines(["*Error parsing JSON response*"])  # what mcp 1.x did instead of returning
    durations = {}
    for line in result.outlines:
        if "DURATION {" in line:
            data = json.loads(line[line.index("DURATION {") + len("DURATION ") :])
            durations[data["name"]] = data["duration"]
    assert 2.0 - 0.1 <= durations["test_langchain_style_call_never_returns"] < 6.0, durations


# -- the tool's own requests and notifications (docs/server-requests.md, docs/progress.md) ------------


async def test_mcp1_answers_each_server_request_and_gets_progress_and_logs() -> None:
    from mcp import types

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "ok"})

    async def sample(context: object, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        text = types.TextContent(type="text", text="m")
        return types.CreateMessageResult(role="assistant", content=text, model="stub")

    async def roots(context: object) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///w", name="w")])  # type: ignore[arg-type]

    progress: list[float] = []
    levels: list[str] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        levels.append(params.level)

    with Sidecar(tool_sets=("basic", "client")) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(
                read, write, elicitation_callback=elicit, sampling_callback=sample, list_roots_callback=roots,
                logging_callback=on_log,
            ) as session:  # fmt: skip
                await session.initialize()
                texts = [
                    (await session.call_tool(name, args)).content[0].text  # type: ignore[union-attr]
                    for name, args in [
                        ("ask_user", {"message": "q"}),
                        ("ask_model", {"prompt": "p"}),
                        ("list_roots", {}),
                        ("ping_client", {}),
                    ]
                ]
                await session.set_logging_level("warning")
                await session.call_tool("log", {"level": "info", "message": "quiet"})
                await session.call_tool("log", {"level": "error", "message": "loud"})
                await session.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
        sc.wait_idle(5)
    assert texts == [
        '{"action": "accept", "content": {"answer": "ok"}}',
        '{"role": "assistant", "content": {"type": "text", "text": "m"}, "model": "stub"}',
        '{"roots": [{"uri": "file:///w", "name": "w"}]}',
        "pong",
    ]
    assert levels == ["error"] and progress == [1, 2]
    requests = sc.journal.server_messages.requests()
    assert [(m.method, m.outcome) for m in requests] == [
        ("elicitation/create", "answered"),
        ("sampling/createMessage", "answered"),
        ("roots/list", "answered"),
        ("ping", "answered"),
    ]


async def test_mcp1_without_the_callback_refuses_and_one_that_never_answers_is_cut_by_patience() -> None:
    import asyncio

    import anyio
    from mcp import types

    with Sidecar(tool_sets=("basic", "client")) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("ask_user", {"message": "q"})
    assert result.isError
    assert result.content[0].text.endswith("Elicitation not supported")  # type: ignore[union-attr]

    async def never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    with Sidecar(tool_sets=("basic", "client"), patience=0.5) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(read, write, elicitation_callback=never) as session:
                await session.initialize()
                with anyio.move_on_after(2.0) as scope:  # patience cuts the stream at 0.5 s ...
                    await session.call_tool("ask_user", {"message": "q"})
                assert scope.cancelled_caught  # ... and mcp 1.x's call never returns
        (v,) = sc.patience_violations
    assert v.describe().startswith("the client never answered the server's `elicitation/create`")
    # the hint names mcp 1.x's own API (its User-Agent is python-httpx), not mcp 2.x's or the TS SDK's
    [hint] = [line for line in patience_verdict(sc, [v]).splitlines() if line.strip().startswith("hint: ")]
    assert "a ClientSession(read, write, elicitation_callback=...) that returns" in hint, hint
    assert "session.call_tool(..., read_timeout_seconds=timedelta(seconds=...))" in hint, hint
    assert "mcp 2.x" not in hint and "setRequestHandler" not in hint, hint
