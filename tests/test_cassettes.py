"""Cassettes end to end: the mcp SDK's own ``MCPServer`` (``tests/sdk_upstream.py``) recorded through
proxy mode by the mcp 2.x client, then replayed offline (the upstream stopped) to the same client in
both eras, with faults on top; matching, misses, redaction and the file format's refusals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from sdk_upstream import serve

from pytest_mcpfaults import Sidecar, SidecarError
from pytest_mcpfaults.faults import BackendGone, Die, ErrorPayload, Stall, Trigger
from pytest_mcpfaults.proxy.cassette import FORMAT, REDACTED, CassetteError, read_cassette
from pytest_mcpfaults.proxy.cassette.matching import Matcher, Rules

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

MODES = ["auto", "legacy"]
ERA = {"auto": "stateless", "legacy": "session"}
Recorded = tuple[Path, list[Any], str]
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def benchmark_session(url: str, mode: str, **client: Any) -> list[Any]:
    """What an exgentic-style runner does: list, create a benchmark session, evaluate, delete, add."""
    async with Client(url, mode=mode, read_timeout_seconds=client.get("read", 5)) as c:
        tools = await c.list_tools()
        created = json.loads((await c.call_tool("create_session", {"task_id": "task-1"})).content[0].text)
        sid = created["session_id"]
        scored = json.loads((await c.call_tool("evaluate_session", {"session_id": sid})).content[0].text)
        deleted = json.loads((await c.call_tool("delete_session", {"session_id": sid})).content[0].text)
        added = await c.call_tool("add", {"a": 2, "b": 3})
        return [sorted(t.name for t in tools.tools), created, scored, deleted, added.structured_content]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """A cassette of one session-era benchmark session with the SDK server, recorded through proxy
    mode; the server is stopped before any test replays it. Yields the path, what the client saw
    live, and the upstream's URL."""
    path = tmp_path_factory.mktemp("cassettes") / "sdk.jsonl"
    with serve() as up, Sidecar(upstream=up.url, record=str(path)) as sc:
        live = asyncio.run(benchmark_session(sc.mcp_url, "legacy"))
        url = up.url
        assert up.calls == ["create_session", "evaluate_session", "delete_session", "add"]
    with pytest.raises(httpx.ConnectError):  # offline from here on: nothing listens there
        httpx.post(url, json={}, timeout=2)
    return path, live, url


# -- the file ---------------------------------------------------------------------------------------


def test_the_cassette_is_one_versioned_header_then_one_sorted_json_exchange_per_line(
    recorded: Recorded,
) -> None:
    path, live, url = recorded
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header == {"cassette": "pytest-mcpfaults", "format": FORMAT, "upstream": url}
    exchanges = [json.loads(line) for line in lines[1:]]
    for line, data in zip(lines[1:], exchanges, strict=True):
        assert line == json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    seen = [(e["http"], e["method"], e.get("tool")) for e in exchanges]
    assert seen == [
        ("POST", "initialize", None),
        ("POST", "notifications/initialized", None),
        ("POST", "tools/list", None),
        ("POST", "tools/call", "create_session"),
        ("POST", "tools/call", "evaluate_session"),
        ("POST", "tools/call", "delete_session"),
        ("POST", "tools/call", "add"),
        ("DELETE", None, None),
    ]
    assert {e["session"] for e in exchanges} == {"session-1"}  # the lifecycle, on one labelled session
    assert exchanges[0]["response_headers"]["mcp-session-id"] == "session-1"  # not the real id
    assert exchanges[-1]["status"] == 200 and exchanges[1]["status"] == 202
    assert all(e["era"] == "session" for e in exchanges)
    create = exchanges[3]
    assert create["params"]["arguments"] == {"task_id": "task-1"}
    assert create["id"] is not None and create["content_type"] == "text/event-stream"
    [event] = create["events"]  # the SDK answers as SSE: each event, with when it came
    assert event["event"] == "message" and 0 < event["at"] <= create["took"]
    assert event["data"] == create["response"]
    assert json.loads(create["response"]["result"]["content"][0]["text"]) == live[1]


def test_a_corrupt_line_is_refused_naming_the_file_and_the_line(recorded: Recorded, tmp_path: Path) -> None:
    lines = recorded[0].read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:4], '{"http": "POST", "method": "tools/call", ', *lines[5:]]) + "\n")
    with pytest.raises(ValueError, match=rf"^cassette {bad}, line 5: not JSON: ") as exc_info:
        Sidecar(cassette=str(bad))
    assert isinstance(exc_info.value, CassetteError)
    bad.write_text("\n".join([*lines[:2], '{"http": "GET", "method": 3, "status": 200}']) + "\n")
    with pytest.raises(ValueError, match=rf"^cassette {bad}, line 3: not an exchange: 'http' must be POST"):
        Sidecar(cassette=str(bad))


