"""The patience verdict says what the sidecar observed: distinct headlines for a request held and never
answered and for a response answered and never released, hints for the client the sidecar saw
(its User-Agent) that say "if" where they guess, identical violations grouped; and the
``assert_client_*`` waits end within ``within`` of the hold's start (plus a scheduling margin).
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time

import httpx
import pytest

from pytest_mcpfaults import EndlessSse, Hang, Sidecar, Stall, parse_fault
from pytest_mcpfaults.core.records import Held, RequestRecord
from pytest_mcpfaults.verdicts.clients import answering, client_family, patience_hint, server_request_hint
from pytest_mcpfaults.verdicts.patience import PatienceError

#: The scheduling margin of these waits (docs/hangs.md): what each bound tells apart is a second or more
#: (issue 13's 1 s settling time, the 2 s and 3 s of the other paths), and on the 2-core machine beside
#: six busy processes and the suite the waiting thread woke 0.23 s late.
MARGIN = 0.3


def _verdict(sc: Sidecar) -> str:
    with pytest.raises(PatienceError) as err:
        sc.assert_no_patience_violations()
    return str(err.value)


# -- headlines from what was sent --------------------------------------------------------------------


def test_a_client_with_a_5s_timeout_is_not_told_timeout_none_waits_forever() -> None:
    """The repro of issue 13 (hints that assert what the sidecar cannot know)."""
    with Sidecar(faults=[Hang(when="health", patience=0.2)]) as sc:
        with pytest.raises(httpx.TransportError):
            httpx.get(sc.health_url, timeout=5.0)  # a client WITH a 5 s timeout
        sc.wait_idle()
        text = _verdict(sc)
    assert "timeout=None" not in text
    assert "waits forever" not in text
    assert "hint: the client did not give up within 0.2 s: if it has a read timeout, it is longer" in text
    assert "(httpx's default timeout, 5 s, is longer than this budget)" in text
    assert "on a hung `GET /health`, never answered (no status line was sent)" in text


def test_a_stalled_body_kept_open_is_not_called_a_hung_request() -> None:
    with Sidecar(patience=0.3, faults=[Stall(after_bytes=4, when="health")]) as sc:
        with httpx.Client(timeout=5.0) as client:
            resp = client.send(client.build_request("GET", sc.health_url), stream=True)
            assert resp.status_code == 200  # the status was read; the body is left open
            sc.journal.wait_for(lambda: bool(sc.patience_violations), 5, "the violation")
            resp.close()
        text = _verdict(sc)
    (v,) = sc.patience_violations
    assert v.answered == "partial"
    assert "never answered" not in text
    assert (
        "1. the client waited 0.3 s (the whole budget) on the response to `GET /health`, which stalled "
        "after the status line (200) and 4 bytes of body, and never released the connection"
    ) in text
    assert "hint: if the client needs only the status (a readiness probe), close the response" in text
    assert "httpx: client.stream(...) and leave the block, or response.close()" in text


def test_a_fully_sent_response_on_a_connection_kept_open_is_a_leak_not_a_wait() -> None:
    with Sidecar(patience=0.3, faults=[Stall(after_bytes=10_000, when="health")]) as sc:
        with httpx.Client(timeout=5.0) as client:
            resp = client.get(sc.health_url)  # the whole body (Content-Length) arrives; the pool keeps it
            assert resp.json() == {"status": "ok"}
            sc.journal.wait_for(lambda: bool(sc.patience_violations), 5, "the violation")
        text = _verdict(sc)
    (v,) = sc.patience_violations
    assert v.answered == "complete"
    assert v.request.body_bytes == v.request.bytes_sent == len(resp.content)
    assert (
        "1. the client kept the connection open for 0.3 s (the whole budget) after the response to "
        f"`GET /health` was sent in full (status 200, all {len(resp.content)} bytes of its Content-Length), "
        "and never released it (a connection leak, if it was done with it)"
    ) in text
    assert "read timeout" not in v.describe()  # no read was waiting
    assert "hint: the whole response was sent; if the client has finished with it" in text


def test_an_endless_sse_stream_kept_open() -> None:
    with Sidecar(patience=0.3, reply="sse", faults=[EndlessSse(when="tools/list")]) as sc:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
        with (
            httpx.Client(timeout=5.0) as client,
            client.stream("POST", sc.mcp_url, json=body, headers=headers) as resp,
        ):
            assert resp.status_code == 200
            sc.journal.wait_for(lambda: bool(sc.patience_violations), 5, "the violation")
        text = _verdict(sc)
    assert "1. the client waited 0.3 s (the whole budget) on the never-ending SSE stream answering" in text
    assert "`POST /mcp` (tools/list)" in text
    assert "client seen: User-Agent python-httpx/" in text
    assert "MCP-Protocol-Version 2026-07-28" in text


# -- hints for the client seen ------------------------------------------------------------------------


def _rec(**fields: object) -> RequestRecord:
    base: dict[str, object] = {"id": 0, "conn_id": 0, "method": "POST", "path": "/mcp", "held": Held(0.0)}
    return RequestRecord(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ua", "family"),
    [
        ("python-httpx2/2.16.2", "httpx2"),  # measured: the mcp 2.x SDK
        ("python-httpx/0.28.1", "httpx"),  # measured: the mcp 1.x SDK and plain httpx
        ("node", "node"),  # measured: the TypeScript SDK on Node's fetch (tests/test_ts_parts.py)
        ("Python/3.11 aiohttp/3.10.5", "aiohttp"),
        ("python-requests/2.32.3", "requests"),
        ("curl/8.5.0", "curl"),
        ("my-harness/1.0", "unknown"),
        (None, "unknown"),
    ],
)
def test_client_family_from_the_user_agent(ua: str | None, family: str) -> None:
    assert client_family(ua) == family


#: Per User-Agent, what the hint for an unanswered server request must name: the library's API that
#: answers each method, and how it bounds the call; and what it must not name (another library's).
SERVER_REQUEST_APIS = {
    "python-httpx2/2.16.2": (
        {
            "elicitation/create": "Client(elicitation_callback=...)",
            "sampling/createMessage": "Client(sampling_callback=...)",
            "roots/list": "Client(list_roots_callback=...)",
        },
        "call_tool(..., read_timeout_seconds=...)",
        "setRequestHandler",
    ),
    "python-httpx/0.28.1": (
        {
            "elicitation/create": "ClientSession(read, write, elicitation_callback=...)",
            "sampling/createMessage": "ClientSession(read, write, sampling_callback=...)",
            "roots/list": "ClientSession(read, write, list_roots_callback=...)",
        },
        "read_timeout_seconds=timedelta(seconds=...)",
        "setRequestHandler",
    ),
    "node": (
        {
            "elicitation/create": "setRequestHandler(ElicitRequestSchema, ...) (with the `elicitation`",
            "sampling/createMessage": "setRequestHandler(CreateMessageRequestSchema, ...) (with the",
            "roots/list": "setRequestHandler(ListRootsRequestSchema, ...) (with the `roots` capability)",
        },
        "client.callTool(params, undefined, { timeout })",
        "_callback",
    ),
}


@pytest.mark.parametrize("ua", sorted(SERVER_REQUEST_APIS))
@pytest.mark.parametrize("method", ["elicitation/create", "sampling/createMessage", "roots/list"])
def test_the_unanswered_server_request_hint_names_the_client_s_own_api(ua: str, method: str) -> None:
    apis, bound, foreign = SERVER_REQUEST_APIS[ua]
    hint = server_request_hint(_rec(user_agent=ua, mcp_method="tools/call", era="session"), method)
    assert hint.startswith(f"the harness received the server's `{method}` and never answered it: "), hint
    assert apis[method] in hint and bound in hint, hint
    others = [api for m, api in apis.items() if m != method]
    assert foreign not in hint and not any(api in hint for api in others), hint


@pytest.mark.parametrize("ua", sorted(SERVER_REQUEST_APIS))
def test_the_call_bound_of_a_lost_answer_s_hint_is_the_client_s_own(ua: str) -> None:
    """The hint for an answer a fault lost (drop_client_answer) bounds the call with this."""
    _, bound, _ = SERVER_REQUEST_APIS[ua]
    assert bound in answering(_rec(user_agent=ua)).bound, answering(_rec(user_agent=ua)).bound


def test_an_unknown_client_is_told_the_mcp_2x_api_and_a_stateless_one_that_it_never_retried() -> None:
    unknown = server_request_hint(_rec(user_agent="my-harness/1.0"), "elicitation/create")
    assert unknown == server_request_hint(_rec(user_agent="python-httpx2/2.16.2"), "elicitation/create")
    stateless = server_request_hint(_rec(user_agent="node", era="stateless"), "elicitation/create")
    assert "a client without the callback raises at once and never retries" in stateless
    assert "Method not found" not in stateless


def test_an_mcp1_client_is_never_told_about_client_read_timeout_seconds() -> None:
    call = _rec(mcp_method="tools/call", tool="echo", era="session", user_agent="python-httpx/0.28.1")
    hint = patience_hint(call, mcp_path="/mcp", budget=2.0)
    assert "Client(read_timeout_seconds" not in hint
    assert hint.startswith("if this is the mcp 1.x SDK")
    assert "'Error parsing JSON response'" in hint
    assert "ClientSession(read, write, read_timeout_seconds=timedelta(seconds=...))" in hint
    delete = _rec(method="DELETE", era="session", user_agent="python-httpx/0.28.1")
    assert "terminate_on_close=False" in patience_hint(delete, mcp_path="/mcp", budget=2.0)


def test_an_mcp2_client_is_told_its_timeout_if_any_is_longer_than_the_budget() -> None:
    call = _rec(mcp_method="tools/call", tool="echo", era="session", user_agent="python-httpx2/2.16.2")
    hint = patience_hint(call, mcp_path="/mcp", budget=2.0)
    assert hint.startswith("if this is the mcp 2.x SDK (it sends this User-Agent)")
    assert "it did not give up within 2 s, so any such timeout is longer than that" in hint


def test_an_unknown_client_gets_a_generic_conditional_hint() -> None:
    hung = _rec(method="GET", path="/health", user_agent="my-harness/1.0")
    assert patience_hint(hung, mcp_path="/mcp", budget=1.0) == (
        "the client did not give up within 1 s: if it has a read timeout, it is longer than that; give "
        "this request a timeout below the budget"
    )
    slow = _rec(method="GET", path="/health", user_agent="python-httpx/0.28.1")
    assert "so this one has a longer timeout or timeout=None" in patience_hint(
        slow, mcp_path="/mcp", budget=5
    )
    assert "is longer than this budget" in patience_hint(slow, mcp_path="/mcp", budget=4.9)


# -- identical violations are grouped ------------------------------------------------------------------


def test_fifty_identical_violations_are_one_bounded_entry() -> None:
    with Sidecar(patience=0.5, faults=[Hang(when="health")]) as sc:

        def probe(_: int) -> None:
            with pytest.raises(httpx.TransportError):
                httpx.get(sc.health_url, timeout=None)

        with concurrent.futures.ThreadPoolExecutor(50) as pool:
            list(pool.map(probe, range(50)))
        sc.wait_idle()
        with pytest.raises(httpx.TransportError):  # a different request: its own entry
            _hang_other(sc)
        sc.wait_idle()
        text = _verdict(sc)
    assert len(sc.patience_violations) == 51
    assert text.startswith(f"51 held requests outlived the patience budget at {sc.url} (2 distinct):")
    assert "\n1. 50 times: the client waited 0.5 s (the whole budget) on a hung `GET /health`, never" in text
    assert "aborted each of the 50 connections (RST): #" in text
    assert " and 40 more" in text  # ten connections named
    assert text.count("journal of connection #") == 2
    assert "\n2. the client waited 0.5 s (the whole budget) on a hung `DELETE /mcp`" in text
    assert len(text) < 4000  # one entry per distinct violation, not 51


def _hang_other(sc: Sidecar) -> None:
    sc.inject(Hang(when="DELETE /mcp"))
    httpx.delete(sc.mcp_url, timeout=None)


# -- exact waits ---------------------------------------------------------------------------------------


def _held_stream(sc: Sidecar, client: httpx.Client) -> httpx.Response:
    resp = client.send(client.build_request("GET", sc.health_url), stream=True)
    sc.wait_held(1)
    return resp


@pytest.mark.parametrize("within", [0.3, 1.0])
def test_a_failing_released_within_ends_at_within_past_the_hold(within: float) -> None:
    """Issue 13 measured 0.3 -> 1.31 s and 1.0 -> 2.01 s here (a 1 s settling time)."""
    with Sidecar(patience=10.0, faults=[Stall(when="health")]) as sc, httpx.Client(timeout=5.0) as client:
        resp = _held_stream(sc, client)
        try:
            t0 = time.monotonic()
            with pytest.raises(AssertionError, match="the client kept it open"):
                sc.assert_client_released(within=within, target="health")
            elapsed, ended = time.monotonic() - t0, sc.journal.now()
        finally:
            resp.close()
        assert elapsed <= within + MARGIN, elapsed
        (req,) = sc.requests
        assert req.held is not None
        assert abs(ended - (req.held.at + within)) <= MARGIN, (ended, req.held.at)


def test_a_passing_gave_up_returns_when_the_close_is_seen() -> None:
    with Sidecar(patience=10.0, faults=[Hang(when="health")]) as sc:

        def probe() -> None:
            with pytest.raises(httpx.ReadTimeout):
                httpx.get(sc.health_url, timeout=0.4)

        t = threading.Thread(target=probe)
        t.start()
        sc.wait_held(1)
        t0 = time.monotonic()
        sc.assert_client_gave_up(within=2.0, target="health")  # called while the client still waits
        elapsed = time.monotonic() - t0
        t.join(5)
        assert elapsed <= 0.4 + MARGIN, elapsed  # not 2 s, not 3 s
        (req,) = sc.requests
        assert req.client_closed_at is not None
        assert req.held is not None
        assert req.client_closed_at - req.held.at < 2.0


def test_a_close_seen_after_within_is_later_than_within() -> None:
    with Sidecar(patience=10.0, faults=[Hang(when="health")]) as sc:
        sock = socket.create_connection((sc.host, sc.port))
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        sc.wait_held(1)
        timer = threading.Timer(1.5, sock.close)  # the client closes at about 1.5 s, well after 0.3 s
        timer.start()
        try:
            t0 = time.monotonic()
            with pytest.raises(AssertionError, match=r"still held after 0\.3"):
                sc.assert_client_gave_up(within=0.3)
            assert time.monotonic() - t0 <= 0.3 + MARGIN
        finally:
            timer.join(5)
        sc.journal.wait_for(lambda: sc.requests[0].client_closed, 5, "the close")
        with pytest.raises(
            AssertionError, match=r"the client closed it only after 1\.\d\d s, later than 0.3 s"
        ):
            sc.assert_client_gave_up(within=0.3)


def test_the_verdict_names_a_connection_by_its_id_after_the_journal_dropped_older_ones() -> None:
    """A journal with a limit drops its oldest closed connections: the verdict finds the held request's
    connection by its id, not by its place in what is left."""
    with Sidecar(faults=[parse_fault("hang(patience=0.2)@health[nth=4]")]) as sc:
        sc.journal.set_limit(2)
        for _ in range(3):
            assert httpx.get(sc.health_url, timeout=5.0).status_code == 200  # a connection each, closed
        with pytest.raises(httpx.TransportError):
            httpx.get(sc.health_url, timeout=5.0)
        sc.wait_idle()
        held = sc.journal.requests[-1]
        [conn] = [c for c in sc.journal.connections if c.id == held.conn_id]
        assert held.conn_id > len(sc.journal.connections) - 1  # its place in the list is not its id
        text = _verdict(sc)
    assert f"journal of connection #{held.conn_id} ({conn.peer})" in text
