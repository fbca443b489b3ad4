"""A test still blocked after a patience verdict is interrupted with the verdict (``mcpfaults_interrupt``
seconds of grace, 1 by default), through pytester with ``-p mcpfaults`` and no pytest-timeout.

Each inner test swallows the client's error after the sidecar's reset and then blocks for 20 s: on its
own it would fail only after those 20 s; interrupted, its call phase ends at about budget + grace. The
call-phase duration is read from the inner run's reports; the bounds are correctness bounds (far below
the 20 s), not speed targets. Every inner run is in-process (no child pytest to start: its run has
the main thread, as a user's has) and bounded by the outer test's timeout.
"""

from __future__ import annotations

import inner_reports
import pytest
from inner_reports import DURATIONS_CONFTEST, failure

BLOCKED = 20.0  # how long each inner test blocks on its own
BUDGET, GRACE = 0.5, 0.5
#: The upper bound of an interrupted test: it ends at budget + grace (1 s) and, not interrupted, would
#: block the full 20 s. Only "bounded" is claimed (no speed): half of BLOCKED tells the two apart on a
#: quiet machine and on one with six busy processes per core pair alike.
ABOUT = BLOCKED / 2
#: How long the bodies of ``OFF`` block by themselves (after the hold's 0.5 s): an interrupted one ends
#: at 0.5 + 1 s (the default grace), one left alone at 0.5 + 4 s: 3 s apart, room for a loaded machine.
OFF_WAIT = 4.0

TESTS = """
import asyncio, socket, threading, time
import httpx, pytest
from pytest_mcpfaults import Hang

HANG = pytest.mark.mcp_sidecar(patience=0.5, faults=[Hang(when="health")])

def swallow(sc):
    try:
        httpx.get(sc.health_url, timeout=None)
    except httpx.TransportError:
        pass  # a harness that swallows the reset, then blocks elsewhere

@HANG
def test_sync_event_wait(mcp_sidecar):
    swallow(mcp_sidecar)
    threading.Event().wait(20)

@HANG
def test_sync_socket_read(mcp_sidecar):
    swallow(mcp_sidecar)
    a, b = socket.socketpair()
    with a, b:
        a.recv(1)  # no timeout, and nobody ever writes to b

@HANG
def test_sync_swallows_everything(mcp_sidecar):
    swallow(mcp_sidecar)
    try:
        time.sleep(20)
    except Exception:
        pass  # the interrupt is a BaseException: not swallowed here

@HANG
async def test_async_awaits_forever(mcp_sidecar):
    swallow(mcp_sidecar)
    await asyncio.wait_for(asyncio.Event().wait(), 20)

@HANG
async def test_async_blocked_in_sync_code(mcp_sidecar):
    swallow(mcp_sidecar)
    time.sleep(20)  # blocks the loop itself: no cancellation can reach it

@HANG
def test_sync_runs_a_loop(mcp_sidecar):
    async def go():
        swallow(mcp_sidecar)
        await asyncio.sleep(20)
    asyncio.run(go())

def test_factory_sidecar_made_in_the_body(mcp_sidecar_factory):
    with mcp_sidecar_factory(patience=0.5, faults=[Hang(when="health")]) as sc:
        swallow(sc)
        threading.Event().wait(20)

@pytest.mark.mcp_expect_hang
@HANG
def test_expected_hang_is_not_interrupted(mcp_sidecar):
    swallow(mcp_sidecar)
    threading.Event().wait(1.5)
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "mcpfaults",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:timeout",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *args,
    )


# eight inner tests in one run, about 20 s beside other jobs (load 10): the suite's 120 s is short when
# six busy processes share the cores with it
@pytest.mark.timeout(240)
def test_blocked_tests_are_interrupted_with_the_verdict(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(DURATIONS_CONFTEST)
    pytester.makeini(f"[pytest]\nmcpfaults_interrupt = {GRACE}\n")
    pytester.makepyfile(TESTS)
    result = _run(pytester, "-s")
    result.assert_outcomes(failed=7, passed=1)
    durations = inner_reports.durations(result)
    how = {
        "test_sync_event_wait": "raised PatienceInterrupt where it was blocked",
        "test_sync_socket_read": "raised PatienceInterrupt where it was blocked",
        "test_sync_swallows_everything": "raised PatienceInterrupt where it was blocked",
        "test_async_awaits_forever": "cancelled every task of its event loop",
        "test_async_blocked_in_sync_code": "raised PatienceInterrupt where it was blocked",
        "test_sync_runs_a_loop": "cancelled every task of its event loop",
        "test_factory_sidecar_made_in_the_body": "raised PatienceInterrupt where it was blocked",
    }
    for name, action in how.items():
        text = failure(result, name)
        assert "PatienceError: 1 held request outlived the patience budget" in text, text
        assert "on a hung `GET /health`, never answered" in text, text
        assert f"The test was still blocked {GRACE:g} s after the verdict at " in text, text
        assert f"mcpfaults {action}" in text, text
        assert "also failed" not in text, text  # the interrupt itself is not the test's own failure
        assert BUDGET + GRACE - 0.05 <= durations[name] < ABOUT, (name, durations[name])
    assert "at test_blocked_tests_are_interrupted_with_the_verdict.py:" in failure(
        result, "test_sync_event_wait"
    )
    # an expected hang is never interrupted: it blocked its full 1.5 s and passed
    assert durations["test_expected_hang_is_not_interrupted"] >= 1.5


OFF = f"""
import threading
import httpx, pytest
from pytest_mcpfaults import Hang

