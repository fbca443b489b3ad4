"""``python -m pytest_mcpfaults serve``: the standalone sidecar, driven in a subprocess over plain HTTP.

Every test starts the real command (``sys.executable -m pytest_mcpfaults serve ...``), reads its start-up
lines with a bounded wait, talks to it with httpx and the official mcp SDK client, and kills it in a
``finally`` so no test can leave it running.
"""

from __future__ import annotations

import io
import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client import Client

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.cli import main

START_TIMEOUT = 30.0  # a cold interpreter on a busy 2-core machine
EXIT_BOUND = 5.0  # the process exits on SIGTERM far sooner; this only bounds the wait
DOCS_EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


@dataclass
class Served:
    """A running ``serve`` subprocess and what it announced."""

    proc: subprocess.Popen[str]
    info: dict[str, str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @property
    def url(self) -> str:
        return self.info["MCPFAULTS_URL"]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.info['MCPFAULTS_CONTROL_TOKEN']}"}

    def control(self, method: str, sub: str, *, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = self.auth if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.request(method, f"{self.url}/_mcpfaults{sub}", headers=headers, timeout=10, **kw)

    def journal(self) -> dict[str, Any]:
        r = self.control("GET", "/journal")
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    def wait_journal(self, predicate: Any, what: str, timeout: float = 10.0) -> dict[str, Any]:
        """Re-read the journal until ``predicate(journal)`` holds; fail after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            j = self.journal()
            if predicate(j):
                return j
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; journal: {json.dumps(j, indent=1)}")
            time.sleep(0.02)

    def terminate(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=EXIT_BOUND)


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _read_announcement(proc: subprocess.Popen[str], lines: queue.Queue[str | None], json_mode: bool) -> Any:
    deadline = time.monotonic() + START_TIMEOUT
    info: dict[str, str] = {}
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(left, 0.01))
        except queue.Empty:
            raise AssertionError(f"serve printed no start-up info within {START_TIMEOUT} s") from None
        if line is None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"serve exited before announcing itself (rc={proc.wait(5)}): {err}")
        if json_mode:
            return json.loads(line)
        key, _, value = line.partition("=")
        info[key] = value
        if key == "MCPFAULTS_READY":
            return info


@contextmanager
def serve(*args: str, json_mode: bool = False) -> Iterator[Served]:
    cmd = [sys.executable, "-m", "pytest_mcpfaults", "serve", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()
    try:
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        info = _read_announcement(proc, lines, json_mode)
        yield Served(proc, info, lines)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=EXIT_BOUND)
        for s in (proc.stdout, proc.stderr):
            if s:
                s.close()


def labels(journal: dict[str, Any]) -> list[str]:
    """The same labels as ``RequestRecord.label``: ``'POST tools/call echo'``."""
    out = []
    for r in journal["requests"]:
        parts = [r["method"], r["mcp_method"] or r["path"]]
        if r["tool"]:
            parts.append(r["tool"])
        out.append(" ".join(parts))
    return out


# -- start-up and MCP ----------------------------------------------------------------------------


def test_announces_urls_and_token_then_serves_health() -> None:
    with serve() as s:
        assert list(s.info) == [
            "MCPFAULTS_URL",
            "MCPFAULTS_MCP_URL",
            "MCPFAULTS_HEALTH_URL",
            "MCPFAULTS_CONTROL_URL",
            "MCPFAULTS_CONTROL_TOKEN",
            "MCPFAULTS_OTLP_URL",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "MCPFAULTS_READY",
        ]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", s.url)
        assert s.info["MCPFAULTS_MCP_URL"] == s.url + "/mcp"
        assert s.info["MCPFAULTS_HEALTH_URL"] == s.url + "/health"
        assert s.info["MCPFAULTS_CONTROL_URL"] == s.url + "/_mcpfaults"
        assert len(s.info["MCPFAULTS_CONTROL_TOKEN"]) >= 32
        r = httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10)
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        assert s.terminate() == 0


def test_json_mode_and_no_health() -> None:
    with serve(
        "--json", "--no-health", "--mcp-path", "/rpc", "--fault", "hang@DELETE /rpc", json_mode=True
    ) as s:
        info: dict[str, Any] = s.info
        assert info["faults"] == ["hang@DELETE /rpc"]
        assert set(info) == {
            "url", "mcp_url", "health_url", "control_url", "control_token", "otlp_url", "otel_env", "faults",
        }  # fmt: skip
        assert info["otel_env"] == {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": info["otlp_url"],
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        }
        assert info["health_url"] is None
        assert info["mcp_url"] == info["url"] + "/rpc"
        r = httpx.get(info["url"] + "/health", timeout=10)
        assert r.status_code == 404
        auth = {"Authorization": f"Bearer {info['control_token']}"}
        j = httpx.get(info["control_url"] + "/journal", headers=auth, timeout=10).json()
        assert [(x["path"], x["status"]) for x in j["requests"]] == [("/health", 404)]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("auto", ["POST server/discover", "POST tools/list", "POST tools/call echo"]),
        (
            "legacy",
            [
                "POST initialize",
                "POST notifications/initialized",
                "GET /mcp",
                "POST tools/list",
                "POST tools/call echo",
                "DELETE /mcp",
            ],
        ),
    ],
)
async def test_serves_mcp_to_the_sdk_client(mode: str, expected: list[str]) -> None:
    with serve("--reply", "sse") as s:
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode=mode) as client:
            tools = await client.list_tools()
            result = await client.call_tool("echo", {"text": "from the cli"})
        assert {t.name for t in tools.tools} >= {"echo", "sleep", "create_session", "delete_session"}
        assert result.content[0].text == "from the cli"  # type: ignore[union-attr]
        j = s.wait_journal(lambda j: all(r["ended_at"] for r in j["requests"]), "every request answered")
        assert labels(j) == expected  # the journal reads themselves are not in it
        assert all(r["status"] in (200, 202, 405) for r in j["requests"])
        assert j["fired"] == {}
        assert j["patience_violations"] == []
        assert j["errors"] == []


async def test_benchmark_only_tool_set_in_session_era() -> None:
    with serve("--era", "session", "--tool-sets", "benchmark") as s:
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode="auto") as client:
            tools = await client.list_tools()
        assert {t.name for t in tools.tools} == {
            "list_tasks",
            "create_session",
            "evaluate_session",
            "delete_session",
        }
        j = s.journal()
        assert labels(j)[0] == "POST server/discover"
        assert j["requests"][0]["status"] == 400
        assert "POST initialize" in labels(j)


# -- faults --------------------------------------------------------------------------------------


def test_command_line_faults_apply_in_order() -> None:
    with serve("--fault", "status(code=502)@health[times=2]", "--fault", "hang@DELETE /mcp") as s:
        plan = ["status(code=502)@health[times=2]", "hang@DELETE /mcp"]
        assert s.control("GET", "/faults").json() == {"faults": plan}
        codes = [httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10).status_code for _ in range(3)]
        assert codes == [502, 502, 200]
        j = s.journal()
        assert [r["fault_kind"] for r in j["requests"]] == ["status", "status", None]
        assert j["fired"] == {"status": 2}


async def test_a_failed_delete_from_the_command_line() -> None:
    spec = 'error_payload(reason="backend timed out")@tool:delete_session[times=1]'
    with serve("--fault", spec) as s:
        assert s.control("GET", "/faults").json() == {
            "faults": ["error_payload@tool:delete_session[times=1]"]
        }
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode="auto") as client:
            created = await client.call_tool("create_session", {"task_id": "task-1"})
            sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
            failed = await client.call_tool("delete_session", {"session_id": sid})
            retried = await client.call_tool("delete_session", {"session_id": sid})
        assert not failed.is_error
        assert json.loads(failed.content[0].text) == {  # type: ignore[union-attr]
            "error": f"Error closing session {sid}: backend timed out"
        }
        assert json.loads(retried.content[0].text) == {"status": "success"}  # type: ignore[union-attr]
        j = s.journal()
        deletes = [r for r in j["requests"] if r["tool"] == "delete_session"]
        assert [r["fault_kind"] for r in deletes] == ["error_payload", None]
        assert j["fired"] == {"error_payload": 1}


async def test_serve_with_auth_issues_tokens_and_its_control_api_keeps_its_own() -> None:
    """``--auth oauth``: the mcp 2.x client with the SDK's client_credentials provider gets a token from
    serve's own authorization server, and a new one after the 401 mid-session; the control API is not
    behind it (its own bearer token), and its journal carries the auth fields."""
    import httpx2
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.streamable_http import streamable_http_client
    from memory_tokens import MemoryTokens as Tokens

    with serve("--era", "session", "--auth", "oauth", "--fault", "unauthorized@tool:echo[times=1]") as s:
        url = s.info["MCPFAULTS_MCP_URL"]
        provider = ClientCredentialsOAuthProvider(url, Tokens(), "cli-harness", "secret", issuer=s.url)
        async with (
            httpx2.AsyncClient(auth=provider, timeout=10) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            result = await client.call_tool("echo", {"text": "behind auth"})
        assert result.content[0].text == "behind auth"  # type: ignore[union-attr]
        assert httpx.post(url, json={}, timeout=10).status_code == 401  # no token: refused
        j = s.wait_journal(lambda j: all(r["ended_at"] for r in j["requests"]), "every request answered")
        echo = [
            (r["status"], r["auth"]["token"], r["auth"]["error"])
            for r in j["requests"]
            if r["tool"] == "echo"
        ]
        assert echo == [(401, "t1", "invalid_token"), (200, "t2", None)]
        assert [r["auth"]["grant"] for r in j["requests"] if r["auth"] and r["auth"]["grant"]] == [
            "client_credentials"
        ] * 2
        assert j["fired"] == {"unauthorized": 1}


def test_control_injects_a_fault_that_then_affects_traffic() -> None:
    with serve() as s:
        health = s.info["MCPFAULTS_HEALTH_URL"]
        r = s.control("POST", "/faults", json={"faults": ["status(code=503)@health[times=2]"]})
        assert r.status_code == 200
        assert r.json() == {"added": ["status@health[times=2]"], "faults": ["status@health[times=2]"]}
        assert [httpx.get(health, timeout=10).status_code for _ in range(3)] == [503, 503, 200]
        j = s.journal()
        assert [r["status"] for r in j["requests"]] == [503, 503, 200]
        assert j["fired"] == {"status": 2}
        assert j["faults"] == ["status@health[times=2]"]
        assert s.control("DELETE", "/faults").json() == {"state": "running"}
        assert s.control("GET", "/faults").json() == {"faults": []}


def test_a_missing_or_wrong_token_gets_401_and_changes_nothing() -> None:
    with serve("--fault", "absent@health") as s:
        base = s.url + "/_mcpfaults"
        for auth in (None, "Bearer not-the-token", "Basic dXNlcjpwYXNz", "Bearer", "bearer " + "x" * 43):
            headers = {} if auth is None else {"Authorization": auth}
            attempts = [
                httpx.post(base + "/faults", json={"faults": ["status@health"]}, headers=headers, timeout=10),
                httpx.delete(base + "/faults", headers=headers, timeout=10),
                httpx.post(base + "/freeze", headers=headers, timeout=10),
                httpx.get(base + "/journal", headers=headers, timeout=10),
            ]
            for r in attempts:
                assert r.status_code == 401, (auth, r.text)
                assert "control token" in r.json()["error"]
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert s.control("GET", "/faults").json() == {"faults": ["absent"]}  # not cleared, not added
        j = s.journal()
        assert j["state"] == "running"  # not frozen
        assert j["requests"] == []  # control requests are not traffic
        assert httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10).status_code == 404  # plan still applies


BAD_BODIES = [
    ({"faults": ["status@health", "nope@health"]}, "fault spec 'nope@health': unknown kind 'nope'"),
    ({"faults": ["status(code=200)"]}, "Status: code must be an HTTP error status in 400..599, got 200"),
    ({"faults": ["hang@nowhere"]}, "Trigger: target 'nowhere' is unknown"),
    ({"faults": "hang"}, 'body must be {"faults": ["<fault spec>", ...]}, got'),
    ({"faults": ["hang@health"], "clear": True}, "unknown key(s) 'clear'"),  # was added, the rest ignored
    ({"fault": ["hang@health"]}, "unknown key(s) 'fault'"),
    (None, 'body must be {"faults"'),
]


def test_a_bad_fault_spec_gets_400_with_the_parse_error_and_adds_nothing() -> None:
    with serve() as s:
        for body, message in BAD_BODIES:
            r = s.control("POST", "/faults", json=body)
            assert r.status_code == 400, body
            assert message in r.json()["error"]
        assert s.control("GET", "/faults").json() == {"faults": []}  # all or nothing


def test_control_404_and_405_name_the_routes() -> None:
    with serve() as s:
        r = s.control("GET", "/nope")
        assert r.status_code == 404
        assert "/_mcpfaults/journal" in r.json()["error"]
        r = s.control("PUT", "/faults")
        assert r.status_code == 405
        assert "DELETE, GET, POST" in r.json()["error"]
        r = s.control("POST", "/faults", content=b"{not json")
        assert r.status_code == 400
        assert "not JSON" in r.json()["error"]


def test_hang_at_health_is_released_through_control() -> None:
    with serve("--fault", "hang@health", "--patience", "none") as s:
        got: list[int] = []
        t = threading.Thread(
            target=lambda: got.append(httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=20).status_code)
        )
        t.start()
        try:
            s.wait_journal(
                lambda j: any(r["held"] and r["held"]["outcome"] is None for r in j["requests"]),
                "a held probe",
            )
            assert got == []
            assert s.control("POST", "/release").status_code == 200
        finally:
            t.join(25)
        assert got == [200]
        j = s.journal()
        assert [(r["path"], r["held"]["outcome"], r["status"]) for r in j["requests"]] == [
            ("/health", "released", 200)
        ]


def test_patience_violation_is_reported_in_the_journal() -> None:
    with serve("--fault", "hang@health", "--patience", "0.2") as s:
        with pytest.raises(httpx.TransportError):
            httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=20)
        j = s.wait_journal(lambda j: j["patience_violations"], "a patience violation")
        (v,) = j["patience_violations"]
        assert v["fault"] == "hang@health"
        assert v["budget"] == 0.2
        assert v["expected"] is False
        assert v["request"]["held"]["outcome"] == "patience"
        assert "on a hung `GET /health`, never answered (no status line was sent)" in v["text"]


def test_freeze_holds_traffic_but_not_control_and_revive_answers() -> None:
    with serve("--patience", "none") as s:
        assert s.control("POST", "/freeze").json() == {"state": "frozen"}
        got: list[int] = []
        t = threading.Thread(
            target=lambda: got.append(httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=20).status_code)
        )
        t.start()
        try:
            j = s.wait_journal(lambda j: any(r["held"] for r in j["requests"]), "the frozen probe")
            assert j["state"] == "frozen"
            assert got == []
            assert s.control("POST", "/revive").json() == {"state": "running"}
        finally:
            t.join(25)
        assert got == [200]


def test_a_fault_on_every_path_does_not_touch_control() -> None:
    with serve("--fault", "status(code=500)@*") as s:
        assert httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=10).status_code == 500
        j = s.journal()
        assert j["fired"] == {"status": 1}
        assert len(j["requests"]) == 1


# -- signals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_exits_0_on_signal_releasing_held_requests(sig: int) -> None:
    with serve("--fault", "hang@health", "--patience", "none") as s:
        errors: list[BaseException] = []

        def probe() -> None:
            try:
                httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=20)
            except httpx.TransportError as exc:
                errors.append(exc)

        t = threading.Thread(target=probe)
        t.start()
        try:
            s.wait_journal(lambda j: any(r["held"] for r in j["requests"]), "a held probe")
            assert s.terminate(sig) == 0
        finally:
            t.join(25)
        assert len(errors) == 1  # the held probe's connection was closed, not left hanging
        assert s.proc.stderr is not None
        assert "Traceback" not in s.proc.stderr.read()
        with pytest.raises(httpx.ConnectError):
            httpx.get(s.url + "/health", timeout=5)


# -- usage errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--era", "bogus"], "argument --era: invalid choice: 'bogus'"),
        (["--reply", "xml"], "argument --reply: invalid choice: 'xml'"),
        (
            ["--port", "70000"],
            "argument --port: must be an integer in 0..65535 (0: any free port), got '70000'",
        ),
        (["--port", "http"], "argument --port: must be an integer in 0..65535"),
        (["--fault", "nope@health"], "argument --fault: fault spec 'nope@health': unknown kind 'nope'"),
        (["--fault", "error_payload@health"], "argument --fault: ErrorPayload: answers tools/call only"),
        (["--fault", "error_payload(reason=42)"], "argument --fault: ErrorPayload: reason must be a string"),
        (["--fault", "delay(seconds=inf)"], "argument --fault: Delay: seconds must be a finite non-negative"),
        (["--fault", "drip(interval=nan)"], "argument --fault: Drip: interval must be a finite non-negative"),
        (
            ["--fault", "delay(seconds=-1)"],
            "argument --fault: Delay: seconds must be a finite non-negative number",
        ),
        (["--host", "10.1.2.3"], "argument --host: '10.1.2.3' is not a loopback address"),
        (["--host", "0.0.0.0"], "argument --host: '0.0.0.0' is not a loopback address"),
        (["--patience", "0"], "argument --patience: must be a positive number of seconds or 'none', got '0'"),
        (
            ["--tool-timeout", "inf"],
            "argument --tool-timeout: must be a positive number of seconds or 'none'",
        ),
        (["--idle-timeout", "-1"], "argument --idle-timeout: must be a positive number of seconds or 'none'"),
        (["--tool-sets", "basic,extra"], "argument --tool-sets: unknown tool set 'extra'"),
        (["--mcp-path", "mcp"], "argument --mcp-path: must be a path starting with '/', got 'mcp'"),
        (
            ["--health-path", "/h", "--no-health"],
            "argument --no-health: not allowed with argument --health-path",
        ),
        (["--health-path", "/mcp"], "argument --health-path: must differ from --mcp-path"),
        (["--mcp-path", "/_mcpfaults/mcp"], "argument --mcp-path: '/_mcpfaults/mcp' is reserved"),
        (
            ["--transport", "sse", "--get-stream"],
            "argument --get-stream: --get-stream shapes Streamable HTTP",
        ),
        # checks the Sidecar makes across flags: a usage error too, not a traceback with exit 1
        (["--record", "x.jsonl"], "argument --record: --record='x.jsonl' records the answers of a real"),
        (["--record-mode", "new_episodes"], "argument --record-mode: --record-mode='new_episodes' is how"),
        # each flag as it is taken: an on/off flag bare, a flag with a value with one (its metavar if the
        # message gives none, or a Python list): `--cassette-order=`, `--upstream-command=['python', ...]`
        (["--cassette-once"], "argument --cassette-once: --cassette-once is a matching rule of replay"),
        (["--cassette-order"], "--cassette-order is a matching rule of replay; give --cassette=PATH too"),
        (
            ["--cassette-ignore", "ts"],
            "argument --cassette-ignore: --cassette-ignore=NAME is a matching rule",
        ),
        (
            ["--record", "x.jsonl"],
            "(--upstream-command='CMD ARGS'), or replay a cassette with --cassette=PATH",
        ),
        (
            ["--cassette", "/nonexistent/t.jsonl"],
            "argument --cassette: cassette /nonexistent/t.jsonl: no such",
        ),
        (["--fault", "unauthorized"], "argument --fault: fault 'unauthorized' needs a sidecar with --auth="),
        (["--fault", "ignore_eof"], "argument --fault: fault 'ignore_eof' is stdio-only"),
    ],
)
def test_bad_arguments_are_usage_errors_naming_the_argument(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", *args])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: python -m pytest_mcpfaults serve")
    assert message in err


def test_the_announcement_loads_in_bash_as_it_says_whatever_the_paths_hold(tmp_path: Path) -> None:
    """docs/cli.md: `. <(grep '^MCPFAULTS_' out.txt)` loads the values. A path (or an --upstream URL)
    may hold characters the shell reads: they were written bare, so sourcing ran `$(...)` and cut the
    value at `;`."""
    from pytest_mcpfaults.cli import _announce

    mark = tmp_path / "ran"
    path = f"/m;x$(touch$IFS{mark})'y&"
    with Sidecar(mcp_path=path, health_path=None) as sc:
        out = io.StringIO()
        _announce(sc, "t" * 43, False, out)
        script = 'set -e; . /dev/stdin; printf \'%s|%s\' "$MCPFAULTS_MCP_URL" "$MCPFAULTS_HEALTH_URL"'
        loaded = subprocess.run(
            ["bash", "-c", script], input=out.getvalue(), capture_output=True, text=True, timeout=30
        )
        assert (loaded.stdout, mark.exists()) == (sc.mcp_url + "|", False), loaded.stderr


def test_usage_error_from_the_real_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_mcpfaults", "serve", "--fault", "hang@nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "argument --fault: Trigger: target 'nowhere' is unknown" in proc.stderr


def test_a_taken_port_fails_with_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_mcpfaults", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr


# -- the docs' examples --------------------------------------------------------------------------


def test_docs_curl_example_runs() -> None:
    missing = [tool for tool in ("curl", "jq") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    proc = subprocess.run(
        ["bash", str(DOCS_EXAMPLES / "cli_curl.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "curl example: ok" in proc.stdout


def test_docs_health_polling_recipe_runs_under_node() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    proc = subprocess.run(
        [node, str(DOCS_EXAMPLES / "cli_health_poll.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "health polling recipe: ok" in proc.stdout


def test_docs_fault_examples_parse_and_the_kinds_table_is_the_generated_one() -> None:
    from pytest_mcpfaults.faults import KIND_NAME, fault_kinds, parse_fault

    text = (DOCS_EXAMPLES.parent / "cli.md").read_text()
    examples = text.split("\nExamples:\n", 1)[1].split("\n\n[Faults]", 1)[0]
    specs = re.findall(r"^- `([^`]+)`:", examples, flags=re.M)
    assert len(specs) >= 7
    for spec in specs:
        assert str(parse_fault(spec)) == str(parse_fault(str(parse_fault(spec))))
    assert "](faults.md#the-kinds-by-name)" in text  # the kinds table is made from the registry there
    rows = set(re.findall(rf"^\| `({KIND_NAME})` \|", text, flags=re.M))
    assert not rows & set(fault_kinds())  # and not copied here by hand


def test_idle_timeout_closes_a_connection_that_sends_nothing() -> None:
    """``--idle-timeout`` reaches the sidecar: a client that connects and sends nothing is cut off,
    and the journal says the connection timed out (it was the sidecar that closed it)."""
    with serve("--idle-timeout", "0.3") as s:
        host, port = s.url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            assert sock.recv(1) == b""  # closed by the sidecar, long before the 10 s socket timeout
        j = s.wait_journal(lambda j: any(c["timed_out"] for c in j["connections"]), "a timed-out connection")
        [conn] = [c for c in j["connections"] if c["timed_out"]]
        assert conn["closed_by"] == "sidecar" and conn["requests"] == 0


def test_timeouts_accept_none_and_default_to_the_sidecars() -> None:
    from pytest_mcpfaults.cli import build_parser

    parsed = build_parser().parse_args(["serve", "--tool-timeout", "none", "--idle-timeout", "none"])
    assert (parsed.tool_timeout, parsed.idle_timeout) == (None, None)
    assert build_parser().parse_args(["serve"]).tool_timeout == 10.0


def test_the_stdio_subcommands_patience_help_says_its_default_as_its_flag_is_written() -> None:
    """The stdio subcommand's flags are its options' (one source), but its ``--patience`` default is
    ``none``, written as the flag takes it, not Python's ``None``; and past it the stdio server exits
    (the child is killed), which its help says."""
    from pytest_mcpfaults.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = sub.choices["stdio"].format_help()  # type: ignore[attr-defined]
    options = text.split("options:", 1)[1]
    patience = " ".join(options.split("--patience SECONDS|none", 1)[1].split("--tool-timeout")[0].split())
    assert re.search(r"\bdefault:? none\b", patience) and "None" not in patience, patience
    assert "the server exits" in patience, patience
    assert build_parser().parse_args(["stdio"]).patience is None
