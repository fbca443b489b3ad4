"""The in-process backend (respx): parity with the socket sidecar for every fault it supports, a clear
refusal for every fault that needs sockets, and what it cannot see (mcp 2.x traffic over httpx2)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import find, given, settings
from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults import Die, Fault, Sidecar, Trigger, fault_kinds, parse_plan
from pytest_mcpfaults.inprocess import (
    SUPPORTED_KINDS,
    InProcessSidecar,
    UnsupportedInProcess,
    check_plan,
    intercepting,
    mock_sidecar,
)
from pytest_mcpfaults.invariants import cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder
from pytest_mcpfaults.strategies import fault_plans

STATELESS = {"MCP-Protocol-Version": "2026-07-28"}
_SID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")

Side = Sidecar | InProcessSidecar
Scenario = Callable[[httpx.Client, Side], list[Any]]


def rpc(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments})


def seen(side: Side, do: Callable[[], httpx.Response]) -> Any:
    """What the client saw: the exception class, or status, selected headers and the body (with the
    sidecar's URL and session ids normalised)."""
    try:
        r = do()
    except httpx.HTTPError as exc:
        return type(exc)
    body = _SID.sub("<sid>", r.text.replace(side.url, "<url>"))
    headers = {k: r.headers[k] for k in ("retry-after", "connection") if k in r.headers}
    if "mcp-session-id" in r.headers:
        headers["mcp-session-id"] = "<sid>"
    return (r.status_code, headers, body)


def health(times: int = 1) -> Scenario:
    return lambda c, s: [seen(s, lambda: c.get(s.health_url)) for _ in range(times)]


def calls(*messages: dict[str, Any]) -> Scenario:
    return lambda c, s: [seen(s, lambda m=m: c.post(s.mcp_url, json=m, headers=STATELESS)) for m in messages]


def created_then_deleted(c: httpx.Client, s: Side) -> list[Any]:
    r = c.post(s.mcp_url, json=tool("create_session", task_id="task-1"), headers=STATELESS)
    sid = re.search(r'session_id\\": \\"([^\\]+)', r.text)
    assert sid is not None, r.text
    return [
        seen(s, lambda: c.post(s.mcp_url, json=tool("delete_session", session_id=sid[1]), headers=STATELESS))
    ]


def created_then_deleted_twice(c: httpx.Client, s: Side) -> list[Any]:
    """A failed delete, then the retry (a fault with ``times=1`` lets it through)."""
    r = c.post(s.mcp_url, json=tool("create_session", task_id="task-1"), headers=STATELESS)
    sid = re.search(r'session_id\\": \\"([^\\]+)', r.text)
    assert sid is not None, r.text
    delete = tool("delete_session", session_id=sid[1])
    return [seen(s, lambda: c.post(s.mcp_url, json=delete, headers=STATELESS)) for _ in range(2)]


def session_era(c: httpx.Client, s: Side) -> list[Any]:
    init = rpc(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    )
    r = c.post(s.mcp_url, json=init)
    out = [seen(s, lambda: r)]
    sid = {"Mcp-Session-Id": r.headers.get("mcp-session-id", "none")}
    out.append(seen(s, lambda: c.post(s.mcp_url, json=rpc("tools/list", id=2), headers=sid)))
    out.append(seen(s, lambda: c.post(s.mcp_url, json=rpc("tools/list", id=3), headers=sid)))
    out.append(seen(s, lambda: c.delete(s.mcp_url, headers=sid)))
    return out


#: (fault plan, what the client does): every kind the in-process backend supports, at least once.
CASES: list[tuple[str, Scenario]] = [
    ("", health()),
    ("status(code=503)@health[times=2]", health(3)),
    ("status(code=429,retry_after=3)@tools/call", calls(tool("list_tasks"))),
    ("absent", health()),
    ("flap(every=2)", health(5)),
    ("terminating", calls(tool("list_tasks"))),
    ("jsonrpc_error(code=-32000,message=boom)@tools/call", calls(tool("list_tasks"), rpc("tools/list"))),
    ("tool_error(text=nope)@tool:list_tasks", calls(tool("list_tasks"), tool("echo", text="hi"))),
    ("session_expired@tools/list[nth=2]", session_era),
    ("backend_gone", created_then_deleted),
    ("backend_gone@tool:list_tasks", calls(tool("list_tasks"))),
    ("error_payload@tool:delete_session[times=1]", created_then_deleted_twice),
    (
        'error_payload(reason=quota,message="{tool}: {reason} ({task_id})")@tools/call',
        calls(tool("create_session", task_id="task-2"), rpc("tools/list")),
    ),
    ("malformed_json@tools/call", calls(tool("echo", text="hello"))),
    ("die@health[nth=2]", health(3)),
    ("die(restart=true)@health[nth=1]", health(2)),
    ("delay(seconds=0.01)@health", health()),
    ("", session_era),
]


def any_request(c: httpx.Client, s: Side) -> list[Any]:
    """A health check, a tool call and a cleanup call: what a kind with its default target meets."""
    return [*health()(c, s), *calls(tool("echo", text="hi"), tool("delete_session", session_id="s-1"))(c, s)]


# every supported kind the cases above leave out, with its defaults (a kind added later gets one)
_HAND = {f.kind for plan, _ in CASES for f in parse_plan(plan)}
CASES += [(str(fault_kinds()[k]()), any_request) for k in SUPPORTED_KINDS if k not in _HAND]


def _client() -> httpx.Client:
    return httpx.Client(timeout=2.0)


@pytest.mark.parametrize(
    ("plan", "scenario"), CASES, ids=[f"{p or 'none'}-{i}" for i, (p, _) in enumerate(CASES)]
)
def test_both_backends_give_the_client_the_same_outcome(plan: str, scenario: Scenario) -> None:
    faults = parse_plan(plan)
    with _client() as client, Sidecar(faults=faults) as socket_side:
        over_sockets = scenario(client, socket_side)
    with _client() as client, mock_sidecar(faults=faults) as side:
        in_process = scenario(client, side)
    assert in_process == over_sockets
    # and both sidecars saw the same requests, with the same faults firing
    assert side.journal.sequence() == socket_side.journal.sequence()
    assert side.fired == socket_side.fired
    assert [r.status for r in side.requests] == [r.status for r in socket_side.requests]


def test_the_parity_cases_cover_every_supported_kind() -> None:
    covered = {f.kind for plan, _ in CASES for f in parse_plan(plan)}
    assert covered == set(SUPPORTED_KINDS)


def test_the_die_outcomes_are_the_socket_exception_classes() -> None:
    with _client() as client, mock_sidecar(faults=[Die(when=Trigger("health", nth=1))]) as side:
        assert health(2)(client, side) == [httpx.ReadError, httpx.ConnectError]
        assert side.state == "dead"
        side.revive()
        assert client.get(side.health_url).status_code == 200
    assert side.journal.sequence() == ["GET /health", "GET /health"]  # refused requests never arrive


def test_kill_and_revive_give_the_same_outcomes_on_both_backends() -> None:
    def scenario(c: httpx.Client, s: Side) -> list[Any]:
        out = [seen(s, lambda: c.get(s.health_url))]
        s.kill()
        out.append(seen(s, lambda: c.get(s.health_url)))
        s.revive()
        out.append(seen(s, lambda: c.get(s.health_url)))
        return out

    with _client() as client, Sidecar() as socket_side:
        over_sockets = scenario(client, socket_side)
    with _client() as client, mock_sidecar() as side:
        in_process = scenario(client, side)
    assert in_process == over_sockets
    assert [o if isinstance(o, type) else o[0] for o in in_process] == [200, httpx.ConnectError, 200]
    assert side.fired == socket_side.fired == {"die": 1}  # a runtime kill counts for coverage on both


@pytest.mark.parametrize("end", ["kill", "stop"])
def test_a_kill_while_a_delayed_answer_is_on_its_way_resets_it_on_both_backends(end: str) -> None:
    """``kill()`` and ``stop()`` reset the open connections, a request waiting out a ``delay`` too:
    in-process it got its 200 after the delay, as if the sidecar had not died."""
    plan = parse_plan("delay(seconds=3)@health[nth=1]")
    outcomes = []
    for make in (lambda: Sidecar(faults=plan), lambda: mock_sidecar(faults=plan)):
        with httpx.Client(timeout=10) as client, make() as side:
            got: list[Any] = []
            waiting = threading.Thread(
                target=lambda c=client, s=side, g=got: g.append(seen(s, lambda: c.get(s.health_url)))
            )
            waiting.start()
            side.journal.wait_for(lambda s=side: len(s.journal) == 1, 5, "the delayed request")
            started = time.monotonic()
            getattr(side, end)()
            waiting.join()
            outcomes.append((got[0], time.monotonic() - started < 2.0))
    assert outcomes == [(httpx.ReadError, True)] * 2


async def test_a_kill_resets_a_delayed_answer_an_async_client_waits_for() -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        with mock_sidecar(faults=["delay(seconds=3)@health"]) as side:
            waiting = asyncio.ensure_future(client.get(side.health_url))
            while len(side.journal) == 0:
                await asyncio.sleep(0.01)
            started = time.monotonic()
            side.kill()
            with pytest.raises(httpx.ReadError):
                await waiting
            assert time.monotonic() - started < 2.0


def test_a_delay_longer_than_the_read_timeout_is_a_read_timeout_on_both_backends() -> None:
    plan = parse_plan("delay(seconds=0.5)@health")
    outcomes = []
    for make in (lambda: Sidecar(faults=plan), lambda: mock_sidecar(faults=plan)):
        with httpx.Client(timeout=0.05) as client, make() as side:
            outcomes.append(seen(side, lambda c=client, s=side: c.get(s.health_url)))
    assert outcomes == [httpx.ReadTimeout, httpx.ReadTimeout]


@pytest.mark.parametrize("era", ["stateless", "session"])
def test_a_tool_slower_than_the_read_timeout_is_a_read_timeout_on_both_backends(era: str) -> None:
    """A call whose tool runs past the client's read timeout: ``httpx.ReadTimeout`` at the timeout, and
    the call journaled as closed by the client (in-process answered it in full, 3 s late)."""
    seen_by_client = []
    call = tool("sleep", seconds=3)
    for make in (lambda: Sidecar(era=era), lambda: mock_sidecar(era=era)):
        with httpx.Client(timeout=5.0) as client, make() as side:
            headers = {"Accept": "application/json, text/event-stream"}
            if era == "session":
                hello = {"name": "t", "version": "1"}
                init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": hello}
                r = client.post(side.mcp_url, json=rpc("initialize", init), headers=headers)
                headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
            else:
                headers.update(STATELESS)
            started = time.monotonic()
            post = functools.partial(client.post, side.mcp_url, json=call, headers=headers, timeout=0.3)
            outcome = seen(side, post)
            waited = time.monotonic() - started
            if isinstance(side, Sidecar):  # it journals the client's close on its loop
                side.wait_for(lambda requests: any(r.client_closed for r in requests))
            [rec] = [r for r in side.requests if r.mcp_method == "tools/call"]
            seen_by_client.append((outcome, waited < 2.0, rec.client_closed))
    assert seen_by_client == [(httpx.ReadTimeout, True, True)] * 2


async def test_async_clients_see_the_same_classes_and_answers() -> None:
    plan = parse_plan("status(code=502)@health[nth=1]; die@health[nth=3]")
    results = []
    for make in (lambda: Sidecar(faults=plan), lambda: mock_sidecar(faults=plan)):
        with make() as side:
            out: list[Any] = []
            async with httpx.AsyncClient(timeout=2.0) as client:
                for _ in range(4):
                    try:
                        out.append((await client.get(side.health_url)).status_code)
                    except httpx.HTTPError as exc:
                        out.append(type(exc))
            results.append(out)
    assert results[0] == results[1] == [502, 200, httpx.ReadError, httpx.ConnectError]


# -- refused: what needs sockets -------------------------------------------------------------------


# the HTTP kinds that need the socket sidecar, with the reason the error gives (each kind's needs_sockets)
NEEDS_SOCKETS = {
    k: cls.needs_sockets
    for k, cls in fault_kinds().items()
    if cls.needs_sockets is not None and "http" in cls.transports
}
STDIO_ONLY = tuple(k for k, cls in fault_kinds().items() if "http" not in cls.transports)


@pytest.mark.parametrize("kind", sorted(NEEDS_SOCKETS))
def test_faults_that_need_sockets_are_refused_with_the_reason(kind: str) -> None:
    fault = fault_kinds()[kind]()
    with pytest.raises(UnsupportedInProcess) as info:
        mock_sidecar(faults=[fault])
    assert str(info.value).startswith(
        f"{kind!r} needs real sockets ({NEEDS_SOCKETS[kind]}); use the socket Sidecar"
    )
    with mock_sidecar() as side:
        with pytest.raises(UnsupportedInProcess, match=f"^{kind!r} needs real sockets"):
            side.inject(fault)
        assert side.plan == ()


def test_stall_is_refused_with_the_connection_reason() -> None:
    with pytest.raises(UnsupportedInProcess) as info:
        mock_sidecar(faults=["stall@tools/call"])
    assert str(info.value).startswith(
        "'stall' needs real sockets (it keeps a connection checked out with a body that never ends); "
        "use the socket Sidecar"
    )


def test_ignore_cancel_is_refused_a_cancel_never_reaches_a_call_in_process() -> None:
    """The in-process backend answers one request at a time: a cancel from another thread, sent while
    the call runs, is answered after it, so there is no call in flight for ``ignore_cancel`` to act on
    (accepted, it never changed a thing)."""
    with mock_sidecar() as side, httpx.Client(timeout=5.0) as client:
        headers = {"Accept": "application/json, text/event-stream", **STATELESS}
        worker = threading.Thread(
            target=client.post,
            args=(side.mcp_url,),
            kwargs={"json": tool("sleep", seconds=0.5), "headers": headers},
        )
        worker.start()
        side.journal.wait_for(lambda: len(side.journal) == 1, 5, "the call to start")
        client.post(side.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 1}}, headers=headers)  # fmt: skip
        worker.join()
        call, cancel = side.requests
        assert cancel.started_at >= call.ended_at  # it waited for the call's answer
    with pytest.raises(UnsupportedInProcess) as info:
        mock_sidecar(faults=["ignore_cancel"])
    assert str(info.value).startswith("'ignore_cancel' needs real sockets (a cancel reaches a call only")


