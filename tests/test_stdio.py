"""The stdio server against the official mcp 2.x client: ``StdioServerParameters`` from the server's
``command``/``args``/``env``, the SDK spawning the child. What the client raised, and what the test
process observed of the child (journal, child record, violations), for each fault that applies to a
pipe; and that no child is left alive after any of them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar, StdioServer
from pytest_mcpfaults.stdio import guardian

SESSION = ["POST initialize", "POST notifications/initialized"]


def params(server: StdioServer) -> StdioServerParameters:
    return StdioServerParameters(command=server.command, args=server.args, env=server.env)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it runs nothing and holds no pipe)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def pipes() -> set[str]:
    """The pipes this process holds open (``/proc/self/fd``)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            out.add(f"{fd}:{target}")
    return out


@pytest.fixture
def make() -> Iterator[Any]:
    guardian.ensure()  # its one pipe lives as long as the process
    before = pipes()
    servers: list[StdioServer] = []

    def make(**kwargs: Any) -> StdioServer:
        server = StdioServer(**kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
        for child in server.children:  # the test process owns every child: none outlives stop()
            assert not alive(child.pid), child.describe()
    assert pipes() <= before  # and no pipe of theirs is left open here


async def session(server: StdioServer, *calls: tuple[str, dict[str, Any]], timeout: float = 5.0) -> list[Any]:
    """One mcp 2.x session (legacy: initialize): each call's text result, or the exception it raised."""
    out: list[Any] = []
    async with Client(params(server), mode="legacy", read_timeout_seconds=timeout) as client:
        for name, args in calls:
            try:
                result = await client.call_tool(name, args)
                out.append((result.content[0].text, result.is_error))  # type: ignore[union-attr]
            except MCPError as exc:
                out.append(exc)
    return out


def run(coro: Any, bound: float = 30.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, bound))


# -- answers ----------------------------------------------------------------------------------------


def test_tools_over_stdio_and_a_clean_exit_on_eof(make: Any) -> None:
    server = make()
    created, echoed = run(
        session(server, ("create_session", {"task_id": "task-1"}), ("echo", {"text": "hi"}))
    )
    sid = json.loads(created[0])["session_id"]
    assert echoed == ("hi", False)
    assert [s.session_id for s in server.benchmark.live] == [sid]
    assert server.journal.sequence() == [
        *SESSION,
        "POST tools/call create_session",
        "POST tools/list",
        "POST tools/call echo",
    ]  # fmt: skip  (the client lists the tools after its first call, for their output schemas)
    child = server.wait_exit()
    assert (child.exit_how, child.exit_code, child.signals) == ("stdin closed", 0, ())
    assert child.stdin_closed_at is not None and child.exited_at is not None
    assert child.stdin_closed_at <= child.exited_at < child.stdin_closed_at + 1.0
    assert child.session_id in server.ended_sessions or child.session_id in server.sessions
    assert {r.session_id for r in server.journal.requests[1:]} == {child.session_id}
    assert server.patience_violations == ()


def test_die_exits_the_child_with_status_1_mid_session(make: Any) -> None:
    server = make(faults=["die@tool:delete_session"])
    _, deleted = run(session(server, ("create_session", {"task_id": "t"}), ("delete_session", {})))
    assert isinstance(deleted, MCPError) and str(deleted) == "Connection closed"
    child = server.wait_exit()
    assert (child.exit_how, child.exit_code) == ("die fault", 1)
    assert server.fired == {"die": 1}
    last = server.journal.requests[-1]
    assert (last.tool, last.fault, last.status) == ("delete_session", "die@tool:delete_session", None)
    assert server.benchmark.live == []  # lost with the process


