"""Session hygiene (issue 36, docs/sessions.md): every session a client opened is ended with a
``DELETE`` unless the sidecar lost it or the test keeps it, and no call reuses a session after the
sidecar's 404 for it; checked at the end of every test with a sidecar, on by default, with a marker
and an ini switch; and an explore oracle. The rules on journal records alone, then through pytester
with the docs' runners and real clients (mcp 2.x, and mcp 1.x with and without its DELETE)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from docs_quotes import assert_quoted_lines_occur, quoted_block

from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.spans.records import RecordedSpan
from pytest_mcpfaults.verdicts.hygiene import client_calls, session_problems, unreached_calls

ROOT = Path(__file__).resolve().parents[1]
LEAK = ROOT / "docs" / "examples" / "sessions" / "leak.py"


def _rec(
    rid: int, method: str = "POST", sid: str | None = "s1", status: int = 200, t: float = 0.0
) -> RequestRecord:
    return RequestRecord(
        id=rid, conn_id=0, method=method, path="/mcp", session_id=sid, status=status,
        started_at=t, ended_at=t + 0.01,
    )  # fmt: skip


def test_a_live_session_without_a_delete_is_never_ended_and_a_delete_of_any_outcome_ends_it() -> None:
    calls = [_rec(0, sid=None), _rec(1), _rec(2)]
    [problem] = session_problems(calls, ["s1"])
    assert (problem.kind, [r.id for r in problem.requests]) == ("never_ended", [1, 2])
    held_delete = _rec(3, "DELETE", status=None)  # type: ignore[arg-type]  # held: never answered
    assert session_problems([*calls, held_delete], ["s1"]) == []
    assert session_problems(calls, ["s1"], owed=False) == []  # kept on purpose
    assert session_problems(calls, []) == []  # lost by the sidecar, or stateless: nothing owed
    cut = RequestRecord(id=3, conn_id=0, method="POST", path="/mcp", session_id="s1", fault="reset")
    assert session_problems([*calls, cut], ["s1"]) == []  # a fault may have cut its transport


def test_a_call_after_the_404_is_a_lost_session_used_again_but_not_its_delete_or_an_earlier_call() -> None:
    lost = _rec(2, status=404, t=1.0)
    in_flight = _rec(3, t=0.5)  # sent before the client could know
    later = [_rec(4, t=2.0), _rec(5, "DELETE", t=2.1), _rec(6, sid="s2", t=2.2)]
    [problem] = session_problems([_rec(1), lost, in_flight, *later], [])
    assert (problem.kind, problem.lost, [r.id for r in problem.requests]) == ("used_after_lost", lost, [4])


def _span(
    uid: int,
    t: float,
    *,
    rpc_id: str | None = None,
    status: str = "UNSET",
    method: str = "tools/call",
    kind: str = "CLIENT",
    parent: int | None = None,
    ended: bool = True,
) -> RecordedSpan:
    attrs = {"mcp.method.name": method, **({"jsonrpc.request.id": rpc_id} if rpc_id is not None else {})}
    return RecordedSpan(
        name=f"MCP send {method}", trace_id=1, span_id=uid, parent_id=parent, status_code=status,
        status_description="boom" if status == "ERROR" else None, attributes=attrs, events=(),
        start_time=int(t * 1e9), end_time=int((t + 0.2) * 1e9) if ended else None, uid=uid,
        parent_uid=parent, kind=kind,
    )  # fmt: skip


def _call(rid: int, rpc_id: int, t: float, status: int = 200, fault: str | None = None) -> RequestRecord:
    return RequestRecord(
        id=rid, conn_id=0, method="POST", path="/mcp", mcp_method="tools/call", rpc_id=rpc_id,
        session_id="s1", status=status, fault=fault, fault_kind=fault, started_at=t, ended_at=t + 0.1,
    )  # fmt: skip


def test_a_call_span_with_no_request_after_a_failed_call_failed_in_the_client() -> None:
    """The journal's clock starts at wall time 100: each request comes 0.05 s into its call's span."""
    journal = [_call(1, 1, 0.05, status=503), _call(2, 2, 1.05)]
    received = [(r, 100 + r.started_at) for r in journal]
    spans = [
        _span(1, 100.0, rpc_id="1", status="ERROR"),  # the failed call: it reached the sidecar
        _span(2, 101.0, rpc_id="2"),  # reached
        _span(3, 102.0, rpc_id="3", status="ERROR"),  # no request: failed in the client
        _span(4, 103.0, rpc_id="4"),  # no request, but no error either: not a failed call
        _span(5, 104.0, rpc_id="5", status="ERROR", ended=False),  # still open: may be on its way
    ]
    [problem] = unreached_calls(journal, received, client_calls(spans), 100.0)
    assert (problem.kind, problem.requests, [c.uid for c in problem.calls]) == (
        "call_never_reached", (journal[0],), [3],
    )  # fmt: skip
    assert "`MCP send tools/call` (JSON-RPC id 3, span ERROR: boom)" in problem.describe()
    # the same spans with no failed call at the sidecar: nothing is owed
    assert unreached_calls(journal[1:], received[1:], client_calls(spans[1:]), 100.0) == []
    # nor after a request refused as the client's mistake (mcp 2.x probing a session-era server)
    probe = RequestRecord(
        id=0, conn_id=0, method="POST", path="/mcp", mcp_method="server/discover", rpc_id=0, status=400,
        error_by="client", started_at=0.0, ended_at=0.01,
    )  # fmt: skip
    assert unreached_calls([probe, *journal[1:]], received[1:], client_calls(spans[1:]), 100.0) == []
    # a request of another id at the same moment is not the call's
    other = [(_call(3, 9, 2.05), 102.05)]
    assert [
        c.uid for c in unreached_calls(journal, received + other, client_calls(spans), 100.0)[0].calls
    ] == [3]
    # without an id the span is matched by its method and its time
    bare = [*spans[:2], _span(3, 102.0, status="ERROR")]
    assert unreached_calls(journal, received + other, client_calls(bare), 100.0) == []


def test_a_client_whose_next_call_reaches_the_sidecar_was_not_poisoned() -> None:
    """An agent with two MCP servers: after the call answered 503 here, its call to the other server
    (which no journal of the test holds: the SDK's span names no server) fails there, and its next call
    here reaches the sidecar: a later call still reached it, so nothing is held against the client (the
    verdict named the other server's failed call, "failed without reaching the sidecar")."""
    journal = [_call(1, 1, 0.05, status=503), _call(3, 3, 2.05)]
    received = [(r, 100 + r.started_at) for r in journal]
    spans = [
        _span(1, 100.0, rpc_id="1", status="ERROR"),  # answered 503 here
        _span(2, 101.0, rpc_id="2", status="ERROR"),  # the other server's error answer
        _span(3, 102.0, rpc_id="3"),  # the next call here: it reached the sidecar
    ]
    assert unreached_calls(journal, received, client_calls(spans), 100.0) == []
    # a client whose later calls all fail in it is held to its duty, as before
    assert [p.kind for p in unreached_calls(journal[:1], received[:1], client_calls(spans), 100.0)] == [
        "call_never_reached"
    ]


def test_only_client_spans_of_requests_count_and_a_framework_span_around_the_sdks_is_one_call() -> None:
    spans = [
        _span(1, 1.0, kind="SERVER"),
        _span(2, 1.0, method="notifications/initialized"),
        _span(3, 1.0),  # the framework's span
        _span(4, 1.0, rpc_id="7", parent=3),  # the SDK's inside it: the call
        _span(5, 2.0),  # a framework span with no SDK span inside: a call of its own
    ]
    assert [s.uid for s in client_calls(spans)] == [4, 5]


def test_a_failure_that_may_leave_the_sidecar_deaf_holds_nothing_against_the_client() -> None:
    journal = [_call(1, 1, 0.05, fault="freeze"), _call(2, 2, 0.5, status=503)]
    received = [(r, 100 + r.started_at) for r in journal]
    spans = [_span(1, 100.0, rpc_id="1"), _span(3, 102.0, rpc_id="3", status="ERROR")]
    assert unreached_calls(journal, received, client_calls(spans), 100.0) == []
    journal[0] = _call(1, 1, 0.05, fault="reset")  # a cut connection: the next call goes on a new one
    received = [(r, 100 + r.started_at) for r in journal]
    assert [p.kind for p in unreached_calls(journal, received, client_calls(spans), 100.0)] == [
        "call_never_reached"
    ]


_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
_ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_a_session_whose_initialize_the_client_gave_up_on_is_not_owed() -> None:
    """A real sidecar: the client's ``initialize`` times out before the answer (a delay holds it), so
    the session it opened never reached the client; one more session, used and never ended, is owed."""
    import httpx

    from pytest_mcpfaults import Sidecar, parse_fault

    with Sidecar(era="session", faults=[parse_fault("delay(seconds=0.5)@initialize[times=1]")]) as sc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(sc.mcp_url, json=_INIT, headers=_ACCEPT, timeout=0.1)
        sc.journal.wait_for(lambda: len(sc.sessions) == 1, 10, "the held initialize to open its session")
        kept = httpx.post(sc.mcp_url, json=_INIT, headers=_ACCEPT, timeout=5).headers["Mcp-Session-Id"]
        [abandoned] = [r for r in sc.journal.requests if r.client_closed]
        assert abandoned.mcp_method == "initialize" and len(sc.sessions) == 2
        [problem] = session_problems(sc.journal.requests, sc.sessions)
        assert (problem.kind, problem.requests) == ("never_ended", ())
        # which of the two went unlearned the journal cannot say; that one of them is owed, it can
        assert problem.session_id in sc.sessions and kept in sc.sessions


def test_a_session_whose_initialize_a_fault_cut_is_not_owed() -> None:
    """A real sidecar: a ``reset`` at the ``initialize`` opens the session and resets the connection
    before the status line, so its id never reached the client (explore's ``reset-at-initialize[n]``
    runs of the example harness were each a false ``sessions`` finding); one more session, used and
    never ended, is still owed."""
    import httpx

    from pytest_mcpfaults import Sidecar, parse_fault

    with Sidecar(era="session", faults=[parse_fault("reset@initialize[times=1]")]) as sc:
        with pytest.raises(httpx.TransportError):
            httpx.post(sc.mcp_url, json=_INIT, headers=_ACCEPT, timeout=5)
        sc.wait_idle()
        assert len(sc.sessions) == 1  # opened, its id lost with the answer
        args = (sc.journal.requests, sc.sessions)
        assert session_problems(*args, connections=sc.journal.connections) == []
        kept = httpx.post(sc.mcp_url, json=_INIT, headers=_ACCEPT, timeout=5).headers["Mcp-Session-Id"]
        sc.wait_idle()
        [problem] = session_problems(sc.journal.requests, sc.sessions, connections=sc.journal.connections)
        assert problem.kind == "never_ended" and kept in sc.sessions


def test_a_fault_answered_in_full_does_not_excuse_a_session_left_open() -> None:
    """A real sidecar and a raw httpx runner: a ``tool_error`` or a JSON-RPC error is answered in full
    (200) on a connection left open, and both SDKs still end the session after it (measured: mcp 2.3
    and 1.30), so a runner that returns on that error path without its ``DELETE`` owes it; a fault that
    cut the answer (a ``truncate``: the sidecar closed the connection; a ``503``: mcp 1.x's transport
    ends) still excuses the session."""
    import httpx

    from pytest_mcpfaults import Sidecar, parse_fault

    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
    faults = ["tool_error@tool:echo[nth=1]", "truncate@tool:echo[nth=2]", "status(code=503)@tool:echo[nth=3]"]
    with Sidecar(era="session", faults=[parse_fault(f) for f in faults]) as sc:
        with httpx.Client(timeout=5) as http:
            for _ in faults:  # each runner returns on its error path: no DELETE
                sid = http.post(sc.mcp_url, json=_INIT, headers=_ACCEPT).headers["Mcp-Session-Id"]
                with contextlib.suppress(httpx.HTTPError):
                    http.post(sc.mcp_url, json=call, headers={**_ACCEPT, "Mcp-Session-Id": sid})
        sc.wait_idle()
        [problem] = session_problems(sc.journal.requests, sc.sessions, connections=sc.journal.connections)
        assert problem.kind == "never_ended" and [r.fault_kind for r in problem.requests] == ["tool_error"]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
        "-o", "asyncio_default_fixture_loop_scope=function", "-s",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", *args,
    )  # fmt: skip


def test_the_docs_runners_fail_at_teardown_with_the_quoted_verdicts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leak=LEAK.read_text())
    result = _run(pytester)
    result.assert_outcomes(passed=3, errors=3)
    page = (ROOT / "docs" / "sessions.md").read_text()
    never = quoted_block(page, "SessionHygieneError: mcpfaults: session hygiene", "   hint: end every")
    assert never is not None
    assert_quoted_lines_occur(never, result.outlines, "docs/sessions.md")
    lost_at = page.index("calls its session again")
    lost = quoted_block(
        page[lost_at:], "SessionHygieneError: mcpfaults: session hygiene", "   hint: on a 404"
    )
    assert lost is not None
    assert_quoted_lines_occur(lost, result.outlines, "docs/sessions.md")
    poisoned_at = page.index("gives up on its client")
    poisoned = quoted_block(
        page[poisoned_at:], "SessionHygieneError: mcpfaults: session hygiene", "   hint: one failed call"
    )
    assert poisoned is not None
    assert_quoted_lines_occur(poisoned, result.outlines, "docs/sessions.md")
    result.stdout.no_fnmatch_line("*_pytest/sidecar.py*")  # the verdict, not a traceback of the plugin


