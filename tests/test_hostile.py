"""Hostile input and load (issue 14, the sidecar's part): each attack as the issue writes it.

Every test asserts what the client saw (status, JSON-RPC body), what the journal recorded, and that
the test's own outcome is right: a client's mistake is never a sidecar error (``errors == []``,
``check_errors()`` passes); only a tool handler's own failure is.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import socket
import threading
import time
import weakref
from typing import Any

import httpx
import pytest

from pytest_mcpfaults import Sidecar, SidecarError
from pytest_mcpfaults.inprocess import mock_sidecar
from pytest_mcpfaults.transports import loop as sidecar_loop

MODERN = {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28"}


def strict_json(text: str) -> Any:
    """Parse as JSON proper: ``NaN`` / ``Infinity`` are not JSON."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def post(sc: Sidecar, body: str | bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(sc.mcp_url, content=body, headers=headers or MODERN, timeout=10)


def call_body(name: str, arguments: Any, rid: int = 1) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )


def only_record(sc: Sidecar) -> Any:
    sc.wait_idle()
    (record,) = sc.requests
    return record


# -- client mistakes: the protocol's own error, journaled as the client's ---------------------------

PARAMS_NOT_AN_OBJECT = {
    "params_array_tools_call": (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["echo",{"text":"hi"}]}'
    ),
    "params_string": '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"echo"}',
    "params_array_initialize": '{"jsonrpc":"2.0","id":1,"method":"initialize","params":[1]}',
}


@pytest.mark.parametrize("name", PARAMS_NOT_AN_OBJECT)
def test_params_that_are_not_an_object_get_invalid_params_not_500(name: str) -> None:
    headers = MODERN if name != "params_array_initialize" else {"Content-Type": "application/json"}
    with Sidecar() as sc:
        reply = post(sc, PARAMS_NOT_AN_OBJECT[name], headers)
        record = only_record(sc)
        assert sc.errors == []
    assert reply.status_code == 400
    kind = "list" if "array" in name else "str"
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32602, "message": f"Invalid params: params must be an object, got {kind}"},
    }
    assert (record.status, record.error_by) == (400, "client")
    assert record.error == f"Invalid params: params must be an object, got {kind}"


def test_params_null_counts_as_absent_as_the_sdk_reads_it() -> None:
    with Sidecar() as sc:
        reply = post(sc, '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":null}')
        record = only_record(sc)
        sc.check_errors()
    assert reply.status_code == 200 and reply.json()["result"]["resultType"] == "complete"
    assert record.error_by is None


def test_json_nested_100000_deep_is_a_parse_error_400_not_500() -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":' + "[" * 100000 + "]" * 100000 + "}"
    with Sidecar() as sc:
        reply = post(sc, body)
        record = only_record(sc)
        sc.check_errors()
    assert reply.status_code == 400
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: JSON nested too deeply"},
    }
    assert (record.error_by, record.error) == ("client", "Parse error: JSON nested too deeply")


def test_method_that_is_not_a_string_is_an_invalid_request_not_202() -> None:
    with Sidecar() as sc:
        reply = post(sc, '{"jsonrpc":"2.0","id":1,"method":5}')
        record = only_record(sc)
        assert sc.errors == []
    assert reply.status_code == 400
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid Request: method must be a string"},
    }
    assert record.error_by == "client"


@pytest.mark.parametrize("rid", ["1e999", "NaN", "-Infinity", "null", "true", '{"a":1}'])
def test_ids_json_cannot_carry_back_are_refused_with_id_null(rid: str) -> None:
    with Sidecar() as sc:
        reply = post(sc, '{"jsonrpc":"2.0","id":' + rid + ',"method":"server/discover"}')
        record = only_record(sc)
        assert sc.errors == []
    assert reply.status_code == 400
    answer = strict_json(reply.text)  # the reply is JSON proper: no Infinity / NaN echoed
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert "id must be a string or a finite number" in answer["error"]["message"]
    assert record.error_by == "client"


