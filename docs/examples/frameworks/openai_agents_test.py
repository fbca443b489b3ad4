"""openai-agents 0.24.0 (mcp 2.x) against ``mcp_sidecar``: ``MCPServerStreamableHttp``, no LLM.

Run: ``tox -e fw-openai-agents``. See fwcheck.py for the three ways each case is driven.
"""

from __future__ import annotations

import asyncio

import fwcheck
import pytest
from agents.mcp import MCPServerStreamableHttp

from pytest_mcpfaults import Hang, Stall

# What the framework does on its own (the sidecar holds for ever; every phase bounded at 30 s).
RAW = {
    "freeze-session": {"close": "hang"},
    "hang_del-session": {"close": "hang"},
    "stall-auto": {"call": "raised"},  # MCPError "timed out" at its own 5 s default
    "stall-session": {"call": "raised"},
    "expire-auto": {"call": "raised", "call2": "ok"},  # stateless: nothing to re-initialise
    "expire-session": {"call": "raised", "call2": "raised"},  # no re-initialise
}
# The cases where it calls its lost session again: the session hygiene verdict (docs/sessions.md).
LOST = {"expire-session": "the 2nd call goes out on the lost session's id (one `initialize`)"}


# --8<-- [start:recipe]
def sidecar_server(mcp_sidecar, seconds=1.0):
    """The harness's MCP server object, pointed at the test's sidecar. ``timeout`` and
    ``sse_read_timeout`` bound every HTTP request, the close-time ``DELETE /mcp`` included;
    ``client_session_timeout_seconds`` bounds the wait for each answer."""
    return MCPServerStreamableHttp(
        params={"url": mcp_sidecar.mcp_url, "timeout": seconds, "sse_read_timeout": seconds},
        client_session_timeout_seconds=seconds,
        name="sidecar",
    )


@pytest.mark.mcp_sidecar(era="session", faults=[Hang(when="DELETE /mcp")])
def test_close_is_bounded(mcp_sidecar):
    async def session():
        async with sidecar_server(mcp_sidecar) as server:
            result = await server.call_tool("echo", {"text": "hi"})
        return result.content[0].text

    assert asyncio.run(session()) == "hi"  # the close gave up on the hung DELETE after 1 s
    mcp_sidecar.assert_client_gave_up(within=2.0, target="DELETE /mcp")


@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=20, when="tools/call")])
def test_calls_are_bounded(mcp_sidecar):
    async def session():
        async with sidecar_server(mcp_sidecar) as server:
            with pytest.raises(Exception, match="timed out"):
                await server.call_tool("echo", {"text": "hi"})

    asyncio.run(session())
    mcp_sidecar.assert_client_released(within=2.0, target="tools/call")


# --8<-- [end:recipe]


class Client:
    """The adapter fwcheck drives: one server object, connect / list / call / close."""

    def __init__(self, server: MCPServerStreamableHttp) -> None:
        self.server = server

    async def connect(self) -> None:
        await self.server.connect()

    async def list_tools(self) -> list[str]:
        return [t.name for t in await self.server.list_tools()]

    async def call(self) -> str:
        result = await self.server.call_tool("echo", {"text": "hi"})
        return str(result.content[0].text)

    async def close(self) -> None:
        await self.server.cleanup()


def default_client(url: str) -> Client:
    return Client(MCPServerStreamableHttp(params={"url": url}, name="sidecar"))


FW = fwcheck.Framework(
    "openai-agents", "openai-agents", __name__, default_client, lambda sc: Client(sidecar_server(sc)),
    raw=RAW, paths={"auto": "stateless", "session": "session", "stateless": "stateless"},
    keeps_lost_session=LOST,
)  # fmt: skip


(
    test_interop,
    test_on_its_own,
    test_patience_turns_the_hang_into_a_verdict,
    test_bounded_passes,
    test_calling_a_lost_session_gets_the_hygiene_verdict,
) = fwcheck.standard_tests(FW)
