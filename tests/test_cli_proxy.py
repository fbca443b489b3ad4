"""``python -m pytest_mcpfaults serve --upstream URL``: the standalone sidecar in proxy mode, in a
subprocess, in front of the mcp SDK's own server; and its proxy flags' usage errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client import Client
from sdk_upstream import SdkUpstream
from sdk_upstream import serve as serve_upstream
from test_cli import labels, serve

from pytest_mcpfaults.cli import main


@pytest.fixture(scope="module")
def up() -> Iterator[SdkUpstream]:
    with serve_upstream() as upstream:
        yield upstream


async def test_serve_upstream_proxies_the_sdk_server_with_the_command_line_faults(up: SdkUpstream) -> None:
    with serve("--upstream", up.url, "--fault", "tool_error(text=nope)@tool:add") as s:
        assert s.info["MCPFAULTS_UPSTREAM"] == up.url
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode="auto", read_timeout_seconds=5) as client:
            failed = await client.call_tool("add", {"a": 1, "b": 2})
            echoed = await client.call_tool("echo", {"text": "through"})
        assert failed.is_error and failed.content[0].text == "nope"
        assert echoed.content[0].text == "through"
        assert httpx.get(s.info["MCPFAULTS_HEALTH_URL"], timeout=5).json() == {"status": "ok"}
        journal = s.wait_journal(lambda j: "GET /health" in labels(j), "the health request")
        # (the SDK client may list the tools to check a result against their output schemas)
        assert [x for x in labels(journal) if x != "POST tools/list"] == [
            "POST server/discover",
            "POST tools/call add",
            "POST tools/call echo",
            "GET /health",
        ]
        add = next(r for r in journal["requests"] if r["tool"] == "add")
        assert add["fault_kind"] == "tool_error" and add["upstream"]["status"] == 200
        assert add["upstream"]["sent_at"] is not None and add["upstream"]["bytes"] > 0
        health = next(r for r in journal["requests"] if r["path"] == "/health")
        assert health["upstream"] is None  # answered by the sidecar
        assert s.terminate() == 0
    assert "add" in up.calls and "echo" in up.calls


async def test_serve_records_with_record_and_replays_offline_with_cassette_and_faults(
    up: SdkUpstream, tmp_path: Path
) -> None:
    path = tmp_path / "sdk.jsonl"
    with serve("--upstream", up.url, "--record", str(path)) as s:
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode="legacy", read_timeout_seconds=5) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
        assert s.terminate() == 0  # the cassette is written at exit
    assert [json.loads(line).get("tool") for line in path.read_text().splitlines()[1:]].count("add") == 1
    ran = len(up.calls)
    with serve("--cassette", str(path), "--fault", "tool_error(text=nope)@tool:add[times=1]") as s:
        async with Client(s.info["MCPFAULTS_MCP_URL"], mode="auto", read_timeout_seconds=5) as client:
            failed = await client.call_tool("add", {"a": 1, "b": 2})
            replayed = await client.call_tool("add", {"a": 1, "b": 2})
        assert failed.is_error and failed.content[0].text == "nope"
        assert replayed.content[0].text == "3" and replayed.structured_content == {"result": 3}
        assert s.terminate() == 0
    assert len(up.calls) == ran  # offline: the server was not asked


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--upstream", "http://10.1.2.3:9000/mcp"],
            "argument --upstream: names host '10.1.2.3', which is not",
        ),
        (["--upstream", "http://10.1.2.3:9000/mcp"], "--allow-remote-upstream"),
        (["--upstream", "127.0.0.1:9000"], "argument --upstream: must be an http:// or https:// URL"),
        (["--upstream-health", "/health"], "argument --upstream-health: needs --upstream URL"),
        (["--allow-remote-upstream"], "argument --allow-remote-upstream: needs --upstream URL"),
        (
            ["--upstream", "http://127.0.0.1:9/mcp", "--upstream-health", "health"],
            "argument --upstream-health",
        ),
        (
            ["--upstream", "http://127.0.0.1:9/mcp", "--upstream-health", "/h", "--no-health"],
            "argument --upstream-health: not with --no-health",
        ),
        (["--upstream-timeout", "0"], "argument --upstream-timeout: must be a positive number of seconds"),
        (["--upstream-header", "X-A: b"], "argument --upstream-header: needs --upstream URL"),
        (
            ["--upstream", "http://127.0.0.1:9/mcp", "--upstream-header", "Bad Name: x"],
            "argument --upstream-header: upstream_headers: 'Bad Name' is not a header name",
        ),
        (
            ["--upstream", "http://127.0.0.1:9/mcp", "--upstream-header", "Host: x"],
            "argument --upstream-header: upstream_headers: 'Host' is a hop-by-hop or framing header",
        ),
    ],
)
def test_bad_proxy_flags_are_usage_errors_naming_the_flag(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", *args])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: python -m pytest_mcpfaults serve")
    assert message in err


def test_upstream_header_specs_set_or_drop() -> None:
    from pytest_mcpfaults.cli import build_parser
    from pytest_mcpfaults.options.text import upstream_headers_text

    args = build_parser().parse_args(
        ["serve", "--upstream", "http://127.0.0.1:9/mcp", "--upstream-header", "X-Tenant: t 1",
         "--upstream-header", "Authorization"]
    )  # fmt: skip
    assert upstream_headers_text(args.upstream_header) == {"X-Tenant": "t 1", "Authorization": None}