#: An id Python's json cannot read (its int-string limit, 4300 digits by default): the body is JSON.
HUGE_ID = '{"jsonrpc":"2.0","id":' + "1" * 5000 + ',"method":"server/discover"}'


def test_an_id_too_large_to_read_is_an_invalid_request_saying_so_on_both_http_backends() -> None:
    """It was "Parse error: body is not JSON" (json.loads' ValueError for the int-string limit)."""
    with Sidecar() as sc, mock_sidecar() as side:
        over_socket = post(sc, HUGE_ID)
        in_process = httpx.post(side.mcp_url, content=HUGE_ID, headers=MODERN)
        record = only_record(sc)
        sc.check_errors()
        side.check_errors()
    assert (in_process.status_code, in_process.content) == (over_socket.status_code, over_socket.content)
    assert over_socket.status_code == 400
    error = over_socket.json()["error"]
    assert over_socket.json()["id"] is None and error["code"] == -32600
    assert error["message"].startswith("Invalid Request: a number of over 4300 digits, too large to read")
    assert record.error_by == "client"


def test_an_invented_tool_argument_is_left_out_as_the_sdk_does_and_is_no_sidecar_error() -> None:
    """`tools/call echo {"text": "hi", "lang": "en"}`: the mcp SDK's MCPServer answers "hi" (its
    argument model ignores extras); the handler is never called with `lang`."""
    seen: list[dict[str, Any]] = []
    with Sidecar() as sc:
        sc.add_tool(
            "lookup",
            lambda q: seen.append({"q": q}) or q,
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        )
        echo = post(sc, call_body("echo", {"text": "hi", "lang": "en"})).json()
        lookup = post(sc, call_body("lookup", {"q": "x", "invented": 1})).json()
        sc.wait_idle()
        records = sc.requests
        sc.check_errors()
    assert echo["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert echo["result"]["isError"] is False
    assert lookup["result"]["content"][0]["text"] == "x" and seen == [{"q": "x"}]
    assert [(r.error_by, r.error) for r in records] == [
        ("client", "ignored argument(s) 'lang': not in the input schema of tool echo"),
        ("client", "ignored argument(s) 'invented': not in the input schema of tool lookup"),
    ]


def test_arguments_a_schema_refuses_are_a_tool_error_and_the_handler_is_not_called() -> None:
    calls: list[Any] = []
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "mode": {"enum": ["a", "b"]}},
        "required": ["n"],
        "additionalProperties": False,
    }
    bad = {
        "extra": ({"n": 1, "lang": "en"}, "unexpected argument(s) 'lang' (the schema allows ['mode', 'n'])"),
        "wrong type": ({"n": "1"}, "argument 'n' must be of type integer, got '1'"),
        "bool is no integer": ({"n": True}, "argument 'n' must be of type integer, got True"),
        "below minimum": ({"n": 0}, "argument 'n' must be >= 1, got 0"),
        "not in enum": ({"n": 1, "mode": "c"}, "argument 'mode' must be one of ['a', 'b'], got 'c'"),
        "missing": ({}, "missing required argument 'n'"),
    }
    with Sidecar() as sc:
        sc.add_tool("count", lambda **kw: calls.append(kw) or "ok", input_schema=schema)
        answers = {name: post(sc, call_body("count", args)).json() for name, (args, _) in bad.items()}
        not_an_object = post(sc, call_body("count", ["n", 1]))
        sc.wait_idle()
        records = sc.requests
        assert sc.errors == []
    assert calls == []
    for name, (_, problem) in bad.items():
        assert answers[name]["result"]["isError"] is True
        assert answers[name]["result"]["content"][0]["text"] == f"Error executing tool count: {problem}"
    assert not_an_object.status_code == 400  # -32602 in the stateless era: 400, as the mcp SDK answers
    assert not_an_object.json()["error"] == {
        "code": -32602,
        "message": "Invalid params: arguments of tool count must be an object, got list",
    }
    assert all(r.error_by == "client" for r in records)


