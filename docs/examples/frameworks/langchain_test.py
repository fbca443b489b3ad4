"""langchain-mcp-adapters 0.3.2 (mcp 1.x) against ``mcp_sidecar``: ``MultiServerMCPClient``, no LLM.

Two ways of using it: one explicit session (``client.session(...)`` + ``load_mcp_tools``), and its
default, where ``get_tools()`` and every tool call open and close a session of their own. mcp 1.x
speaks only the session era. Run: ``tox -e fw-langchain``. See fwcheck.py for how each case is driven.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

import fwcheck
import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from pytest_mcpfaults import Hang, Stall

# What the framework does on its own (the sidecar holds for ever; every phase bounded at 30 s).
RAW = {
    "freeze-session": {"close": "hang"},
    "hang_del-session": {"close": "hang"},
    "stall-session": {"call": "hang"},
    "expire-session": {"call": "raised", "call2": "raised"},  # McpError('Session terminated') twice
}
# The cases where it calls its lost session again: the session hygiene verdict (docs/sessions.md).
LOST = {"expire-session": "the 2nd call goes out on the lost session's id (one `initialize`)"}
# Per-call sessions: every operation ends with its session's DELETE.
RAW_PER_CALL = {
    "freeze-session": {"close": "hang"},  # the probe's close is a last call: its initialize is frozen
    "hang_del-session": {"connect": "hang"},  # get_tools() waits on its own session's DELETE
    "stall-session": {"call": "hang", "close": "hang"},  # the close is a last call: it stalls too
    "expire-session": {"call": "raised", "call2": "ok"},  # the next call opens a new session
}


# mcp 1.x never returns from a call whose response the sidecar cut (it logs "Error parsing JSON
# response" in a background task). The plugin interrupts a test still blocked a grace after its verdict
# (ini mcpfaults_interrupt, 1 s), so that verdict too comes in about the budget: no case waits for an
# outer bound any more.
LATE: dict[str, str] = {}


# --8<-- [start:recipe]
def sidecar_connection(mcp_sidecar, seconds=1.0):
    """The connection the harness gives MultiServerMCPClient, pointed at the test's sidecar. ``timeout``
    and ``sse_read_timeout`` bound every HTTP request, the close-time ``DELETE /mcp`` included;
    ``read_timeout_seconds`` (a ``ClientSession`` argument) bounds the wait for each answer."""
    return {
        "transport": "streamable_http",
        "url": mcp_sidecar.mcp_url,
        "timeout": seconds,
        "sse_read_timeout": seconds,
        "session_kwargs": {"read_timeout_seconds": timedelta(seconds=seconds)},
    }


@pytest.mark.mcp_sidecar(faults=[Hang(when="DELETE /mcp")])
def test_close_is_bounded(mcp_sidecar):
    client = MultiServerMCPClient({"sidecar": sidecar_connection(mcp_sidecar)})

    async def session():
        async with client.session("sidecar") as session:
            tools = {t.name: t for t in await load_mcp_tools(session)}
            return await tools["echo"].ainvoke({"text": "hi"})

    assert asyncio.run(session())[0]["text"] == "hi"
    mcp_sidecar.assert_client_gave_up(within=2.0, target="DELETE /mcp")


@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=20, when="tools/call")])
def test_calls_are_bounded(mcp_sidecar):
    client = MultiServerMCPClient({"sidecar": sidecar_connection(mcp_sidecar)})

    async def session():
        tools = {t.name: t for t in await client.get_tools()}
        with pytest.raises(Exception):  # noqa: B017, PT011
            await tools["echo"].ainvoke({"text": "hi"})

    asyncio.run(session())
    mcp_sidecar.assert_client_released(within=2.0, target="tools/call")


# --8<-- [end:recipe]


def text(result) -> str:
    """A tool's answer: langchain-core 1.x gives content blocks, ``[{'type': 'text', 'text': ...}]``."""
    if isinstance(result, list) and result and isinstance(result[0], dict):
        return "".join(str(block.get("text", block)) for block in result)
    return str(result)


