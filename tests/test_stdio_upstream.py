"""Proxy mode with a stdio upstream (``Sidecar(upstream_command=[...])``): the mcp SDK's own ``MCPServer``
run over stdio (tests/stdio_child.py) as a child the sidecar spawns and owns, driven by the mcp 2.x
client through the sidecar over Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from test_cli import serve

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.cli import main
from pytest_mcpfaults.faults import Die, MalformedJson, Reset, Stall, ToolError, Trigger, Truncate

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

CHILD = [sys.executable, str(Path(__file__).with_name("stdio_child.py"))]
MODES = ["auto", "legacy"]
ACCEPT = {"Accept": "application/json, text/event-stream"}
VERSION = "2025-11-25"
CUT = (httpx.ReadError, httpx.RemoteProtocolError)  # what httpx raises when a server cuts the connection


def leaves(exc: BaseException) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return [name for e in exc.exceptions for name in leaves(e)]
    return [type(exc).__name__]


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts: it was not reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def settled(sc: Sidecar) -> None:
    """Wait until every request has ended (the client's connection may stay open)."""
    sc.journal.wait_for(lambda: all(r.done for r in sc.journal.requests), 3, "every request to end")


def rpc(method: str, rid: int | None = 1, **params: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if rid is not None:
        msg["id"] = rid
    return msg


INIT = rpc("initialize", protocolVersion=VERSION, capabilities={}, clientInfo={"name": "t", "version": "1"})


def initialize(c: httpx.Client, url: str) -> dict[str, str]:
    init = rpc(
        "initialize", protocolVersion=VERSION, capabilities={}, clientInfo={"name": "t", "version": "1"}
    )
    r = c.post(url, json=init, headers=ACCEPT)
    assert r.status_code == 200, r.text
    headers = {**ACCEPT, "Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": VERSION}
    assert c.post(url, json=rpc("notifications/initialized", None), headers=headers).status_code == 202
    return headers


@pytest.mark.parametrize("mode", MODES)
async def test_the_mcp2_client_lists_and_calls_a_stdio_servers_tools(mode: str) -> None:
    with Sidecar(upstream_command=CHILD) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=10) as client:
            tools = await client.list_tools()
            assert {t.name for t in tools.tools} == {"add", "echo", "calls", "pid", "exit"}
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result.content[0].text == "5"
            child = await client.call_tool("pid", {})
        assert int(child.content[0].text) == sc.upstream_pid  # the child the sidecar spawned answered
        await asyncio.to_thread(sc.wait_idle, 3)
        (call,) = [r for r in sc.requests if r.tool == "add"]
        assert call.forwarded and call.status == 200
        assert call.upstream.bytes > 0 and call.upstream.failure is None
        assert call.upstream.time is not None and call.upstream.time >= 0
        init = next(r for r in sc.requests if r.mcp_method == "initialize")
        assert init.forwarded and init.session_id is None  # the sidecar assigned the session id
        assert len(sc.ended_sessions) == 1 and not sc.sessions  # the client's DELETE ended it locally


async def test_die_at_the_second_tool_call_is_as_on_the_fake() -> None:
    with Sidecar(upstream_command=CHILD, faults=[Die(when=Trigger("tools/call", nth=2))]) as sc:
        first = None
        with pytest.raises(BaseExceptionGroup) as exc_info:  # noqa: PT012
            async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=10) as client:
                first = await client.call_tool("add", {"a": 1, "b": 1})
                await client.call_tool("echo", {"text": "never"})
        assert first is not None and first.content[0].text == "2"
        assert leaves(exc_info.value) == ["ReadError"]  # reset under the call, as on the fake
        await asyncio.to_thread(sc.wait_idle, 3)
        (died,) = [r for r in sc.requests if r.fault_kind == "die"]
        assert died.label == "POST tools/call echo"
        assert died.status is None and died.bytes_sent == 0
        assert not died.forwarded  # the child never saw it
        assert sc.state == "dead" and sc.fired == {"die": 1}
        pid = sc.upstream_pid
        assert pid is not None and alive(pid)  # the sidecar died, its upstream did not
    assert not alive(pid)