def test_the_marker_and_the_ini_switch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leak=LEAK.read_text())
    _run(pytester, "-o", "mcpfaults_session_hygiene=off").assert_outcomes(passed=3)
    bad_ini = _run(pytester, "-o", "mcpfaults_session_hygiene=maybe")
    assert bad_ini.ret == pytest.ExitCode.USAGE_ERROR
    bad_ini.stderr.fnmatch_lines(
        ["*ini option mcpfaults_session_hygiene must be 'on' or 'off', got 'maybe'*"]
    )
    pytester.makepyfile(
        test_marked="""
        import pytest
        @pytest.mark.mcp_keep_sessions(True)
        def test_x(mcp_sidecar):
            pass
        """
    )
    marked = _run(pytester, "test_marked.py")
    marked.stdout.fnmatch_lines(["*@pytest.mark.mcp_keep_sessions takes no arguments, got (True,)*"])


RERUN = """
import threading
from pathlib import Path
import httpx, pytest
from pytest_mcpfaults import Hang

TRIED = Path(__file__).with_name("tried")
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"},
    },
}

@pytest.mark.mcp_sidecar(era="session", patience=0.3, faults=[Hang(when="health")])
def test_flaky(mcp_sidecar):
    if not TRIED.exists():  # the first attempt blocks after the verdict: the watcher interrupts it
        TRIED.write_text("tried")
        try:
            httpx.get(mcp_sidecar.health_url, timeout=None)
        except httpx.TransportError:
            pass
        threading.Event().wait(20)
    # the second opens a session and never ends it
    accept = {"Accept": "application/json, text/event-stream"}
    httpx.post(mcp_sidecar.mcp_url, json=INIT, headers=accept, timeout=5).raise_for_status()
"""


