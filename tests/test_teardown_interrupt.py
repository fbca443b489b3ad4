"""A harness fixture whose teardown is still blocked after a verdict is interrupted too (the watcher of
``_pytest/interrupt.py`` at teardown), through pytester with ``-p mcpfaults`` and no pytest-timeout.

At teardown the interrupt is ``PatienceTeardownInterrupt``, an ``Exception``: pytest records it for the
harness fixture's finalizer and goes on with the others, so the sidecar's own finalizer stops it and
the next tests of the session still run. The inner fixtures depend on ``mcp_sidecar`` and block after
a fault: on a socket read after a stall (``reset`` on ``GET /health``, then nothing), and with an mcp
1.x-like "log the failed reply and wait" after the patience reset of a hung request. Their own blocks
end after 15 s or more, so a run without the watcher ends too (and fails these tests); interrupted,
each teardown ends in about budget + grace. The durations are read from the inner run's reports and
are correctness bounds (far below the blocks), not speed targets. The last inner test reads what the
sidecars of the others saw (their state, journal, fired faults), kept in a module dict.
"""

from __future__ import annotations

import json

import inner_reports
import pytest

BUDGET, GRACE = 0.5, 0.5
BLOCKED = 15.0  # how long each inner teardown blocks on its own
#: Room for a loaded machine on each teardown's bound: 4.3 s was seen for a 1 s budget beside six busy
#: processes and helpers' runs (load 13-20, the suite getting half a core). Every bound stays far below
#: what it tells apart: BLOCKED, or a wedged mcp 1.x client that waits for ever.
ROOM = 6.0
ABOUT = BUDGET + GRACE + ROOM  # budget + grace, plus room for a loaded machine; far below BLOCKED

TEARDOWN_DURATIONS = """
import json
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown":
        print("TEARDOWN " + json.dumps({"name": item.name, "duration": call.duration}))
    return report
"""

TESTS = f"""
import asyncio, logging, socket, threading
import httpx, pytest
from pytest_mcpfaults import Hang, Reset

SEEN = {{}}
STALL = pytest.mark.mcp_sidecar(patience={BUDGET}, faults=[Reset(when="health")])

def get_health(sc):
    try:
        httpx.get(sc.health_url, timeout=None)
    except httpx.TransportError:
        logging.getLogger("harness").warning("Error parsing JSON response")  # logged, then waits on

def read_forever():
    a, b = socket.socketpair()
    with a, b:
        a.settimeout({BLOCKED})  # nobody ever writes to b
        a.recv(1)

@pytest.fixture
def stalled_harness(mcp_sidecar, request):
    SEEN[request.node.name] = mcp_sidecar
    yield mcp_sidecar
    read_forever()  # the client wedged itself on the reset: its cleanup waits for an answer

@pytest.fixture
def hung_cleanup_harness(mcp_sidecar, request):
    SEEN[request.node.name] = mcp_sidecar
    yield mcp_sidecar
    get_health(mcp_sidecar)  # its cleanup request is held, and reset at the budget
    threading.Event().wait({BLOCKED})  # as the mcp 1.x ClientSession: the error is logged, it waits on

@pytest.fixture
def stubborn_harness(mcp_sidecar, request):
    SEEN[request.node.name] = mcp_sidecar
    yield mcp_sidecar
    for _ in range(3):
        try:
            read_forever()
        except Exception:
            print("CAUGHT")  # a cleanup that swallows every error and blocks again
    threading.Event().wait(4 * {GRACE} + 1)

@pytest.fixture
async def async_harness(mcp_sidecar, request):
    SEEN[request.node.name] = mcp_sidecar
    yield mcp_sidecar
    await asyncio.wait_for(asyncio.Event().wait(), {BLOCKED})

@pytest.fixture
def slow_cleanup_harness(mcp_sidecar):
    yield mcp_sidecar
    threading.Event().wait(3 * {GRACE})  # a slow cleanup, not blocked: it returns by itself

@STALL
def test_body_verdict_then_slow_cleanup(slow_cleanup_harness):
    get_health(slow_cleanup_harness)
    read_forever()  # interrupted in the body: its verdict is not found again at teardown

@STALL
def test_stall_then_socket_read(stalled_harness):
    get_health(stalled_harness)

@pytest.mark.mcp_sidecar(patience={BUDGET}, faults=[Hang(when="health")])
def test_hung_cleanup_then_waits(hung_cleanup_harness):
    pass

@STALL
def test_cleanup_swallows_the_interrupt(stubborn_harness):
    get_health(stubborn_harness)

@STALL
def test_async_fixture_awaits_forever(async_harness):
    get_health(async_harness)

def test_the_session_goes_on():
    assert sorted(SEEN) == sorted([
        "test_stall_then_socket_read", "test_hung_cleanup_then_waits",
        "test_cleanup_swallows_the_interrupt", "test_async_fixture_awaits_forever",
    ])
    for name, sc in SEEN.items():
        print("SEEN " + name + " " + sc.state + " " + ",".join(r.label for r in sc.journal.requests)
              + " fired=" + ",".join(sorted(sc.fired)) + " violations=" + str(len(sc.patience_violations)))
"""