@pytest.mark.parametrize(
    ("fault", "seen"),
    [
        ('jsonrpc_error(code=-32001,message="backend exploded")@tools/call', "backend exploded"),
        ('tool_error(text="disk full")@tool:echo', ("disk full", True)),
        ("stdout_noise(lines=3)@tools/call", ("hi", False)),  # the SDK logs each line and goes on
        ("delay(seconds=0.3)@tools/call", ("hi", False)),
    ],
)
def test_answer_faults(make: Any, fault: str, seen: Any) -> None:
    server = make(faults=[fault])
    started = time.monotonic()
    [got] = run(session(server, ("echo", {"text": "hi"})))
    if isinstance(seen, str):
        assert isinstance(got, MCPError) and got.error.message == seen and got.error.code == -32001
    else:
        assert got == seen
    if fault.startswith("delay"):
        assert time.monotonic() - started >= 0.3
    assert list(server.fired) == [fault.split("(")[0].split("@")[0]]


def test_backend_gone_at_the_delete(make: Any) -> None:
    server = make(faults=["backend_gone"])
    _, deleted = run(
        session(server, ("create_session", {"task_id": "t"}), ("delete_session", {"session_id": "s-1"}))
    )
    assert deleted == (
        f'{{"error": "Error closing session s-1: Service at {server.url} is no longer alive"}}',
        False,
    )


def test_malformed_json_is_a_half_line_the_client_cannot_parse(make: Any) -> None:
    server = make(faults=["malformed_json@tools/call"])
    [got] = run(session(server, ("echo", {"text": "hi"}), timeout=1.0))
    assert isinstance(got, MCPError) and "timed out" in str(got)  # the reply never parsed: it waited it out
    [rec] = [r for r in server.journal.requests if r.fault_kind]
    assert rec.fault_kind == "malformed_json" and 0 < rec.bytes_sent < 60
    assert server.journal.sequence()[-1] == "POST notifications/cancelled"  # it gave up on the call


# -- holds and patience -----------------------------------------------------------------------------


def test_a_hang_released_by_the_test_is_answered(make: Any) -> None:
    server = make(faults=["hang@tool:echo"])

    async def go() -> list[Any]:
        task = asyncio.ensure_future(session(server, ("echo", {"text": "late"})))
        while not any(r.held for r in server.journal.requests):
            await asyncio.sleep(0.01)
        server.release()
        return await task

    assert run(go()) == [("late", False)]
    [held] = [r for r in server.journal.requests if r.held]
    assert (held.tool, held.hold) == ("echo", "released")
    assert server.patience_violations == ()


def test_a_stall_past_the_budget_is_a_violation_and_the_child_is_killed(make: Any) -> None:
    server = make(faults=["stall(after_bytes=5)@tools/call"], patience=0.5)
    [got] = run(session(server, ("echo", {"text": "hi"}), timeout=10.0))
    assert isinstance(got, MCPError) and str(got) == "Connection closed"  # the kill closed its stdout
    [v] = server.patience_violations
    assert v.kind == "hold" and v.budget == 0.5
    assert v.describe() == (
        "the client waited 0.5 s (the whole budget) on the reply to `tools/call echo`, which stopped after 5 "
        "bytes of its line, and neither closed stdin nor ended the child; it never sent SIGTERM"
    )
    assert server.wait_exit().exit_how == "patience"
    assert server.journal.requests[-1].hold == "patience"


def test_the_stalls_bytes_in_the_verdict_are_the_journals(make: Any) -> None:
    """The verdict's "stopped after N bytes" and the journal's bytes= are one recorded fact: what the
    stall wrote before its hold, kept when the hold ends at the budget (not reset to 0)."""
    server = make(faults=["stall(after_bytes=10)@tools/call"], patience=0.5)
    [got] = run(session(server, ("echo", {"text": "hi"}), timeout=10.0))
    assert isinstance(got, MCPError)
    [v] = server.patience_violations
    [held] = [r for r in server.journal.requests if r.held]
    assert (held.bytes_sent, held.hold) == (10, "patience")
    assert "which stopped after 10 bytes of its line" in v.describe()
    text = server.patience_verdict([v])
    assert "POST tools/call echo" in text and "bytes=10  fault=stall(after_bytes=10)@tools/call" in text


