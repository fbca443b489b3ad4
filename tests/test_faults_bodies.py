"""Body faults end to end: stall, drip, truncate, reset, malformed JSON, endless SSE.

httpx shows the bytes (a partial body, then the symptom); the mcp 2.x ``Client`` shows what a harness
sees on ``tools/call`` in the stateless (``mode="auto"``) and session (``mode="legacy"``) eras.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import Drip, EndlessSse, MalformedJson, Reset, Stall, Truncate

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


def leaves(exc: BaseException) -> list[str]:
    """The type names of an exception group's leaves (anyio nests groups depending on timing)."""
    if isinstance(exc, BaseExceptionGroup):
        return [name for e in exc.exceptions for name in leaves(e)]
    return [type(exc).__name__]


HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}
MODES = ["auto", "legacy"]


def full_reply(sse: bool) -> bytes:
    """The bytes the sidecar sends for CALL when no fault fires (to compare partial bodies with)."""
    result = {"content": [{"type": "text", "text": "hi"}], "isError": False, "resultType": "complete"}
    data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, separators=(",", ":")).encode()
    return b"event: message\ndata: " + data + b"\n\n" if sse else data


async def call_echo(sc: Sidecar, mode: str, **kw: Any) -> Any:
    async with Client(sc.mcp_url, mode=mode, **kw) as client:
        return await client.call_tool("echo", {"text": "hi"})


async def call_echo_fails(sc: Sidecar, mode: str, match: str, **kw: Any) -> None:
    """The call raises ``MCPError`` matching ``match``; the client then exits cleanly."""
    async with Client(sc.mcp_url, mode=mode, **kw) as client:
        with pytest.raises(MCPError, match=match):
            await client.call_tool("echo", {"text": "hi"})


# -- stall -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", ["json", "sse"])
def test_stall_sends_headers_and_a_prefix_then_holds(reply: str) -> None:
    with Sidecar(reply=reply, faults=[Stall(after_bytes=7, when="tools/call")], patience=5.0) as sc:
        with (
            httpx.Client(timeout=httpx.Timeout(2.0, read=0.3)) as client,
            client.stream("POST", sc.mcp_url, json=CALL, headers=HEADERS) as resp,
        ):
            assert resp.status_code == 200
            assert resp.headers["Content-Type"].startswith(
                "text/event-stream" if reply == "sse" else "application/json"
            )
            chunks = resp.iter_raw()
            got = next(chunks)
            with pytest.raises(httpx.ReadTimeout):
                next(chunks)
        assert got == full_reply(reply == "sse")[:7]
        sc.wait_idle(3)
        (rec,) = sc.requests
        assert rec.fault_kind == "stall"
        assert rec.status == 200
        assert rec.bytes_sent == 7
        assert rec.hold == "client_closed"
        assert rec.client_closed
        sc.assert_client_released(within=2.0)


@pytest.mark.parametrize("mode", MODES)
async def test_stall_mcp_client_times_out(mode: str) -> None:
    with Sidecar(faults=[Stall(after_bytes=5, when="tools/call")], patience=2.0) as sc:
        await call_echo_fails(sc, mode, "timed out", read_timeout_seconds=0.3)
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.fault_kind == "stall"
        assert call.hold == "client_closed"
        assert call.status == 200
        assert sc.patience_violations == ()  # both eras close the stalled POST on the timeout


@pytest.mark.parametrize("mode", MODES)
async def test_stall_released_mcp_call_completes(mode: str) -> None:
    with Sidecar(faults=[Stall(after_bytes=5, when="tools/call")], patience=None) as sc:
        call = asyncio.ensure_future(call_echo(sc, mode, read_timeout_seconds=5.0))
        await asyncio.to_thread(sc.wait_held, 1)
        sc.release()
        result = await asyncio.wait_for(call, 5)
        assert result.content[0].text == "hi"
        assert not result.is_error
        await asyncio.to_thread(sc.wait_idle, 3)
        rec = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert rec.hold == "released"
        assert rec.bytes_sent > 5


# -- drip --------------------------------------------------------------------------------------------


async def test_drip_delivers_the_whole_body_slowly() -> None:
    with Sidecar(faults=[Drip(chunk_bytes=16, interval=0.01, when="tools/call")]) as sc:
        async with httpx.AsyncClient(timeout=5.0) as client:
            r = await client.post(sc.mcp_url, json=CALL, headers=HEADERS)
        assert r.content == full_reply(False)
        for mode in MODES:
            assert (await call_echo(sc, mode)).content[0].text == "hi"
        await asyncio.to_thread(sc.wait_idle, 3)
        dripped = [r for r in sc.requests if r.fault_kind == "drip"]
        assert len(dripped) == 3
        assert dripped[0].bytes_sent == len(full_reply(False))
        assert all(r.status == 200 and not r.client_closed for r in dripped)


