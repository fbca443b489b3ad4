"""Hangs at teardown: a frozen sidecar at client close, the patience verdict, and the bounded client.

``test_patient_client_waits_out_a_frozen_delete`` fails with the patience verdict on purpose, and
``test_wedged_client_after_die`` with the no-progress verdict, ``test_harness_waiting_on_itself``
with the idle-hang verdict, ``test_pooled_connection_gone_silent`` with the patience verdict of a
silent connection; they are
marked ``xfail(raises=PatienceError, strict=True)`` so this file passes as a whole, and
``tests/test_patience_plugin.py`` runs it with ``--runxfail`` to capture the verdict that
``docs/hangs.md`` quotes.
"""

from __future__ import annotations

import asyncio
import threading

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Stall
from pytest_mcpfaults.faults import Blackhole
from pytest_mcpfaults.verdicts.patience import PatienceError


@pytest.mark.xfail(raises=PatienceError, strict=True, reason="shows the patience verdict")
# --8<-- [start:patient]
@pytest.mark.mcp_sidecar(era="session", patience=1.0)
async def test_patient_client_waits_out_a_frozen_delete(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "hi"})
        mcp_sidecar.freeze()  # the sidecar stops answering before the client closes
    # leaving `async with` sends DELETE /mcp; mcp 2.x would wait 300 s for it


# --8<-- [end:patient]


@pytest.mark.xfail(raises=PatienceError, strict=True, reason="shows the no-progress verdict")
# --8<-- [start:wedged]
@pytest.mark.mcp_sidecar(patience=1.0, faults=["die@tool:delete_session"])
def test_wedged_client_after_die(mcp_sidecar):
    answered = threading.Event()  # what the caller waits on; the client's reader sets it

    def reader():  # the client's reader: it dies with the connection and never tells the caller
        call = {"name": "delete_session", "arguments": {"session_id": "s-1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        try:
            httpx.post(mcp_sidecar.mcp_url, json=body, headers={"Accept": "application/json"})
            answered.set()
        except httpx.TransportError:
            pass

    threading.Thread(target=reader, daemon=True).start()
    answered.wait()  # no timeout, as an mcp 1.x ClientSession.call_tool without read_timeout_seconds


# --8<-- [end:wedged]


# --8<-- [start:bounded]
@pytest.mark.mcp_sidecar(era="session", patience=1.0)
async def test_bounded_client_gives_up_on_a_frozen_delete(mcp_sidecar):
    # The close-time DELETE goes through the transport's httpx2 client: give it a short read timeout.
    http = create_mcp_http_client(timeout=httpx2.Timeout(5.0, read=0.3))
    transport = streamable_http_client(mcp_sidecar.mcp_url, http_client=http)
    async with http, Client(transport, mode="legacy") as client:
        await client.call_tool("echo", {"text": "hi"})
        mcp_sidecar.freeze()
    mcp_sidecar.assert_client_gave_up(within=0.9, target="DELETE /mcp")
    mcp_sidecar.assert_no_patience_violations()


# --8<-- [end:bounded]


# --8<-- [start:expected]
@pytest.mark.mcp_expect_hang  # reported in the record and the CI report, not failed
@pytest.mark.mcp_sidecar(era="session", patience=0.5)
async def test_waiting_it_out_is_what_we_pin_here(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "hi"})
        mcp_sidecar.freeze()
    mcp_sidecar.wait_idle()
    (violation,) = mcp_sidecar.patience_violations
    assert violation.request.label == "DELETE /mcp"
    assert violation.expected


# --8<-- [end:expected]


# --8<-- [start:probe]
@pytest.mark.mcp_sidecar(faults=[Stall(when="health")])
def test_probe_releases_a_stalled_health_body(mcp_sidecar):
    with httpx.Client(timeout=5.0) as http, http.stream("GET", mcp_sidecar.health_url) as resp:
        ready = resp.status_code == 200  # read the status, never the body that never ends
    assert ready
    mcp_sidecar.assert_client_released(within=1.0, target="health")


# --8<-- [end:probe]


@pytest.mark.xfail(raises=PatienceError, strict=True, reason="shows the idle-hang verdict")
# --8<-- [start:idle]
@pytest.mark.mcp_sidecar(patience=1.0)
def test_harness_waiting_on_itself(mcp_sidecar):
    done = threading.Event()  # what the caller waits on; the reader should set it

    def reader():  # the call succeeds, but the reader forgets to say so
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "h", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
        accept = {"Accept": "application/json, text/event-stream"}
        httpx.post(mcp_sidecar.mcp_url, json=body, headers=accept).raise_for_status()

    threading.Thread(target=reader, daemon=True).start()
    done.wait()  # no timeout: nothing will ever set it


# --8<-- [end:idle]


# --8<-- [start:allow-idle]
@pytest.mark.mcp_allow_idle  # it waits on purpose, longer than the budget, after its last request
@pytest.mark.mcp_sidecar(patience=0.5)
def test_a_ttl_expires_between_two_calls(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    threading.Event().wait(1.0)  # let a cache entry expire (a sleep would do the same)
    httpx.get(mcp_sidecar.health_url, timeout=5)


# --8<-- [end:allow-idle]


@pytest.mark.xfail(raises=PatienceError, strict=True, reason="shows the silent-connection verdict")
# --8<-- [start:silent]
@pytest.mark.mcp_sidecar(patience=1.0, faults=[Blackhole(idle=0.2, when="tools/call")])
async def test_pooled_connection_gone_silent(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        await client.call_tool("echo", {"text": "hi"})
        await asyncio.sleep(0.3)  # the pooled connection idles; a NAT in between forgets it
        await client.call_tool("echo", {"text": "again"})  # on that connection: no answer, ever


# --8<-- [end:silent]


# --8<-- [start:silent-bounded]
@pytest.mark.mcp_sidecar(patience=1.0, faults=[Blackhole(idle=0.2, when="tools/call")])
async def test_bounded_client_calls_again_on_a_fresh_connection(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, read_timeout_seconds=0.3) as client:
        await client.call_tool("echo", {"text": "hi"})
        await asyncio.sleep(0.3)
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("echo", {"text": "again"})
        retried = await client.call_tool("echo", {"text": "retried"})  # the SDK opens a new connection
    assert retried.content[0].text == "retried"
    mcp_sidecar.assert_client_gave_up(within=0.9, target="tools/call")
    (silent,) = [c for c in mcp_sidecar.journal.connections if c.silent_at is not None]
    (held,) = mcp_sidecar.held_requests("tools/call")
    assert held.conn_id == silent.id and held.idle_before >= 0.2


# --8<-- [end:silent-bounded]
