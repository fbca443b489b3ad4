"""docs/hangs.md's advice for an outside timeout, measured: pytest-timeout's default ``signal`` method
raises its failure wherever the main thread is, and when that is inside an asyncio callback (a loop that
busy-spins, as anyio's does on a dropped mcp 1.x connection) the event loop logs it and goes on, so the
test hangs on; ``timeout_method = thread`` ends it (the process, so under pytest-xdist only the worker,
which xdist replaces, and the run goes on)."""

from __future__ import annotations

import time

import pytest

SPINS = """
import asyncio
import time


def test_spins_in_callbacks():
    async def main():
        loop = asyncio.get_running_loop()

        def spin():
            time.sleep(0.01)  # one callback's work: the main thread is almost always in one
            loop.call_soon(spin)

        loop.call_soon(spin)
        await asyncio.Event().wait()  # never set: only a timeout ends this test

    asyncio.run(main())


def test_after():
    pass
"""

STILL_RUNNING = 6.0  # seconds the signal-method run is given (its timeout is 1 s)


def test_the_signal_method_lands_in_an_asyncio_callback_and_the_test_hangs_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_spin=SPINS)
    started = time.monotonic()
    with pytest.raises(pytester.TimeoutExpired):
        # -p no:logging: asyncio's log record of the dropped exception goes to stderr, not to the capture
        pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "no:logging", "-p", "timeout", "--timeout=1",
            "--timeout-method=signal", "-s", timeout=STILL_RUNNING,
        )  # fmt: skip
    assert time.monotonic() - started >= STILL_RUNNING - 0.5  # killed by us: still running 5 s after
    err = (pytester.path / "stderr").read_text()
    # pytest-timeout fired at 1 s, inside a callback, where asyncio logged and dropped its failure
    assert "Exception in callback test_spins_in_callbacks.<locals>.main.<locals>.spin()" in err, err
    assert "Failed: Timeout (>1.0s) from pytest-timeout." in err, err


def test_the_thread_method_ends_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_spin=SPINS)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "timeout", "--timeout=1", "--timeout-method=thread", timeout=60
    )
    assert time.monotonic() - started < 30
    assert result.ret != 0
    # every thread's stack, the main thread's in the callback, then the process ends (os._exit)
    result.stdout.fnmatch_lines(["*+ Timeout +*", '*test_spin.py", line *, in spin', "*+ Timeout +*"])
    result.stdout.no_fnmatch_line("*passed*")  # test_after never ran


def test_the_thread_method_under_xdist_fails_the_test_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_spin=SPINS)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "timeout", "-p", "xdist", "--timeout=1", "--timeout-method=thread",
        "-n", "1", timeout=90,
    )  # fmt: skip
    result.assert_outcomes(failed=1, passed=1)  # the worker died with the test; its replacement ran on
    result.stdout.fnmatch_lines(["*worker 'gw0' crashed while running*test_spins_in_callbacks*"])
