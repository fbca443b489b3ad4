"""A hang with no fault gets a verdict (issue 36, capability 4): every MCP request was answered, the
sidecar is up and holds nothing, no fault fired, and the test's thread stays blocked on one line for
the patience budget: the harness is waiting on itself. Each inner run is an in-process pytester run
with ``-p mcpfaults -p no:timeout`` (no outside timeout could end it). What is not one: a test that
computes (even on one line), one that keeps making requests, one marked ``mcp_allow_idle`` or run with
``mcpfaults_idle_verdict = off``, one that never talked MCP. Durations bound the verdict (the budget
+ 2 s, measured by the inner run's own report), and are not speed targets.
"""

from __future__ import annotations

import re

import inner_reports
import pytest
from inner_reports import DURATIONS_CONFTEST, failure

pytestmark = pytest.mark.timeout(240)

BUDGET = 1.0
#: A test left blocked would wait until the inner run's 180 s timeout: 15 s tells the two apart.
HANG_BOUND = 15.0

IDLE_TESTS = f"""
import asyncio, subprocess, sys, threading, time
import httpx, pytest
from mcp.client import Client

BUDGET = {BUDGET}


class Harness:
    '''Calls a tool from its reader task and waits for the reader to say it is done; the reader
    stores the result but never sets the event (the bug).'''

    def __init__(self, client):
        self.client, self.done, self.result = client, asyncio.Event(), None

    async def reader(self):
        self.result = await self.client.call_tool("echo", {{"text": "hi"}})

    async def run(self):
        task = asyncio.ensure_future(self.reader())
        await self.done.wait()  # the reader never sets it
        return task.result()


@pytest.mark.mcp_sidecar(era="session", patience=BUDGET)
def test_async_harness_waits_on_itself(mcp_sidecar):
    async def main():
        async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
            await Harness(client).run()
    asyncio.run(main())


@pytest.mark.mcp_sidecar(era="session", patience=BUDGET)
def test_async_harness_waits_on_itself_while_a_heartbeat_beats(mcp_sidecar):
    async def heartbeat():
        while True:  # wakes the event loop faster than the watcher samples it
            await asyncio.sleep(0.01)

    async def main():
        beat = asyncio.ensure_future(heartbeat())
        async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
            await Harness(client).run()
        beat.cancel()
    asyncio.run(main())


@pytest.mark.mcp_sidecar(era="session", patience=BUDGET)
def test_async_harness_polls_for_what_never_comes(mcp_sidecar):
    async def main():
        async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
            await client.call_tool("echo", {{"text": "hi"}})
            done = False
            while not done:  # a poll loop is a wait like time.sleep(): the reader never sets it
                await asyncio.sleep(0.01)
    asyncio.run(main())


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_thread_harness_waits_on_itself(mcp_sidecar):
    answered = threading.Event()
    def reader():
        httpx.get(mcp_sidecar.health_url, timeout=5)  # answered 200; answered.set() forgotten
    threading.Thread(target=reader, daemon=True).start()
    answered.wait()  # the reader never sets it


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_computing_on_one_line(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    end = time.monotonic() + 2.5
    while time.monotonic() < end: pass


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_computing_moves(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    end, n = time.monotonic() + 2.5, 0
    while time.monotonic() < end:
        n += sum(range(1000))


@pytest.mark.mcp_sidecar(era="session", patience=BUDGET)
def test_keeps_making_requests(mcp_sidecar):
    async def main():
        async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
            for _ in range(12):
                await client.call_tool("echo", {{"text": "hi"}})
                await asyncio.sleep(0.2)
    asyncio.run(main())


@pytest.mark.mcp_allow_idle
@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_waits_on_purpose(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    time.sleep(2.5)


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_sleeps_after_mcp(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    time.sleep(2.5)  # a wait like any other: past the budget it needs the marker


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_never_talked_mcp(mcp_sidecar):
    time.sleep(2.5)


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_waits_on_a_computing_child(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    # a harness run as a child process, working (slowly, beside other jobs) between its MCP requests
    busy = "import time; end = time.monotonic() + 2.0; any(time.monotonic() > end for _ in iter(int, 1))"
    subprocess.run([sys.executable, "-c", busy], check=True, timeout=60)


@pytest.mark.mcp_sidecar(patience=BUDGET)
def test_waits_on_a_sleeping_child(mcp_sidecar):
    httpx.get(mcp_sidecar.health_url, timeout=5)
    subprocess.run([sys.executable, "-c", "import time; time.sleep(2.5)"], check=True, timeout=60)
"""

