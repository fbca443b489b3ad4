"""Process-level faults end to end: die, die-and-restart, freeze, revive, runtime inject/release, patience.

Every test drives a real client (httpx sync/async, the mcp 2.x ``Client`` in both eras) and asserts what
the client saw and what the sidecar's journal recorded.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import Die, Freeze, Hang, Stall, Trigger

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


def leaves(exc: BaseException) -> list[str]:
    """The type names of an exception group's leaves (anyio nests groups depending on timing)."""
    if isinstance(exc, BaseExceptionGroup):
        return [name for e in exc.exceptions for name in leaves(e)]
    return [type(exc).__name__]


CUT = (httpx.ReadError, httpx.RemoteProtocolError)  # what httpx raises when the server cuts the connection


def rpc(method: str, rid: int = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


STATELESS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}


def initialize(client: httpx.Client, sc: Sidecar) -> str:
    """Open a session-era transport session with plain httpx; return its id."""
    r = client.post(
        sc.mcp_url,
        json=rpc(
            "initialize",
            protocolVersion="2025-11-25",
            capabilities={},
            clientInfo={"name": "t", "version": "0"},
        ),
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert r.status_code == 200
    return r.headers["Mcp-Session-Id"]


# -- die -------------------------------------------------------------------------------------------


def test_kill_resets_open_connections_and_refuses_new_ones() -> None:
    with Sidecar(faults=[Hang(when="health")], patience=None) as sc, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.get, sc.health_url, timeout=5.0)
        sc.wait_held(1)
        sc.kill()
        with pytest.raises(CUT):
            pending.result(timeout=5)
        with pytest.raises(httpx.ConnectError):
            httpx.get(sc.health_url, timeout=1.0)
        assert sc.state == "dead"
        sc.wait_idle(2)
        (held, refused_nothing) = (sc.requests[0], len(sc.requests))
        assert refused_nothing == 1  # the refused connection never reached the sidecar
        assert held.fault_kind == "hang"
        assert held.hold == "teardown"
        assert not held.client_closed
        assert [c.closed_by for c in sc.journal.connections] == ["sidecar"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_die_on_the_second_tool_call_mcp_client(mode: str) -> None:
    with Sidecar(faults=[Die(when=Trigger("tools/call", nth=2))]) as sc:
        first = None
        with pytest.raises(BaseExceptionGroup) as exc_info:  # noqa: PT012
            async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=2.0) as client:
                first = await client.call_tool("create_session", {"task_id": "task-1"})
                await client.call_tool("evaluate_session", {"session_id": "x"})
        assert first is not None
        assert not first.is_error
        assert leaves(exc_info.value) == ["ReadError"]  # httpx2.ReadError: reset under the call
        await asyncio.to_thread(sc.wait_idle, 3)
        died = [r for r in sc.requests if r.fault_kind == "die"]
        assert [r.label for r in died] == ["POST tools/call evaluate_session"]
        assert died[0].status is None
        assert died[0].bytes_sent == 0
        assert sc.fired == {"die": 1}
        assert sc.state == "dead"
        assert sc.journal.sequence()[-1] == "POST tools/call evaluate_session"  # no DELETE got through
        assert sc.benchmark.sessions == {}  # the benchmark session died with the process


def test_die_restart_comes_back_on_the_same_port_without_sessions() -> None:
    with Sidecar(era="session", faults=[Die(restart=True, when=Trigger("tools/call", nth=1))]) as sc:
        port = sc.port
        with httpx.Client(timeout=2.0) as c:
            sid = initialize(c, sc)
            headers = {"Mcp-Session-Id": sid, "Accept": "application/json, text/event-stream"}
            with pytest.raises(CUT):
                c.post(
                    sc.mcp_url, json=rpc("tools/call", name="echo", arguments={"text": "x"}), headers=headers
                )
            again = c.post(
                sc.mcp_url, json=rpc("tools/call", name="echo", arguments={"text": "x"}), headers=headers
            )
        assert again.status_code == 404
        assert again.json()["error"]["message"] == "Session not found"
        assert sc.state == "running"
        assert sc.port == port
        assert sc.sessions == ()
        assert sid in sc.ended_sessions
        assert [r.fault_kind for r in sc.requests] == [None, "die", None]
        assert sc.requests[1].conn_id != sc.requests[2].conn_id  # the old connection was reset