def test_a_client_that_timed_out_the_call_and_went_on_is_not_said_to_have_waited(make: Any) -> None:
    """The client bounds the call at 1 s (mcp 2.x cancels it with notifications/cancelled) and sends its
    delete; the child still holds the stalled reply when the 1.5 s budget runs out. The verdict says what
    the records show: held the whole budget, cancelled after 1 s, one more request sent, stdin open.
    (The delete's own reply waits behind the stalled line, so its 1 s timeout ends at 2 s: a 2 s budget
    raced it.)"""
    server = make(faults=["stall(after_bytes=10)@tool:echo"], patience=1.5)
    echo, _delete = run(
        session(server, ("echo", {"text": "hi"}), ("delete_session", {"session_id": "s"}), timeout=1.0)
    )
    assert isinstance(echo, MCPError) and "timed out" in str(echo)
    [v] = server.patience_violations
    [cancel] = v.child.cancels
    [held] = [r for r in server.journal.requests if r.held]
    assert cancel.request == held.id and 0.9 <= cancel.at - v.waited_from < 1.4
    assert [(r.mcp_method, r.tool) for r in v.later] == [("tools/call", "delete_session")]
    text = v.describe()
    assert text.startswith(
        "the reply to `tools/call echo` was held 1.5 s (the whole budget) with 10 bytes of its line written; "
        f"meanwhile the client cancelled it after {cancel.at - v.waited_from:.2f} s (notifications/cancelled"
    )
    after = v.later[0].started_at - v.waited_from
    assert f"sent 1 more request on this child (`tools/call delete_session` after {after:.2f} s)" in text
    assert text.endswith("but neither closed stdin nor ended the child; it never sent SIGTERM")
    assert "the client waited" not in text
    verdict = server.patience_verdict([v])
    assert "The client gave up on the request but kept using the child, which still held it" in verdict
    assert "put a timeout on the request" not in verdict


def test_the_socket_sidecars_journal_waits_work_on_stdio(make: Any) -> None:
    """``wait_held``, ``wait_for`` and ``cancellations`` as on the socket Sidecar (they were missing: a
    test moved from one backend to the other broke on an AttributeError): the test thread waits for the
    hang to hold the call and for the client's cancel, which names it, then lets it go."""
    import threading

    server = make(faults=["hang@tool:echo"], patience=None)
    got: list[Any] = []

    async def call() -> None:  # only the held call is bounded short (a child starts slowly when busy)
        async with Client(params(server), mode="legacy") as client:
            try:
                await client.call_tool("echo", {"text": "hi"}, read_timeout_seconds=0.3)
            except MCPError as exc:
                got.append(exc)

    client = threading.Thread(target=lambda: run(call()))
    client.start()
    try:
        server.wait_held(1, timeout=10)
        server.wait_for(lambda rs: any(r.mcp_method == "notifications/cancelled" for r in rs), timeout=10)
    finally:
        server.release()
        client.join(30)
    [held] = [r for r in server.journal.requests if r.held]
    [cancel] = server.cancellations
    assert (cancel.cancels, cancel.in_flight) == (held.id, True)
    assert isinstance(got[0], MCPError) and "timed out" in str(got[0])


def test_a_client_that_sent_more_without_cancelling_is_not_said_to_have_waited() -> None:
    """A client that never cancels (no notifications/cancelled on record) but sends the child more
    requests while one is held: the verdict names them, from the journal's records, and does not say
    the client waited; a hold with nothing after it keeps the waiting wording."""
    from pytest_mcpfaults.core.records import Held, RequestRecord
    from pytest_mcpfaults.stdio.records import ChildRecord, StdioViolation

    held = RequestRecord(3, 0, "POST", "/mcp", "tools/call", "echo", fault_kind="hang", held=Held(at=1.0))
    later = RequestRecord(5, 0, "POST", "/mcp", "tools/call", "delete_session", started_at=2.25)
    child = ChildRecord(id=0, pid=4242, started_at=0.1)
    v = StdioViolation("hold", child, "hang@tool:echo", 2.0, False, 1.0, request=held, later=(later,))
    assert v.cancel is None and v.moved_on
    assert v.describe() == (
        "`tools/call echo` was held 2 s (the whole budget) before any byte of its reply; meanwhile the "
        "client sent 1 more request on this child (`tools/call delete_session` after 1.25 s), but neither "
        "closed stdin nor ended the child; it never sent SIGTERM"
    )
    alone = StdioViolation("hold", child, "hang@tool:echo", 2.0, False, 1.0, request=held)
    assert alone.describe().startswith("the client waited 2 s (the whole budget) on a hung `tools/call echo`")
    assert not alone.moved_on


