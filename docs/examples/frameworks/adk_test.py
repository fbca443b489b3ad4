"""google-adk[mcp] 2.13.0 (mcp 2.x) against ``mcp_sidecar``: ``McpToolset``, no LLM.

Plain ``google-adk`` installs no mcp at all: the ``[mcp]`` extra is needed. ADK speaks the session era
unless ``ADK_ENABLE_MCP_MODERN_PROTOCOL=1`` is set (then it starts stateless, as mcp 2.x does); both
are run here. Run: ``tox -e fw-adk``. See fwcheck.py for how each case is driven.
"""

from __future__ import annotations

import asyncio

import fwcheck
import pytest
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.mcp_tool.mcp_session_manager import StreamableHTTPConnectionParams
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset
from google.adk.tools.tool_context import ToolContext

from pytest_mcpfaults import Hang, Stall

MODERN = "ADK_ENABLE_MCP_MODERN_PROTOCOL"
# What the framework does on its own (the sidecar holds for ever; every phase bounded at 30 s).
RAW = {
    "freeze-session": {"close": "ok"},  # gives up after 5 s with a WARNING
    "hang_del-session": {"close": "ok"},
    "stall-session": {"call": "hang"},
    # an error dict, then the next run's tool listing raises 'Session not found': no re-initialise
    "expire-session": {"call": "error", "call2": "raised"},
}
# The cases where it calls its lost session again: the session hygiene verdict (docs/sessions.md).
LOST = {"expire-session": "its next tool listings go out on the lost session's id (one `initialize`)"}
RAW_MODERN = {
    "stall-auto": {"call": "hang"},
    "expire-auto": {"call": "error", "call2": "ok"},  # an error dict, then fine (no session to lose)
}


# --8<-- [start:recipe]
def sidecar_toolset(mcp_sidecar, seconds=1.0):
    """The harness's toolset, pointed at the test's sidecar: ``timeout`` bounds connecting and the
    close, ``sse_read_timeout`` the wait for each answer."""
    url = mcp_sidecar.mcp_url
    return McpToolset(
        connection_params=StreamableHTTPConnectionParams(url=url, timeout=seconds, sse_read_timeout=seconds)
    )


async def call_echo(toolset):
    """What an agent run does with a tool (ADK wants a ToolContext of an invocation)."""
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="harness", user_id="test")
    agent = LlmAgent(name="harness", model="gemini-2.0-flash")  # never called: no LLM here
    context = InvocationContext(session_service=sessions, invocation_id="i1", agent=agent, session=session)
    (echo,) = [t for t in await toolset.get_tools() if t.name == "echo"]
    return await echo.run_async(args={"text": "hi"}, tool_context=ToolContext(context))


@pytest.mark.mcp_sidecar(era="session", faults=[Hang(when="DELETE /mcp")])
def test_close_is_bounded(mcp_sidecar):
    async def session():
        toolset = sidecar_toolset(mcp_sidecar)
        try:
            return await call_echo(toolset)
        finally:
            await toolset.close()  # gives up on the hung DELETE after 1 s

    assert asyncio.run(session())["content"][0]["text"] == "hi"
    mcp_sidecar.assert_client_gave_up(within=2.0, target="DELETE /mcp")


@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=20, when="tools/call")])
def test_calls_are_bounded(mcp_sidecar):
    async def session():
        toolset = sidecar_toolset(mcp_sidecar)
        try:
            return await call_echo(toolset)
        finally:
            await toolset.close()

    assert "error" in asyncio.run(session())
    mcp_sidecar.assert_client_released(within=2.0, target="tools/call")


# --8<-- [end:recipe]


class Client:
    """The adapter fwcheck drives: the toolset's first get_tools() opens the session."""

    def __init__(self, toolset: McpToolset) -> None:
        self.toolset = toolset

    async def connect(self) -> None:
        self.tools = [t.name for t in await self.toolset.get_tools()]

    async def list_tools(self) -> list[str]:
        return self.tools

    async def call(self) -> str:
        result = await call_echo(self.toolset)
        if "error" in result:
            return f"error dict: {result['error']}"
        return "".join(str(c.get("text", c)) for c in result["content"])

    async def close(self) -> None:
        await self.toolset.close()


def default_client(url: str) -> Client:
    return Client(McpToolset(connection_params=StreamableHTTPConnectionParams(url=url)))


FW = fwcheck.Framework(
    "adk", "google-adk[mcp]", __name__, default_client, lambda sc: Client(sidecar_toolset(sc)),
    raw=RAW, paths={"auto": "session", "session": "session"}, keeps_lost_session=LOST,
)  # fmt: skip
FW_MODERN = fwcheck.Framework(
    "adk-modern", "google-adk[mcp]", __name__, default_client, lambda sc: Client(sidecar_toolset(sc)),
    raw=RAW_MODERN, paths={"auto": "stateless", "session": "session", "stateless": "stateless"},
)  # fmt: skip


@pytest.fixture
def flag(monkeypatch):
    """ADK reads its feature flag from the environment at run time (and the verdict runs inherit it)."""

    def set_for(f):
        if f is FW_MODERN:
            monkeypatch.setenv(MODERN, "1")
        else:
            monkeypatch.delenv(MODERN, raising=False)
        return f

    return set_for


@pytest.mark.parametrize(
    ("f", "era"), [pytest.param(f, e, id=f"{f.name}-{e}") for f in (FW, FW_MODERN) for e in f.paths]
)
def test_interop(f, era, flag, mcp_sidecar_factory):
    flag(f).check_interop(era, mcp_sidecar_factory)


def test_a_stateless_only_sidecar_is_refused_without_the_flag(mcp_sidecar_factory, monkeypatch):
    monkeypatch.delenv(MODERN, raising=False)
    sidecar = mcp_sidecar_factory(era="stateless")
    c = fwcheck.case("none-stateless")
    result = asyncio.run(fwcheck.measure(default_client(sidecar.mcp_url), sidecar, c))
    FW.record(c.name, {"raw": result})
    assert result["phases"]["connect"]["outcome"] == "raised"
    assert "Unsupported protocol version" in result["phases"]["connect"]["error"]


def _cases(attr):
    return [pytest.param(f, n, id=f"{f.name}-{n}") for f in (FW, FW_MODERN) for n in getattr(f, attr)]


@pytest.mark.parametrize(("f", "name"), _cases("raw"))
def test_on_its_own(f, name, flag, mcp_sidecar_factory):
    flag(f).check_on_its_own(name, mcp_sidecar_factory)


@pytest.mark.parametrize(("f", "name"), _cases("hangs"))
def test_patience_turns_the_hang_into_a_verdict(f, name, flag, pytester, monkeypatch):
    flag(f).check_verdict(name, pytester, monkeypatch)


@pytest.mark.parametrize(("f", "name"), _cases("raw"))
def test_bounded_passes(f, name, flag, mcp_sidecar_factory):
    flag(f).check_bounded(name, mcp_sidecar_factory)


@pytest.mark.parametrize(("f", "name"), _cases("lost_sessions"))
def test_calling_a_lost_session_gets_the_hygiene_verdict(f, name, flag, pytester, monkeypatch):
    flag(f).check_lost_session(name, pytester, monkeypatch)
