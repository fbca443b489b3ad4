"""Patience budgets on the library Sidecar: the abort, the violation record, the verdict text and the
positive-case assertions, with real clients (httpx, the mcp 2.x Client in the session era).

Budgets are 0.5-1.5 s, so a client that would wait 300 s is cut off in about a second. Timing bounds
here are generous correctness bounds ("not the client's own 300 s"), not speed targets.
"""

from __future__ import annotations

import math
import threading
import time

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Hang, Sidecar, Stall, Trigger, parse_fault
from pytest_mcpfaults.verdicts.patience import PatienceError, patience_verdict, violation_record

NOT_300_S = 60.0  # far above any budget used here, far below the clients' own 300 s


# -- budgets are validated --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Sidecar(patience=0),
            "Sidecar: patience must be a positive number of seconds or None, got 0",
        ),
        (
            lambda: Sidecar(patience=-1.5),
            "Sidecar: patience must be a positive number of seconds or None, got -1.5",
        ),
        (
            lambda: Sidecar(patience="x"),
            "Sidecar: patience must be a positive number of seconds or None, got 'x'",
        ),
        (
            lambda: Sidecar(patience=True),
            "Sidecar: patience must be a positive number of seconds or None, got True",
        ),
        (
            lambda: Hang(patience=-1),
            "Hang: patience must be a finite positive number of seconds or None, got -1",
        ),
        (
            lambda: Stall(patience=0),
            "Stall: patience must be a finite positive number of seconds or None, got 0",
        ),
        (
            lambda: parse_fault("freeze(patience=-2)"),
            "Freeze: patience must be a finite positive number of seconds",
        ),
        (lambda: Hang(expect_hang="yes"), "Hang: expect_hang must be True or False, got 'yes'"),
    ],
)
def test_bad_budgets_are_refused_naming_the_argument(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        make()


@pytest.mark.parametrize("within", [0, -1, "1", None, True, math.inf, math.nan, 10**400])
def test_assertion_windows_are_validated(sidecar: Sidecar, within: object) -> None:
    with pytest.raises(ValueError, match=r"Sidecar.assert_client_gave_up: within must be a positive number"):
        sidecar.assert_client_gave_up(within)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Sidecar.assert_client_released: within must be a positive number"):
        sidecar.assert_client_released(within)  # type: ignore[arg-type]


def test_assertions_refuse_a_bad_target(sidecar: Sidecar) -> None:
    with pytest.raises(ValueError, match="target"):
        sidecar.assert_client_gave_up(1.0, target="")


# -- a hung /health: httpx without and with a timeout ------------------------------------------------


def test_patient_probe_is_aborted_at_the_budget_and_recorded() -> None:
    with Sidecar(patience=0.5, faults=[Hang(when="health")]) as sc:
        t0 = time.monotonic()
        with pytest.raises(httpx.TransportError):  # the RST: ReadError / RemoteProtocolError
            httpx.get(sc.health_url, timeout=None)
        assert time.monotonic() - t0 < NOT_300_S
        sc.wait_idle()
        (req,) = sc.requests
        assert (bool(req.held), req.hold, req.status, req.bytes_sent) == (True, "patience", None, 0)
        assert req.held.waited is not None
        assert req.held.waited >= 0.5
        (conn,) = sc.journal.connections
        assert conn.closed_by == "sidecar"
        (v,) = sc.patience_violations
        assert (v.fault, v.budget, v.budget_from, v.expected, v.client_closed) == (
            "hang@health",
            0.5,
            "sidecar",
            False,
            False,
        )
        assert v.answered == "none"
        assert v.describe() == (
            "the client waited 0.5 s (the whole budget) on a hung `GET /health`, never answered (no status "
            "line was sent), and never closed the connection; without the budget it would have waited as "
            "long as its own read timeout allows (if it has one, it is longer than 0.5 s)"
        )
        assert "held by `hang@health`" in v.details()
        assert "aborted connection #0 (RST)" in v.details()
        with pytest.raises(PatienceError) as err:
            sc.assert_no_patience_violations()
        text = str(err.value)
        assert text == patience_verdict(sc, [v])
        assert text.startswith(f"1 held request outlived the patience budget at {sc.url}:")
        assert "timeout=None" not in text  # the client had no timeout, but the sidecar cannot know that
        assert (
            "   hint: the client did not give up within 0.5 s: if it has a read timeout, it is longer than "
            "that; give this request a timeout below the budget (httpx's default timeout, 5 s, is longer "
            "than this budget)"
        ) in text
        assert f"   client seen: User-Agent python-httpx/{httpx.__version__}" in text
        assert f"journal of connection #0 ({conn.peer}):" in text
        assert "hold=patience" in text
        with pytest.raises(
            AssertionError, match=r"(?s)did not give up within 1 s.*connection #0.*sidecar aborted it"
        ):
            sc.assert_client_gave_up(1.0, target="health")


def test_bounded_probe_gives_up_on_its_own_and_no_violation() -> None:
    with Sidecar(patience=1.5, faults=[Hang(when="health")]) as sc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(sc.health_url, timeout=0.3)
        sc.assert_client_gave_up(within=1.0, target="health")
        sc.assert_no_patience_violations()
        sc.wait_idle()
        (req,) = sc.requests
        assert req.hold == "client_closed"
        assert req.client_closed
        assert sc.journal.connections[0].closed_by == "client"


# -- a stalled /health body: release it, or keep it open ----------------------------------------------


def test_probe_that_aborts_the_stalled_body_passes_released_within() -> None:
    with Sidecar(patience=5.0, faults=[Stall(when="health")]) as sc:
        with httpx.Client(timeout=5.0) as client, client.stream("GET", sc.health_url) as resp:
            status = resp.status_code  # read the status, never the body; leaving the block aborts it
        assert status == 200
        sc.assert_client_released(within=1.0, target="health")
        sc.assert_no_patience_violations()
        (req,) = sc.requests
        assert (req.status, req.bytes_sent, req.hold) == (200, 0, "client_closed")


def test_probe_that_keeps_the_stalled_body_open_fails_released_within_naming_the_connection() -> None:
    with Sidecar(patience=10.0, faults=[Stall(when="health")]) as sc, httpx.Client(timeout=5.0) as client:
        req = client.build_request("GET", sc.health_url)
        resp = client.send(req, stream=True)  # status read, body left open: the connection stays busy
        try:
            assert resp.status_code == 200
            (conn,) = sc.journal.connections
            with pytest.raises(AssertionError) as err:
                sc.assert_client_released(within=1.0, target="health")
            text = str(err.value)
            assert text.startswith(f"the client did not release connection #0 ({conn.peer}) within 1 s")
            assert "`GET /health` on connection #0, held by `stall@health`: still held after" in text
            assert "the client kept it open" in text
            assert "hold=active" in text
        finally:
            resp.close()
        assert sc.patience_violations == ()


# -- per-fault budgets and expectations ------------------------------------------------------------


def test_fault_budget_overrides_the_sidecar_and_expect_hang_is_carried() -> None:
    faults = [Hang(when="health", patience=0.5, expect_hang=True)]
    with Sidecar(patience=None, faults=faults) as sc:
        with pytest.raises(httpx.TransportError):
            httpx.get(sc.health_url, timeout=None)
        sc.wait_idle()
        (v,) = sc.patience_violations
        assert (v.budget, v.budget_from, v.expected) == (0.5, "fault", True)
        assert "(its fault's patience=)" in v.details()
        rec = violation_record(v, expected=True, sidecar_url=sc.url)
        assert rec["request"] == "GET /health"
        assert rec["connection"] == 0
        assert rec["expected"] is True
        assert rec["fault"] == "hang(patience=0.5,expect_hang=true)@health"


def test_no_budget_holds_until_release() -> None:
    with Sidecar(patience=None, faults=[Hang(when="health")]) as sc, httpx.Client(timeout=10.0) as c:
        result: list[int] = []
        t = threading.Thread(target=lambda: result.append(c.get(sc.health_url).status_code))
        t.start()
        sc.wait_held(1)
        sc.release()
        t.join(10)
        (req,) = sc.requests
        assert req.hold == "released"
        assert sc.patience_violations == ()
        with pytest.raises(AssertionError, match="the test released it"):
            sc.assert_client_gave_up(1.0)


def test_held_requests_lists_what_blocking_faults_held_matching_a_target() -> None:
    with (
        Sidecar(patience=None, faults=[Hang(when=Trigger("health", times=1))]) as sc,
        httpx.Client(timeout=10.0) as c,
    ):
        t = threading.Thread(target=lambda: c.get(sc.health_url))
        t.start()
        sc.wait_held(1)
        assert httpx.post(sc.mcp_url, content=b"{").status_code == 400  # not held
        sc.release()
        t.join(10)
        assert [r.label for r in sc.held_requests()] == ["GET /health"]
        assert [r.hold for r in sc.held_requests("health")] == ["released"]
        assert sc.held_requests("POST /mcp") == []
        with pytest.raises(ValueError, match="target"):
            sc.held_requests("nonsense target!")


# -- the mcp 2.x client (session era): a sidecar frozen before the client closes ----------------------


async def test_mcp2_default_client_waits_out_a_frozen_delete_until_the_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Sidecar(patience=1.0) as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            await client.call_tool("echo", {"text": "hi"})
            sc.freeze()
            t0 = time.monotonic()
        assert time.monotonic() - t0 < NOT_300_S  # the abort unblocked the close-time DELETE
        assert "Session termination failed" in caplog.text  # the SDK swallowed the RST with a WARNING
        sc.wait_idle()
        (v,) = sc.patience_violations
        assert v.request.label == "DELETE /mcp"
        assert v.request.era == "session"
        assert v.fault == "freeze"
        assert v.describe().startswith(
            "the client waited 1 s (the whole budget) on a frozen `DELETE /mcp` (session era), never "
            "answered (no status line was sent)"
        )
        assert v.request.user_agent is not None
        assert v.request.user_agent.startswith("python-httpx2/")  # measured: what mcp 2.x sends
        assert v.request.protocol_version is not None
        text = patience_verdict(sc, [v])
        assert "hint: if this is the mcp 2.x SDK (it sends this User-Agent): it sends this DELETE" in text
        assert "Client(read_timeout_seconds=...) does not bound it" in text
        assert "POST tools/call echo" in text  # the journal of the DELETE's (keep-alive) connection


async def test_mcp2_read_timeout_seconds_does_not_bound_the_delete() -> None:
    with Sidecar(patience=1.0) as sc:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=0.3) as client:
            await client.call_tool("echo", {"text": "hi"})
            sc.freeze()
        sc.wait_idle()
        assert [v.request.label for v in sc.patience_violations] == ["DELETE /mcp"]