@pytest.mark.parametrize("seconds", ["NaN", "Infinity", "1e999", "-1"])
def test_sleep_with_a_non_finite_or_negative_length_is_refused_and_never_reaches_the_loop(
    seconds: str,
) -> None:
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":%s}}}'
    )
    with Sidecar() as a, Sidecar(faults=["delay(seconds=0.2)@health"]) as b:
        reply = post(a, body % seconds).json()
        # the shared loop's timers still work: an unrelated sidecar's delay(0.2) answers (it timed
        # out at 5 s when NaN reached the timer heap)
        health = httpx.get(b.health_url, timeout=5)
        record = only_record(a)
        assert a.errors == []
    assert health.status_code == 200
    assert reply["result"]["isError"] is True
    text = reply["result"]["content"][0]["text"]
    if seconds == "-1":
        assert text == "Error executing tool sleep: argument 'seconds' must be >= 0, got -1"
    else:
        assert (
            text
            == "Error executing tool sleep: argument 'seconds' is NaN or Infinity, which is not a JSON number"
        )
    assert record.error_by == "client"


def test_a_genuine_exception_in_a_handler_is_still_re_raised_in_the_test() -> None:
    sc = Sidecar().start()

    def broken(text: str) -> str:
        raise KeyError(text)

    sc.add_tool("broken", broken, input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
    try:
        answer = post(sc, call_body("broken", {"text": "boom"})).json()
        record = only_record(sc)
    finally:
        sc.stop()
    assert answer["result"]["isError"] is True
    assert (record.error_by, record.error) == ("tool", "KeyError: 'boom'")
    with pytest.raises(SidecarError, match=r"in tool broken") as raised:
        sc.check_errors()
    assert isinstance(raised.value.__cause__, KeyError)


def test_client_mistakes_do_not_fail_a_plugin_test(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    """The d02/d03 attacks through the `mcp_sidecar` fixture: each test passes (it ERRORed at teardown
    with SidecarError)."""
    pytester.makepyfile(
        """
        import httpx, pytest
        H = {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28"}
        BODIES = [
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["echo",{"text":"hi"}]}',
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"echo"}',
            '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":'
            + "[" * 100000 + "]" * 100000 + "}",
            '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            '"params":{"name":"echo","arguments":{"text":"hi","lang":"en"}}}',
        ]

        @pytest.mark.parametrize("body", BODIES)
        def test_it(mcp_sidecar, body):
            r = httpx.post(mcp_sidecar.mcp_url, headers=H, content=body)
            assert r.status_code in (200, 400)
            mcp_sidecar.wait_idle()
            assert mcp_sidecar.requests[-1].error_by == "client"
        """
    )
    result = run_plugin("-p", "no:randomly")
    result.assert_outcomes(passed=4, errors=0)


def test_the_in_process_backend_answers_client_mistakes_the_same_way() -> None:
    body = PARAMS_NOT_AN_OBJECT["params_array_tools_call"]
    with Sidecar() as sc, mock_sidecar() as side:
        over_socket = post(sc, body)
        in_process = httpx.post(side.mcp_url, content=body, headers=MODERN)
        side.check_errors()
        sc.check_errors()
        (record,) = side.requests
    assert (in_process.status_code, in_process.content) == (over_socket.status_code, over_socket.content)
    assert record.error_by == "client"


# -- one handler never stalls another sidecar --------------------------------------------------------


def test_a_blocking_sync_handler_does_not_stall_an_unrelated_sidecar() -> None:
    """The handler blocks until the unrelated sidecar has answered: were it on the shared loop
    thread, /health could not answer (ReadTimeout) until the handler's own 10 s wait ran out."""
    unblock = threading.Event()
    answered: list[int] = []
    with Sidecar() as a, Sidecar() as c:
        a.add_tool(
            "slow_lookup",
            lambda q: (unblock.wait(10), q)[1],
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        )
        caller = threading.Thread(
            target=lambda: answered.append(post(a, call_body("slow_lookup", {"q": "x"})).status_code)
        )
        caller.start()
        a.wait_for(lambda reqs: any(r.tool == "slow_lookup" for r in reqs))
        try:
            health = httpx.get(c.health_url, timeout=5)
            a_health = httpx.get(a.health_url, timeout=5)  # nor its own sidecar
        finally:
            unblock.set()
            caller.join(10)
        a.check_errors()
    assert (health.status_code, a_health.status_code, answered) == (200, 200, [200])


def test_a_handler_past_tool_timeout_is_answered_and_named_in_the_test() -> None:
    """A 12 s block ended in a teardown `TimeoutError: sidecar operation did not finish within
    10.0 s` naming no culprit; now the client gets a tool error and the test a SidecarError, both
    naming the tool and the bound."""
    unblock = threading.Event()

    async def forever() -> str:
        await asyncio.Event().wait()
        return "never"

    sc = Sidecar(tool_timeout=0.3).start()
    sc.add_tool(
        "slow_lookup",
        lambda q: (unblock.wait(10), q)[1],
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    sc.add_tool("forever", forever, input_schema={"type": "object", "properties": {}})
    try:
        sync_answer = post(sc, call_body("slow_lookup", {"q": "x"})).json()
        async_answer = post(sc, call_body("forever", {})).json()
        sc.wait_idle()
        records = sc.requests
    finally:
        unblock.set()
        sc.stop()
    with pytest.raises(SidecarError) as raised:
        sc.check_errors()
    for name, answer in (("slow_lookup", sync_answer), ("forever", async_answer)):
        assert answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"] == (
            f"Error executing tool {name}: tool {name!r} did not finish within tool_timeout=0.3 s"
        )
    assert [(r.tool, r.error_by) for r in records] == [("slow_lookup", "tool"), ("forever", "tool")]
    assert [str(e) for e in raised.value.errors] == [
        "tool 'slow_lookup' did not finish within tool_timeout=0.3 s; raise Sidecar(tool_timeout=)",
        "tool 'forever' did not finish within tool_timeout=0.3 s; raise Sidecar(tool_timeout=)",
    ]
    assert "--- in tool slow_lookup ---" in str(raised.value)


def test_the_builtin_sleep_past_tool_timeout_is_the_clients_not_an_error() -> None:
    with Sidecar(tool_timeout=0.2) as sc:
        answer = post(sc, call_body("sleep", {"seconds": 30})).json()
        record = only_record(sc)
        sc.check_errors()
    assert answer["result"]["content"][0]["text"] == (
        "Error executing tool sleep: tool 'sleep' did not finish within tool_timeout=0.2 s"
    )
    assert record.error_by == "client"


@pytest.mark.parametrize("name", ["tool_timeout", "idle_timeout"])
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "5", True, 10**400])
def test_timeouts_are_validated_naming_the_argument(name: str, value: Any) -> None:
    with pytest.raises(
        ValueError, match=rf"Sidecar: {name} must be a positive, finite number of seconds or None"
    ):
        Sidecar(**{name: value})


