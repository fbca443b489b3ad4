"""Proxy mode and cassette replay on the newest surfaces, with a real upstream (the mcp SDK's own
``MCPServer``, ``tests/sdk_upstream.py``) and the mcp 2.x ``Client``:

* a stateless-era ``subscriptions/listen`` stream forwarded as a POST is long-lived: ``upstream_timeout``
  does not cut it while it is quiet (as a session-era ``GET`` stream is not cut), and it ends at
  ``stop()`` in bounded time;
* a fault's forced successful result (``error_payload``) answered in place of a call to a tool with an
  ``outputSchema`` carries the ``structuredContent`` that tool declares (as ``backend_gone``'s rewrite of
  the real result does), so the mcp 2.x client, which checks it, gets the payload; an ``isError`` result
  (``tool_error``) needs none: the client does not check one;
* the same through a stdio upstream (``upstream_command``), where ``backend_gone``'s forced result is
  shaped like the child's real one too;
* a listen relayed while recording is not recorded (it never ends whole), and a replaying sidecar
  answers a listen itself, as the fake does.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client import Client
from mcp.client.subscriptions import SubscriptionLost, ToolsListChanged
from mcp.server.mcpserver import Context
from quiet_upstream import quiet_stream
from sdk_upstream import SdkUpstream, serve

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import BackendGone, ErrorPayload, ToolError, Trigger
from pytest_mcpfaults.proxy.cassette import read_cassette

#: The bound under test: shorter than the quiet spell each stream is left in.
GAP = 0.3
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def up() -> Iterator[SdkUpstream]:
    with serve() as upstream:

        @upstream.server.tool()
        async def announce(ctx: Context) -> str:
            """Tell the listening clients the tool list changed."""
            await ctx.notify_tools_changed()
            return "told"

        yield upstream


async def test_a_quiet_listen_stream_outlives_upstream_timeout_and_ends_at_stop(up: SdkUpstream) -> None:
    """The listen stays open through a quiet spell three times ``upstream_timeout``, then the notice the
    upstream publishes reaches the client; ``stop()`` ends the stream in bounded time."""
    with Sidecar(upstream=up.url, upstream_timeout=GAP) as sc:
        async with (
            Client(sc.mcp_url, mode="auto", read_timeout_seconds=5) as client,
            client.listen(tools_list_changed=True) as sub,
        ):
            await asyncio.sleep(3 * GAP)  # the quiet spell under test: no frame on the stream
            told = await client.call_tool("announce", {})
            event = await asyncio.wait_for(sub.__anext__(), 5)
            listen = next(r for r in sc.requests if r.mcp_method == "subscriptions/listen")
            assert not listen.done, sc.journal.format()  # still open, past the bound
            started = time.monotonic()
            await asyncio.to_thread(sc.stop)
            stopped = time.monotonic() - started
            with pytest.raises(SubscriptionLost):  # the graceful end is the upstream's to send
                await asyncio.wait_for(sub.__anext__(), 5)
    assert told.structured_content == {"result": "told"} and event == ToolsListChanged()
    assert stopped < 3
    (ended,) = [r for r in sc.requests if r.mcp_method == "subscriptions/listen"]
    assert ended.era == "stateless" and ended.upstream.status == 200 and ended.upstream.failure is None
    assert ended.ended_at is not None and not ended.client_closed  # the sidecar ended it, at stop


def test_a_quiet_session_get_stream_outlives_upstream_timeout_and_ends_at_stop(up: SdkUpstream) -> None:
    """The session era's ``GET`` stream, the same: not cut by the gap bound, ended at ``stop()``."""
    with Sidecar(upstream=up.url, upstream_timeout=GAP) as sc, httpx.Client(timeout=5) as c:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        r = c.post(sc.mcp_url, json=init, headers=ACCEPT)
        headers = {
            **ACCEPT,
            "Mcp-Session-Id": r.headers["Mcp-Session-Id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        with c.stream("GET", sc.mcp_url, headers=headers) as stream:
            assert stream.status_code == 200
            time.sleep(3 * GAP)  # the quiet spell under test
            get = next(r for r in sc.requests if r.method == "GET")
            assert not get.done and get.upstream.failure is None, sc.journal.format()
            started = time.monotonic()
            sc.stop()
            stopped = time.monotonic() - started
    assert stopped < 3 and get.upstream.failure is None, sc.journal.format()


async def test_a_client_hanging_up_on_a_relayed_listen_closes_the_upstream_connection() -> None:
    """An upstream's listen stream that says nothing after its ack: when the client goes, so does the
    sidecar's connection to the upstream, at once (as for a ``GET`` stream), not at stop."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {"notifications": {}}}
    headers = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
    async with quiet_stream("POST", b": ack\n\n") as up:
        with Sidecar(upstream=up.url, upstream_timeout=GAP) as sc:
            async with (
                httpx.AsyncClient(timeout=5) as c,
                c.stream("POST", sc.mcp_url, json=body, headers=headers) as resp,
            ):
                assert resp.status_code == 200
                chunks = resp.aiter_raw()  # kept: a dropped iterator closes the response
                assert await chunks.__anext__() == b": ack\n\n"
                await asyncio.sleep(2 * GAP)  # quiet past the gap bound: not cut
                assert not up.gone.is_set(), sc.journal.format()
            await asyncio.wait_for(up.gone.wait(), 2)  # the client closed: the upstream's stream ended too
            await asyncio.to_thread(sc.wait_idle, 3)
            (rec,) = sc.requests
            assert rec.client_closed and rec.upstream.status == 200 and rec.upstream.failure is None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_error_payload_at_a_tool_with_an_output_schema_carries_its_structured_content(
    up: SdkUpstream, mode: str
) -> None:
    """``delete_session`` returns a string: the SDK declares ``{"result": string}`` and wraps its value.
    ``error_payload`` answers the delete without forwarding it, shaped as the upstream's ``tools/list``
    (relayed earlier: the mcp 2.x client lists the tools to check its first result) declared; an
    ``isError`` result at ``add`` is relayed with none and the client takes it."""
    faults = [ErrorPayload(reason="backend timed out"), ToolError(text="disk full", when="tool:add")]
    with Sidecar(upstream=up.url, faults=faults) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=5) as client:
            created = await client.call_tool("create_session", {"task_id": "t"})
            sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
            failed = await client.call_tool("delete_session", {"session_id": sid})
            broken = await client.call_tool("add", {"a": 1, "b": 2})
        fired = sc.fired
    text = json.dumps({"error": f"Error closing session {sid}: backend timed out"})
    assert not failed.is_error and failed.structured_content == {"result": text}
    assert failed.content[0].text == text  # type: ignore[union-attr]
    assert broken.is_error and broken.structured_content is None
    assert sid in up.sessions  # the delete never reached the upstream
    assert fired == {"error_payload": 1, "tool_error": 1}


async def test_a_listen_is_not_recorded_and_a_replay_answers_it_as_the_fake_does(
    up: SdkUpstream, tmp_path: Path
) -> None:
    path = tmp_path / "listen.jsonl"
    with Sidecar(upstream=up.url, record=str(path)) as sc:
        async with (
            Client(sc.mcp_url, mode="auto", read_timeout_seconds=5) as client,
            client.listen(tools_list_changed=True),
        ):
            await client.call_tool("add", {"a": 1, "b": 2})
            await asyncio.to_thread(sc.stop)  # the listen is still open: its answer never ends whole
    methods = [e.method for e in read_cassette(path).exchanges]
    assert "tools/call" in methods and "subscriptions/listen" not in methods
    with Sidecar(cassette=str(path)) as sc:
        async with (
            Client(sc.mcp_url, mode="auto", read_timeout_seconds=5) as client,
            client.listen(tools_list_changed=True) as sub,
        ):
            await asyncio.to_thread(sc.stop)
            told = [event async for event in sub]  # the graceful end: no SubscriptionLost
        assert told == [] and sc.errors == []
    assert sub.honored is not None and sub.honored.tools_list_changed is True


STDIO_SERVER = Path(__file__).resolve().parent.parent / "docs" / "examples" / "proxy_stdio_server.py"


@pytest.mark.parametrize("kind", ["error_payload", "backend_gone"])
async def test_a_forced_result_through_a_stdio_upstream_carries_the_tools_structured_content(
    kind: str,
) -> None:
    """``open_ticket`` returns a string (``{"result": string}``); its second call is faulted, once the
    mcp 2.x client has listed the tools (to check the first)."""
    when = Trigger("tool:open_ticket", nth=2)
    fault = (
        ErrorPayload(reason="backend timed out", when=when)
        if kind == "error_payload"
        else BackendGone(when=when)
    )
    with Sidecar(upstream_command=[sys.executable, str(STDIO_SERVER)], faults=[fault]) as sc:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=10) as client:
            await client.call_tool("open_ticket", {"title": "a"})
            faulted = await client.call_tool("open_ticket", {"title": "b"})
        assert sc.fired == {kind: 1}
    text = faulted.content[0].text  # type: ignore[union-attr]
    assert not faulted.is_error and faulted.structured_content == {"result": text}
    assert "backend timed out" in text if kind == "error_payload" else "is no longer alive" in text


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_a_listing_is_learned_by_the_chunk_that_completes_it_before_it_is_relayed(sse: bool) -> None:
    """The proxy learns the listed output schemas when the chunk that completes the ``tools/list``
    response passes through its tap (before it is written to the client), not when the relay ends:
    a client calling the tool the moment it has the listing raced the learning (an ``error_payload``
    answered without the schema's ``structuredContent``)."""
    from pytest_mcpfaults.proxy.proxy import _Listing

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    response = {"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "count", "outputSchema": schema}]}}
    body = json.dumps(response).encode()
    if sse:
        body = b"event: message\nid: 1\ndata: " + body + b"\n\n"
    relayed: list[bytes] = []
    schemas: dict[str, object] = {}
    listing = _Listing(relayed.append, sse, 3, schemas)
    listing.feed(body[:20])
    assert schemas == {} and not listing.learned  # not complete yet
    listing.feed(body[20:])
    assert schemas == {"count": schema} and listing.learned
    assert b"".join(relayed) == body  # every chunk passed on, in order