def test_the_socket_sidecars_journal_waits_work_in_process_and_wait_held_says_why_not() -> None:
    """``wait_for`` and ``cancellations`` as on the socket Sidecar (they were missing: a test moved from
    one backend to the other broke on an AttributeError); nothing is ever held in-process, so
    ``wait_held`` is refused, naming the backend and why, rather than timing out."""
    with mock_sidecar() as side, httpx.Client(timeout=5.0) as client:
        headers = {"Accept": "application/json, text/event-stream", **STATELESS}
        client.post(side.mcp_url, json=tool("echo", text="hi"), headers=headers)
        client.post(side.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 1}}, headers=headers)  # fmt: skip
        side.wait_for(lambda rs: len(rs) == 2, timeout=0)
        with pytest.raises(
            AssertionError, match=r"timed out after 0.01 s waiting for `side.wait_for\(lambda"
        ):
            side.wait_for(lambda rs: len(rs) == 3, timeout=0.01)
        [cancel] = side.cancellations
        assert (cancel.cancels, cancel.in_flight) == (side.requests[0].id, False)  # answered already
        with pytest.raises(UnsupportedInProcess) as info:
            side.wait_held()
    assert str(info.value) == (
        "InProcessSidecar.wait_held(): the in-process backend holds no request (the faults that hold one "
        "keep a connection checked out and need real sockets); use the socket Sidecar"
    )