# -- stop() cancels what it started ------------------------------------------------------------------


def _loop_tasks() -> int:
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1  # not this one

    return sidecar_loop.run(count())


def _send(port: int, data: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    return s


SLEEP_CALL = call_body("sleep", {"seconds": 3600}).encode()
REQUESTS = (
    b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
    + f"Content-Length: {len(SLEEP_CALL)}\r\n\r\n".encode()
    + SLEEP_CALL,
)


def _stop_with_handlers_in_flight() -> weakref.ref[Sidecar]:
    sc = Sidecar(faults=["delay(seconds=3600)@health"], tool_timeout=None).start()
    socks = [_send(sc.port, data) for data in REQUESTS]
    sc.wait_for(lambda reqs: len(reqs) == 2 and reqs[1].tool == "sleep")
    sc.stop()
    for s in socks:
        s.close()
    sc.check_errors()
    return weakref.ref(sc)


def test_stop_cancels_handlers_in_flight_soak() -> None:
    """Soak (as benchmarks/soak.py, which also samples fds and RSS): 1,000 stops with a `delay` and
    a `sleep` in flight leave no task on the sidecar loop and no Sidecar alive (each leaked 2 tasks
    and itself)."""
    _stop_with_handlers_in_flight()  # warm-up: the loop thread and its first tasks
    gc.collect()
    before = _loop_tasks()
    refs = [_stop_with_handlers_in_flight() for _ in range(1000)]
    gc.collect()
    assert _loop_tasks() == before
    assert sum(r() is not None for r in refs) == 0


def test_an_abandoned_sync_handler_does_not_keep_its_sidecar_alive() -> None:
    unblock = threading.Event()
    sc = Sidecar().start()
    sc.add_tool(
        "block", lambda: unblock.wait(10) and "done", input_schema={"type": "object", "properties": {}}
    )
    body = call_body("block", {})
    s = _send(
        sc.port,
        REQUESTS[1].split(b"Content-Length")[0] + f"Content-Length: {len(body)}\r\n\r\n{body}".encode(),
    )
    try:
        sc.wait_for(lambda reqs: len(reqs) == 1 and reqs[0].tool == "block")
        sc.stop()
        ref = weakref.ref(sc)
        del sc
        gc.collect()
        assert ref() is None  # its worker thread still runs the handler, abandoned
    finally:
        unblock.set()
        s.close()


# -- headers, addresses, slow clients ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "values"),
    [
        ("Origin", ("http://localhost", "http://evil.example")),
        ("Mcp-Session-Id", ("a", "b")),
        ("Mcp-Method", ("tools/call", "tools/list")),
    ],
)
def test_duplicate_security_relevant_headers_are_refused_not_first_wins(
    header: str, values: tuple[str, str]
) -> None:
    headers = [*MODERN.items(), (header, values[0]), (header, values[1])]
    with Sidecar() as sc:
        reply = httpx.post(sc.mcp_url, content=call_body("echo", {"text": "hi"}), headers=headers)
        record = only_record(sc)
        assert sc.errors == []
    assert reply.status_code == 400
    assert reply.json()["error"] == {
        "code": -32600,
        "message": f"Bad Request: the {header} header appears more than once",
    }
    assert record.error_by == "client"


