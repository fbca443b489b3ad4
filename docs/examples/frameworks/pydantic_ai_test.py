"""pydantic-ai-slim[mcp] 2.68.0 (mcp 2.x through fastmcp) against ``mcp_sidecar``: ``MCPToolset``, no LLM.

Run: ``tox -e fw-pydantic-ai``. See fwcheck.py for the three ways each case is driven.
"""

from __future__ import annotations

import asyncio
import contextlib

import fwcheck
import httpx2
import pytest
from pydantic_ai.mcp import MCPToolset

from pytest_mcpfaults import Hang, Stall

# What the framework does on its own (the sidecar holds for ever; every phase bounded at 30 s).
RAW = {
    "freeze-session": {"close": "ok"},  # gives up after 5 s, silently
    "hang_del-session": {"close": "ok"},
    "stall-auto": {"call": "hang"},
    "stall-session": {"call": "hang"},
    "expire-auto": {"call": "raised", "call2": "ok"},  # ModelRetry('Session not found')
    "expire-session": {"call": "raised", "call2": "raised"},  # no re-initialise
}
# The cases where it calls its lost session again: the session hygiene verdict (docs/sessions.md).
LOST = {"expire-session": "the 2nd call goes out on the lost session's id (one `initialize`)"}


# --8<-- [start:recipe]
@contextlib.asynccontextmanager
async def sidecar_toolset(mcp_sidecar, seconds=1.0):
    """The harness's toolset, pointed at the test's sidecar. ``read_timeout`` bounds the wait for each
    answer, ``init_timeout`` the connection; only an HTTP client of your own bounds the close-time
    ``DELETE /mcp`` (the toolset never closes a client it was given: close it yourself). Its read
    timeout is longer than ``read_timeout``, so that a stalled answer is given up by ``read_timeout``
    first: when the HTTP read times out first, mcp's transport task fails with ``httpx2.ReadTimeout``,
    and the toolset's exit raises it."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(seconds, read=1.5 * seconds)) as http,
        MCPToolset(mcp_sidecar.mcp_url, http_client=http, read_timeout=seconds, init_timeout=seconds) as ts,
    ):
        yield ts


@pytest.mark.mcp_sidecar(era="session", faults=[Hang(when="DELETE /mcp")])
def test_close_is_bounded(mcp_sidecar):
    async def session():
        async with sidecar_toolset(mcp_sidecar) as toolset:
            return await toolset.direct_call_tool("echo", {"text": "hi"})

    assert asyncio.run(session()) == "hi"
    mcp_sidecar.assert_client_gave_up(within=2.0, target="DELETE /mcp")


@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=20, when="tools/call")])
def test_calls_are_bounded(mcp_sidecar):
    async def session():
        async with sidecar_toolset(mcp_sidecar) as toolset:
            with pytest.raises(Exception):  # noqa: B017, PT011
                await toolset.direct_call_tool("echo", {"text": "hi"})

    asyncio.run(session())
    mcp_sidecar.assert_client_released(within=2.0, target="tools/call")


# --8<-- [end:recipe]


class Client:
    """The adapter fwcheck drives: one toolset (entered at connect, left at close), list / call."""

    def __init__(self, toolset: contextlib.AbstractAsyncContextManager[MCPToolset]) -> None:
        self.cm = toolset
        self.stack = contextlib.AsyncExitStack()

    async def connect(self) -> None:
        self.toolset = await self.stack.enter_async_context(self.cm)

    async def list_tools(self) -> list[str]:
        return [t.name for t in await self.toolset.list_tools()]

    async def call(self) -> str:
        return str(await self.toolset.direct_call_tool("echo", {"text": "hi"}))

    async def close(self) -> None:
        await self.stack.aclose()


def default_client(url: str) -> Client:
    return Client(MCPToolset(url))


FW = fwcheck.Framework(
    "pydantic-ai", "pydantic-ai-slim[mcp]", __name__, default_client, lambda sc: Client(sidecar_toolset(sc)),
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
