"""Cassettes against hostile input: secrets never reach the file (default-deny redaction), a cassette too
deep is refused naming its line, matching a large cassette is indexed with the documented semantics, and a
recorded answer that never ends is bounded, the cassette saying what was cut."""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_mcpfaults import Sidecar, Tool
from pytest_mcpfaults.core.core import SINGLE_HEADERS
from pytest_mcpfaults.proxy.cassette import REDACTED, CassetteError, Exchange, read_cassette, recorder
from pytest_mcpfaults.proxy.cassette.fileformat import MAX_DEPTH
from pytest_mcpfaults.proxy.cassette.matching import MISS_SCAN, Matcher, Rules, differences
from pytest_mcpfaults.proxy.cassette.recorder import EVENTS_MAX_BYTES
from pytest_mcpfaults.proxy.cassette.redact import KEPT_HEADERS, redact_command, redact_text, redact_value
from pytest_mcpfaults.proxy.cassette.replay import MAX_TOOL_DEPTH

HEADER = '{"cassette": "pytest-mcpfaults", "format": 1}\n'
ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}

# -- redaction ------------------------------------------------------------------------------------------

#: Every secret of issue 34's d01 and d02, each a distinct string that must never reach the file.
ARG_SECRETS: dict[str, Any] = {
    "a": "bearer S3CRETlowerbearer0001",
    "b": "Token S3CRETtokenscheme0002",
    "password": ["S3CRETpwlist0003"],
    "secret": {"v": "S3CRETpwdict0004"},
    "token": 90210777,
    "auth": "S3CRETkeyauth0005",
    "pwd": "S3CRETkeypwd0006",
    "passphrase": "S3CRETpassphr0007",
    "aws": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYS3CRETAWS8",
    "url": "https://admin:S3CRETurlpw0009@db.example/x",
    "url2": "https://x.example/?access_token=S3CRETurlq0010",
    "nested": [{"deeper": {"apiKey": "S3CRETapikey0016", "session_key": 4242424242}}],
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTM0NSRVRqd3QwMDE3In0.S3CRETjwtsig0017",
    "keys": "AKIAS3CRETAWSID00018 sk-S3CRETopenai000000019 ghp_S3CRETgithub00000000020 xoxb-S3CRETslack0021",
}
RESULT_SECRETS = {
    "note": "bearer S3CRETresult0011",
    "db": "postgres://svc:S3CRETdbpw0022@db.example/app",
    "private": {"auth": "S3CRETkeyauth0023"},
    "text": "config: password=S3CRETinline0024 api_key: S3CRETinline0025",
}
HEADER_SECRETS = {
    "Mcp-Auth-Token": "S3CREThdrmcpauth0012",
    "X-Mcp-Api-Key": "S3CREThdrmcpkey0013",
    "X-Session-Key": "S3CREThdrsessionkey0014",
    "Authorization": "bearer S3CREThdrauth0015",
    "X-Whatever": "S3CREThdrmadeup0026",
}
COMMAND_SECRETS = [
    "--api-key",
    "sk-S3CRETstdioarg0000003",
    "--password=S3CRETstdio04",
    "--token",
    "S3CRETtok05",
]