def test_a_repeated_accept_is_one_list_as_the_sdk_servers_read_it() -> None:
    """Issue 36: the mcp 1.26 client's event-stream ``GET`` carries two ``Accept`` headers (its own and
    httpx-sse's: measured, it got 400 for it) and the SDK's servers accept it; ``Accept`` is a list, so
    the GET stream opens."""
    client_info = {"name": "t", "version": "1"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client_info}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    with Sidecar(era="session", get_stream=True) as sc, httpx.Client(timeout=5) as client:
        accept = ("Accept", "application/json, text/event-stream")
        answer = client.post(sc.mcp_url, json=init, headers=[accept, ("Content-Type", "application/json")])
        sid = answer.headers["Mcp-Session-Id"]
        headers = [accept, ("Accept", "text/event-stream"), ("Mcp-Session-Id", sid),
                   ("MCP-Protocol-Version", "2025-06-18")]  # fmt: skip
        with client.stream("GET", sc.mcp_url, headers=headers) as stream:
            assert stream.status_code == 200, stream.read()
            assert stream.headers["Content-Type"].startswith("text/event-stream")
        sc.wait_idle(10)  # the GET's record ends once the sidecar saw the client close the stream
        get = next(r for r in sc.requests if r.method == "GET")
        assert (get.status, get.error) == (200, None)


