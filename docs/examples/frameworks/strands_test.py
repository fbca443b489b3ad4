"""strands-agents 1.62.0 (mcp 2.x) against ``mcp_sidecar``: ``MCPClient``, no LLM.

Its API is synchronous (the session runs on a background thread of its own); fwcheck drives each call
on a thread so that a call that never returns can be measured. Run: ``tox -e fw-strands``.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import fwcheck
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from strands.tools.mcp import MCPClient

from pytest_mcpfaults import Hang, Stall

# What the framework does on its own (the sidecar holds for ever; every phase bounded at 30 s).
RAW = {
    "freeze-session": {"close": "hang"},  # stop() cannot be cancelled
    "hang_del-session": {"close": "hang"},
    "stall-auto": {"call": "hang"},
    "stall-session": {"call": "hang"},
    "expire-auto": {"call": "error", "call2": "ok"},  # an error result 'Session not found', then fine
    "expire-session": {"call": "error", "call2": "error"},  # an error result twice: no re-initialise
}
# The cases where it calls its lost session again: the session hygiene verdict (docs/sessions.md).
LOST = {"expire-session": "the 2nd call goes out on the lost session's id (one `initialize`)"}


# --8<-- [start:recipe]
def sidecar_client(mcp_sidecar, seconds=1.0):
    """The harness's MCPClient, pointed at the test's sidecar through a transport of your own: its HTTP
    client's timeout bounds every request, the close-time ``DELETE /mcp`` in ``stop()`` included.
    Bound each call with ``call_tool_sync(..., read_timeout_seconds=...)``, below the HTTP client's
    read timeout: when the HTTP read of a stalled answer times out first, mcp's transport task fails,
    and ``stop()`` raises "Connection to the MCP server was closed"."""

    @contextlib.asynccontextmanager
    async def transport():
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(seconds, read=1.5 * seconds)) as http,
            streamable_http_client(mcp_sidecar.mcp_url, http_client=http) as streams,
        ):
            yield streams

    return MCPClient(transport)


@pytest.mark.mcp_sidecar(era="session", faults=[Hang(when="DELETE /mcp")])
def test_close_is_bounded(mcp_sidecar):
    with sidecar_client(mcp_sidecar) as client:  # stop() gives up on the hung DELETE after 1 s
        result = client.call_tool_sync("t1", "echo", {"text": "hi"})
    assert result["content"][0]["text"] == "hi"
    mcp_sidecar.assert_client_gave_up(within=2.0, target="DELETE /mcp")


@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=20, when="tools/call")])
def test_calls_are_bounded(mcp_sidecar):
    with sidecar_client(mcp_sidecar) as client:
        result = client.call_tool_sync(
            "t1", "echo", {"text": "hi"}, read_timeout_seconds=timedelta(seconds=1.0)
        )
    assert result["status"] == "error"
    mcp_sidecar.assert_client_released(within=2.0, target="tools/call")


# --8<-- [end:recipe]


class Client:
    """The adapter fwcheck drives: each synchronous call on a thread of its own."""

    def __init__(self, client: MCPClient, call_timeout: float | None = None) -> None:
        self.client = client
        self.call_timeout = None if call_timeout is None else timedelta(seconds=call_timeout)

    async def connect(self) -> None:
        await fwcheck.in_thread(self.client.start)

    async def list_tools(self) -> list[str]:
        return [t.tool_name for t in await fwcheck.in_thread(self.client.list_tools_sync)]

    async def call(self) -> str:
        client, timeout = self.client, self.call_timeout
        result = await fwcheck.in_thread(lambda: client.call_tool_sync("t1", "echo", {"text": "hi"}, timeout))
        text = "".join(str(c.get("text", c)) for c in result["content"])
        return text if result["status"] == "success" else f"error result: {text}"

    async def close(self) -> None:
        await fwcheck.in_thread(lambda: self.client.stop(None, None, None))


def default_client(url: str) -> Client:
    return Client(MCPClient(url=url))


FW = fwcheck.Framework(
    "strands", "strands-agents", __name__, default_client,
    lambda sc: Client(sidecar_client(sc), call_timeout=1.0), raw=RAW,
    paths={"auto": "stateless", "session": "session", "stateless": "stateless"}, keeps_lost_session=LOST,
)  # fmt: skip


(
    test_interop,
    test_on_its_own,
    test_patience_turns_the_hang_into_a_verdict,
    test_bounded_passes,
    test_calling_a_lost_session_gets_the_hygiene_verdict,
) = fwcheck.standard_tests(FW)