def _run(pytester: pytest.Pytester) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *("-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:timeout", "-s", "-W", "ignore"),
        *("-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function"),
        timeout=200,
    )


def _teardowns(result: pytest.RunResult) -> dict[str, float]:
    out = {}
    for line in result.outlines:
        if "TEARDOWN {" in line:
            data = json.loads(line[line.index("TEARDOWN {") + len("TEARDOWN ") :])
            out[data["name"]] = data["duration"]
    return out


def test_blocked_fixture_teardowns_end_with_the_verdict_and_the_session_goes_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(TEARDOWN_DURATIONS)
    pytester.makeini(f"[pytest]\nmcpfaults_interrupt = {GRACE}\n")
    pytester.makepyfile(test_harness=TESTS)
    result = _run(pytester)
    result.assert_outcomes(passed=5, errors=4, failed=1)
    body = inner_reports.failure(result, "test_body_verdict_then_slow_cleanup")
    assert "The test was interrupted: mcpfaults raised PatienceInterrupt" in body, body
    assert not [line for line in result.outlines if "at teardown of test_body_verdict_then" in line]
    durations = _teardowns(result)
    for name in (
        "test_stall_then_socket_read",
        "test_hung_cleanup_then_waits",
        "test_async_fixture_awaits_forever",
    ):
        assert durations[name] < ABOUT, (name, durations)
    # the stubborn one: three steps a grace apart, the give-up a grace later, then its own bounded wait
    assert durations["test_cleanup_swallows_the_interrupt"] < BUDGET + 8 * GRACE + 1 + ROOM, durations
    stall = inner_reports.failure(result, "test_stall_then_socket_read")
    assert "PatienceError: the test made no progress for" in stall, stall
    assert "after `reset@health` fired" in stall, stall
    assert "in read_forever" in stall and "a.recv(1)" in stall, stall  # where the harness was blocked
    assert (
        "The fixture teardown was interrupted: mcpfaults raised PatienceTeardownInterrupt where it was"
        in stall
    )
    hung = inner_reports.failure(result, "test_hung_cleanup_then_waits")
    assert "PatienceError: 1 held request outlived the patience budget" in hung, hung
    assert "on a hung `GET /health`, never answered" in hung, hung
    assert f"The fixture teardown was still blocked {GRACE:g} s after the verdict at test_harness.py:" in hung
    assert "in hung_cleanup_harness: mcpfaults raised PatienceTeardownInterrupt" in hung, hung
    asyncf = inner_reports.failure(result, "test_async_fixture_awaits_forever")
    assert "The fixture teardown was interrupted: mcpfaults raised PatienceTeardownInterrupt" in asyncf, (
        asyncf
    )
    assert "in async_harness" in asyncf and "await asyncio.wait_for(" in asyncf, asyncf  # its task's stack
    for text in (stall, hung, asyncf):
        assert "The teardown phase also failed" not in text, text  # the interrupt is not the failure
    stubborn = inner_reports.failure(result, "test_cleanup_swallows_the_interrupt")
    assert (
        "raised PatienceTeardownInterrupt where it was blocked (3 times: the harness caught it and blocked "
        "again); then mcpfaults gave up, and the fixture teardown ended by itself." in stubborn
    ), stubborn
    assert sum(line.endswith("CAUGHT") for line in result.outlines) == 3  # each step reached the harness
    assert any(
        "mcpfaults: gave up interrupting the blocked teardown after 3 attempts" in x for x in result.errlines
    )
    lines = [line[line.index("SEEN ") :] for line in result.outlines if "SEEN test_" in line]
    seen = {line.split()[1]: line for line in lines}  # a line may follow a progress mark
    for name in (
        "test_stall_then_socket_read",
        "test_cleanup_swallows_the_interrupt",
        "test_async_fixture_awaits_forever",
    ):
        assert seen[name] == f"SEEN {name} stopped GET /health fired=reset violations=0", seen
    assert seen["test_hung_cleanup_then_waits"] == (
        "SEEN test_hung_cleanup_then_waits stopped GET /health fired=hang violations=1"
    ), seen


