"""Scenarios from real incidents (see docs/faults.md, "Incidents"), each with a real client.

* The MCP sidecar was reaped after an agent timeout, before the harness deleted its session.
* The benchmark's backing service died: ``delete_session`` answers the "no longer alive" payload.
* A delete failed with a real reason ("backend timed out") and the runner deleted again: the
  incident's second delete, caught by counting deletes in the journal.
* A runner that is still starting answers ``/health`` 503 a few times, then 200.
* A ``/health`` that hangs must be given up on by a probe with a timeout.
* A stalled ``/health`` body must not keep the probe's connection open: abort after the status.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

import httpx
import pytest
from example_modules import load
from mcp.client import Client
from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import BackendGone, ErrorPayload, Hang, Stall, Status, Trigger

_harness = load("examples/harness")


async def test_sidecar_dies_after_create_session_and_the_delete_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """mcp 2.x legacy client: the exit's DELETE is refused, logged as a WARNING and swallowed."""
    with Sidecar() as sc:
        with caplog.at_level(logging.WARNING, logger="mcp"):
            async with Client(sc.mcp_url, mode="legacy") as client:
                created = await client.call_tool("create_session", {"task_id": "task-1"})
                session = json.loads(created.content[0].text)  # type: ignore[union-attr]
                assert session["status"] == "success"
                sc.kill()  # reaped after the agent timed out
            # leaving the block raised nothing: the failure is only in the log
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert [r.name for r in warnings] == ["mcp.client.streamable_http"]
        assert warnings[0].getMessage().startswith("Session termination failed")
        assert "All connection attempts failed" in warnings[0].getMessage()  # connection refused
        # the client's GET stream opens beside its calls, in an order only the scheduler decides (under
        # load it came last): the calls are what the incident is about
        posts = [step for step in sc.journal.sequence() if step != "GET /mcp"]
        assert posts[-2:] == ["POST tools/call create_session", "POST tools/list"]
        assert "DELETE /mcp" not in sc.journal.sequence()  # it never reached the dead sidecar
        assert sc.state == "dead"
        assert sc.benchmark.sessions == {}  # the benchmark session died with the process
        with pytest.raises(httpx.ConnectError):
            httpx.get(sc.health_url, timeout=1.0)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_backend_gone_delete_session_payload(mode: str) -> None:
    with Sidecar(faults=[BackendGone()]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            created = await client.call_tool("create_session", {"task_id": "task-1"})
            sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
            deleted = await client.call_tool("delete_session", {"session_id": sid})
        payload = json.loads(deleted.content[0].text)  # type: ignore[union-attr]
        assert payload == {
            "error": f"Error closing session {sid}: Service at http://127.0.0.1:{sc.port} is no longer alive"
        }
        assert re.fullmatch(
            r"Error closing session [0-9a-f-]{36}: Service at http://127\.0\.0\.1:\d+ is no longer alive",
            payload["error"],
        )
        assert not deleted.is_error
        assert [r.tool for r in sc.requests if r.fault_kind == "backend_gone"] == ["delete_session"]
        assert len(sc.benchmark.live) == 1  # the delete never reached the (dead) backend


@pytest.mark.parametrize(
    ("hardened", "deletes", "outcome", "cleanup"),
    [(True, 1, "completed", "failed"), (False, 2, "failed", "deleted")],
    ids=["hardened", "unhardened"],
)
async def test_a_failed_delete_is_not_retried(
    hardened: bool, deletes: int, outcome: str, cleanup: str
) -> None:
    """The example runner against a failed delete: the unhardened one (the incident's) lets the
    failure escape, flips the session and deletes again, which ``times=1`` lets through; the
    hardened one records the failure on its cleanup and deletes once."""
    fault = ErrorPayload(reason="backend timed out", when=Trigger("tool:delete_session", times=1))
    with Sidecar(faults=[fault]) as sc:
        config = _harness.RunnerConfig(mcp_url=sc.mcp_url, read_timeout=2.0, call_timeout=5.0, mode="auto")
        tracer = TracerProvider().get_tracer("incident")
        result = await _harness.Runner(config, hardened=hardened, tracer=tracer).run_session("task-1")
        await asyncio.to_thread(sc.wait_idle, 3)
        assert sc.fired == {"error_payload": 1}
        assert sc.journal.sequence().count("POST tools/call delete_session") == deletes
        assert (result.outcome, result.cleanup) == (outcome, cleanup)
        assert len(sc.benchmark.live) == 2 - deletes  # the failed delete left the session live
        if not hardened:
            assert result.error == (
                f"Session deletion failed: {{'error': 'Error closing session {result.session_id}: "
                "backend timed out'}"
            )


def wait_until_ready(url: str, attempts: int = 10) -> int:
    """A readiness poll as harnesses write it: probe until 200, at most ``attempts`` times."""
    with httpx.Client(timeout=1.0) as client:
        for n in range(1, attempts + 1):
            if client.get(url).status_code == 200:
                return n
    raise TimeoutError(f"{url} not ready after {attempts} probes")


def test_health_503_three_times_then_200() -> None:
    with Sidecar(faults=[Status(503, when=Trigger("health", times=3))]) as sc:
        assert wait_until_ready(sc.health_url) == 4
        assert [r.status for r in sc.requests] == [503, 503, 503, 200]
        assert sc.fired == {"status": 3}


def test_health_hangs_and_a_probe_with_a_timeout_gives_up() -> None:
    with Sidecar(faults=[Hang(when="health")], patience=5.0) as sc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(sc.health_url, timeout=0.2)
        sc.assert_client_gave_up(within=1.0, target="health")
        (rec,) = sc.requests
        assert rec.hold == "client_closed"
        assert rec.client_closed
        assert rec.held.waited is not None
        assert rec.held.waited >= 0.15
        assert sc.patience_violations == ()


async def test_health_hangs_async_probe_gives_up() -> None:
    with Sidecar(faults=[Hang(when="health")], patience=5.0) as sc:
        async with httpx.AsyncClient(timeout=0.2) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(sc.health_url)
        await asyncio.to_thread(sc.assert_client_gave_up, 1.0, "health")


def test_stalled_health_body_released_by_a_probe_that_aborts() -> None:
    with Sidecar(faults=[Stall(after_bytes=0, when="health")], patience=5.0) as sc:
        with httpx.Client(timeout=2.0) as client:
            with client.stream("GET", sc.health_url) as resp:
                status = resp.status_code  # read the status, never the body
            # leaving the stream block closes the unread response: httpx drops the connection
            assert status == 200
            sc.assert_client_released(within=1.0)
        (rec,) = sc.requests
        assert rec.fault_kind == "stall"
        assert rec.hold == "client_closed"
        assert sc.journal.connections[0].closed_by == "client"


def test_stalled_health_body_held_by_a_probe_that_does_not_abort() -> None:
    with Sidecar(faults=[Stall(after_bytes=0, when="health")], patience=None) as sc:
        with httpx.Client(timeout=2.0) as client:
            resp = client.send(client.build_request("GET", sc.health_url), stream=True)
            assert resp.status_code == 200  # ... and the response is left open
            conn = sc.journal.connections[0]
            with pytest.raises(AssertionError) as exc_info:
                sc.assert_client_released(within=0.3)
            msg = str(exc_info.value)
            assert f"did not release connection #{conn.id} ({conn.peer})" in msg
            assert "GET /health" in msg
            assert sc.requests[0].hold is None  # still held: nobody let go
            resp.close()
        sc.assert_client_released(within=5.0)  # once closed, the journal says the client let go