def test_a_freeze_fault_stops_the_child_on_the_request(make: Any) -> None:
    server = make(faults=["freeze@tools/call"], patience=0.5)
    [got] = run(session(server, ("echo", {"text": "hi"}), timeout=10.0))
    assert isinstance(got, MCPError)
    [v] = server.patience_violations
    assert "held by a child that stopped itself (SIGSTOP) on it" in v.describe()
    assert [s.name for s in server.wait_exit().signals] == ["SIGSTOP", "SIGKILL"]


def test_freeze_and_revive_at_runtime_are_sigstop_and_sigcont(make: Any) -> None:
    server = make(patience=None)

    async def go() -> Any:
        async with Client(params(server), mode="legacy", read_timeout_seconds=5) as client:
            server.freeze()
            task = asyncio.ensure_future(client.call_tool("echo", {"text": "after"}))
            await asyncio.sleep(0.3)
            assert not task.done()  # the child is stopped: the request waits in the pipe
            assert server.state == "frozen"
            server.revive()
            return await task

    assert run(go()).content[0].text == "after"
    assert [(s.name, s.action) for s in server.child.signals] == [("SIGSTOP", "sent"), ("SIGCONT", "sent")]


def test_a_frozen_child_with_input_waiting_past_the_budget_is_a_violation(make: Any) -> None:
    server = make(patience=0.5)

    async def go() -> Any:
        async with Client(params(server), mode="legacy", read_timeout_seconds=10) as client:
            server.freeze()
            with pytest.raises(MCPError, match="Connection closed"):
                await client.call_tool("echo", {"text": "never"})

    run(go())
    [v] = server.patience_violations
    assert v.kind == "frozen" and v.pending_bytes > 0
    assert v.describe().startswith(
        f"the client sent {v.pending_bytes} bytes to a frozen child (SIGSTOP, never"
    )


def test_kill_is_a_crash(make: Any) -> None:
    server = make()

    async def go() -> None:
        async with Client(params(server), mode="legacy", read_timeout_seconds=5) as client:
            server.kill()
            with pytest.raises(MCPError, match="Connection closed"):
                await client.call_tool("echo", {"text": "x"})

    run(go())
    assert server.wait_exit().exit_how == "kill()"
    assert server.fired == {"die": 1}


# -- the close: stdin EOF, SIGTERM, SIGKILL -----------------------------------------------------------


def test_ignore_eof_and_sigterm_the_sdk_close_is_cut_at_the_patience_budget(make: Any) -> None:
    server = make(faults=["ignore_eof", "ignore_sigterm"], patience=1.0)
    started = time.monotonic()
    run(session(server, ("echo", {"text": "x"})))
    took = time.monotonic() - started
    assert took < 2.0  # the SDK's own escalation would take 4 s (2 s to SIGTERM, 2 s more to SIGKILL)
    [v] = server.patience_violations
    assert v.describe() == (
        "the client closed stdin and waited 1 s (the whole budget) for a child that ignores EOF; "
        "it never sent SIGTERM"
    )
    child = server.wait_exit()
    assert child.ignored_eof and child.exit_how == "patience"
    # the verdict is read after the kill: its child line is the record as of the budget's end, said so
    [line] = [x.strip() for x in server.patience_verdict([v]).splitlines() if "pid" in x and "started" in x]
    assert line == f"child when the budget ran out: {v.child.describe()}"
    assert line.endswith("still running") and not server.child.alive


