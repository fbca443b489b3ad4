"""Runtime fault control, waiting helpers, patience and the journal; quoted in docs/faults.md."""

import threading

import httpx
import pytest

from pytest_mcpfaults import Die, Hang, Sidecar, Stall, Trigger


# --8<-- [start:kill_revive]
def test_kill_and_revive(mcp_sidecar):
    port = mcp_sidecar.port
    mcp_sidecar.kill()  # listener closed, open connections reset, sessions forgotten
    with pytest.raises(httpx.ConnectError):
        httpx.get(mcp_sidecar.health_url)
    mcp_sidecar.revive()  # the same port again
    assert mcp_sidecar.port == port
    assert httpx.get(mcp_sidecar.health_url).status_code == 200


# --8<-- [end:kill_revive]


# --8<-- [start:restart]
@pytest.mark.mcp_sidecar(era="session", faults=[Die(restart=True, when=Trigger("tools/list", nth=1))])
def test_crash_loop(mcp_sidecar):
    with pytest.raises(httpx.ReadError):  # this request's connection is reset ...
        httpx.post(mcp_sidecar.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert httpx.get(mcp_sidecar.health_url).status_code == 200  # ... and it is back at once
    assert mcp_sidecar.state == "running"


# --8<-- [end:restart]


# --8<-- [start:freeze_release]
def test_freeze_then_release(mcp_sidecar):
    mcp_sidecar.freeze()
    answers = []
    probe = threading.Thread(target=lambda: answers.append(httpx.get(mcp_sidecar.health_url, timeout=5)))
    probe.start()
    mcp_sidecar.wait_held(1)  # no sleep: returns as soon as the probe is held
    mcp_sidecar.release()  # held requests proceed; the freeze ends
    probe.join(5)
    assert answers[0].status_code == 200
    assert mcp_sidecar.requests[0].hold == "released"


# --8<-- [end:freeze_release]


# --8<-- [start:inject]
def test_inject_and_clear(mcp_sidecar):
    mcp_sidecar.inject(Stall(after_bytes=4, when="health"))  # or its text form "stall(after_bytes=4)@health"
    answers = []
    probe = threading.Thread(target=lambda: answers.append(httpx.get(mcp_sidecar.health_url, timeout=5)))
    probe.start()
    mcp_sidecar.wait_held(1)
    mcp_sidecar.clear_faults()  # new requests are answered normally; the held one stays held
    assert httpx.get(mcp_sidecar.health_url).status_code == 200
    mcp_sidecar.release()  # the stalled body completes
    probe.join(5)
    assert answers[0].json() == {"status": "ok"}


# --8<-- [end:inject]


# --8<-- [start:patience]
def test_patience_budget():
    with Sidecar(faults=[Hang(when="health", patience=0.3)]) as sidecar:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):  # the sidecar cuts at 0.3 s
            httpx.get(sidecar.health_url, timeout=5.0)
        sidecar.wait_idle()
        (rec,) = sidecar.requests
        assert rec.hold == "patience"
        assert rec.held.waited >= 0.3
        (violation,) = sidecar.patience_violations
        assert violation.budget == 0.3
        assert not violation.expected
        with pytest.raises(AssertionError, match=r"waited 0\.3 s"):
            sidecar.assert_no_patience_violations()


# --8<-- [end:patience]


# --8<-- [start:journal]
@pytest.mark.mcp_sidecar(faults=[Hang(when="health")])
def test_the_journal_measures_client_patience(mcp_sidecar):
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(mcp_sidecar.health_url, timeout=0.2)
    mcp_sidecar.wait_idle()  # the connection is closed and the record is final
    (r,) = mcp_sidecar.requests
    assert (r.fault, r.fault_kind, r.hold) == ("hang@health", "hang", "client_closed")
    assert r.client_closed
    assert r.client_closed_at >= r.started_at
    assert r.held.waited > 0.1  # how long the client waited before hanging up: about its 0.2 s timeout
    assert mcp_sidecar.journal.connections[0].closed_by == "client"
    assert mcp_sidecar.fired == {"hang": 1}


# --8<-- [end:journal]