def _planted(value: Any) -> Iterator[str]:
    """The secret strings planted in ``value`` (the part after a scheme, a key's value, a number)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _planted(v)
    elif isinstance(value, list):
        for v in value:
            yield from _planted(v)
    elif isinstance(value, int):
        yield str(value)
    else:
        yield from (
            w.split("@")[0].split(":")[-1].split("=")[-1] for w in str(value).split() if "S3CRET" in w
        )


def test_every_planted_secret_stays_off_the_cassette_and_the_protocol_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    def leak(**args: Any) -> str:
        return json.dumps(RESULT_SECRETS)

    schema = {
        "type": "object",
        "properties": {"password": {"description": "any"}, "token": {"description": "any"}},
        "additionalProperties": True,
    }
    with Sidecar(tools=[Tool("leak", leak, schema)]) as upstream:  # noqa: SIM117 (the upstream first)
        with Sidecar(upstream=upstream.mcp_url, record=str(path)) as rec:
            with httpx.Client(headers={**ACCEPT, **HEADER_SECRETS}, timeout=10) as c:
                init = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                }
                r = c.post(
                    rec.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
                )
                sid = r.headers["Mcp-Session-Id"]
                h = {"Mcp-Session-Id": sid}
                c.post(rec.mcp_url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                c.post(rec.mcp_url, headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                call = {"name": "leak", "arguments": ARG_SECRETS}
                r = c.post(
                    rec.mcp_url,
                    headers=h,
                    json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
                )
                assert "S3CRETinline0024" in r.text  # the client got the real answer
    secrets = [*_planted(ARG_SECRETS), *_planted(RESULT_SECRETS), *HEADER_SECRETS.values()]
    assert len(secrets) >= 25
    text = path.read_text()
    assert [s for s in secrets if s.split()[-1] in text] == []
    exchanges = [json.loads(line) for line in text.splitlines()[1:]]
    call_ex = next(e for e in exchanges if e.get("tool") == "leak")
    sent = call_ex["request_headers"]
    assert {sent[name] for name in HEADER_SECRETS} == {REDACTED}  # names kept, values redacted
    assert sent["MCP-Protocol-Version"] == "2025-11-25" and sent["Mcp-Session-Id"] == "session-1"
    assert call_ex["response_headers"]["Content-Type"].startswith(("application/json", "text/event-stream"))
    assert (
        call_ex["params"]["arguments"]["password"] == REDACTED
        and call_ex["params"]["arguments"]["token"] == REDACTED
    )
    listed = next(e for e in exchanges if e["method"] == "tools/list")["response"]["result"]["tools"]
    assert (
        next(t for t in listed if t["name"] == "leak")["inputSchema"] == schema
    )  # a schema's property names are names, not secrets
    # the replay still answers the redacted call: a recorded [REDACTED] matches any value
    with Sidecar(cassette=str(path)) as replay, httpx.Client(headers=ACCEPT, timeout=10) as c:
        r = c.post(replay.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        h = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"]}
        r = c.post(
            replay.mcp_url,
            headers=h,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
        )
        assert r.status_code == 200 and "[REDACTED]" in r.text and "error" not in r.text


def test_the_upstream_command_line_is_redacted_in_the_header(tmp_path: Path) -> None:
    path = tmp_path / "stdio.jsonl"
    command = [sys.executable, "-m", "pytest_mcpfaults", "stdio", *COMMAND_SECRETS]
    with Sidecar(upstream_command=command, record=str(path)) as rec:
        httpx.post(
            rec.mcp_url, headers=ACCEPT, timeout=10,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}},
        )  # fmt: skip
    header = json.loads(path.read_text().splitlines()[0])
    assert header["upstream"] == (
        f"stdio: {sys.executable} -m pytest_mcpfaults stdio --api-key {REDACTED} --password={REDACTED} "
        f"--token {REDACTED}"
    )


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Authorization: BEARER abc.def-123456", "Authorization: [REDACTED]"),
        ("basic dXNlcjpwYXNzMTIz", "[REDACTED]"),
        (
            "see https://u:p4ss@host/x?a=1&token=t0k&sig=s1g",
            "see https://[REDACTED]@host/x?a=1&token=[REDACTED]&sig=[REDACTED]",
        ),
        ('{"client_secret": "abc", "n": 1}', '{"client_secret": "[REDACTED]", "n": 1}'),
        ("API_KEY=abc123 DEBUG=1", "API_KEY=[REDACTED] DEBUG=1"),
        ("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----", "[REDACTED]"),
        # and what is not a secret stays
        ("the token expired; basic usage", "the token expired; basic usage"),
        ("author: bob, maxTokens=5", "author: bob, maxTokens=5"),
        (
            "commit 3b18e512dba7e2f1c7d5a3b9c0e4f6a8b2c1d0e9",
            "commit 3b18e512dba7e2f1c7d5a3b9c0e4f6a8b2c1d0e9",
        ),
        ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
    ],
)
def test_secrets_are_redacted_by_shape_and_the_rest_is_kept(text: str, redacted: str) -> None:
    assert redact_text(text) == redacted


def test_keys_are_redacted_whatever_their_value_and_the_protocols_own_are_kept() -> None:
    value = {
        "PassWord": 1.5, "X-Api-Key": ["a"], "accessKey": {"id": "x"}, "private_key": "k", "oauth": "o",
        "requires_password": False, "description": None, "author": "bob", "max_tokens": 10,
        "_meta": {"progressToken": "p-1"}, "inputSchema": {"properties": {"secret": {"type": "string"}}},
    }  # fmt: skip
    out = redact_value(value)
    assert {k for k, v in out.items() if v == REDACTED} == {
        "PassWord",
        "X-Api-Key",
        "accessKey",
        "private_key",
        "oauth",
    }
    assert out["_meta"] == {"progressToken": "p-1"} and out["inputSchema"] == value["inputSchema"]
    assert redact_command(["srv", "DB_PASSWORD=x", "-v", "name=y"]) == f"srv DB_PASSWORD={REDACTED} -v name=y"


def test_the_kept_headers_are_the_protocols() -> None:
    assert {h.lower() for h in SINGLE_HEADERS} - {"host"} <= KEPT_HEADERS
    assert not any("auth" in h or "token" in h or "key" in h or "cookie" in h for h in KEPT_HEADERS)


# -- bad cassettes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_a_line_nested_too_deep_is_refused_naming_the_line(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.jsonl"
    inner = depth - 1  # the exchange's object, then the arrays
    line = '{"http": "POST", "method": "ping", "status": 200, "x": ' + "[" * inner + "]" * inner + "}"
    path.write_text(HEADER + line + "\n")
    with pytest.raises(
        CassetteError, match=rf"^cassette {path}, line 2: nests deeper than {MAX_DEPTH} levels"
    ):
        Sidecar(cassette=str(path))


def _deep_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range((levels - 1) // 2):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _listing(path: Path, schema: dict[str, Any]) -> None:
    tools = [{"name": "flat", "inputSchema": {"type": "object"}}, {"name": "deep", "inputSchema": schema}]
    line = {
        "http": "POST", "method": "tools/list", "status": 200, "id": 1, "params": {},
        "response": {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}},
    }  # fmt: skip
    path.write_text(HEADER + json.dumps(line) + "\n")


def test_a_recorded_tool_nested_too_deep_is_refused_naming_it_and_its_line(tmp_path: Path) -> None:
    path = tmp_path / "tools.jsonl"
    _listing(path, _deep_schema(MAX_TOOL_DEPTH + 10))  # within MAX_DEPTH: the line reads, the tool is refused
    with pytest.raises(
        CassetteError,
        match=rf"line 2: recorded tool 'deep' cannot be served: its tools/list entry nests deeper than "
        rf"{MAX_TOOL_DEPTH}",
    ):
        Sidecar(cassette=str(path))
    _listing(path, _deep_schema(MAX_DEPTH))  # past the line's bound: the tool is named too
    with pytest.raises(
        CassetteError, match=rf"line 2: nests deeper than {MAX_DEPTH} levels .*in recorded tool 'deep'"
    ):
        Sidecar(cassette=str(path))
    _listing(path, _deep_schema(MAX_TOOL_DEPTH - 2))  # at the bound: served
    with Sidecar(cassette=str(path)) as sc:
        r = httpx.post(sc.mcp_url, headers={**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}, timeout=10,
                       json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})  # fmt: skip
        assert r.status_code == 200 and '"deep"' in r.text
    assert sc.errors == []


# -- matching: the index keeps the documented semantics ---------------------------------------------


def _reference(
    exchanges: Sequence[Exchange],
    rules: Rules,
    played: dict[int, int],
    method: str,
    params: Mapping[str, Any],
) -> int | None:
    """The matching rules as documented, by scanning every exchange (the matcher before its index)."""
    tool = params.get("name") if method == "tools/call" else None
    same = [i for i, e in enumerate(exchanges) if e.method == method and e.tool == tool]
    candidates = same
    if rules.order:
        fresh = [i for i in same if i not in played]
        candidates = fresh[:1] or ([same[-1]] if same and rules.repeats else [])
    matching = [i for i in candidates if not differences(exchanges[i], method, params, rules)]
    chosen = next((i for i in matching if i not in played), None)
    if chosen is None and matching and rules.repeats:
        chosen = matching[-1]
    return chosen


def _exchange(n: int, args: dict[str, Any], tool: str = "t") -> Exchange:
    return Exchange(
        http="POST", method="tools/call", status=200, tool=tool, id=n,
        params={"name": tool, "arguments": args}, response={"jsonrpc": "2.0", "id": n, "result": {"n": n}},
    )  # fmt: skip


@pytest.mark.parametrize(
    "rules",
    [Rules(frozenset(), order, repeats) for order, repeats in itertools.product([False, True], repeat=2)]
    + [Rules(frozenset({"ts"}), False, True), Rules(frozenset({"ts"}), True, False)],
    ids=str,
)
def test_the_indexed_matcher_chooses_as_the_documented_rules_do(rules: Rules) -> None:
    recorded = [
        {"a": 1}, {"a": 1}, {"a": 1.0}, {"a": True}, {"a": REDACTED}, {"a": 2, "ts": 5},
        {"a": [1, {"b": REDACTED}]}, {"a": 1}, {"a": -0.0}, {"a": 0.0}, {"a": 2, "ts": 6},
        {"a": [1, {"b": 3}]}, {}, {"a": REDACTED, "c": 1}, {"a": f"x-{REDACTED}-y"}, {"a": "x-1-y"},
    ]  # fmt: skip
    exchanges = [_exchange(i, args) for i, args in enumerate(recorded)] + [_exchange(99, {"a": 1}, tool="u")]
    asked = [
        {"a": 1}, {"a": 1.0}, {"a": True}, {"a": "x"}, {"a": "x-1-y"}, {"a": "x-2-y"}, {"a": "x--y"},
        {"a": 2, "ts": 7}, {"a": [1, {"b": 9}]}, {"a": 0.0},
        {"a": -0.0}, {}, {"a": 5, "c": 1}, {"a": 1, "c": 2}, {"b": 1},
    ] * 3  # fmt: skip
    matcher = Matcher(exchanges, rules, "cassette x")
    played: dict[int, int] = {}
    for args in asked:
        params = {"name": "t", "arguments": args}
        expected = _reference(matcher.exchanges, rules, played, "tools/call", params)
        try:
            got: int | None = matcher.exchanges.index(matcher.match("tools/call", params))
        except CassetteError:
            got = None
        assert got == expected, (args, rules)
        if expected is not None:
            played[expected] = played.get(expected, 0) + 1
    assert matcher.played == played


# -- recording an answer that never ends --------------------------------------------------------------


class _Chatty(BaseHTTPRequestHandler):
    """An upstream answering every request with an SSE stream: ``notes`` notifications, then the answer."""

    notes = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in body:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x" * 4000},
        }
        event = f"event: message\ndata: {json.dumps(note)}\n\n".encode()
        for _ in range(self.notes):
            self.wfile.write(event)
        answer = {
            "jsonrpc": "2.0",
            "id": body["id"],
            "result": {"content": [{"type": "text", "text": "done"}]},
        }
        self.wfile.write(f"event: message\ndata: {json.dumps(answer)}\n\n".encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_a_long_recorded_stream_keeps_its_answer_and_says_what_was_cut(tmp_path: Path) -> None:
    path = tmp_path / "chatty.jsonl"
    notes = EVENTS_MAX_BYTES // 4000 + 300  # past the bound
    handler = type("Chatty", (_Chatty,), {"notes": notes})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        with Sidecar(upstream=url, record=str(path)) as rec:
            call = {"name": "chat", "arguments": {}}
            r = httpx.post(rec.mcp_url, headers={**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}, timeout=30,
                           json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                 "params": call})  # fmt: skip
            assert r.text.count("notifications/message") == notes and '"done"' in r.text  # the client got all
    finally:
        server.shutdown()
        server.server_close()
    [exchange] = read_cassette(path).exchanges
    kept = [e for e in exchange.events if e["data"].get("method") == "notifications/message"]
    assert exchange.cut is not None and exchange.cut["events"] == notes - len(kept) > 0
    assert sum(len(json.dumps(e["data"])) for e in kept) <= EVENTS_MAX_BYTES * 1.01
    assert exchange.cut["bytes"] >= exchange.cut["events"] * 4000
    assert exchange.response is not None and exchange.response["result"]["content"][0]["text"] == "done"
    assert '"cut": {"bytes": ' in path.read_text()


def test_an_answer_over_the_bound_is_recorded_as_cut_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder, "ANSWER_MAX_BYTES", 10_000)  # the bound's logic, at a size a test affords
    path = tmp_path / "long.jsonl"
    with Sidecar(tools=[Tool("long", lambda: "x" * 20_000, {"type": "object"})]) as upstream:  # noqa: SIM117
        with Sidecar(upstream=upstream.mcp_url, record=str(path)) as rec:
            r = httpx.post(rec.mcp_url, headers={**ACCEPT, "MCP-Protocol-Version": "2026-07-28"}, timeout=10,
                           json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": "long"}})  # fmt: skip
            assert r.status_code == 200 and r.text.count("x") >= 20_000  # the client got it whole
    [exchange] = read_cassette(path).exchanges
    assert exchange.tool == "long" and exchange.response is None
    assert exchange.cut is not None and exchange.cut["bytes"] > 20_000


def test_a_miss_names_the_nearest_among_the_first_exchanges_of_its_tool() -> None:
    exchanges = [_exchange(i, {"a": i, "b": i}) for i in range(MISS_SCAN + 100)]
    exchanges[MISS_SCAN + 50].params["arguments"]["b"] = -1  # the nearest of all, past the scan
    for e, line in zip(exchanges, itertools.count(2)):
        e.line = line
    matcher = Matcher(exchanges, Rules(), "cassette x")
    with pytest.raises(
        CassetteError, match=r"nearest: line 2, tools/call t .*: argument 'a' differs.*argument 'b' differs"
    ):
        matcher.match("tools/call", {"name": "t", "arguments": {"a": -1, "b": -1}})
    assert (
        matcher.match("tools/call", {"name": "t", "arguments": {"a": MISS_SCAN + 50, "b": -1}})
        is exchanges[MISS_SCAN + 50]
    )