def test_a_newer_format_is_refused_naming_its_version_and_the_one_read(
    recorded: Recorded, tmp_path: Path
) -> None:
    lines = recorded[0].read_text().splitlines()
    newer = tmp_path / "newer.jsonl"
    header = {"cassette": "pytest-mcpfaults", "format": FORMAT + 1}
    newer.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(
        ValueError,
        match=rf"line 1: cassette format {FORMAT + 1} is newer than this pytest-mcpfaults reads "
        rf"\(format {FORMAT}\); upgrade",
    ):
        Sidecar(cassette=str(newer))
    other = tmp_path / "other.jsonl"
    other.write_text('{"interactions": []}\n')
    with pytest.raises(ValueError, match=r"line 1: not a pytest-mcpfaults cassette"):
        Sidecar(cassette=str(other))
    with pytest.raises(ValueError, match=r"no-such.jsonl: no such file"):
        Sidecar(cassette=str(tmp_path / "no-such.jsonl"))


def test_bad_cassette_arguments_are_refused_naming_them(recorded: Recorded) -> None:
    path = str(recorded[0])
    with pytest.raises(ValueError, match=r"record='x.jsonl' records the answers of a real server"):
        Sidecar(record="x.jsonl")
    with pytest.raises(ValueError, match=r"cassette=.* replays a recording offline; upstream="):
        Sidecar(cassette=path, upstream="http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match=r"cassette_ignore must be a list of argument names"):
        Sidecar(cassette=path, cassette_ignore="ts")
    with pytest.raises(ValueError, match=r"cassette_order= is a matching rule of replay"):
        Sidecar(cassette_order=True)
    with pytest.raises(ValueError, match=r"record_mode must be one of all, new_episodes, got 'once'"):
        Sidecar(record="x.jsonl", upstream="http://127.0.0.1:9/mcp", record_mode="once")
    with pytest.raises(ValueError, match=r"add_tool.*replays .*whose tools are the recorded server's"):
        Sidecar(cassette=path).add_tool("x", lambda: 1, input_schema={"type": "object"})


# -- replay -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_replay_answers_the_mcp2_client_offline_in_both_eras(recorded: Recorded, mode: str) -> None:
    path, live, _ = recorded
    with Sidecar(cassette=str(path)) as sc:
        replayed = await benchmark_session(sc.mcp_url, mode)
        assert replayed == live  # the recorded server's tools and answers, a session-era recording both ways
        await asyncio.to_thread(sc.wait_idle, 3)
        calls = [r for r in sc.requests if r.mcp_method == "tools/call"]
        assert [r.tool for r in calls] == ["create_session", "evaluate_session", "delete_session", "add"]
        assert {r.era for r in calls} == {ERA[mode]}
        assert not any(r.forwarded or r.error_by for r in sc.requests), sc.journal.format()
        assert sc.errors == []


def test_ids_and_sessions_are_the_clients_own_and_schemas_the_recorded_servers(recorded: Recorded) -> None:
    path, live, _ = recorded
    with Sidecar(cassette=str(path)) as sc, httpx.Client(headers=ACCEPT, timeout=5) as c:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        r = c.post(
            sc.mcp_url, json={"jsonrpc": "2.0", "id": "init-x", "method": "initialize", "params": init}
        )
        assert r.json()["id"] == "init-x"
        assert r.json()["result"]["serverInfo"]["name"] == "sdk-upstream"  # the recorded server's
        assert "resources" in r.json()["result"]["capabilities"]
        sid = r.headers["Mcp-Session-Id"]
        assert sid != "session-1" and sid in sc.sessions  # the sidecar's own session
        h = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        listed = c.post(
            sc.mcp_url, headers=h, json={"jsonrpc": "2.0", "id": 41, "method": "tools/list"}
        ).json()
        add = next(t for t in listed["result"]["tools"] if t["name"] == "add")
        assert add["outputSchema"]["properties"]["result"]["type"] == "integer"  # kept whole
        call = {"name": "create_session", "arguments": {"task_id": "task-1"}}
        made = c.post(
            sc.mcp_url, headers=h, json={"jsonrpc": "2.0", "id": 777, "method": "tools/call", "params": call}
        )
        assert made.json()["id"] == 777 and json.loads(made.json()["result"]["content"][0]["text"]) == live[1]
        wrong = {"name": "add", "arguments": {"a": "two", "b": 3}}  # checked against the recorded schema
        bad = c.post(
            sc.mcp_url, headers=h, json={"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": wrong}
        )
        assert bad.json()["result"]["isError"] and "'a'" in bad.json()["result"]["content"][0]["text"]
        assert c.delete(sc.mcp_url, headers=h).status_code == 200
    assert sc.errors == []


# -- faults on top: what the client sees is what it sees in front of the live server ------------------

DELETE_FAULTS = {
    "die": Die(when="tool:delete_session"),
    "backend_gone": BackendGone(),
    "stall": Stall(after_bytes=0, when="tool:delete_session"),
    "error_payload": ErrorPayload(reason="backend timed out"),
}


#: The client's read timeout in :func:`_under`: its give-up on the stalled delete, and also the bound
#: on the healthy calls before it, which outran 1 s through the proxy at load 12 (so the delete, and
#: its fault, never came). Inside :data:`PATIENCE`, so the client is the one that gives up.
READ_TIMEOUT = 2.0
#: The sidecars' patience in the delete-fault comparison: past the client's :data:`READ_TIMEOUT`.
PATIENCE = 5


async def _under(url: str, mode: str) -> tuple[str, Any]:
    """What the client saw of ``delete_session`` under the fault (outcome, detail)."""
    async with asyncio.timeout(20):
        try:
            async with Client(url, mode=mode, read_timeout_seconds=READ_TIMEOUT) as c:
                created = json.loads(
                    (await c.call_tool("create_session", {"task_id": "task-1"})).content[0].text
                )
                sid = created["session_id"]
                await c.call_tool("evaluate_session", {"session_id": sid})
                got = await c.call_tool("delete_session", {"session_id": sid})
                text = got.content[0].text.replace(sid, "<sid>")
                return "answered", (got.is_error, text)
        except BaseExceptionGroup as group:
            leaves = []
            stack: list[BaseException] = [group]
            while stack:
                exc = stack.pop()
                if isinstance(exc, BaseExceptionGroup):
                    stack.extend(exc.exceptions)
                else:
                    leaves.append(type(exc).__name__)
            return "raised", sorted(leaves)
        except MCPError as exc:
            return "error", str(exc)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", list(DELETE_FAULTS))
async def test_faults_at_the_recorded_delete_give_what_the_live_proxied_server_gives(
    tmp_path: Path, kind: str, mode: str
) -> None:
    path = tmp_path / "sdk.jsonl"
    fault = DELETE_FAULTS[kind]
    with serve() as up:
        with Sidecar(upstream=up.url, record=str(path), era="auto") as sc:  # recorded in this client's era
            async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=5) as c:
                created = json.loads(
                    (await c.call_tool("create_session", {"task_id": "task-1"})).content[0].text
                )
                await c.call_tool("evaluate_session", {"session_id": created["session_id"]})
                await c.call_tool("delete_session", {"session_id": created["session_id"]})
        origin = up.origin
        with Sidecar(upstream=up.url, faults=[fault], patience=PATIENCE) as sc:
            live = await _under(sc.mcp_url, mode)
            await asyncio.to_thread(sc.release)
            live_fired = sc.fired
    # the live server's own session id differs from the recorded one: only the shape is compared
    with Sidecar(cassette=str(path), faults=[fault], patience=PATIENCE) as sc:
        replayed = await _under(sc.mcp_url, mode)
        await asyncio.to_thread(sc.release)
        assert sc.fired == live_fired == {kind: 1}
        assert sc.errors == []
    assert replayed == live
    if kind == "error_payload":  # a successful result, with the structuredContent the tool declares
        assert replayed == (
            "answered",
            (False, '{"error": "Error closing session <sid>: backend timed out"}'),
        )
    if kind == "backend_gone":  # named as the recorded server's address, as in front of it
        assert f"Service at {origin} is no longer alive" in replayed[1][1]


