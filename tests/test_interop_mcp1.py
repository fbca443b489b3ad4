"""The mcp 1.x client (session era only, ``streamablehttp_client`` + ``ClientSession``) against the
sidecar: initialize, list tools, call a tool, exit with ``DELETE``. Runs in the tox env ``mcp1``;
skipped where the installed mcp is 2.x (which has no ``streamablehttp_client``)."""

from __future__ import annotations

import pytest

from pytest_mcpfaults import Sidecar

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
