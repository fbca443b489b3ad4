"""A test that hangs after a fault while the sidecar holds nothing gets a verdict (issue 24): the
runner's shape (tests/wedge_runner.py: one MCP session kept across ``run_until_complete`` calls of a
private loop, no read timeout) wedges for ever under mcp 1.x after ``die`` at the delete, ``kill()``
during another call, and ``truncate`` or ``reset`` on the delete's body. Each inner run has
``-p mcpfaults -p no:timeout`` (no outside timeout could end it); the mcp 1.x ones are child pytests
(mcp 1.x comes from ``mcp1_overlay``), in one process and on two xdist workers, the mcp 2.x ones run
in-process. The durations bound the verdict (under
``HANG_BOUND``), far below a hang, and are not speed targets: the wedged runs' whole-test durations
come from the plugin's JSON report (which the xdist controller merges), the others' call phases from
their reports.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import inner_reports
import pytest
from inner_reports import DURATIONS_CONFTEST, failure

HERE = Path(__file__).parent
BUDGET = 1.0
#: The verdict ends a wedged test at about the budget (plus the watcher's poll and the interrupt); left
#: alone it would block until the inner run's 180 s timeout. Only "bounded" is claimed, not a speed:
#: 15 s tells the two apart on a quiet machine and beside six busy processes alike.
HANG_BOUND = 15.0
# each child run is bounded at 180 s (_run), not the suite's 120 s: room for six busy processes beside it
pytestmark = pytest.mark.timeout(240)

RUNNER_TESTS = f"""
import os, threading
import pytest
from wedge_runner import Runner

RT = float(os.environ["WEDGE_READ_TIMEOUT"]) if os.environ.get("WEDGE_READ_TIMEOUT") else None

@pytest.mark.parametrize("kind", ["die", "truncate", "reset"])
def test_fault_at_delete(mcp_sidecar_factory, kind):
    sc = mcp_sidecar_factory(faults=[kind + "@tool:delete_session"], patience={BUDGET})
    runner = Runner(sc.mcp_url, read_timeout=RT)
    assert runner.run_task("task-1").startswith("cleanup failed")

@pytest.mark.mcp_sidecar(patience={BUDGET})
def test_kill_during_another_call(mcp_sidecar):
    runner = Runner(mcp_sidecar.mcp_url, read_timeout=RT)
    def kill_once_called():
        mcp_sidecar.journal.wait_for(
            lambda: any(r.tool == "sleep" for r in mcp_sidecar.requests), 10, "the sleep call")
        mcp_sidecar.kill()
    threading.Thread(target=kill_once_called, daemon=True).start()
    with pytest.raises(Exception):
        runner.call("sleep", {{"seconds": 30}})
"""

NAMES = [
    "test_fault_at_delete[die]",
    "test_fault_at_delete[truncate]",
    "test_fault_at_delete[reset]",
    "test_kill_during_another_call",
]


_ARGS = ("-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:timeout", "-s", "-W", "ignore")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A child pytest: for mcp 1.x (its ``PYTHONPATH``) and xdist."""
    return pytester.runpytest_subprocess(*_ARGS, *args, timeout=180)


def _run_here(pytester: pytest.Pytester) -> pytest.RunResult:
    """In this process (mcp 2.x, no xdist): no child pytest to start, about 1 s of CPU a run."""
    return pytester.runpytest(*_ARGS, "-o", "asyncio_default_fixture_loop_scope=function")


def _runner_dir(pytester: pytest.Pytester) -> None:
    shutil.copy(HERE / "wedge_runner.py", pytester.path / "wedge_runner.py")
    pytester.makeconftest(DURATIONS_CONFTEST)
    pytester.makepyfile(test_runner=RUNNER_TESTS)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_wedged_mcp1_runner_gets_a_verdict_naming_the_blocked_call(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mcp1_path: str, workers: str
) -> None:
    monkeypatch.setenv("PYTHONPATH", mcp1_path)
    _runner_dir(pytester)
    result = _run(pytester, "-p", "xdist", "-n", workers, "--mcpfaults-report=report.json")
    result.assert_outcomes(failed=4)
    report = json.loads((pytester.path / "report.json").read_text())
    durations = {t["nodeid"].split("::")[-1]: t["duration"] for t in report["tests"]}  # the whole test
    on_delete = "@tool:delete_session` on `POST tools/call delete_session`"
    fired = {
        "test_fault_at_delete[die]": f"`die{on_delete}",
        "test_fault_at_delete[truncate]": f"`truncate{on_delete}",
        "test_fault_at_delete[reset]": f"`reset{on_delete}",
        "test_kill_during_another_call": "`kill()` (the test's call)",
    }
    for name in NAMES:
        text = failure(result, name)
        # the idle time is when the watcher (polling every 50 ms) saw it: the budget, or a little more
        headline = rf"PatienceError: the test made no progress for \d\.\d s \(the {BUDGET:g} s patience"
        assert re.search(headline, text), text
        assert f"fired: {fired[name]}" in text, text
        assert "since then: no request reached the sidecar" in text, text
        assert "hint: if this is the mcp 1.x SDK" in text and "read_timeout_seconds=timedelta" in text, text
        # the stack line of the blocked call, in the harness's own file
        assert 'wedge_runner.py", line' in text, text
        assert "self.loop.run_until_complete(self.session.call_tool(tool, args))" in text, text
        # step 1 cancels the loop's tasks when the signal finds it in its selector; when it lands in one
        # of the loop's own callbacks (the client's stream work), step 1 raises there instead
        assert re.search(
            r"The test was interrupted: mcpfaults (cancelled every task of its event loop|raised "
            r"PatienceInterrupt where it was blocked)",
            text,
        ), text
        assert "site-packages" not in text.split("the test's thread is blocked at")[1], text
        assert durations[name] < HANG_BOUND, (name, durations[name])
    assert "since then: no request reached the sidecar; connection #" in failure(result, NAMES[0])
    assert "it has been down since" in failure(result, NAMES[0])
    assert "it is up and would answer" in failure(result, NAMES[1])
    stalls = [p for t in report["tests"] for p in t["patience_violations"] if p.get("kind") == "no_progress"]
    assert sorted(p["fault"] for p in stalls) == sorted(
        ["die@tool:delete_session", "truncate@tool:delete_session", "reset@tool:delete_session", "kill()"]
    )
    assert report["totals"]["patience_violations"] == 4