def test_a_probe_waits_behind_a_slow_tool_in_process_but_not_behind_a_delay() -> None:
    """docs/fuzzing.md: the in-process backend answers one request at a time, so a ``/health`` probe
    sent while a tool runs is answered once the tool returns (the socket sidecar answers it at once);
    a ``delay`` fault's body waits outside the sidecar, so a probe is answered meanwhile."""
    from pytest_mcpfaults import Tool

    gate = threading.Event()
    slow = Tool("slow", lambda: str(gate.wait(10)), {"type": "object", "properties": {}})
    plan = ["delay(seconds=10)@tool:echo"]
    with mock_sidecar(tools=[slow], faults=plan) as side, httpx.Client(timeout=15.0) as client:
        headers = {"Accept": "application/json, text/event-stream", **STATELESS}
        call = threading.Thread(
            target=client.post, args=(side.mcp_url,), kwargs={"json": tool("slow"), "headers": headers}
        )
        call.start()
        side.wait_for(lambda rs: any(r.tool == "slow" for r in rs))
        probe = threading.Thread(target=httpx.get, args=(side.health_url,))
        probe.start()
        probe.join(0.3)
        waited = probe.is_alive()
        gate.set()
        call.join(10)
        probe.join(10)
        assert waited  # still unanswered 0.3 s on: the tool was running
        slow_call, probed = side.requests
        assert probed.path == "/health" and probed.started_at >= slow_call.ended_at
        started = time.monotonic()
        with client.stream("POST", side.mcp_url, json=tool("echo", text="x"), headers=headers) as r:
            assert r.status_code == 200  # headers at once, the body 10 s later
            assert httpx.get(side.health_url).status_code == 200  # answered meanwhile
        assert time.monotonic() - started < 5.0


