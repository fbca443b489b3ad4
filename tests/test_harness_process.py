"""``mcp_harness_process`` / ``HarnessProcess``: a harness run as a child process gets a verdict when it
never exits (issue 36), with its threads' stacks, its last MCP traffic and a hint, within its budget
plus the abort's grace, and nothing of it is left running. The harness here is a script that talks MCP
with httpx and then exits the way the bug class does: a thread joined without a timeout at
interpreter exit; fixed, the same script exits. The real framework (strands-agents' managed
``MCPClient``, affected and fixed release) is in docs/examples/frameworks/strands_exit_test.py."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from docs_quotes import assert_quoted_lines_occur, quoted_block

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.verdicts.harness_process import ABORT_GRACE, HarnessProcess, HarnessProcessError

BUDGET = 1.0
#: A verdict comes at about the budget plus the abort (the child printing its stacks): bounded, not a
#: speed target; a child left alone would run for ever.
VERDICT_BOUND = BUDGET + ABORT_GRACE + 2.0
#: How the plugin's runs here load it: in-process (pytester.runpytest), no child pytest to start.
IN_PROCESS = (
    *("-p", "mcpfaults", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function"),
    *("-W", "ignore::pytest.PytestAssertRewriteWarning"),
)

HARNESS = r"""
import json, os, signal, subprocess, sys, threading, time
import httpx

url, mode = sys.argv[1], sys.argv[2]
if mode == "url_from_file":  # the test makes its server after the harness started
    while not os.path.exists(url):
        time.sleep(0.05)
    time.sleep(0.05)
    url, mode = open(url).read(), "joins_forever"
if mode == "no_mcp":
    time.sleep(60)
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}
headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
with httpx.Client(timeout=5) as client:
    client.post(url, json=init, headers=headers)

def background_loop(stop):
    stop.wait()  # a managed client's loop, waiting for a close signal that never comes

if mode == "held":  # a call the sidecar holds; reset at its patience, then the same exit as below
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}}}
    try:
        httpx.post(url, json=call, headers=headers, timeout=None)
    except httpx.HTTPError:
        pass
    mode = "joins_forever"
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
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    with httpx.Client(timeout=5) as client:
        while True:  # keeps talking MCP: only the stop rule can end it
            client.post(url, json=ping, headers=headers)
            time.sleep(0.1)
elif mode == "health_only":
    with httpx.Client(timeout=5) as client:
        while True:  # GET /health is not MCP traffic
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