HANG = pytest.mark.mcp_sidecar(patience=0.5, faults=[Hang(when="health")])
OFF_WAIT = {OFF_WAIT}

def block(sc):
    try:
        httpx.get(sc.health_url, timeout=None)
    except httpx.TransportError:
        pass
    threading.Event().wait(OFF_WAIT)  # bounded: with interrupting off, the body returns by itself

@HANG
@pytest.mark.mcp_no_interrupt
def test_marker_off(mcp_sidecar):
    block(mcp_sidecar)

@HANG
def test_default(mcp_sidecar):
    block(mcp_sidecar)
"""


@pytest.mark.parametrize("ini", ["", "mcpfaults_interrupt = off"])
def test_interrupting_can_be_turned_off(pytester: pytest.Pytester, ini: str) -> None:
    pytester.makeconftest(DURATIONS_CONFTEST)
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(OFF)
    result = _run(pytester, "-s")
    result.assert_outcomes(failed=2)
    durations = inner_reports.durations(result)
    off = ["test_marker_off"] + (["test_default"] if ini else [])
    for name in off:  # the verdict after the body returned by itself, without the note
        text = failure(result, name)
        assert "PatienceError: 1 held request outlived the patience budget" in text, text
        assert "still blocked" not in text, text
        assert durations[name] >= OFF_WAIT, (name, durations[name])
    if not ini:  # the default grace is 1 s
        assert "The test was still blocked 1 s after the verdict" in failure(result, "test_default")
        assert durations["test_default"] < 0.5 + OFF_WAIT  # interrupted: sooner than its body returns


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan", "inf"])
def test_bad_interrupt_ini_is_a_usage_error(pytester: pytest.Pytester, raw: str) -> None:
    pytester.makeini(f"[pytest]\nmcpfaults_interrupt = {raw}\n")
    pytester.makepyfile("def test_x(): pass")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*ini option mcpfaults_interrupt must be a positive number of seconds*or 'off', got {raw!r}*"]
    )


@pytest.mark.parametrize("marker", ["mcp_no_interrupt", "mcp_expect_hang"])
def test_a_bare_marker_takes_no_arguments(pytester: pytest.Pytester, marker: str) -> None:
    """mcp_expect_hang(False) was taken as the marker itself: the hang expected, the verdict not given."""
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}(False)
        def test_it():
            raise AssertionError("must not run")
        """
    )
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*test_it: @pytest.mark.{marker} takes no arguments, got (False,)*"])