# -- notifications, resources, prompts ------------------------------------------------------------------


def _server_with_notifications() -> MCPServer:
    server = MCPServer("notifying")

    @server.tool()
    async def work(steps: int, ctx: Context) -> str:
        """Report progress and log each step."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await ctx.info(f"did step {step}")
        return f"{steps} steps"

    @server.resource("notes://today")
    def today() -> str:
        """Today's note."""
        return "buy milk"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello, {name}!"

    return server


@contextlib.contextmanager
def _serve_app(app: Any) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start within 10 s"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()


async def _notified(url: str, mode: str) -> list[Any]:
    progress: list[Any] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    async with Client(url, mode=mode, read_timeout_seconds=5, logging_callback=on_log, log_level="info") as c:
        done = await c.call_tool("work", {"steps": 2}, progress_callback=on_progress)
        note = await c.read_resource("notes://today")
        prompt = await c.get_prompt("greet", {"name": "Ada"})
    return [
        done.content[0].text,  # type: ignore[union-attr]
        progress,
        logs,
        note.contents[0].text,  # type: ignore[union-attr]
        prompt.messages[0].content.text,  # type: ignore[union-attr]
    ]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # still what servers send
@pytest.mark.parametrize("mode", MODES)
async def test_progress_and_logs_replay_before_the_answer_and_resources_and_prompts_answer(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "notifying.jsonl"
    with (
        _serve_app(_server_with_notifications().streamable_http_app()) as url,
        Sidecar(upstream=url, record=str(path)) as sc,
    ):
        live = await _notified(sc.mcp_url, mode)
    assert live[1] == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert live[2] == ["did step 1", "did step 2"]
    assert live[3:] == ["buy milk", "Hello, Ada!"]
    with Sidecar(cassette=str(path)) as sc:
        replayed = await _notified(sc.mcp_url, mode)  # the client's progress token is its own again
        await asyncio.to_thread(sc.wait_idle, 3)
        call = next(r for r in sc.requests if r.tool == "work")
        notes = list(sc.journal.server_messages)
    assert replayed == live
    # journaled as the fake journals its tools' own: one record each, sent on the call's answer stream
    assert [(n.method, n.request_id, n.tool, n.outcome, n.id) for n in notes] == [
        (method, call.id, "work", "sent", None)
        for _ in (1, 2)
        for method in ("notifications/progress", "notifications/message")
    ]
    assert [n.params.get("progress") for n in notes[::2]] == [1, 2]
    assert len({n.params["progressToken"] for n in notes[::2]}) == 1  # the replaying client's token
    assert [n.params["data"] for n in notes[1::2]] == ["did step 1", "did step 2"]


# -- a stdio upstream ---------------------------------------------------------------------------------

STDIO_SERVER = Path(__file__).resolve().parent.parent / "docs" / "examples" / "proxy_stdio_server.py"


@pytest.mark.parametrize("mode", MODES)
async def test_a_stdio_server_recorded_through_upstream_command_replays_in_both_eras(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "stdio.jsonl"
    with Sidecar(upstream_command=[sys.executable, str(STDIO_SERVER)], record=str(path)) as sc:
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=10) as c:
            live = [
                json.loads((await c.call_tool("open_ticket", {"title": "disk full"})).content[0].text),
                (await c.call_tool("count_tickets", {})).structured_content,
            ]
    cassette = read_cassette(path)
    assert cassette.upstream == f"stdio: {sys.executable} {STDIO_SERVER}"
    assert [(e.http, e.method, e.tool) for e in cassette.exchanges if e.method != "tools/list"] == [
        ("POST", "initialize", None),
        ("POST", "notifications/initialized", None),
        ("POST", "tools/call", "open_ticket"),
        ("POST", "tools/call", "count_tickets"),
        ("DELETE", None, None),
    ]
    assert {e.session for e in cassette.exchanges} == {"session-1"}
    assert cassette.exchanges[0].response_headers == {"Mcp-Session-Id": "session-1"}
    with Sidecar(cassette=str(path), faults=[BackendGone(when=Trigger("tool:open_ticket", nth=1))]) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=5) as c:
            gone = await c.call_tool("open_ticket", {"title": "disk full"})
            opened = json.loads((await c.call_tool("open_ticket", {"title": "disk full"})).content[0].text)
            counted = (await c.call_tool("count_tickets", {})).structured_content
        assert f"Service at {sc.url} is no longer alive" in gone.content[0].text  # a stdio server has no URL
        assert [opened, counted] == live == [{"id": 1, "title": "disk full"}, {"result": 1}]
        assert sc.fired == {"backend_gone": 1}