@pytest.mark.parametrize("header", ["Content-Type", "Host", "Content-Length"])
def test_headers_aiohttp_refuses_repeated_are_400_and_the_log_never_quotes_a_header(
    header: str, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp's parser refuses a repeated Content-Type, Host or Content-Length itself (400, the
    connection closed, before any handler runs: the journal has the connection, not a request). It
    logged the parse error with a traceback quoting the offending line: a bearer token included."""
    values = {"Content-Type": ("application/json", "text/plain"), "Host": ("127.0.0.1", "evil.example"),
              "Content-Length": ("2", "3")}[header]  # fmt: skip
    secret = "SECRET-" + "s" * 32
    with Sidecar() as sc:
        answers = []
        for head in (
            f"POST /mcp HTTP/1.1\r\nHost: x\r\n{header}: {values[0]}\r\n{header}: {values[1]}\r\n"
            f"Authorization: Bearer {secret}\r\n\r\n{{}}",
            f"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}\x01\r\n\r\n",
        ):
            s = _send(sc.port, head.encode())
            try:
                answers.append(_read_until_closed(s))
            finally:
                s.close()
        sc.wait_idle()
        assert sc.requests == () and len(sc.journal.connections) == 2
        assert sc.errors == []
    assert all(a.startswith(b"HTTP/1.0 400 Bad Request") for a in answers), answers
    logged = [r for r in caplog.records if r.name.startswith(("aiohttp", "pytest_mcpfaults"))]
    assert logged and all(secret not in r.getMessage() and not r.exc_info for r in logged)
    assert all(r.levelname == "WARNING" and "refused with 400" in r.getMessage() for r in logged)


def test_mcp_bodies_are_inflated_by_the_sidecar_bounded_and_other_encodings_are_415() -> None:
    """aiohttp's own decompression is off on the sidecar's port: gzip and deflate bodies are inflated
    by the sidecar, at most max_body_bytes (a bomb is 413, never inflated further); another encoding
    is 415 and the client's, not aiohttp's unjournaled 400."""
    import gzip
    import zlib

    body = call_body("echo", {"text": "hi"}).encode()
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(c.compress(bytes(1 << 20)) for _ in range(64)) + c.flush()
    with Sidecar() as sc:
        ok = httpx.post(
            sc.mcp_url, content=gzip.compress(body), headers={**MODERN, "Content-Encoding": "gzip"}
        )
        br = httpx.post(sc.mcp_url, content=body, headers={**MODERN, "Content-Encoding": "br"})
        junk = httpx.post(sc.mcp_url, content=b"not gzip", headers={**MODERN, "Content-Encoding": "gzip"})
        big = httpx.post(sc.mcp_url, content=bomb, headers={**MODERN, "Content-Encoding": "gzip"})
        records = [(r.status, r.error_by) for r in sc.journal.requests]
        assert sc.errors == []
    assert ok.status_code == 200 and ok.json()["result"]["content"][0]["text"] == "hi"
    assert (
        br.status_code == 415 and br.text == "Content-Encoding 'br' is not supported (gzip, deflate or none)"
    )
    assert junk.status_code == 400 and junk.text.startswith("body does not decode (gzip encoding): ")
    assert big.status_code == 413
    assert records == [(200, None), (415, "client"), (400, "client"), (413, None)]


def test_a_malformed_origin_is_forbidden_not_a_500() -> None:
    with Sidecar() as sc:
        reply = httpx.post(
            sc.mcp_url, content=call_body("echo", {"text": "hi"}), headers={**MODERN, "Origin": "http://[::1"}
        )
        record = only_record(sc)
        assert sc.errors == []
    assert reply.status_code == 403
    assert reply.json()["error"]["message"] == "Forbidden: Origin 'http://[::1' is not allowed"
    assert record.error_by == "client"


def test_localhost_on_a_dual_stack_host_listens_on_one_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """`localhost` resolving to ::1 and 127.0.0.1 (Debian, macOS): both listen on the port `url`
    names (they listened on two different ports)."""
    real = socket.getaddrinfo

    def dual(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost":
            return real("::1", *args, **kwargs) + real("127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", dual)
    with Sidecar(host="localhost") as sc:
        listening = sorted(s.getsockname()[:2] for s in sc._listener.server.sockets)  # type: ignore[union-attr]
        v4 = httpx.get(f"http://127.0.0.1:{sc.port}/health", timeout=5)
        v6 = httpx.get(f"http://[::1]:{sc.port}/health", timeout=5)
    assert sc.url == f"http://localhost:{sc.port}"
    assert listening == [("127.0.0.1", sc.port), ("::1", sc.port)]
    assert (v4.status_code, v6.status_code) == (200, 200)


def _read_until_closed(s: socket.socket, trickle: bytes = b"", limit: float = 5.0) -> bytes:
    """Trickle a byte every 0.1 s until the server closes (EOF/RST); ``TimeoutError`` past ``limit``."""
    s.settimeout(0.1)
    out, waited = b"", 0.0
    while waited < limit:
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            waited += 0.1
            if trickle:
                try:
                    s.sendall(trickle)
                except OSError:
                    return out
            continue
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk
    raise TimeoutError(f"still open after {limit} s")


def test_slow_headers_are_bounded_by_idle_timeout_and_journaled() -> None:
    with Sidecar(idle_timeout=0.5) as sc:
        slow = _send(sc.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-a: ")
        idle = _send(sc.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            assert _read_until_closed(slow, trickle=b"a") == b""  # slowloris: closed, never answered
            answered = _read_until_closed(idle)  # answered, then closed once idle
        finally:
            slow.close()
            idle.close()
        sc.wait_idle()
        conns = sc.journal.connections
        assert sc.errors == []
    assert answered.startswith(b"HTTP/1.1 200 OK")
    assert [(c.requests, c.closed_by, c.timed_out) for c in conns] == [
        (0, "sidecar", True),
        (1, "sidecar", True),
    ]


def test_the_idle_bound_restarts_with_each_request_on_a_kept_alive_connection() -> None:
    """The idle timer is lazy (one timer per connection, re-armed when it fires early): requests
    0.4 s apart keep a connection with idle_timeout=1 open well past 1 s, and once it goes quiet the
    sidecar closes it no sooner than 1 s after its last answer."""
    with Sidecar(idle_timeout=1.0) as sc, httpx.Client() as client:
        for _ in range(4):  # 1.6 s in all on one connection
            assert client.get(sc.health_url).status_code == 200
            time.sleep(0.4)
        sc.journal.wait_for(lambda: sc.journal.connections[0].closed_at is not None, 5.0, "the idle close")
        (conn,) = sc.journal.connections
        last = sc.journal.requests[-1]
    assert (conn.requests, conn.closed_by, conn.timed_out) == (4, "sidecar", True)
    assert last.ended_at is not None and conn.closed_at is not None
    assert conn.closed_at - last.ended_at >= 1.0


def test_a_slow_body_is_bounded_by_idle_timeout_and_is_the_clients() -> None:
    with Sidecar(idle_timeout=0.5) as sc:
        slow = _send(
            sc.port,
            b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            b'{"jsonrpc"',
        )
        try:
            answered = _read_until_closed(slow)
        finally:
            slow.close()
        record = only_record(sc)
        assert sc.errors == []
    assert answered.startswith(b"HTTP/1.1 408 Request Timeout")
    assert answered.endswith(b"request body not complete within idle_timeout=0.5 s")
    assert (record.status, record.error_by) == (408, "client")


def test_more_concurrent_sync_calls_than_workers_all_answer_and_no_worker_outlives_stop() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def workers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "mcpfaults-tool-handler"]

    before = set(workers())  # another test's abandoned call may still be ending
    with Sidecar() as sc, httpx.Client(timeout=20, limits=httpx.Limits(max_connections=48)) as client:
        sc.add_tool(
            "nap",
            lambda: (threading.Event().wait(0.01), "ok")[1],
            input_schema={"type": "object", "properties": {}},
        )
        with ThreadPoolExecutor(48) as ex:
            answers = list(
                ex.map(
                    lambda _: client.post(sc.mcp_url, content=call_body("nap", {}), headers=MODERN).json(),
                    range(100),
                )
            )
        ours = set(workers()) - before
        sc.check_errors()
    assert [a["result"]["content"][0]["text"] for a in answers] == ["ok"] * 100
    assert 1 <= len(ours) <= 16  # bounded pool
    for t in ours:
        t.join(5)  # told to exit at stop(); idle ones leave at once
    assert [t for t in ours if t.is_alive()] == []