MCP1_BUDGET = 1.0
MCP1_TESTS = f"""
import pytest
from wedge_runner import MCP1, Runner

SEEN = {{}}

@pytest.fixture
def runner(mcp_sidecar, request):
    SEEN[request.node.name] = mcp_sidecar
    r = Runner(mcp_sidecar.mcp_url)  # no read timeout, one session on a private loop
    yield r
    r.call("delete_session", {{"session_id": "s-1"}})  # the harness's cleanup: its last call

@pytest.mark.mcp_sidecar(patience={MCP1_BUDGET}, faults=["die@tool:delete_session"])
def test_cleanup_call_dies(runner):
    assert MCP1
    runner.call("create_session", {{"task_id": "t-1"}})

@pytest.mark.mcp_sidecar(patience={MCP1_BUDGET}, faults=["hang@tool:delete_session"])
def test_cleanup_call_hangs(runner):
    runner.call("create_session", {{"task_id": "t-1"}})

def test_the_session_goes_on():
    for name, sc in sorted(SEEN.items()):
        print("SEEN " + name + " " + sc.state + " " + ",".join(r.label for r in sc.journal.requests
              if r.label.startswith("POST tools/call")) + " fired=" + ",".join(sorted(sc.fired)))
"""


def test_a_wedged_mcp1_cleanup_in_a_fixture_ends_with_the_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mcp1_path: str
) -> None:
    """The real mcp 1.x ``ClientSession`` in a harness fixture (``tests/wedge_runner.py``): its cleanup call
    wedges after ``die`` (a stall) and after the patience reset of a hung call (it logs the failed reply
    and waits on); each teardown ends in about budget (+ grace) with the verdict, the sidecar stopped."""
    import shutil
    from pathlib import Path

    monkeypatch.setenv("PYTHONPATH", mcp1_path)
    shutil.copy(Path(__file__).parent / "wedge_runner.py", pytester.path / "wedge_runner.py")
    pytester.makeconftest(TEARDOWN_DURATIONS)
    pytester.makeini(f"[pytest]\nmcpfaults_interrupt = {GRACE}\n")
    pytester.makepyfile(test_mcp1_harness=MCP1_TESTS)
    result = _run(pytester)
    result.assert_outcomes(passed=3, errors=2)
    durations = _teardowns(result)
    assert durations["test_cleanup_call_dies"] < MCP1_BUDGET + ROOM, durations
    assert durations["test_cleanup_call_hangs"] < MCP1_BUDGET + GRACE + ROOM, durations
    dies = inner_reports.failure(result, "test_cleanup_call_dies")
    assert "PatienceError: the test made no progress for" in dies, dies
    assert "after `die@tool:delete_session` fired" in dies, dies
    assert "hint: if this is the mcp 1.x SDK" in dies, dies
    assert "The fixture teardown was interrupted: mcpfaults raised PatienceTeardownInterrupt" in dies, dies
    hangs = inner_reports.failure(result, "test_cleanup_call_hangs")
    assert "PatienceError: 1 held request outlived the patience budget" in hangs, hangs
    assert "The fixture teardown was still blocked 0.5 s after the verdict at test_mcp1_harness.py:" in hangs
    lines = [line[line.index("SEEN ") :] for line in result.outlines if "SEEN test_" in line]
    assert lines == [
        "SEEN test_cleanup_call_dies stopped POST tools/call create_session,POST tools/call delete_session"
        " fired=die",
        "SEEN test_cleanup_call_hangs stopped POST tools/call create_session,POST tools/call delete_session"
        " fired=hang",
    ], lines