def test_the_child_never_ran_the_call_the_die_took() -> None:
    with (
        Sidecar(upstream_command=CHILD, faults=[Die(restart=True, when="tool:echo")]) as sc,
        httpx.Client(timeout=10) as c,
    ):
        headers = initialize(c, sc.mcp_url)
        with pytest.raises(CUT):
            c.post(
                sc.mcp_url, json=rpc("tools/call", 2, name="echo", arguments={"text": "x"}), headers=headers
            )
        headers = initialize(c, sc.mcp_url)  # the restarted sidecar: a new session on the same child
        r = c.post(sc.mcp_url, json=rpc("tools/call", 3, name="calls", arguments={}), headers=headers)
        assert r.status_code == 200
        assert r.json()["result"]["content"][0]["text"] == "0"  # echo never ran


@pytest.mark.parametrize("mode", MODES)
async def test_tool_error_rewrites_a_result_the_child_really_produced(mode: str) -> None:
    with Sidecar(upstream_command=CHILD, faults=[ToolError(text="disk full", when="tool:add")]) as sc:
        async with Client(sc.mcp_url, mode=mode, read_timeout_seconds=10) as client:
            result = await client.call_tool("add", {"a": 1, "b": 2})
            assert result.is_error and result.content[0].text == "disk full"
            ran = await client.call_tool("calls", {})
            assert ran.content[0].text == "1"  # the child ran add all the same
        await asyncio.to_thread(sc.wait_idle, 3)
        (call,) = [r for r in sc.requests if r.tool == "add"]
        assert call.fault_kind == "tool_error" and call.forwarded and call.upstream.bytes > 0


@pytest.mark.parametrize(
    "fault", [Truncate(after_bytes=10, when="tool:echo"), Reset(after_bytes=5, when="tool:echo")]
)
def test_body_faults_cut_the_childs_answer(fault: Truncate | Reset) -> None:
    with Sidecar(upstream_command=CHILD, faults=[fault]) as sc, httpx.Client(timeout=10) as c:
        headers = initialize(c, sc.mcp_url)
        got = b""
        call = rpc("tools/call", 2, name="echo", arguments={"text": "hello"})
        with pytest.raises(CUT), c.stream("POST", sc.mcp_url, json=call, headers=headers) as resp:  # noqa: PT012
            for chunk in resp.iter_raw():
                got += chunk
        assert got == b'{"jsonrpc":"2.0"'[: fault.after_bytes]  # the child's answer, cut
        settled(sc)
        (rec,) = [r for r in sc.requests if r.tool == "echo"]
        assert rec.forwarded and rec.bytes_sent == fault.after_bytes
        assert rec.upstream.bytes > 100  # the child answered in full


def test_stall_after_bytes_holds_the_childs_answer_as_sse() -> None:
    with Sidecar(upstream_command=CHILD, reply="sse", faults=[Stall(after_bytes=12, when="tool:echo")]) as sc:
        with httpx.Client(timeout=10) as c:
            headers = initialize(c, sc.mcp_url)  # the child's start-up is not bounded by the read below
            call = rpc("tools/call", 2, name="echo", arguments={"text": "hello"})
            short = httpx.Timeout(10.0, read=0.3)
            with c.stream("POST", sc.mcp_url, json=call, headers=headers, timeout=short) as resp:
                assert resp.status_code == 200
                assert resp.headers["Content-Type"].startswith("text/event-stream")  # reply="sse"
                chunks = resp.iter_raw()
                got = next(chunks)
                with pytest.raises(httpx.ReadTimeout):
                    next(chunks)
        assert got == b"event: messa"
        sc.wait_idle(3)
        (rec,) = [r for r in sc.requests if r.tool == "echo"]
        assert rec.fault_kind == "stall" and rec.bytes_sent == 12 and rec.hold == "client_closed"
        assert rec.upstream.bytes > 12 and rec.upstream.failure is None  # the child answered in full


def test_malformed_json_cuts_the_childs_answer() -> None:
    with (
        Sidecar(upstream_command=CHILD, faults=[MalformedJson(when="tool:echo")]) as sc,
        httpx.Client(timeout=10) as c,
    ):
        headers = initialize(c, sc.mcp_url)
        r = c.post(
            sc.mcp_url, json=rpc("tools/call", 2, name="echo", arguments={"text": "hi"}), headers=headers
        )
        assert r.status_code == 200 and r.content.startswith(b'{"jsonrpc"')
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.content)
        settled(sc)
        (rec,) = [x for x in sc.requests if x.tool == "echo"]
        assert (
            rec.fault_kind == "malformed_json" and rec.forwarded and rec.upstream.bytes > rec.bytes_sent > 0
        )