def test_a_rerun_after_an_interrupted_attempt_still_owes_its_sessions(pytester: pytest.Pytester) -> None:
    """pytest-rerunfailures: the watcher interrupted the first attempt (which cuts the client's close,
    so no ``DELETE`` is owed then); the second was not interrupted and owes the session it left open."""
    pytester.makeini("[pytest]\nmcpfaults_interrupt = 0.3\n")
    pytester.makepyfile(test_rerun=RERUN)
    result = _run(pytester, "--reruns=1")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1, "errors": 1}, result.stdout.str()
    result.stdout.fnmatch_lines(["*SessionHygieneError*", "*was never ended*"])


MCP1_RUNNER = """
import os, subprocess, sys

CHILD = '''
import asyncio, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def session(url, terminate):
    async with streamable_http_client(url, terminate_on_close=terminate) as (r, w, _):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("echo", {"text": "hi"})

async def main(ends, leaks):
    await session(ends, True)  # the default: the DELETE is sent on exit
    await session(leaks, False)

asyncio.run(main(*sys.argv[1:]))
'''

def test_mcp1_runner(mcp_sidecar_factory):
    ends, leaks = mcp_sidecar_factory(era="session"), mcp_sidecar_factory(era="session")
    env = {**os.environ, "PYTHONPATH": os.environ["MCP1_PATH"]}
    args = [sys.executable, "-c", CHILD, ends.mcp_url, leaks.mcp_url]
    subprocess.run(args, env=env, check=True, timeout=200)
    print("LEAKS", leaks.url)
"""


@pytest.mark.timeout(
    300
)  # one child Python importing mcp 1.x: seconds on a quiet machine, more beside busy ones
def test_the_mcp1_client_ends_its_session_unless_told_not_to(
    pytester: pytest.Pytester, mcp1_path: str
) -> None:
    """mcp 1.x's ``streamable_http_client`` sends the ``DELETE`` when it exits (``terminate_on_close``,
    default ``True``); with ``terminate_on_close=False`` it leaves the session open, and the check says
    so naming its requests."""
    pytester.makepyfile(test_mcp1=MCP1_RUNNER)
    os.environ["MCP1_PATH"] = mcp1_path
    try:
        result = _run(pytester)
    finally:
        del os.environ["MCP1_PATH"]
    result.assert_outcomes(passed=1, errors=1)
    leaks = next(line.split("LEAKS ")[1].split()[0] for line in result.outlines if "LEAKS " in line)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_mcp1_runner*",
            f"SessionHygieneError: mcpfaults: session hygiene at {leaks}:",
            "   session * was never ended: no `DELETE` came for it (its requests: "
            "`POST notifications/initialized` (#1), *`POST tools/call echo` *",
        ]
    )