def test_freeze_at_runtime_is_refused() -> None:
    with mock_sidecar() as side, pytest.raises(UnsupportedInProcess, match="'freeze' needs real sockets"):
        side.freeze()


def test_a_fault_refused_by_inject_is_named_as_inject_s_not_the_constructor_s() -> None:
    """The other backends name ``inject()``; this one said ``faults=``, an argument the test never gave."""
    with mock_sidecar() as side:
        with pytest.raises(
            UnsupportedInProcess, match=r"^'stall' needs real sockets .*\(fault 'stall' in inject\(\)\)$"
        ):
            side.inject("stall")
        with pytest.raises(
            UnsupportedInProcess, match=r"^mock_sidecar inject\(\): fault 'ignore_eof' is stdio-only"
        ):
            side.inject("ignore_eof")
        assert side.plan == ()


def test_every_kind_is_either_supported_or_refused() -> None:
    assert set(SUPPORTED_KINDS) | set(NEEDS_SOCKETS) | set(STDIO_ONLY) == set(fault_kinds())
    assert not set(SUPPORTED_KINDS) & set(NEEDS_SOCKETS)
    assert not (set(SUPPORTED_KINDS) | set(NEEDS_SOCKETS)) & set(STDIO_ONLY)
    for kind, cls in fault_kinds().items():  # and check_plan agrees: accepted exactly when supported
        if kind in SUPPORTED_KINDS:
            assert check_plan([cls()]) == (cls(),)
        else:
            with pytest.raises(UnsupportedInProcess, match=f"^(mock_sidecar faults=: fault )?{kind!r}"):
                check_plan([cls()])