def test_the_mcp1_runner_with_read_timeouts_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mcp1_path: str
) -> None:
    monkeypatch.setenv("PYTHONPATH", mcp1_path)
    monkeypatch.setenv("WEDGE_READ_TIMEOUT", "0.5")
    _runner_dir(pytester)
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    assert "made no progress" not in result.stdout.str()


def test_the_mcp2_runner_is_not_wedged_and_gets_no_verdict(pytester: pytest.Pytester) -> None:
    """Measured: mcp 2.x's ClientSession raises ``MCPError`` at once in all four cases, read timeout or
    not, so the hardened runner's cleanup keeps going and nothing is interrupted."""
    _runner_dir(pytester)
    result = _run_here(pytester)
    result.assert_outcomes(passed=4)
    assert "made no progress" not in result.stdout.str()


PROGRESS_TESTS = """
import asyncio, time
import httpx, pytest
from pytest_mcpfaults import Status, Trigger

BUDGET = 0.5

def die_at_health(sc):
    with pytest.raises(httpx.TransportError):
        httpx.get(sc.health_url, timeout=5)

@pytest.mark.mcp_sidecar(patience=BUDGET, faults=["die@health"])
def test_a_sleep_after_die(mcp_sidecar):
    die_at_health(mcp_sidecar)
    time.sleep(20)

@pytest.mark.mcp_sidecar(patience=BUDGET, faults=["die@health"])
def test_a_busy_spinning_private_loop(mcp_sidecar):
    die_at_health(mcp_sidecar)
    async def spin():
        while True:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                pass  # a client that shrugs off cancellation and spins on
    async def main():
        background = asyncio.ensure_future(spin())
        await spin()
    asyncio.new_event_loop().run_until_complete(main())

# a request every 0.2 s for 2.4 s, twice the 1.2 s budget: each gap is a sixth of it, so a loaded
# machine's late wake-ups do not make one look like a stall
@pytest.mark.mcp_sidecar(patience=1.2, faults=[Status(503, when=Trigger("health", times=1))])
def test_requests_after_the_fault_are_progress(mcp_sidecar):
    for _ in range(12):
        httpx.get(mcp_sidecar.health_url, timeout=5)
        time.sleep(0.2)

@pytest.mark.mcp_sidecar(patience=BUDGET, faults=["status(code=503)@health"])
def test_a_fallback_to_another_sidecar_is_progress(mcp_sidecar, mcp_sidecar_factory):
    replica = mcp_sidecar_factory(patience=BUDGET, faults=["delay(seconds=0.3)@health"])
    assert httpx.get(mcp_sidecar.health_url, timeout=5).status_code == 503
    for _ in range(4):  # the runner goes on with the replica, slow but answering: 1.2 s, over 2 budgets
        assert httpx.get(replica.health_url, timeout=5).status_code == 200

@pytest.mark.mcp_sidecar(patience=BUDGET, faults=["delay(seconds=1.5)@health"])
def test_a_request_in_flight_is_the_sidecars_to_answer(mcp_sidecar):
    assert httpx.get(mcp_sidecar.health_url, timeout=5).status_code == 200

@pytest.mark.mcp_no_interrupt
@pytest.mark.mcp_sidecar(patience=BUDGET, faults=["die@health"])
def test_interrupting_off(mcp_sidecar):
    die_at_health(mcp_sidecar)
    time.sleep(1.2)

@pytest.mark.mcp_expect_hang
@pytest.mark.mcp_sidecar(patience=BUDGET, faults=["die@health"])
def test_an_expected_hang(mcp_sidecar):
    die_at_health(mcp_sidecar)
    time.sleep(1.2)
"""