def _until(predicate: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def test_a_thread_joined_at_exit_gets_a_verdict_with_its_stacks(harness: Path) -> None:
    args = [sys.executable, str(harness)]
    with (
        Sidecar(patience=BUDGET) as sc,
        HarnessProcess([*args, sc.mcp_url, "joins_forever"], servers=[sc]) as proc,
    ):
        started = time.monotonic()
        with pytest.raises(HarnessProcessError) as raised:
            proc.wait()
        took = time.monotonic() - started
        assert proc.returncode is not None and proc.killed  # killed
    text = str(raised.value)
    assert text.startswith(
        "the harness process did not exit: it was still running 1 s after its last MCP traffic\n"
    )
    assert f"last MCP traffic: `POST initialize` (#0) to {sc.url}, " in text
    assert ", answered 200\n" in text
    # its threads, the one the signal hit (the interpreter's exit, joining) first
    assert text.index("Current thread") < text.index("in _shutdown") < text.index("in background_loop")
    assert "hint: a thread is joined without a timeout at exit" in text
    assert text.endswith("it was killed with its process group: nothing of it is left running")
    assert proc.verdict == text
    assert took < VERDICT_BOUND, took


def test_the_fixed_harness_exits_and_gets_no_verdict(harness: Path) -> None:
    args = [sys.executable, str(harness)]
    with Sidecar(patience=BUDGET) as sc, HarnessProcess([*args, sc.mcp_url, "daemon"], servers=[sc]) as proc:
        assert proc.wait() == 0
        assert proc.verdict is None and not proc.killed


def test_a_harness_asked_to_stop_that_does_not(harness: Path) -> None:
    args = [sys.executable, str(harness)]
    with (
        Sidecar(patience=BUDGET) as sc,
        HarnessProcess([*args, sc.mcp_url, "ignores_term"], servers=[sc]) as proc,
    ):
        _until(lambda: "ready" in proc.stdout)
        time.sleep(BUDGET + 0.5)  # talking MCP all along: within its budget
        assert proc.returncode is None
        proc.stop()
        with pytest.raises(HarnessProcessError) as raised:
            proc.wait()
    text = str(raised.value)
    assert text.startswith(
        "the harness process did not exit: it was still running 1 s after it was asked to stop (SIGTERM)\n"
    )
    assert "last MCP traffic: `POST ping`" in text


def test_health_checks_are_not_mcp_traffic(harness: Path) -> None:
    args = [sys.executable, str(harness)]
    with (
        Sidecar(patience=BUDGET) as sc,
        HarnessProcess([*args, sc.mcp_url, "health_only"], servers=[sc]) as proc,
        pytest.raises(HarnessProcessError) as raised,
    ):
        proc.wait()
    assert any(r.path == "/health" for r in sc.journal.requests)
    text = str(raised.value)
    assert "it was still running 1 s after its last MCP traffic" in text
    assert "last MCP traffic: `POST initialize` (#0)" in text


def test_a_harness_that_never_talks_mcp_is_bounded_by_startup(harness: Path) -> None:
    args = [sys.executable, str(harness)]
    with (
        Sidecar(patience=BUDGET) as sc,
        HarnessProcess([*args, sc.mcp_url, "no_mcp"], servers=[sc], startup=1) as proc,
        pytest.raises(HarnessProcessError) as raised,
    ):
        proc.wait()
    text = str(raised.value)
    assert "did not exit: it talked no MCP to the test's servers in the 1 s it was given to start" in text
    assert "last MCP traffic: none" in text
    assert "in <module>" in text  # its main thread, asleep


def test_servers_are_read_live(harness: Path, tmp_path: Path) -> None:
    """A server appended after the start counts: its traffic starts the budget (without it, the
    verdict would be the startup one, much later)."""
    servers: list[Sidecar] = []
    url_file = tmp_path / "url"
    with HarnessProcess(
        [sys.executable, str(harness), str(url_file), "url_from_file"], servers=servers
    ) as proc:
        assert proc.budget == 5.0  # no server yet: the default
        with Sidecar(patience=BUDGET) as sc:
            servers.append(sc)
            assert proc.budget == BUDGET  # now the server's patience
            url_file.write_text(sc.mcp_url)
            with pytest.raises(HarnessProcessError, match="1 s after its last MCP traffic"):
                proc.wait()


def test_nothing_of_it_is_left_running_nor_on_disk(harness: Path) -> None:
    args = [sys.executable, str(harness)]
    with (
        Sidecar(patience=BUDGET) as sc,
        HarnessProcess([*args, sc.mcp_url, "grandchild"], servers=[sc]) as proc,
    ):
        files = Path(proc._dir or "")
        assert files.is_dir()
        with pytest.raises(HarnessProcessError):
            proc.wait()
        grandchild = json.loads(proc.stdout.splitlines()[0])["grandchild"]
    assert not _alive(grandchild)
    assert not files.exists()  # its stdout and stderr files are removed at close ...
    assert "grandchild" in proc.stdout and "Fatal Python error: Aborted" in proc.stderr  # ... and kept


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="args must be a non-empty list of strings"):
        HarnessProcess("python runner.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget must be a positive number of seconds, got -1"):
        HarnessProcess(["python"], budget=-1)
    with pytest.raises(TypeError, match="startup must be a positive number of seconds, got '5'"):
        HarnessProcess(["python"], startup="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="servers must be a list of servers or a function"):
        HarnessProcess(["python"], servers=42)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="was not started: call start"):
        HarnessProcess(["python"]).wait()


def test_the_fixture_stops_a_harness_at_teardown_and_fails_the_test(
    pytester: pytest.Pytester, harness: Path
) -> None:
    pytester.makepyfile(
        f"""
        import sys, time
        import pytest

        @pytest.mark.mcp_sidecar(patience={BUDGET})
        def test_leaves_it_running(mcp_sidecar, mcp_harness_process):
            args = [sys.executable, {str(harness)!r}, mcp_sidecar.mcp_url, "ignores_term"]
            proc = mcp_harness_process(args)
            deadline = time.monotonic() + 30
            while "ready" not in proc.stdout and time.monotonic() < deadline:
                time.sleep(0.05)  # its SIGTERM handler is in place
        """
    )
    result = pytester.runpytest(*IN_PROCESS)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*the harness process did not exit: it was still running 1 s after it was asked*"]
    )