def test_a_child_kept_alive_by_a_fault_is_the_stdio_patience_s_not_a_stall(make: Any) -> None:
    """While a child ignores the client's end (stdin closed, SIGTERM) the stdio server's patience times
    that wait, so the no-progress verdict, counted from the same fault with the same budget, keeps out
    of it, and its clock starts again when the child is gone: on a loaded machine the two raced, and the
    test got both verdicts."""
    import threading

    from pytest_mcpfaults.verdicts.stalls import find_stall

    server = make(faults=["ignore_eof", "ignore_sigterm"], patience=0.5)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (run(session(server, ("echo", {"text": "x"}))), done.set()))
    worker.start()
    seen, deadline = [], time.monotonic() + 20
    while not done.is_set() and time.monotonic() < deadline:
        seen.append((find_stall(server), server.children))
        time.sleep(0.02)
    worker.join(20)
    child = server.wait_exit()
    assert child.ignored_eof and child.exit_how == "patience"  # the stdio server's own verdict ended it
    assert [stall for stall, _ in seen if stall is not None] == []  # alive, then just killed: no stall
    assert child.exited_at is not None
    assert find_stall(server) is None or server.journal.now() - child.exited_at >= 0.5  # counted from its end


def test_a_harness_that_bounds_its_close_passes(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp.client.stdio as sdk

    monkeypatch.setattr(sdk, "PROCESS_TERMINATION_TIMEOUT", 0.2)  # the harness's own, shorter waits
    monkeypatch.setattr(sdk, "FORCE_KILL_TIMEOUT", 0.2)
    server = make(faults=["ignore_eof", "ignore_sigterm"], patience=1.0)
    run(session(server, ("echo", {"text": "x"})))
    child = server.wait_exit()
    assert server.patience_violations == ()
    assert [(s.name, s.action) for s in child.signals] == [("SIGTERM", "ignored")]
    assert child.exit_how == "killed"  # SIGKILL from the client: the child could not say
    assert child.stdin_closed_at is not None and child.exited_at is not None
    assert 0.3 < child.exited_at - child.stdin_closed_at < 1.0


def test_ignore_eof_alone_the_sdk_sigterms_after_its_grace(make: Any) -> None:
    server = make(faults=["ignore_eof"], patience=None)
    run(session(server, ("echo", {"text": "x"})))
    child = server.wait_exit()
    assert [(s.name, s.action) for s in child.signals] == [("SIGTERM", "died")]
    assert child.exit_how == "signal SIGTERM"
    assert child.exited_at is not None and child.stdin_closed_at is not None
    assert 1.9 < child.exited_at - child.stdin_closed_at < 3.0  # PROCESS_TERMINATION_TIMEOUT = 2.0


def test_a_stderr_flood_nobody_reads_blocks_the_reply(make: Any) -> None:
    server = make(faults=["stderr_flood(bytes=1000000)@tools/call"])
    read_end, write_end = os.pipe()

    async def go() -> Any:
        with os.fdopen(write_end, "w") as errlog:  # a pipe the harness never drains
            async with stdio_client(params(server), errlog=errlog) as (r, w):
                from mcp.client.session import ClientSession

                async with ClientSession(r, w, read_timeout_seconds=1.0) as s:  # type: ignore[call-arg]
                    await s.initialize()
                    with pytest.raises(MCPError, match="timed out"):
                        await s.call_tool("echo", {"text": "x"})

    try:
        run(go())
    finally:
        os.close(read_end)
    assert server.fired == {"stderr_flood": 1}


# -- refused plans ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"faults": ["status(code=503)"]}, "fault 'status' is http-only: 'status' does not apply to stdio"),
        ({"faults": ["die(restart=True)"]}, "a stdio child cannot restart itself"),
        ({"faults": ["ignore_eof@tools/call"]}, "IgnoreEof: counts eof events, not requests"),
        ({"era": "modern"}, "era must be one of"),
        ({"patience": 0}, "patience must be a positive number of seconds or None"),
        ({"faults": "hang"}, "faults must be a list of faults"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        StdioServer(**kwargs)


@pytest.mark.parametrize("kind", ["ignore_eof", "ignore_sigterm", "stderr_flood", "stdout_noise"])
def test_the_socket_sidecar_refuses_stdio_only_kinds(kind: str) -> None:
    with pytest.raises(ValueError, match=f"Sidecar faults=: fault '{kind}' is stdio-only"):
        Sidecar(faults=[kind])
    with (
        Sidecar() as sc,
        pytest.raises(ValueError, match=f"Sidecar inject\\(\\): fault '{kind}' is stdio-only"),
    ):
        sc.inject(kind)


# -- the command line -------------------------------------------------------------------------------


def test_standalone_answers_a_pipeline() -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
         "capabilities": {}, "clientInfo": {"name": "sh", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "x"}}},
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_mcpfaults", "stdio", "--fault", "tool_error(text=nope)@tool:echo"],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert replies[1]["result"]["protocolVersion"] == "2025-11-25"
    assert replies[2]["result"] == {"content": [{"type": "text", "text": "nope"}], "isError": True}