async def test_a_child_that_exits_mid_session_is_a_bad_gateway_recorded_as_the_upstreams() -> None:
    with Sidecar(upstream_command=CHILD) as sc:
        with pytest.raises(BaseExceptionGroup) as exc_info:  # noqa: PT012
            async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=10) as client:
                assert (await client.call_tool("add", {"a": 1, "b": 1})).content[0].text == "2"
                await client.call_tool("exit", {})
        (failure,) = exc_info.value.exceptions
        while isinstance(failure, BaseExceptionGroup):
            (failure,) = failure.exceptions
        assert isinstance(failure, MCPError) and "Bad Gateway" in str(failure)
        await asyncio.to_thread(sc.wait_idle, 3)
        (gone,) = [r for r in sc.requests if r.tool == "exit"]
        assert gone.status == 502 and gone.error_by == "upstream" and gone.upstream.failure == "reset"
        assert "exited (code 3)" in (gone.error or "")
        pid = sc.upstream_pid
        assert pid is not None and not alive(pid)  # exited and reaped
        with httpx.Client(timeout=5) as c:  # later requests: 502 at once, no wait for a dead child
            r = c.post(sc.mcp_url, json=INIT, headers=ACCEPT)
            assert r.status_code == 502 and "Bad Gateway" in r.json()["error"]["message"]


def test_a_child_that_stops_answering_is_a_504_within_upstream_timeout(tmp_path: Path) -> None:
    script = tmp_path / "silent.py"
    script.write_text("import sys\nfor line in sys.stdin:\n    pass\n")
    with (
        Sidecar(upstream_command=[sys.executable, str(script)], upstream_timeout=0.3) as sc,
        httpx.Client(timeout=5) as c,
    ):
        r = c.post(sc.mcp_url, json=INIT, headers=ACCEPT)
        assert r.status_code == 504 and "Gateway Timeout" in r.json()["error"]["message"]
        settled(sc)
        (rec,) = sc.requests
        assert rec.error_by == "upstream" and rec.upstream.failure == "timed_out"
        assert rec.upstream.time is not None and 0.3 <= rec.upstream.time < 2.0


def test_stop_kills_the_child_and_a_child_ignoring_sigterm_too(tmp_path: Path) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\nwhile True:\n    time.sleep(1)\n"
    )
    pids = []
    for command in (CHILD, [sys.executable, str(script)]):
        sc = Sidecar(upstream_command=command).start()
        pid = sc.upstream_pid
        assert pid is not None and alive(pid)
        sc.stop()
        assert not alive(pid)
        pids.append(pid)
    assert len(set(pids)) == 2


def test_stop_kills_what_the_child_started_too(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    pidfile = tmp_path / "grandchild.pid"
    script.write_text(
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "for line in sys.stdin:\n    pass\n"
    )
    sc = Sidecar(upstream_command=[sys.executable, str(script)]).start()
    try:
        deadline = time.monotonic() + 10
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the child never started its own child"
            time.sleep(0.02)
        grandchild = int(pidfile.read_text())
        assert alive(grandchild)
    finally:
        sc.stop()
    deadline = time.monotonic() + 5  # killed by the group SIGTERM; reaped by init, not by us
    while alive(grandchild) and _zombie(grandchild) is False and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild) or _zombie(grandchild)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"upstream_command": "python server.py"}, "upstream_command must be a list of strings"),
        ({"upstream_command": []}, "non-empty list of non-empty strings"),
        ({"upstream_command": ["python", ""]}, "non-empty list of non-empty strings"),
        # a NUL passed the check and failed start() with "ValueError: embedded null byte", naming nothing
        ({"upstream_command": ["python", "a\0b"]}, r"strings without a NUL .* got \['python', 'a\\x00b'\]"),
        (
            {"upstream_command": CHILD, "upstream": "http://127.0.0.1:9/mcp"},
            "upstream=.* and upstream_command=",
        ),
        ({"upstream_command": CHILD, "upstream_health": "/health"}, "has no health path"),
        ({"upstream_command": CHILD, "era": "stateless"}, "era='stateless' with upstream_command="),
    ],
)
def test_bad_upstream_command_arguments_are_refused_naming_them(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sidecar(**kwargs)


def test_a_command_that_cannot_run_fails_start_naming_it() -> None:
    sc = Sidecar(upstream_command=["/nonexistent/mcp-server"])
    with pytest.raises(OSError, match=r"upstream_command .*/nonexistent/mcp-server.* cannot be run"):
        sc.start()
    sc.stop()


# -- through the plugin: the marker and the factory take the same key ------------------------------

PLUGIN_TESTS = """
import os
import shlex
import sys

import pytest
from mcp.client import Client

CHILD = [sys.executable, "stdio_child.py"]


@pytest.mark.mcp_sidecar(upstream_command=CHILD, faults=["tool_error@tool:add"])
async def test_marker(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy", read_timeout_seconds=10) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert result.is_error
        assert (await client.call_tool("calls", {})).content[0].text == "1"
    assert mcp_sidecar.upstream_pid is not None


async def test_factory(mcp_sidecar_factory):
    sc = mcp_sidecar_factory(upstream_command=CHILD)
    async with Client(sc.mcp_url, mode="legacy", read_timeout_seconds=10) as client:
        assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
    with open("pids.txt", "a") as f:
        f.write(f"{sc.upstream_pid}\\n")
"""


def test_the_marker_and_the_factory_take_upstream_command(pytester: pytest.Pytester) -> None:
    (pytester.path / "stdio_child.py").write_text(Path(CHILD[1]).read_text())
    pytester.makepyfile(test_stdio_up=PLUGIN_TESTS)
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-p", "no:cacheprovider", "-o",
                                           "asyncio_mode=auto", "-p", "no:randomly", timeout=240)  # fmt: skip
    result.assert_outcomes(passed=2)
    (pid,) = (pytester.path / "pids.txt").read_text().split()
    assert not alive(int(pid))  # the factory's teardown stopped the sidecar, and the child with it