# -- matching -------------------------------------------------------------------------------------------


async def test_an_unmatched_request_is_an_error_naming_the_nearest_exchange_and_fails_the_test(
    recorded: Recorded,
) -> None:
    path = recorded[0]
    sc = Sidecar(cassette=str(path)).start()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=5) as c:
            with pytest.raises(MCPError) as exc_info:
                await c.call_tool("delete_session", {"session_id": "not-recorded"})
        took = loop.time() - started
        message = str(exc_info.value)
        assert message.startswith(f"cassette {path} has no recorded answer for tools/call delete_session ")
        assert '; nearest: line 7, tools/call delete_session {"session_id": ' in message
        assert "argument 'session_id' differs: recorded '" in message and "sent 'not-recorded'" in message
        assert took < 2.0  # answered at once: never a hang
        [error] = sc.errors  # and the test fails with it at teardown
        assert isinstance(error, CassetteError) and str(error) == message
    finally:
        sc.stop()
    with pytest.raises(SidecarError, match=r"has no recorded answer for tools/call delete_session"):
        sc.check_errors()  # what the plugin's teardown (and the context manager) raises in the test


def _matcher(path: Path, **rules: Any) -> tuple[Matcher, dict[str, Any]]:
    cassette = read_cassette(path)
    add = next(e for e in cassette.exchanges if e.tool == "add")
    return Matcher(cassette.exchanges, Rules(**rules), "cassette x"), add.params