async def test_mcp2_client_with_a_short_httpx2_read_timeout_gives_up_on_the_delete() -> None:
    with Sidecar(patience=5.0) as sc:
        http = create_mcp_http_client(timeout=httpx2.Timeout(5.0, read=0.3))  # bounds the close-time DELETE
        transport = streamable_http_client(sc.mcp_url, http_client=http)
        async with http, Client(transport, mode="legacy") as client:
            await client.call_tool("echo", {"text": "hi"})
            sc.freeze()
        sc.assert_client_gave_up(within=2.0, target="DELETE /mcp")
        sc.assert_no_patience_violations()
        assert sc.journal.sequence()[-1] == "DELETE /mcp"


# -- the mcp 2.x client: a stalled tools/call body ---------------------------------------------------


async def test_mcp2_default_client_waits_out_a_stalled_tool_call_until_the_budget() -> None:
    with Sidecar(patience=1.0, faults=[Stall(after_bytes=10, when="tools/call")]) as sc:
        with pytest.raises(BaseException):  # noqa: B017, PT011  the RST surfaces as cancellation + ExceptionGroup
            async with Client(sc.mcp_url, mode="legacy") as client:
                await client.call_tool("echo", {"text": "hi"})
        sc.wait_idle()
        (v,) = sc.patience_violations
        assert v.request.label == "POST tools/call echo"
        assert v.request.bytes_sent == 10
        assert v.answered == "partial"
        assert v.describe().startswith(
            "the client waited 1 s (the whole budget) on the response to `POST /mcp` (tools/call echo) "
            "(session era), which stalled after the status line (200) and 10 bytes of body, and never "
            "released the connection"
        )
        text = patience_verdict(sc, [v])
        assert "Client(read_timeout_seconds=...) or call_tool(..., read_timeout_seconds=...)" in text
        assert "it did not give up within 1 s, so any such timeout is longer than that" in text


async def test_mcp2_client_with_a_read_timeout_gives_up_on_a_stalled_tool_call() -> None:
    with Sidecar(patience=5.0, faults=[Stall(after_bytes=10, when="tools/call")]) as sc:
        # the read timeout bounds initialize too: 1 s leaves room for a loaded machine
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=1.0) as client:
            with pytest.raises(MCPError, match="timed out"):
                await client.call_tool("echo", {"text": "hi"})
        sc.assert_client_gave_up(within=2.0, target="tools/call")
        sc.assert_client_released(within=2.0, target="tool:echo")
        sc.assert_no_patience_violations()