def test_kill_then_revive_same_port_forgets_sessions() -> None:
    with Sidecar(era="session") as sc:
        port = sc.port
        with httpx.Client(timeout=2.0) as c:
            sid = initialize(c, sc)
            created = c.post(
                sc.mcp_url,
                json=rpc("tools/call", 2, name="create_session", arguments={"task_id": "task-1"}),
                headers={"Mcp-Session-Id": sid, "Accept": "application/json"},
            )
            assert created.status_code == 200
            assert len(sc.benchmark.live) == 1
        sc.kill()
        with pytest.raises(httpx.ConnectError):
            httpx.get(sc.health_url, timeout=1.0)
        sc.revive()
        assert sc.state == "running"
        assert sc.port == port
        assert httpx.get(sc.health_url, timeout=2.0).json() == {"status": "ok"}
        r = httpx.post(sc.mcp_url, json=rpc("tools/list"), headers={"Mcp-Session-Id": sid}, timeout=2.0)
        assert r.status_code == 404
        assert r.json()["error"]["message"] == "Session not found"
        assert sc.sessions == ()
        assert sc.benchmark.sessions == {}


# -- freeze ----------------------------------------------------------------------------------------


async def test_freeze_holds_requests_until_the_client_gives_up_or_release() -> None:
    with Sidecar(patience=5.0) as sc:
        sc.freeze()
        assert sc.state == "frozen"
        async with httpx.AsyncClient(timeout=0.3) as impatient:
            with pytest.raises(httpx.ReadTimeout):
                await impatient.get(sc.health_url)
        await asyncio.to_thread(sc.wait_idle, 3)
        gave_up = sc.requests[0]
        assert gave_up.hold == "client_closed"
        assert gave_up.client_closed
        assert gave_up.held.waited is not None
        assert gave_up.held.waited >= 0.25
        sc.assert_client_gave_up(within=2.0)

        async with httpx.AsyncClient(timeout=5.0) as patient:
            task = asyncio.ensure_future(patient.get(sc.health_url))
            await asyncio.to_thread(sc.wait_held, 1)
            sc.release()
            r = await task
        assert r.status_code == 200
        assert sc.state == "running"
        assert sc.requests[1].hold == "released"
        assert sc.requests[1].status == 200
        assert sc.patience_violations == ()


async def test_freeze_fault_in_the_session_era_mcp_client_times_out_but_keeps_the_connection() -> None:
    """mcp 2.x legacy: the call times out (MCPError) but the POST stays open; the fault's patience
    aborts it, and the client's exit then fails with the reset. The process stays frozen."""
    with Sidecar(faults=[Freeze(when=Trigger("tools/call", times=1), patience=0.5)]) as sc:
        with pytest.raises(BaseExceptionGroup) as exc_info:  # noqa: PT012
            async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=0.3) as client:
                with pytest.raises(MCPError, match="timed out"):
                    await client.call_tool("echo", {"text": "x"})
        assert leaves(exc_info.value) == ["ReadError"]
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.fault_kind == "freeze"
        assert call.hold == "patience"
        assert not call.client_closed
        (v,) = sc.patience_violations
        assert v.request.id == call.id
        assert v.budget == 0.5
        assert not v.expected
        assert sc.state == "frozen"
        later = [r for r in sc.requests if r.id > call.id]  # cancel + DELETE were frozen too
        assert {r.label for r in later} == {"POST notifications/cancelled", "DELETE /mcp"}
        assert all(r.held and r.hold == "client_closed" for r in later)


async def test_freeze_fault_stateless_client_closes_its_request() -> None:
    with Sidecar(faults=[Freeze(when=Trigger("tools/call", times=1))], patience=2.0) as sc:
        async with Client(sc.mcp_url, mode="auto", read_timeout_seconds=0.3) as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("echo", {"text": "x"})
        await asyncio.to_thread(sc.wait_idle, 3)
        call = sc.requests[-1]
        assert call.label == "POST tools/call echo"
        assert call.hold == "client_closed"
        assert sc.patience_violations == ()
        sc.assert_client_gave_up(within=1.5, target="tools/call")


# -- runtime inject / clear / release --------------------------------------------------------------