def test_a_bad_upstream_command_in_the_marker_fails_collection_naming_it(
    pytester: pytest.Pytester, run_plugin
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.mcp_sidecar(upstream_command="python server.py")
        def test_x(mcp_sidecar):
            pass
        """
    )
    result = run_plugin()
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.mcp_sidecar: Sidecar: upstream_command must be a list of strings*"]
    )
    assert result.ret != 0


# -- serve --upstream-command ----------------------------------------------------------------------


async def test_serve_upstream_command_proxies_a_stdio_server_and_kills_it_at_exit() -> None:
    with serve("--upstream-command", shlex.join(CHILD), "--fault", "tool_error(text=nope)@tool:add") as s:
        pid = int(s.info["MCPFAULTS_UPSTREAM_PID"])
        assert alive(pid)
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode="auto", read_timeout_seconds=10) as client:
            failed = await client.call_tool("add", {"a": 1, "b": 2})
            echoed = await client.call_tool("echo", {"text": "through"})
        assert failed.is_error and failed.content[0].text == "nope"
        assert echoed.content[0].text == "through"
        assert s.terminate() == 0
    assert not alive(pid)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--upstream-command", "python s.py", "--upstream", "http://127.0.0.1:9/mcp"], "not allowed with"),
        (["--upstream-command", ""], "argument --upstream-command: must name a program"),
        (["--upstream-command", "python 's.py"], "argument --upstream-command: cannot split"),
        (["--upstream-command", "python s.py", "--upstream-health", "/h"], "argument --upstream-health"),
        (["--upstream-command", "python s.py", "--era", "stateless"], "argument --era"),
    ],
)
def test_bad_upstream_command_flags_are_usage_errors_naming_the_flag(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", *args])
    assert exc.value.code == 2
    _, err = capsys.readouterr()
    assert message in err


def test_an_upstream_command_that_cannot_start_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A missing program was reported as "cannot listen on 127.0.0.1:0" (exit 1): the bind was never
    tried. ``serve`` installs its signal handlers: restored for the rest of the session."""
    import signal

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--upstream-command", "mcpfaults-no-such-program --flag"])
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "cannot listen" not in err
    assert (
        "argument --upstream-command: cannot start 'mcpfaults-no-such-program': [Errno 2] No such file or "
        "directory: 'mcpfaults-no-such-program'"
    ) in err


# -- a hostile stdio upstream -----------------------------------------------------------------------

#: A stdio MCP server in a few lines, for the hostile ones below: ``MODE`` says what it does wrong.
HOSTILE = """
import json, os, signal, sys, time
mode = sys.argv[1]
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def send(obj):
    sys.stdout.buffer.write(json.dumps(obj).encode() + b"\\n"); sys.stdout.buffer.flush()
for line in sys.stdin.buffer:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "h", "version": "1"}}})
        if mode == "noread":
            time.sleep(60)
        continue
    if mode == "deep":
        sys.stdout.buffer.write(b"[" * 200000 + b"\\n")
    if mode == "strid":  # the id it was sent, as a string: an answer to no request
        m["id"] = str(m["id"])
    send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "pong"}]}})
while mode == "stubborn":
    time.sleep(1)
"""


def hostile(tmp_path: Path, mode: str) -> list[str]:
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    return [sys.executable, str(script), mode]


def echo(rid: int, text: str = "hi") -> dict[str, Any]:
    return rpc("tools/call", rid, name="echo", arguments={"text": text})


def test_an_over_deep_json_line_is_skipped_and_the_reader_lives_on(tmp_path: Path) -> None:
    """A line nested too deep for ``json.loads`` (a RecursionError, not a ValueError) killed the reader:
    every later call waited for upstream_timeout. Now it is skipped like any line that is not JSON-RPC."""
    with (
        Sidecar(upstream_command=hostile(tmp_path, "deep"), upstream_timeout=3) as sc,
        httpx.Client(timeout=10) as c,
    ):
        headers = initialize(c, sc.mcp_url)
        for rid in (2, 3, 4):
            started = time.monotonic()
            r = c.post(sc.mcp_url, json=echo(rid), headers=headers)
            assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "pong"
            assert time.monotonic() - started < 2
        settled(sc)
        assert sc.errors == []  # the upstream's garbage, not the sidecar's fault
        assert sc._stdio is not None and sc._stdio.skipped == 3


def test_an_answer_with_an_id_no_request_has_is_named_in_the_504(tmp_path: Path) -> None:
    """A child that answers with another id (``"2"`` for ``2``) answered: the 504 says so (it said only
    that no answer came)."""
    with (
        Sidecar(upstream_command=hostile(tmp_path, "strid"), upstream_timeout=0.5) as sc,
        httpx.Client(timeout=10) as c,
    ):
        headers = initialize(c, sc.mcp_url)
        r = c.post(sc.mcp_url, json=echo(2), headers=headers)
        assert r.status_code == 504
        assert r.json()["error"]["message"].endswith(
            "no answer within upstream_timeout=0.5 s; it wrote 1 line(s) that answered no request, skipped "
            "(the last: an answer with id '2', which no request waits for)"
        )


def test_a_child_that_stops_reading_its_stdin_gets_504s_with_bounded_memory(tmp_path: Path) -> None:
    """Requests to a child that no longer reads its stdin used to pile up in the pipe's write buffer
    without bound; past ``upstream_write_buffer`` each waits for room, then gets a 504."""
    from pytest_mcpfaults.proxy.stdio_upstream import WRITE_BUFFER

    with (
        Sidecar(upstream_command=hostile(tmp_path, "noread"), upstream_timeout=0.3) as sc,
        httpx.Client(timeout=10) as c,
    ):
        headers = initialize(c, sc.mcp_url)
        for rid in range(2, 22):
            started = time.monotonic()
            r = c.post(sc.mcp_url, json=echo(rid, "z" * 400_000), headers=headers)
            assert r.status_code == 504, r.text
            assert time.monotonic() - started < 1.5  # within upstream_timeout, whichever wait bit
        assert sc._stdio is not None and sc._stdio._proc is not None
        stdin = sc._stdio._proc.stdin
        assert stdin is not None
        assert stdin.transport.get_write_buffer_size() <= WRITE_BUFFER + 500_000  # not 20 x 400 KB
        settled(sc)
        last = sc.requests[-1]
        assert (last.error_by, last.upstream.failure) == ("upstream", "timed_out")
        assert last.error is not None and "not reading its stdin" in last.error
        assert f"upstream_write_buffer of {WRITE_BUFFER} bytes" in last.error


OWNER = """
import os, sys
from pytest_mcpfaults import Sidecar
sc = Sidecar(upstream_command={command!r}).start()
print(sc.upstream_pid, flush=True)
sys.stdin.readline()
os._exit(1)
"""


def test_a_child_ignoring_eof_and_sigterm_dies_with_its_owner_however_it_dies(tmp_path: Path) -> None:
    """The owner exits without stopping the sidecar (``os._exit``, as pytest-timeout's thread method
    does): the guardian kills the upstream child (and its process group), which would run on."""
    import subprocess

    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER.format(command=hostile(tmp_path, "stubborn"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None and owner.stdin is not None
    pid = int(owner.stdout.readline())
    try:
        assert alive(pid) and not _zombie(pid)
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert owner.wait(10) == 1
        deadline = time.monotonic() + 5
        while alive(pid) and not _zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(pid) or _zombie(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, 9)