def test_standalone_starts_no_guardian() -> None:
    """The standalone child is the harness's own child: nothing of it may outlive it, so it watches no
    pids and starts no guardian process (it once did, the flag being read before it was set)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_mcpfaults", "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "sh", "version": "1"},
        }
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        assert select.select([proc.stdout], [], [], 30)[0], "the standalone child did not answer in 30 s"
        assert json.loads(proc.stdout.readline())["id"] == 1  # the relay is connected: its hello is done
        children = {
            int(pid)
            for task in Path(f"/proc/{proc.pid}/task").iterdir()
            for pid in (task / "children").read_text().split()
        }
        assert children == set()
    finally:
        proc.stdin.close()
        try:
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()


def test_a_child_of_a_test_refuses_command_line_options(make: Any) -> None:
    server = make()
    proc = subprocess.run(
        [server.command, *server.args, "--fault", "hang"],
        env={**os.environ, **server.env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "belongs to a test (MCPFAULTS_STDIO_CONTROL is set)" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "reset"], "argument --fault: fault 'reset' is http-only"),
        (["--fault", "die(restart=true)"], "argument --fault: 'die(restart=true)': a stdio child cannot"),
    ],
)
def test_standalone_refuses_what_a_pipe_cannot_do_as_a_usage_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the StdioServer refuses is a usage error naming the flag (exit 2), not a traceback."""
    from pytest_mcpfaults.stdio.entry import standalone

    with pytest.raises(SystemExit) as exc:
        standalone(args)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_child_whose_owner_is_gone_exits() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_mcpfaults", "stdio"],
        env={**os.environ, "MCPFAULTS_STDIO_CONTROL": "127.0.0.1:1", "MCPFAULTS_STDIO_TOKEN": "x"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 3
    assert "cannot reach the test process at '127.0.0.1:1'" in proc.stderr


# -- long lines and the control channel -------------------------------------------------------------


@contextlib.contextmanager
def stopped_after(server: StdioServer) -> Iterator[subprocess.Popen[bytes]]:
    """A raw child of ``server``; at the end the server stops, the child is reaped and its pipes closed
    here, not when a failure's traceback lets go of it."""
    proc = raw_child(server)
    try:
        yield proc
    finally:
        server.stop()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def raw_child(server: StdioServer) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [server.command, *server.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **server.env},
        bufsize=0,  # replies are read with os.read after select: nothing may wait in a buffer
    )