def test_inject_clear_faults_and_release() -> None:
    with Sidecar(patience=None) as sc, ThreadPoolExecutor(1) as pool:
        assert httpx.get(sc.health_url).status_code == 200
        sc.inject("stall(after_bytes=4)@health", Hang(when="/other"))
        assert [str(f) for f in sc.plan] == ["stall(after_bytes=4)@health", "hang@/other"]
        stalled = pool.submit(httpx.get, sc.health_url, timeout=5.0)
        sc.wait_held(1)
        sc.clear_faults()
        assert sc.plan == ()
        assert httpx.get(sc.health_url, timeout=2.0).status_code == 200  # new requests pass
        assert not stalled.done()  # the held one stays held until release()
        sc.release()
        r = stalled.result(timeout=5)
        assert r.status_code == 200
        assert r.json() == {"status": "ok"}
        sc.wait_idle(2)
        held = sc.requests[1]
        assert held.fault == "stall(after_bytes=4)@health"
        assert held.hold == "released"
        assert held.bytes_sent == len(b'{"status":"ok"}')


def test_revive_of_a_frozen_sidecar_releases_it() -> None:
    with Sidecar(patience=None) as sc, ThreadPoolExecutor(1) as pool:
        sc.freeze()
        pending = pool.submit(httpx.get, sc.health_url, timeout=5.0)
        sc.wait_held(1)
        sc.revive()
        assert pending.result(timeout=5).status_code == 200
        assert sc.state == "running"
        assert sc.requests[0].hold == "released"


def test_runtime_methods_refuse_a_stopped_sidecar() -> None:
    sc = Sidecar()
    with pytest.raises(RuntimeError, match=r"kill\(\).*new"):
        sc.kill()
    sc.start()
    sc.stop()
    for name in ("kill", "freeze", "revive"):
        with pytest.raises(RuntimeError, match=rf"{name}\(\).*stopped"):
            getattr(sc, name)()
    sc.release()  # a no-op once stopped


# -- patience --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan", "sidecar_patience", "budget", "expected"),
    [
        ([Hang(when="health", patience=0.3)], 30.0, 0.3, False),  # per fault overrides the sidecar's
        ([Hang(when="health")], 0.3, 0.3, False),  # per sidecar
        ([Hang(when="health", patience=0.3, expect_hang=True)], None, 0.3, True),
        ([Stall(after_bytes=3, when="health", patience=0.3)], None, 0.3, False),
    ],
)
def test_patience_aborts_the_held_connection_and_records_a_violation(
    plan: list[Any], sidecar_patience: float | None, budget: float, expected: bool
) -> None:
    with Sidecar(faults=plan, patience=sidecar_patience) as sc:
        with pytest.raises(CUT):
            httpx.get(sc.health_url, timeout=5.0)  # the client would wait 5 s; the sidecar cuts at 0.3
        sc.wait_idle(3)
        (rec,) = sc.requests
        assert rec.hold == "patience"
        assert not rec.client_closed
        assert rec.held.waited is not None
        assert budget <= rec.held.waited < 2.0
        (v,) = sc.patience_violations
        assert v.budget == budget
        assert v.expected is expected
        assert v.request.id == rec.id
        assert sc.journal.connections[0].closed_by == "sidecar"
        with pytest.raises(AssertionError, match=r"waited 0\.3 s .*GET /health"):
            sc.assert_no_patience_violations()


def test_logging_is_quiet_on_a_clean_release(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), Sidecar(faults=[Hang(when=Trigger("health", times=1))]) as sc:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(httpx.get, sc.health_url, timeout=5.0)
            sc.wait_held(1)
            sc.release()
            assert pending.result(timeout=5).status_code == 200
        sc.wait_idle(2)
    assert not [r for r in caplog.records if r.name.startswith("aiohttp")]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_hang_on_tools_call_mcp_client_times_out_and_hangs_up(mode: str) -> None:
    with Sidecar(faults=[Hang(when="tools/call")], patience=2.0) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=0.3) as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("echo", {"text": "x"})
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.mcp_method == "tools/call")
        assert call.fault_kind == "hang"
        assert call.hold == "client_closed"
        assert sc.patience_violations == ()


def test_runtime_kill_and_freeze_count_as_fired_for_coverage() -> None:
    with Sidecar() as sc:
        assert sc.fired == {}
        sc.freeze()
        sc.release()
        sc.kill()
        assert sc.fired == {"freeze": 1, "die": 1}
        with pytest.raises(httpx.ConnectError):
            httpx.get(sc.health_url, timeout=1.0)