def test_the_sessions_of_a_harness_killed_by_its_verdict_are_not_owed(
    pytester: pytest.Pytester, harness: Path
) -> None:
    """The verdict kills the harness before it could end its session: session hygiene asks for no
    ``DELETE`` (the affected strands-agents release, tox -e fw-strands-exit, failed so at teardown)."""
    pytester.makepyfile(
        f"""
        import sys
        import pytest
        from pytest_mcpfaults import HarnessProcessError

        @pytest.mark.mcp_sidecar(era="session", patience={BUDGET})
        def test_killed(mcp_sidecar, mcp_harness_process):
            args = [sys.executable, {str(harness)!r}, mcp_sidecar.mcp_url, "joins_forever"]
            proc = mcp_harness_process(args)
            with pytest.raises(HarnessProcessError):
                proc.wait()
            assert proc.killed and len(mcp_sidecar.sessions) == 1  # its session is still open
        """
    )
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*SessionHygieneError*")


def test_the_fixture_watches_a_server_made_after_the_start(
    pytester: pytest.Pytester, harness: Path, tmp_path: Path
) -> None:
    url_file = tmp_path / "url"
    pytester.makepyfile(
        f"""
        import sys
        import pytest
        from pytest_mcpfaults import HarnessProcessError

        @pytest.mark.mcp_keep_sessions  # the harness is killed: it cannot end its session
        def test_late_server(mcp_sidecar_factory, mcp_harness_process):
            proc = mcp_harness_process([sys.executable, {str(harness)!r}, {str(url_file)!r}, "url_from_file"])
            sc = mcp_sidecar_factory(patience={BUDGET})
            open({str(url_file)!r}, "w").write(sc.mcp_url)
            with pytest.raises(HarnessProcessError, match="{BUDGET:g} s after its last MCP traffic"):
                proc.wait()
        """
    )
    result = pytester.runpytest(*IN_PROCESS)
    result.assert_outcomes(passed=1)


def test_a_held_call_ends_by_the_patience_verdict_within_budget_and_grace(
    pytester: pytest.Pytester, harness: Path
) -> None:
    """The plugin's patience watcher and a test blocked in ``wait()``: the held call's verdict
    interrupts the wait one grace after the patience; the harness is stopped and killed at teardown,
    and the run ends by itself, bounded."""
    pytester.makeini("[pytest]\nmcpfaults_interrupt = 0.5\n")
    pytester.makepyfile(
        f"""
        import sys
        import pytest
        from pytest_mcpfaults import Hang

        @pytest.mark.mcp_keep_sessions  # the harness is killed: it cannot end its session
        @pytest.mark.mcp_sidecar(patience={BUDGET}, faults=[Hang(when="tools/call")])
        def test_held(mcp_sidecar, mcp_harness_process):
            proc = mcp_harness_process([sys.executable, {str(harness)!r}, mcp_sidecar.mcp_url, "held"])
            proc.wait()
        """
    )
    started = time.monotonic()
    result = pytester.runpytest(*IN_PROCESS)
    took = time.monotonic() - started
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PatienceError*", "*tools/call*"])
    assert took < 30, took  # bounded by itself (the child would run for ever), not a speed target


def test_the_docs_quote_is_what_the_example_prints(pytester: pytest.Pytester) -> None:
    """docs/harness-process.md quotes the verdict of its example run without ``pytest.raises``; the
    lines that follow the Python version (the process line, the stdlib's frames) are not compared,
    but for the interpreter's exit joining."""
    examples = Path(__file__).resolve().parent.parent / "docs" / "examples"
    client = examples / "harness_process_client.py"
    source = (examples / "harness_process_test.py").read_text()
    assert 'CLIENT = str(Path(__file__).with_name("harness_process_client.py"))' in source
    pytester.makepyfile(
        f"""
        import sys
        import pytest

        @pytest.mark.mcp_sidecar(patience=1.0)
        def test_a_harness_that_never_exits(mcp_sidecar, mcp_harness_process):
            proc = mcp_harness_process([sys.executable, {str(client)!r}, mcp_sidecar.mcp_url])
            proc.wait()
        """
    )
    result = pytester.runpytest(*IN_PROCESS)
    result.assert_outcomes(failed=1)
    page = (examples.parent / "harness-process.md").read_text()
    first = "pytest_mcpfaults.verdicts.harness_process.HarnessProcessError: the harness process did not exit"
    quote = quoted_block(page, first, "it was killed with its process group")
    assert quote is not None, "docs/harness-process.md no longer quotes the example's verdict"
    kept = [
        line
        for line in quote.splitlines()
        if not line.strip().startswith(("process: pid", "File ")) or line.endswith(" in _shutdown")
    ]
    printed = [re.sub(r"^E {0,7}", "", line) for line in result.outlines]
    assert_quoted_lines_occur("\n".join(kept), printed, "docs/harness-process.md")