def test_matching_rules_ignore_order_and_once(recorded: Recorded) -> None:
    path = recorded[0]
    m, add = _matcher(path)
    other = {**add, "arguments": {"a": 2, "b": 4}}
    with pytest.raises(
        CassetteError, match=r"nearest: line 8, tools/call add .*argument 'b' differs: recorded 3, sent 4"
    ):
        m.match("tools/call", other)
    m, add = _matcher(path, ignore=frozenset({"b"}))
    assert m.match("tools/call", other).tool == "add"  # b is not compared
    m, add = _matcher(path)
    assert m.match("tools/call", add).tool == "add"
    assert m.match("tools/call", add).tool == "add"  # repeats: the last match answers again
    m, add = _matcher(path, repeats=False)
    m.match("tools/call", add)
    with pytest.raises(
        CassetteError, match=r"line 8 recorded it, already played 1 time\(s\), and repeats are off"
    ):
        m.match("tools/call", add)
    m, add = _matcher(path, order=True)
    with pytest.raises(
        CassetteError, match=r"nearest: line 8 \(cassette_order=True: the next one recorded\)"
    ):
        m.match("tools/call", other)
    with pytest.raises(CassetteError, match=r"nearest: line \d+, tools/call create_session"):
        _matcher(path)[0].match("tools/call", {"name": "create_session", "arguments": {"task_id": "task-9"}})
    with pytest.raises(
        CassetteError, match=r"tools/call nope; nearest: line 5, tools/call create_session .*: tool "
    ):
        _matcher(path)[0].match("tools/call", {"name": "nope"})
    with pytest.raises(
        CassetteError, match=r"prompts/list; nearest: line 2, initialize .*: method 'initialize' recorded"
    ):
        _matcher(path)[0].match("prompts/list", {})


# -- redaction ----------------------------------------------------------------------------------------------


async def test_secrets_are_never_written_and_the_hook_redacts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "secret.jsonl"
    token = "ghp_" + "A1b2C3d4" * 4

    def hook(exchange: dict[str, Any]) -> dict[str, Any] | None:
        if exchange.get("tool") == "add":
            return None  # left out
        text = json.dumps(exchange).replace("task-1", "task-X")
        return json.loads(text)  # type: ignore[no-any-return]

    headers = {"Authorization": "Bearer s3cr3t-value-123", "Cookie": "sid=abc123", "X-Api-Key": "k-123"}
    with serve() as up, Sidecar(upstream=up.url, record=str(path), record_redact=hook) as sc:
        http = create_mcp_http_client(headers=headers)
        async with http, Client(streamable_http_client(sc.mcp_url, http_client=http), mode="legacy") as c:
            echoed = await c.call_tool("echo", {"text": f"my token is {token}"})
            await c.call_tool("create_session", {"task_id": "task-1"})
            await c.call_tool("add", {"a": 1, "b": 2})
        assert token in echoed.content[0].text  # the client got the real answer
    text = path.read_text()
    for secret in (token, "s3cr3t-value-123", "sid=abc123", "k-123", "task-1"):
        assert secret not in text
    assert '"text": "my token is [REDACTED]"' in text  # in the arguments and in the result
    assert '"tool": "add"' not in text
    assert "task-X" in text
    auth = [json.loads(line)["request_headers"] for line in text.splitlines()[1:]]
    assert {h.get("Authorization") for h in auth} == {REDACTED}