# -- truncate and reset ------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", ["json", "sse"])
def test_truncate_closes_after_a_prefix(reply: str) -> None:
    with Sidecar(reply=reply, faults=[Truncate(after_bytes=10, when="tools/call")]) as sc:
        with pytest.raises(httpx.RemoteProtocolError, match=r"incomplete|received 10 bytes"):
            httpx.post(sc.mcp_url, json=CALL, headers=HEADERS, timeout=2.0)
        sc.wait_idle(3)
        (rec,) = sc.requests
        assert rec.fault_kind == "truncate"
        assert rec.status == 200
        assert rec.bytes_sent == 10
        assert not rec.client_closed
        assert sc.journal.connections[0].closed_by == "sidecar"


@pytest.mark.parametrize("after", [0, 10])
def test_reset_before_or_after_the_status_line(after: int) -> None:
    with Sidecar(faults=[Reset(after_bytes=after, when="tools/call")]) as sc:
        with httpx.Client(timeout=2.0) as client:
            if after == 0:
                with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                    client.post(sc.mcp_url, json=CALL, headers=HEADERS)
            else:
                with client.stream("POST", sc.mcp_url, json=CALL, headers=HEADERS) as resp:
                    assert resp.status_code == 200  # the status line came, then the reset
                    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                        resp.read()
        sc.wait_idle(3)
        (rec,) = sc.requests
        assert rec.fault_kind == "reset"
        assert rec.bytes_sent == after
        assert rec.status == (None if after == 0 else 200)
        assert sc.journal.connections[0].closed_by == "sidecar"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("fault", "leaf"),
    [
        (Truncate(after_bytes=10, when="tools/call"), "RemoteProtocolError"),
        (Reset(when="tools/call"), "ReadError"),
        (Reset(after_bytes=10, when="tools/call"), "ReadError"),
    ],
    ids=str,
)
async def test_cut_bodies_mcp_client_call_cancelled_and_exit_raises(mode: str, fault: Any, leaf: str) -> None:
    """mcp 2.x: the transport error cancels the call and surfaces on exit as an ExceptionGroup."""
    with Sidecar(faults=[fault]) as sc:
        with pytest.raises(BaseExceptionGroup) as exc_info:
            await call_echo(sc, mode, read_timeout_seconds=2.0)
        assert leaves(exc_info.value) == [leaf]
        await asyncio.to_thread(sc.wait_idle, 3)
        assert sc.fired == {fault.kind: 1}
        assert sc.journal.sequence()[-1] == "POST tools/call echo"


# -- malformed JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", ["json", "sse"])
def test_malformed_json_is_a_200_that_does_not_parse(reply: str) -> None:
    with Sidecar(reply=reply, faults=[MalformedJson(when="tools/call")]) as sc:
        r = httpx.post(sc.mcp_url, json=CALL, headers=HEADERS, timeout=2.0)
        assert r.status_code == 200
        whole = full_reply(reply == "sse")
        assert r.content == whole[: len(whole) // 2]
        assert int(r.headers["Content-Length"]) == len(r.content)
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.content.split(b"data: ", 1)[-1])
        assert sc.requests[0].fault_kind == "malformed_json"


@pytest.mark.parametrize("mode", MODES)
async def test_malformed_json_mcp_client_raises_mcp_error(mode: str) -> None:
    with Sidecar(faults=[MalformedJson(when="tools/call")]) as sc:
        await call_echo_fails(sc, mode, "Failed to parse JSON response")
        assert sc.fired == {"malformed_json": 1}


# -- endless SSE -------------------------------------------------------------------------------------


def test_endless_sse_sends_the_event_and_never_ends() -> None:
    with Sidecar(faults=[EndlessSse(when="tools/call")], patience=5.0) as sc:
        with (
            httpx.Client(timeout=httpx.Timeout(2.0, read=0.3)) as client,
            client.stream("POST", sc.mcp_url, json=CALL, headers=HEADERS) as resp,
        ):
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            lines = resp.iter_lines()
            assert next(lines) == "event: message"
            assert json.loads(next(lines).removeprefix("data: "))["result"]["content"][0]["text"] == "hi"
            assert next(lines) == ""
            with pytest.raises(httpx.ReadTimeout):
                next(lines)  # the stream never ends
        sc.wait_idle(3)
        (rec,) = sc.requests
        assert rec.fault_kind == "endless_sse"
        assert rec.hold == "client_closed"
        assert rec.bytes_sent == len(full_reply(True))


@pytest.mark.parametrize("mode", MODES)
async def test_endless_sse_mcp_client_takes_the_result_and_closes_the_stream(mode: str) -> None:
    with Sidecar(faults=[EndlessSse(when="tools/call")], patience=2.0) as sc:
        result = await call_echo(sc, mode, read_timeout_seconds=2.0)
        assert result.content[0].text == "hi"
        await asyncio.to_thread(sc.wait_idle, 3)
        rec = next(r for r in sc.requests if r.fault_kind == "endless_sse")
        assert rec.hold == "client_closed"
        assert sc.patience_violations == ()
        sc.assert_client_released(within=2.0, target="tools/call")
