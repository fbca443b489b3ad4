"""``mcp_harness_process`` / ``HarnessProcess``: a harness run as a child process gets a verdict when it
never exits (issue 36), with its threads' stacks, its last MCP traffic and a hint, within its budget
plus the abort's grace, and nothing of it is left running. The harness here is a script that talks MCP
with httpx and then exits the way the bug class does: a thread joined without a timeout at
interpreter exit; fixed, the same script exits."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.sidecar.harness_process import ABORT_GRACE, HarnessProcess, HarnessProcessError

BUDGET = 1.0
#: A verdict comes at about the budget plus the abort (the child printing its stacks): bounded, not a
#: speed target; a child left alone would run for ever.
VERDICT_BOUND = BUDGET + ABORT_GRACE + 2.0

HARNESS = r"""
import json, os, signal, subprocess, sys, threading, time
import httpx

url, mode = sys.argv[1], sys.argv[2]
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}
headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
with httpx.Client(timeout=5) as client:
    client.post(url, json=init, headers=headers)

def background_loop(stop):
    stop.wait()  # a managed client's loop, waiting for a close signal that never comes

if mode == "grandchild":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(json.dumps({"grandchild": child.pid}), flush=True)
if mode in ("joins_forever", "grandchild"):
    threading.Thread(target=background_loop, args=(threading.Event(),)).start()  # joined at exit
elif mode == "daemon":
    threading.Thread(target=background_loop, args=(threading.Event(),), daemon=True).start()
elif mode == "ignores_term":
    signal.signal(signal.SIGTERM, lambda *_: None)
    print("ready", flush=True)
    with httpx.Client(timeout=5) as client:
        while True:  # keeps talking: only the stop rule can end it
            client.get(url.replace("/mcp", "/health"))
            time.sleep(0.1)
"""


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    path = tmp_path / "harness.py"
    path.write_text(HARNESS)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_a_thread_joined_at_exit_gets_a_verdict_with_its_stacks(harness: Path) -> None:
    with Sidecar(patience=BUDGET) as sc:
        with HarnessProcess(
            [sys.executable, str(harness), sc.mcp_url, "joins_forever"], servers=[sc]
        ) as proc:
            started = time.monotonic()
            with pytest.raises(HarnessProcessError) as raised:
                proc.wait()
            took = time.monotonic() - started
            assert proc.returncode is not None  # killed
    text = str(raised.value)
    assert text.startswith(
        "the harness process did not exit: 1 s after its last MCP traffic it was still running"
    )
    assert f"last MCP traffic: `POST initialize` (#0) to {sc.url}" in text
    assert "in background_loop" in text and "in _shutdown" in text  # its thread, and the interpreter's join
    assert "hint: a thread is joined without a timeout at exit" in text
    assert took < VERDICT_BOUND, took


def test_the_fixed_harness_exits_and_gets_no_verdict(harness: Path) -> None:
    with Sidecar(patience=BUDGET) as sc:
        with HarnessProcess([sys.executable, str(harness), sc.mcp_url, "daemon"], servers=[sc]) as proc:
            assert proc.wait() == 0
            assert proc.verdict is None


def test_a_harness_asked_to_stop_that_does_not(harness: Path) -> None:
    with Sidecar(patience=BUDGET) as sc:
        with HarnessProcess([sys.executable, str(harness), sc.mcp_url, "ignores_term"], servers=[sc]) as proc:
            deadline = time.monotonic() + 30
            while "ready" not in proc.stdout and time.monotonic() < deadline:
                time.sleep(0.05)
            assert proc.returncode is None
            proc.stop()
            with pytest.raises(
                HarnessProcessError, match="1 s after it was asked to stop it was still running"
            ):
                proc.wait()


def test_nothing_of_it_is_left_running(harness: Path) -> None:
    import json

    with Sidecar(patience=BUDGET) as sc:
        with HarnessProcess([sys.executable, str(harness), sc.mcp_url, "grandchild"], servers=[sc]) as proc:
            with pytest.raises(HarnessProcessError):
                proc.wait()
            grandchild = json.loads(proc.stdout.splitlines()[0])["grandchild"]
    assert not _alive(grandchild)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="args must be a non-empty list of strings"):
        HarnessProcess("python runner.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget must be a positive number of seconds, got -1"):
        HarnessProcess(["python"], budget=-1)


def test_the_fixture_stops_a_harness_at_teardown_and_fails_the_test(
    pytester: pytest.Pytester, harness: Path
) -> None:
    pytester.makepyfile(
        f"""
        import sys, time
        import pytest

        @pytest.mark.mcp_sidecar(patience={BUDGET})
        def test_leaves_it_running(mcp_sidecar, mcp_harness_process):
            proc = mcp_harness_process([sys.executable, {str(harness)!r}, mcp_sidecar.mcp_url, "ignores_term"])
            deadline = time.monotonic() + 30
            while "ready" not in proc.stdout and time.monotonic() < deadline:
                time.sleep(0.05)  # its SIGTERM handler is in place
        """
    )
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*the harness process did not exit: 1 s after it was asked to stop*"])