class Client:
    """One explicit session: entered at connect, left at close."""

    def __init__(self, connection: dict) -> None:
        self.client = MultiServerMCPClient({"sidecar": connection})
        self.stack = contextlib.AsyncExitStack()

    async def connect(self) -> None:
        self.session = await self.stack.enter_async_context(self.client.session("sidecar"))

    async def list_tools(self) -> list[str]:
        self.tools = {t.name: t for t in await load_mcp_tools(self.session)}
        return list(self.tools)

    async def call(self) -> str:
        return text(await self.tools["echo"].ainvoke({"text": "hi"}))

    async def close(self) -> None:
        await self.stack.aclose()


class PerCallClient(Client):
    """langchain's default: get_tools() and each call open and close a session; the close is one
    last call (so a fault at close lands on a session's start or end, as in a harness's next turn)."""

    async def connect(self) -> None:
        self.tools = {t.name: t for t in await self.client.get_tools()}

    async def list_tools(self) -> list[str]:
        return list(self.tools)

    async def close(self) -> None:
        await self.call()


def default_client(url: str) -> Client:
    return Client({"transport": "streamable_http", "url": url})


def default_per_call_client(url: str) -> PerCallClient:
    return PerCallClient({"transport": "streamable_http", "url": url})


FW = fwcheck.Framework(
    "langchain", "langchain-mcp-adapters", __name__, default_client,
    lambda sc: Client(sidecar_connection(sc)), raw=RAW, paths={"auto": "session", "session": "session"},
    late_verdict=LATE, keeps_lost_session=LOST,
)  # fmt: skip
FW_PER_CALL = fwcheck.Framework(
    "langchain-per-call", "langchain-mcp-adapters", __name__, default_per_call_client,
    lambda sc: PerCallClient(sidecar_connection(sc)), raw=RAW_PER_CALL,
    paths={"auto": "session", "session": "session"}, factory="default_per_call_client", late_verdict=LATE,
    held={"freeze-session": "`POST /mcp` (initialize)"},  # frozen before the next call's session starts
)  # fmt: skip
BOTH = [pytest.param(FW, id="session"), pytest.param(FW_PER_CALL, id="per-call")]


@pytest.mark.parametrize("fw", BOTH)
@pytest.mark.parametrize("era", FW.paths)
def test_interop(fw, era, mcp_sidecar_factory):
    fw.check_interop(era, mcp_sidecar_factory)


def test_a_stateless_only_sidecar_is_refused(mcp_sidecar_factory):
    sidecar = mcp_sidecar_factory(era="stateless")
    c = fwcheck.case("none-stateless")
    result = asyncio.run(fwcheck.measure(default_client(sidecar.mcp_url), sidecar, c))
    FW.record(c.name, {"raw": result})
    assert result["phases"]["connect"]["outcome"] == "raised"
    assert "Unsupported protocol version" in result["phases"]["connect"]["error"]


@pytest.mark.parametrize(
    ("fw", "name"), [pytest.param(fw, n, id=f"{fw.name}-{n}") for fw in (FW, FW_PER_CALL) for n in fw.raw]
)
def test_on_its_own(fw, name, mcp_sidecar_factory):
    fw.check_on_its_own(name, mcp_sidecar_factory)


@pytest.mark.parametrize(
    ("fw", "name"), [pytest.param(fw, n, id=f"{fw.name}-{n}") for fw in (FW, FW_PER_CALL) for n in fw.hangs]
)
def test_patience_turns_the_hang_into_a_verdict(fw, name, pytester, monkeypatch):
    fw.check_verdict(name, pytester, monkeypatch)


@pytest.mark.parametrize(
    ("fw", "name"), [pytest.param(fw, n, id=f"{fw.name}-{n}") for fw in (FW, FW_PER_CALL) for n in fw.raw]
)
def test_bounded_passes(fw, name, mcp_sidecar_factory):
    fw.check_bounded(name, mcp_sidecar_factory)


@pytest.mark.parametrize(
    ("fw", "name"),
    [pytest.param(fw, n, id=f"{fw.name}-{n}") for fw in (FW, FW_PER_CALL) for n in fw.lost_sessions],
)
def test_calling_a_lost_session_gets_the_hygiene_verdict(fw, name, pytester, monkeypatch):
    fw.check_lost_session(name, pytester, monkeypatch)