FAILING = [
    "test_async_harness_waits_on_itself",
    "test_async_harness_waits_on_itself_while_a_heartbeat_beats",
    "test_async_harness_polls_for_what_never_comes",
    "test_thread_harness_waits_on_itself",
    "test_sleeps_after_mcp",
    "test_waits_on_a_sleeping_child",
]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(DURATIONS_CONFTEST)
    pytester.makepyfile(test_idle=IDLE_TESTS)
    return pytester.runpytest(  # in-process: no child pytest to start (about 1 s of CPU a run)
        *("-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:timeout", "-s", "-W", "ignore"),
        *("-o", "asyncio_default_fixture_loop_scope=function"),
        *args,
    )


def test_a_harness_waiting_on_itself_gets_a_verdict_and_the_others_do_not(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(failed=6, passed=6)
    durations = inner_reports.durations(result)
    for name in FAILING:
        text = failure(result, name)
        headline = (
            r"PatienceError: the test made no progress for \d\.\d s after its last MCP request `[^`]+` "
            r"\(#\d+\) ended, and no fault fired: the sidecar at http://127\.0\.0\.1:\d+ is up and idle"
        )
        assert re.search(headline, text), text
        assert "hint: the harness is waiting on itself" in text, text
        assert "mcp_allow_idle" in text, text
        # the verdict came within the budget + 2 s of the last answer (the headline's idle time), and the
        # interrupted test ended soon after (bounded; not a speed target)
        waited = float(re.search(r"no progress for (\d+\.\d) s", text).group(1))  # type: ignore[union-attr]
        assert BUDGET <= waited < BUDGET + 2.0, (name, waited)
        assert durations[name] < HANG_BOUND, (name, durations[name])
    on_async = failure(result, FAILING[0])
    assert "last MCP request `POST tools/" in on_async, on_async  # mcp 2.x lists tools after a call
    assert "await self.done.wait()  # the reader never sets it" in on_async, on_async  # the blocked line
    on_beat = failure(result, FAILING[1])
    assert "await self.done.wait()  # the reader never sets it" in on_beat, on_beat
    on_poll = failure(result, FAILING[2])
    assert "await asyncio.sleep(0.01)" in on_poll, on_poll
    on_thread = failure(result, FAILING[3])
    assert "`GET /health`" in on_thread, on_thread
    assert "answered.wait()  # the reader never sets it" in on_thread, on_thread
    # the run's summary names the violation by its kind (it has no fault to name)
    summary = result.stdout.str()
    assert "test_idle.py::test_sleeps_after_mcp: patience idle: the test made no progress" in summary
    assert "patience None" not in summary
    names = ("test_computing_on_one_line", "test_computing_moves", "test_keeps_making_requests")
    for name in (*names, "test_waits_on_a_computing_child"):
        assert durations[name] >= 2.0, (name, durations[name])  # ran its course, past twice the budget
    for name in ("test_waits_on_purpose", "test_never_talked_mcp"):
        assert durations[name] >= 2.5, (name, durations[name])


def test_the_ini_switch_turns_it_off(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-o", "mcpfaults_idle_verdict=off", "-k", "sleeps_after_mcp")
    result.assert_outcomes(passed=1)
    assert inner_reports.durations(result)["test_sleeps_after_mcp"] >= 2.5


def test_a_bad_ini_value_and_a_marker_with_arguments_are_usage_errors(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-o", "mcpfaults_idle_verdict=maybe")
    assert "ini option mcpfaults_idle_verdict must be 'on' or 'off', got 'maybe'" in result.stderr.str()
    pytester.makepyfile(
        test_marker="""
import pytest

@pytest.mark.mcp_allow_idle(3)
def test_x():
    pass
"""
    )
    result = pytester.runpytest(
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function",
        "test_marker.py",
    )  # fmt: skip
    assert "@pytest.mark.mcp_allow_idle takes no arguments" in result.stdout.str()
