"""The ``mcp_stdio_server`` fixture and ``@pytest.mark.mcp_stdio`` through the plugin (pytester): the
verdict a test fails with, markers checked at collection, and every child killed whatever happened to
the test: a harness that leaked it, pytest-timeout raising in the test, or pytest-timeout ending the
whole test process (``os._exit``) while the child was stopped."""

from __future__ import annotations

import time

import pytest

from pytest_mcpfaults.stdio import guardian

CLIENT = """
import asyncio, os, subprocess, sys, time
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


def params(server):
    return StdioServerParameters(command=server.command, args=server.args, env=server.env)


async def one_call(server):
    async with Client(params(server), mode="legacy", read_timeout_seconds=5) as client:
        return (await client.call_tool("echo", {"text": "hi"})).content[0].text


def spawn(server):
    # a harness that spawns the child itself and never ends it
    return subprocess.Popen([server.command, *server.args], env={**os.environ, **server.env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_child_that_ignores_eof_and_sigterm_fails_the_test_in_about_the_budget(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        CLIENT
        + """
@pytest.mark.mcp_stdio(faults=["ignore_eof", "ignore_sigterm"], patience=1.0)
def test_close(mcp_stdio_server):
    started = time.monotonic()
    assert asyncio.run(one_call(mcp_stdio_server)) == "hi"
    print(f"TOOK {time.monotonic() - started:.3f}")
"""
    )
    result = run_plugin("-q", "-rA")
    result.assert_outcomes(failed=1)
    took = float(result.stdout.str().split("TOOK ", 1)[1].split()[0])
    out = result.stdout.str()
    assert (
        "PatienceError: 1 wait on a stdio child outlived the patience budget "
        "(stdio:python -m pytest_mcpfaults stdio):" in out
    )
    assert (
        "1. the client closed stdin and waited 1 s (the whole budget) for a child that ignores EOF; it never "
        "sent SIGTERM" in out
    )
    assert "@pytest.mark.mcp_stdio(expect_hang=True)" in out
    assert 1.0 < took < 2.5  # the SDK alone would have taken 4 s to close


def test_the_same_wait_expected_is_reported_not_failed(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        CLIENT
        + """
@pytest.mark.mcp_expect_hang
@pytest.mark.mcp_stdio(faults=["ignore_eof"], patience=0.5)
def test_close(mcp_stdio_server):
    assert asyncio.run(one_call(mcp_stdio_server)) == "hi"
    assert [v.kind for v in mcp_stdio_server.patience_violations] == ["close"]
"""
    )
    result = run_plugin("-q", "-rP")
    result.assert_outcomes(passed=1)
    assert "mcpfaults patience (expected)" in result.stdout.str()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("mcp_stdio(fautls=[])",
         "@pytest.mark.mcp_stdio got an unknown argument 'fautls'; valid arguments (those of StdioServer): "
         "era, tools, tool_sets, faults, patience"),
        ('mcp_stdio(faults=["status"])', "fault 'status' is http-only: 'status' does not apply to stdio"),
        ('mcp_sidecar(faults=["ignore_eof"])',
         "fault 'ignore_eof' is stdio-only: 'ignore_eof' does not apply"),
        ('mcp_stdio("hang")', "@pytest.mark.mcp_stdio takes keyword arguments only (those of StdioServer)"),
    ],
)  # fmt: skip
def test_bad_markers_fail_collection_naming_the_argument(
    pytester: pytest.Pytester, run_plugin, marker: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        f"""
import pytest

@pytest.mark.{marker}
def test_x(mcp_stdio_server):
    pass
"""
    )
    result = run_plugin("-q")
    result.assert_outcomes(errors=1)
    assert message in result.stdout.str()


def test_a_child_the_harness_leaked_is_killed_at_teardown(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pidfile = pytester.path / "pid"
    pytester.makepyfile(
        CLIENT
        + f"""
def test_leak(mcp_stdio_server):
    proc = spawn(mcp_stdio_server)
    child = mcp_stdio_server.wait_child()
    open({str(pidfile)!r}, "w").write(str(child.pid))
    assert child.pid == proc.pid and child.alive
"""
    )
    result = run_plugin("-q")
    result.assert_outcomes(passed=1)
    pid = int(pidfile.read_text())
    assert not alive(pid)


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_no_child_is_left_when_pytest_timeout_ends_the_test(pytester: pytest.Pytester, method: str) -> None:
    """``signal``: the timeout raises in the test and teardown kills the child. ``thread``: pytest-timeout
    ends the whole test process with ``os._exit``; the child is stopped (SIGSTOP), so it cannot notice its
    control channel close: the guardian kills it."""
    pidfile = pytester.path / "pid"
    pytester.makepyfile(
        CLIENT
        + f"""
@pytest.mark.timeout(8, method={method!r})  # room for a slow spawn on a loaded machine
@pytest.mark.mcp_no_interrupt  # else the no-progress verdict after freeze() ends it before the timeout
def test_stuck(mcp_stdio_server):
    proc = spawn(mcp_stdio_server)
    child = mcp_stdio_server.wait_child()
    mcp_stdio_server.freeze()
    open({str(pidfile)!r}, "w").write(str(child.pid))
    time.sleep(60)
"""
    )
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-q", timeout=60)
    assert "Timeout" in result.stdout.str() + result.stderr.str()
    assert pidfile.exists(), (
        "the inner test timed out before its child was up:\n" + result.stdout.str()[-2000:]
    )
    pid = int(pidfile.read_text())
    assert wait_dead(pid), f"child {pid} still alive after the test process ended"


def test_the_guardian_kills_only_what_it_watches() -> None:
    import subprocess
    import sys

    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        guardian.watch(watched.pid)
        guardian.watch(other.pid)
        guardian.forget(other.pid)
        guardian.close()  # as if this process had died
        assert watched.wait(5) == -9
        assert other.poll() is None
    finally:
        for p in (watched, other):
            p.kill()
            p.wait()