@pytest.mark.parametrize("kind", STDIO_ONLY)
def test_stdio_only_kinds_are_refused_as_not_http(kind: str) -> None:
    with pytest.raises(UnsupportedInProcess, match=f"^mock_sidecar faults=: fault '{kind}' is stdio-only"):
        mock_sidecar(faults=[kind])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "http://sidecar.test/api"}, "base_url must be an http(s) origin without a path"),
        ({"base_url": "sidecar.test"}, "base_url must be an http(s) origin"),
        # a query, a fragment or a port out of range made a health_url answered 404, or no origin at all
        ({"base_url": "http://sidecar.test?x=1"}, "got 'http://sidecar.test?x=1'"),
        ({"base_url": "http://sidecar.test#top"}, "got 'http://sidecar.test#top'"),
        ({"base_url": "http://sidecar.test:99999"}, "got 'http://sidecar.test:99999'"),
        ({"era": "modern"}, "era must be one of 'auto', 'stateless', 'session', got 'modern'"),
        ({"mcp_path": "mcp"}, "mcp_path must be a path starting with '/', got 'mcp'"),
        ({"health_path": "/mcp"}, "mock_sidecar: health_path and mcp_path must differ, both are '/mcp'"),
        ({"reply": "xml"}, "mock_sidecar: reply must be 'json' or 'sse', got 'xml'"),
        ({"faults": "die"}, "faults must be a list of faults (or fault specs), got 'die'"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        mock_sidecar(**kwargs)


# -- routing ------------------------------------------------------------------------------------------


def test_other_hosts_pass_through_to_the_network_and_two_in_process_sidecars_coexist() -> None:
    with (
        Sidecar() as real,
        mock_sidecar() as a,
        mock_sidecar(base_url="http://other.test", health_path="/ready") as b,
        _client() as client,
    ):
        assert client.get(real.health_url).json() == {"status": "ok"}
        assert client.get(a.health_url).json() == {"status": "ok"}
        assert client.get("http://other.test/ready").json() == {"status": "ok"}
        assert client.get("http://other.test/health").status_code == 404
    assert real.journal.sequence() == ["GET /health"]
    assert a.journal.sequence() == ["GET /health"]
    assert b.journal.sequence() == ["GET /ready", "GET /health"]
    assert all(r.conn_id == -1 for r in a.requests)
    assert a.journal.connections == ()


def test_after_the_block_nothing_is_intercepted() -> None:
    with mock_sidecar(base_url="http://127.0.0.1:9") as side, _client() as client:
        assert client.get(side.health_url).status_code == 200
    with _client() as client, pytest.raises(httpx.ConnectError):
        client.get("http://127.0.0.1:9/health")  # the discard port: nothing listens
    assert side.state == "stopped"


def test_mcp_2x_traffic_is_invisible_to_the_in_process_backend() -> None:
    from mcp.client import Client

    async def connect(url: str) -> None:
        with anyio.fail_after(20):
            async with Client(url) as client:
                await client.list_tools()

    side = mock_sidecar(base_url="http://127.0.0.1:9")
    with side, pytest.raises(BaseException):  # noqa: B017, PT011 - the real network refused it
        asyncio.run(connect(side.mcp_url))
    assert side.journal.sequence() == []  # httpx2 went to the socket, never to respx


def test_tool_handler_errors_are_re_raised_like_the_socket_sidecar() -> None:
    from pytest_mcpfaults import SidecarError, Tool

    def broken() -> str:
        raise KeyError("oops")

    bad = Tool("broken", broken, {"type": "object", "properties": {}})
    side = mock_sidecar(tools=[bad])
    with pytest.raises(SidecarError, match="KeyError"):  # noqa: PT012, SIM117 - raised when the block ends
        with side, _client() as client:
            r = client.post(side.mcp_url, json=tool("broken"), headers=STATELESS)
            assert r.json()["result"]["isError"] is True


# -- the same fuzzing, in-process -------------------------------------------------------------------

from example_modules import load  # noqa: E402

_harness = load("docs/examples/fuzzing_harness.py")
HarnessError, Runner = _harness.HarnessError, _harness.Runner

recorder = SpanRecorder()
tracer = recorder.attach(TracerProvider()).get_tracer("harness")
PLANS = fault_plans(max_faults=2, kinds=SUPPORTED_KINDS)
DERANDOMIZED = settings(derandomize=True, database=None, deadline=None)
client = httpx.Client(timeout=2.0)


def flips(plan: list[Fault], *, hardened: bool) -> bool:
    recorder.clear()
    with mock_sidecar(faults=plan) as side:  # noqa: SIM117
        with contextlib.suppress(HarnessError):  # the session may fail; it must not flip
            Runner(client, side.mcp_url, tracer, hardened=hardened).run()
    return bool(cleanup_never_flips(recorder.spans()))


@pytest.fixture(scope="class")
def interception() -> Iterator[None]:
    with intercepting():  # one respx start for the whole class: a sidecar per example is cheap
        yield


@pytest.mark.usefixtures("interception")
class TestFuzzingInProcess:
    def test_the_unhardened_flip_shrinks_to_the_same_plan_as_over_sockets(self) -> None:
        found = find(PLANS, lambda p: flips(p, hardened=False), settings=DERANDOMIZED)
        assert [str(f) for f in found] == ["backend_gone"]

    @settings(DERANDOMIZED, max_examples=300)
    @given(plan=PLANS)
    def test_the_hardened_runner_never_flips(self, plan: list[Fault]) -> None:
        assert not flips(plan, hardened=True)


def test_interception_is_held_only_inside_the_block() -> None:
    with intercepting():
        with mock_sidecar() as a, _client() as client:
            assert client.get(a.health_url).status_code == 200
        with mock_sidecar() as b, _client() as client:  # same origin again: a fresh sidecar
            assert client.get(b.health_url).status_code == 200
        assert (len(a.journal), len(b.journal)) == (1, 1)
    with _client() as client, pytest.raises(httpx.ConnectError):
        client.get("http://127.0.0.1:9/health")


def test_a_fault_that_loses_to_an_earlier_one_keeps_its_times_budget_on_both_backends() -> None:
    plan = parse_plan("status(code=502)@health[times=1]; status(code=503)@health[times=1]")
    for make in (lambda: Sidecar(faults=plan), lambda: mock_sidecar(faults=plan)):
        with make() as side, _client() as client:
            codes = [client.get(side.health_url).status_code for _ in range(3)]
        assert codes == [502, 503, 200], type(side).__name__


def test_a_respx_mock_of_the_users_own_still_answers_its_routes_whenever_it_started() -> None:
    """The in-process backend patches httpx one level above respx's default (httpcore), so a user's
    own ``respx.mock`` sees every request it does not answer, started before or after it."""
    import respx

    with _client() as client:
        with respx.mock(assert_all_called=False) as early, mock_sidecar() as side:
            early.get("http://api.test/early").respond(200, json={"who": "early"})
            with respx.mock(assert_all_called=False) as late:
                late.get("http://api.test/late").respond(200, json={"who": "late"})
                assert client.get("http://api.test/late").json() == {"who": "late"}
                assert late.calls.call_count == 1
            assert client.get("http://api.test/early").json() == {"who": "early"}
            assert client.get(side.health_url).json() == {"status": "ok"}
            assert early.calls.call_count == 1
        assert side.journal.sequence() == ["GET /health"]  # the sidecar saw only its own request


def test_requests_and_answers_do_not_pile_up_while_the_interception_is_held() -> None:
    """A fuzz run holds the interception for thousands of requests: none of them may be kept."""
    import gc

    def live() -> int:
        gc.collect()
        return sum(isinstance(o, (httpx.Request, httpx.Response)) for o in gc.get_objects())

    with intercepting(), _client() as client:
        before = live()
        for _ in range(50):
            with mock_sidecar() as side:
                r = client.post(side.mcp_url, json=tool("list_tasks"), headers=STATELESS)
                assert r.status_code == 200 and "tasks" in r.json()["result"]["content"][0]["text"]
        del r
        assert live() - before <= 2, "requests or responses are kept alive across examples"


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        (
            [("Origin", "http://localhost"), ("Origin", "http://evil.example")],
            400,
            "Bad Request: the Origin header appears more than once",
        ),
        (
            [("Mcp-Session-Id", "a"), ("Mcp-Session-Id", "b")],
            400,
            "Bad Request: the Mcp-Session-Id header appears more than once",
        ),
        ([("Origin", "http://evil.example")], 403, "Forbidden: Origin 'http://evil.example' is not allowed"),
        ([("Origin", "http://[::1")], 403, "Forbidden: Origin 'http://[::1' is not allowed"),
        ([("Origin", "http://a.example")], 200, None),  # in allowed_origins
        # origins compare as RFC 6454 says: scheme and host in any case, the default port elided
        ([("Origin", "HTTP://A.Example:80")], 200, None),
        ([("Origin", "https://a.example")], 403, "Forbidden: Origin 'https://a.example' is not allowed"),
        (
            [("Origin", "http://a.example:8080")],
            403,
            "Forbidden: Origin 'http://a.example:8080' is not allowed",
        ),
    ],
)
def test_both_backends_apply_the_same_security_checks(
    extra: list[tuple[str, str]], status: int, message: str | None
) -> None:
    """The Origin check and the refusal of duplicated routing headers live in the shared core
    (core/core.py), so the in-process backend answers exactly as the socket one."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    base = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list")]  # fmt: skip
    answers = []
    with Sidecar(allowed_origins=["http://a.example"]) as sc:
        answers.append(httpx.post(sc.mcp_url, content=body, headers=[*base, *extra]))
        socket_record = sc.requests[-1]
        assert sc.errors == []
    with mock_sidecar(allowed_origins=["http://a.example"]) as side:
        answers.append(httpx.post(side.mcp_url, content=body, headers=[*base, *extra]))
        inprocess_record = side.requests[-1]
        assert side.errors == []
    assert [a.status_code for a in answers] == [status, status]
    if message is None:
        assert all("tools" in a.json()["result"] for a in answers)
    else:
        assert [a.json()["error"]["message"] for a in answers] == [message, message]
        assert socket_record.error_by == inprocess_record.error_by == "client"


def test_the_in_process_sidecar_accepts_its_own_origin_and_checks_allowed_origins() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/list"}  # fmt: skip
    for base_url in ("http://sidecar.test", "http://Sidecar.Test", "http://sidecar.test:80"):  # one origin
        with mock_sidecar(base_url=base_url) as side:
            own = httpx.post(side.mcp_url, content=body, headers={**headers, "Origin": "http://sidecar.test"})
        assert own.status_code == 200, (base_url, own.text)
    with pytest.raises(ValueError, match=r"mock_sidecar: allowed_origins must be a list of Origin values"):
        mock_sidecar(allowed_origins="http://a.example")  # type: ignore[arg-type]
    for never_sent in ("a.example", "http://a.example/"):  # compared as sent: accepted, they never matched
        for make in (Sidecar, mock_sidecar):
            with pytest.raises(
                ValueError, match=rf"allowed_origins takes origins as a client sends them.*got '{never_sent}'"
            ):
                make(allowed_origins=[never_sent])


def test_both_backends_refuse_a_body_over_max_body_bytes_with_the_same_413() -> None:
    """The size limit is the core's: the socket sidecar stops reading at it, the in-process backend
    (whose body is already in memory) answers the same 413; one byte under the limit is served."""
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 200}})
    small = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}  # fmt: skip
    limit = len(small) + 1
    answers = []
    with Sidecar(max_body_bytes=limit) as sc:
        answers.append(httpx.post(sc.mcp_url, content=big, headers=headers))
        served_socket = httpx.post(sc.mcp_url, content=small, headers=headers)
    with mock_sidecar(max_body_bytes=limit) as side:
        answers.append(httpx.post(side.mcp_url, content=big, headers=headers))
        served_inprocess = httpx.post(side.mcp_url, content=small, headers=headers)
        assert [r.status for r in side.requests] == [413, 200]
    assert [(a.status_code, a.text) for a in answers] == [(413, f"request body over {limit} bytes")] * 2
    assert served_socket.status_code == served_inprocess.status_code == 200
    with pytest.raises(ValueError, match=r"mock_sidecar: max_body_bytes must be a positive integer, got 0"):
        mock_sidecar(max_body_bytes=0)
