"""Health-endpoint faults end to end: hang, delay, status sequences, flapping, absent, terminating.

Clients: httpx sync and async (health probes are plain HTTP); the mcp 2.x ``Client`` where the fault
also touches MCP traffic (terminating).
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import Absent, Delay, Flap, Hang, Status, Terminating, Trigger

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


def test_hang_sync_probe_times_out_and_the_journal_says_it_gave_up() -> None:
    with Sidecar(faults=[Hang(when="health")], patience=5.0) as sc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(sc.health_url, timeout=0.2)
        sc.wait_idle(3)
        (rec,) = sc.requests
        assert rec.fault == "hang@health"
        assert rec.fault_kind == "hang"
        assert sc.fired == {"hang": 1}
        assert rec.held
        assert rec.hold == "client_closed"
        assert rec.client_closed
        assert rec.status is None
        assert rec.bytes_sent == 0
        assert rec.held.waited is not None
        assert rec.held.waited >= 0.15
        assert rec.client_closed_at is not None
        assert rec.client_closed_at >= rec.started_at
        assert sc.journal.connections[0].closed_by == "client"
        sc.assert_client_gave_up(within=2.0, target="health")
        assert sc.patience_violations == ()


async def test_hang_async_probe_times_out() -> None:
    with Sidecar(faults=[Hang(when="health")], patience=5.0) as sc:
        async with httpx.AsyncClient(timeout=0.2) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(sc.health_url)
        await asyncio.to_thread(sc.wait_idle, 3)
        assert sc.requests[0].hold == "client_closed"
        sc.assert_client_gave_up(within=2.0)


def test_assert_client_gave_up_fails_when_the_sidecar_aborted_the_hold() -> None:
    with Sidecar(faults=[Hang(when="health", patience=0.3, expect_hang=True)]) as sc:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            httpx.get(sc.health_url, timeout=5.0)
        sc.wait_idle(3)
        with pytest.raises(
            AssertionError, match=r"(?s)did not give up within 1(\.0)? s.*connection #0.*hold=patience"
        ):
            sc.assert_client_gave_up(within=1.0)


def test_delay_answers_late() -> None:
    with Sidecar(faults=[Delay(0.2, when="health")]) as sc:
        t0 = time.monotonic()
        r = httpx.get(sc.health_url, timeout=5.0)
        assert time.monotonic() - t0 >= 0.2  # a lower bound only: never an upper one on a shared machine
        assert r.status_code == 200
        assert r.json() == {"status": "ok"}
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(sc.health_url, timeout=0.05)
        sc.wait_idle(3)
        assert [r.fault_kind for r in sc.requests] == ["delay", "delay"]
        assert [r.client_closed for r in sc.requests] == [False, True]
        assert not sc.requests[1].held  # a delay is not a hold: no patience applies


async def test_status_503_three_times_then_200() -> None:
    with Sidecar(faults=[Status(503, retry_after=1, when=Trigger("health", times=3))]) as sc:
        async with httpx.AsyncClient(timeout=2.0) as client:
            answers = [await client.get(sc.health_url) for _ in range(5)]
        assert [a.status_code for a in answers] == [503, 503, 503, 200, 200]
        assert answers[0].headers["Retry-After"] == "1"
        assert answers[0].json() == {"error": "injected HTTP 503"}
        assert answers[3].json() == {"status": "ok"}
        assert [r.fault_kind for r in sc.requests] == ["status"] * 3 + [None] * 2
        assert sc.fired == {"status": 3}


def test_flap_alternates() -> None:
    with Sidecar(faults=[Flap(every=2, code=502)]) as sc, httpx.Client(timeout=2.0) as client:
        codes = [client.get(sc.health_url).status_code for _ in range(6)]
        assert codes == [200, 200, 502, 502, 200, 200]
        assert [r.fault_kind for r in sc.requests] == [None, None, "flap", "flap", None, None]
        assert client.post(sc.mcp_url, json={}).status_code == 400  # flap targets health by default


def test_absent_is_indistinguishable_from_a_sidecar_without_health() -> None:
    with Sidecar(faults=[Absent()]) as faulty, Sidecar(health_path=None) as bare:
        a = httpx.get(faulty.health_url, timeout=2.0)
        b = httpx.get(bare.url + "/health", timeout=2.0)
        assert (a.status_code, a.json()) == (b.status_code, b.json()) == (404, {"error": "Not Found"})
        assert faulty.requests[0].fault_kind == "absent"
        assert bare.requests[0].fault is None


def test_terminating_health_ok_mcp_refused_with_connection_close() -> None:
    with Sidecar(faults=[Terminating()]) as sc:
        with httpx.Client(timeout=2.0) as client:
            assert client.get(sc.health_url).json() == {"status": "ok"}  # still says ready
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            first = client.post(sc.mcp_url, json=body)
            sc.wait_for(lambda reqs: not sc.journal.connections[0].open)  # closed by the sidecar
            second = client.post(sc.mcp_url, json=body)
        assert first.status_code == second.status_code == 503
        assert first.headers["Connection"] == "close"
        assert first.json()["error"]["message"] == "Service Unavailable: the server is terminating"
        sc.wait_idle(3)
        reqs = sc.requests
        assert [r.fault_kind for r in reqs] == [None, "terminating", "terminating"]
        assert reqs[1].conn_id == reqs[0].conn_id
        assert reqs[2].conn_id != reqs[1].conn_id
        assert [c.closed_by for c in sc.journal.connections] == ["sidecar", "sidecar"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_terminating_mcp_client_fails_to_connect(mode: str) -> None:
    with Sidecar(faults=[Terminating()]) as sc:
        with pytest.raises(BaseExceptionGroup) as exc_info:
            async with Client(sc.mcp_url, mode=mode):
                pass
        assert exc_info.group_contains(MCPError, match="the server is terminating", depth=2)
        await asyncio.to_thread(sc.wait_idle, 3)
        # auto: server/discover refused -> falls back to initialize, refused too; legacy: initialize only
        want = ["POST server/discover", "POST initialize"] if mode == "auto" else ["POST initialize"]
        assert sc.journal.sequence() == want
        assert {r.status for r in sc.requests} == {503}