def test_what_is_and_is_not_a_stall(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(DURATIONS_CONFTEST)
    pytester.makepyfile(test_stall_cases=PROGRESS_TESTS)  # not a name of this suite: it runs in-process
    result = _run_here(pytester)
    result.assert_outcomes(failed=2, passed=5)
    durations = inner_reports.durations(result)
    sleep = failure(result, "test_a_sleep_after_die")
    headline = r"the test made no progress for \d\.\d s \(the 0.5 s patience budget\) after `die@health`"
    assert re.search(headline, sleep), sleep
    assert "fired: `die@health` on `GET /health`" in sleep
    assert "time.sleep(20)" in sleep  # where it was blocked
    assert "mcpfaults raised PatienceInterrupt where it was blocked" in sleep
    spin = failure(result, "test_a_busy_spinning_private_loop")
    assert "the test made no progress" in spin
    assert "await spin()" in spin or "await asyncio.sleep(0)" in spin, spin
    for name in ("test_a_sleep_after_die", "test_a_busy_spinning_private_loop"):
        assert durations[name] < HANG_BOUND, (name, durations[name])  # not the 20 s sleep, not for ever
    assert durations["test_requests_after_the_fault_are_progress"] >= 2.4  # twice its budget, no verdict
    assert durations["test_a_request_in_flight_is_the_sidecars_to_answer"] >= 1.5
    assert durations["test_a_fallback_to_another_sidecar_is_progress"] >= 1.2  # no verdict at 0.5 s
    assert durations["test_interrupting_off"] >= 1.2


def test_a_hold_is_patiences_and_the_clock_starts_at_the_last_answer() -> None:
    """find_stall on its own: a hold patience ended is that verdict's (never a stall, even in the moment
    between the abort and the violation's record); a hold the client gave up on, and a delayed answer,
    count from their end, not from the fault."""
    import time

    import httpx

    from pytest_mcpfaults import Sidecar
    from pytest_mcpfaults.verdicts.stalls import find_stall

    with Sidecar(patience=0.3, faults=["stall@health"], expect_hang=True) as sc:
        with pytest.raises(httpx.TransportError), httpx.stream("GET", sc.health_url, timeout=5) as r:
            r.read()
        sc.journal.wait_for(lambda: sc.requests[0].hold == "patience", 5, "the patience abort")
        time.sleep(0.4)  # past the budget since the fault, and nothing since
        assert find_stall(sc) is None
    with Sidecar(patience=0.4, faults=["hang@health"]) as sc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(sc.health_url, timeout=0.1)
        sc.journal.wait_for(lambda: sc.requests[0].hold == "client_closed", 5, "the client's close")
        stall, deadline = None, time.monotonic() + 5
        while stall is None and time.monotonic() < deadline:
            stall = find_stall(sc)
            time.sleep(0.02)
        assert stall is not None and stall.request is not None
        released = stall.request.ended_at
        assert released is not None and stall.fired.at < released
        assert stall.idle >= 0.4 and sc.journal.now() - released >= 0.4
    with Sidecar(patience=0.3, faults=["delay(seconds=0.6)@health"]) as sc:
        assert httpx.get(sc.health_url, timeout=5).status_code == 200
        assert sc.journal.now() - sc.requests[0].started_at >= 0.6  # past the budget since the fault
        assert find_stall(sc) is None  # but the answer just ended: the clock starts there


def test_the_clients_own_event_stream_does_not_restart_the_clock() -> None:
    """Issue 36: a client that reopens its refused event stream every 0.1 s (a ``GET`` on the MCP
    endpoint, answered at once) is not making progress, so the stall is found once the budget has passed
    since the fault, while the GETs go on; before, each answered GET restarted the clock and the verdict
    waited until the client stopped."""
    import time

    import httpx

    from pytest_mcpfaults import Sidecar
    from pytest_mcpfaults.verdicts.stalls import find_stall

    with Sidecar(patience=0.5, faults=["status(code=503)@health"]) as sc, httpx.Client(timeout=5) as client:
        assert client.get(sc.health_url).status_code == 503
        stall, deadline = None, time.monotonic() + 5
        while stall is None and time.monotonic() < deadline:
            assert client.get(sc.mcp_url, headers={"Accept": "text/event-stream"}).status_code >= 400
            stall = find_stall(sc)
            time.sleep(0.1)
        gets = [r for r in sc.requests if r.method == "GET" and r.path == sc.mcp_path]
        assert stall is not None, f"no stall after {len(gets)} refused GETs"
        assert stall.background and all(r.method == "GET" for r in stall.background)
        assert stall.idle >= 0.5
        last_get = max(r.ended_at or 0 for r in gets)
        # the GETs went on inside the budget: they did not hold it off
        assert sc.journal.now() - last_get < 0.5