def exchange(proc: subprocess.Popen[bytes], *messages: dict[str, Any] | bytes) -> None:
    assert proc.stdin is not None
    for m in messages:
        proc.stdin.write(m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n")
    proc.stdin.flush()


def reply(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> Any:
    """The next line the child wrote, as JSON (a bounded wait: ``None`` when none came)."""
    assert proc.stdout is not None
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            return None
        byte = os.read(proc.stdout.fileno(), 1 << 20)
        if not byte:
            return None
        buf += byte
    return json.loads(buf)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip


def echo_call(rid: int, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }


def test_the_sdk_echoes_a_line_over_64_kib(make: Any) -> None:
    server = make()
    big = "x" * 100_000  # asyncio's default StreamReader limit is 64 KiB; the line limit is 1 MiB
    assert run(session(server, ("echo", {"text": big}), ("echo", {"text": "after"}))) == [
        (big, False),
        ("after", False),
    ]
    assert server.errors == []


def test_an_id_too_large_to_read_is_an_invalid_request_saying_so(make: Any) -> None:
    """As over HTTP (tests/test_hostile.py): the line is JSON, its id too large for Python's json."""
    server = make()
    with stopped_after(server) as proc:
        exchange(proc, b'{"jsonrpc":"2.0","id":' + b"1" * 5000 + b',"method":"ping"}\n')
        got = reply(proc)
        assert got["id"] is None and got["error"]["code"] == -32600, got
        assert got["error"]["message"].startswith("Invalid Request: a number of over 4300 digits")
        assert server.errors == []


def test_a_long_lived_childs_link_keeps_nothing_per_answered_request(make: Any) -> None:
    """The test process's link to a child kept every JSON-RPC id it read, for the child's life, only to
    name the request a later ``notifications/cancelled`` cancels: the journal's records already say which
    request had that id. A cancel still names its request, answered or not."""
    server = make()
    with stopped_after(server) as proc:
        exchange(proc, INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert reply(proc)["id"] == 1
        for n in range(2, 42):  # one at a time: reply() reads one line
            exchange(proc, echo_call(n, "x"))
            assert reply(proc)["id"] == n
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        exchange(proc, cancel)
        server.wait_for(lambda rs: any(r.mcp_method == "notifications/cancelled" and r.done for r in rs))
        [link] = server._channel.live.values()
        kept = {k: len(v) for k, v in vars(link).items() if isinstance(v, (dict, set, list))}
        assert max(kept.values()) < 40, kept  # 40 calls answered: nothing kept per call
        [named] = [r.id for r in server.journal.requests if r.rpc_id == 7]
        assert [c.request for c in server.child.cancels] == [named]


@pytest.mark.parametrize("size", [900_000, (1 << 20) + 1, 8 << 20])
def test_a_long_stdin_line_is_answered_and_the_child_lives_on(make: Any, size: int) -> None:
    server = make()
    with stopped_after(server) as proc:
        exchange(proc, INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert reply(proc)["id"] == 1
        exchange(proc, echo_call(7, "x" * size))
        got = reply(proc)
        if size <= (1 << 20) - 100:
            assert got["id"] == 7 and got["result"]["content"][0]["text"] == "x" * size
        else:  # over the limit: an error the client can read, the line dropped unread
            assert got["id"] is None and got["error"]["code"] == -32600
            assert "over the stdio line limit of 1048576 bytes (stdio_max_line)" in got["error"]["message"]
            last = server.journal.requests[-1]
            assert (last.status, last.error_by) == (413, "client")
            assert last.error is not None and "over the stdio line limit" in last.error
        exchange(proc, echo_call(8, "next"))
        assert reply(proc)["id"] == 8
        assert server.child.alive and server.errors == []  # the client's fault, not the server's
    assert server.child.exit_how == "teardown"


def test_a_control_channel_that_fails_kills_the_child_and_says_so(make: Any) -> None:
    """Whatever breaks the control channel, the child it belonged to does not run on: it is killed,
    its record says so, and the failure is in ``errors``."""
    server = make()
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        env = server.env
        host, port = env["MCPFAULTS_STDIO_CONTROL"].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            hello = {
                "t": "hello",
                "token": env["MCPFAULTS_STDIO_TOKEN"],
                "pid": victim.pid,
                "ppid": os.getpid(),
            }
            sock.sendall(json.dumps(hello).encode() + b"\n")
            server.wait_child()
            sock.sendall(b"this is not a control message\n")
            child = server.wait_exit()
        assert victim.wait(5) == -9
        assert (child.exit_how, child.alive) == ("control channel lost", False)
        assert [type(e) for e in server.errors] == [json.JSONDecodeError]
    finally:
        victim.kill()
        victim.wait()


def sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return n


def test_the_socket_of_an_ended_child_is_closed_when_it_is_reaped(make: Any) -> None:
    server = make()
    before = sockets()
    run(session(server, ("echo", {"text": "hi"})))
    server.wait_exit()
    deadline = time.monotonic() + 5
    while sockets() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sockets() == before


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_wait_exit_returns_with_the_exit_recorded_in_the_journal(make: Any, sig: int) -> None:
    """A child that dies holding a request: once ``wait_exit()`` returns, that request's hold has ended
    (the client went) and the child's connection is closed, in the journal the test reads next."""
    for _ in range(3):  # the journal was written on the loop after wait_exit() woke (a race, 2 in 3 lost)
        server = make(faults=["hang@ping"], patience=5)
        with raw_child(server) as proc:
            exchange(proc, INIT, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert reply(proc)["id"] == 1
            server.journal.wait_for(lambda j=server.journal: any(r.held for r in j.requests), 5, "a hold")
            proc.send_signal(sig)
            proc.wait(5)
        child = server.wait_exit()
        ping, conn = server.journal.request(1), server.journal.connections[0]
        assert (ping.hold, ping.ended_at is not None) == ("client_closed", True), ping
        assert (conn.closed_by, conn.closed_at) == ("client", child.exited_at), conn


def test_an_answer_ready_after_the_child_exited_on_eof_is_journaled_as_not_sent(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline (requests, then stdin closed): the child answers what it read for a bounded time, then
    exits. A reply made later (a delay past that bound) never reached stdout: its record says so
    (it said status 200 and the line's bytes)."""
    from pytest_mcpfaults.stdio import child_link

    monkeypatch.setattr(child_link, "_EOF_GRACE", 0.2)
    server = make(faults=["delay(seconds=0.6)@ping"])
    with raw_child(server) as proc:
        out, _ = proc.communicate(
            json.dumps(INIT).encode() + b'\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n', timeout=10
        )
    assert [json.loads(line)["id"] for line in out.splitlines()] == [1]  # the ping's line never came
    assert server.wait_exit().exit_how == "stdin closed"
    server.journal.wait_for(lambda: all(r.done for r in server.journal.requests), 5, "the ping to end")
    ping = server.journal.request(1)
    assert (ping.status, ping.bytes_sent, ping.client_closed) == (None, 0, True), ping


@pytest.mark.parametrize(
    ("sig", "message"),
    [
        (
            signal.SIGSTOP,
            "StdioServer.kill(): SIGSTOP stops the child: use freeze() (and release() to continue)",
        ),
        (signal.SIGCONT, "StdioServer.kill(): SIGCONT continues the child: use release()"),
        (
            999,
            "StdioServer.kill(): sig must be a signal number (signal.SIGKILL, signal.SIGTERM ...), got 999",
        ),
        (
            "SIGTERM",
            "StdioServer.kill(): sig must be a signal number (signal.SIGKILL, signal.SIGTERM ...), got",
        ),
    ],
)
def test_kill_refuses_what_is_not_a_signal_that_ends_the_child_naming_it(
    make: Any, sig: Any, message: str
) -> None:
    """``kill(SIGSTOP)`` stopped the child behind freeze()'s back: release() did not continue it and the
    harness's close hung; 999 or a name failed with "999 is not a valid Signals"."""
    server = make()
    with pytest.raises(ValueError, match=re.escape(message)):
        server.kill(sig)
