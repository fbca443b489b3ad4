"""One MCP client calling the tool ``test_reconnection`` once, the way the conformance suite's
``sse-retry`` client scenario runs a client: ``python tests/sse_retry_client.py CLIENT URL``. The
server closes the call's event stream after a priming event with a ``retry``; the client should come
back with ``GET`` and ``Last-Event-ID`` after the retry. Exits 0 with the tool's text on stdout when
the call returned its result, 1 otherwise. Imports no part of pytest_mcpfaults (it runs under mcp 1.x
too, from its own virtualenv).

``CLIENT``: ``mcp2`` (the mcp 2.x ``Client``), ``mcp1`` (mcp 1.x's ``ClientSession`` over
``streamablehttp_client``; run it with mcp 1.x on ``PYTHONPATH``), ``httpx-no-id`` (plain httpx that
waits the retry and reconnects without ``Last-Event-ID``), ``httpx-eager`` (plain httpx that reconnects
with ``Last-Event-ID`` at once, ignoring the retry).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

TOOL = "test_reconnection"
#: The whole call, resumption included; the conformance runner's own bound is longer.
TIMEOUT = 10.0


async def mcp2(url: str) -> str:
    from mcp.client import Client  # type: ignore[attr-defined,unused-ignore]

    async with Client(url, mode="legacy") as client:
        result = await client.call_tool(TOOL, {}, read_timeout_seconds=TIMEOUT)
    return str(getattr(result.content[0], "text", result.content[0]))


async def mcp1(url: str) -> str:  # pragma: no cover - mcp 1.x's interpreter runs it
    from mcp import ClientSession  # type: ignore[attr-defined,unused-ignore]
    from mcp.client.streamable_http import streamablehttp_client  # type: ignore[attr-defined,unused-ignore]

    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(TOOL, {})
    return str(getattr(result.content[0], "text", result.content[0]))


def _events(lines: Any) -> Any:
    """The SSE events of a stream of lines, each as its fields."""
    block: dict[str, str] = {}
    for line in lines:
        if not line:
            if block:
                yield block
            block = {}
            continue
        name, _, value = line.partition(":")
        block[name] = value[1:] if value.startswith(" ") else value
    if block:
        yield block


def httpx_no_id(url: str) -> str:
    """Plain httpx: the call's stream ends without a reply; it waits the retry and comes back with a
    ``GET`` but without ``Last-Event-ID``, and reads that stream for the reply."""
    return _httpx(url, wait=True, with_id=False)


def httpx_eager(url: str) -> str:
    """Plain httpx that comes back with ``Last-Event-ID`` at once, without waiting the retry."""
    return _httpx(url, wait=False, with_id=True)


def _httpx(url: str, *, wait: bool, with_id: bool) -> str:
    import httpx

    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "httpx-no-id", "version": "1"},
        },
    }
    with httpx.Client(timeout=TIMEOUT) as client:
        r = client.post(url, json=init, headers=accept)
        r.raise_for_status()
        headers = {
            **accept,
            "Mcp-Session-Id": r.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": TOOL, "arguments": {}}}
        retry_ms, last = 1000, None
        with client.stream("POST", url, json=call, headers=headers) as stream:
            for event in _events(stream.iter_lines()):
                retry_ms, last = int(event.get("retry", retry_ms)), event.get("id", last)
                if event.get("data"):
                    return str(json.loads(event["data"])["result"]["content"][0]["text"])
        if wait:
            time.sleep(retry_ms / 1000)
        plain = {k: v for k, v in headers.items() if k != "Content-Type"}
        if with_id and last is not None:
            plain["Last-Event-ID"] = last
        with client.stream("GET", url, headers=plain) as again:
            if again.status_code != 200:
                raise RuntimeError(f"GET without Last-Event-ID answered {again.status_code}")
            for event in _events(again.iter_lines()):
                if event.get("data"):
                    message = json.loads(event["data"])
                    if message.get("id") == 2:
                        return str(message["result"]["content"][0]["text"])
    raise RuntimeError("the reply never came")


def main(argv: list[str]) -> int:
    client, url = argv[1], argv[2]
    try:
        if client.startswith("httpx"):
            text = {"httpx-no-id": httpx_no_id, "httpx-eager": httpx_eager}[client](url)
        else:
            # The SDK imported before the call's clock starts: on a starved machine the import alone
            # once outlasted the bound, and the client sent nothing.
            __import__("mcp.client" if client == "mcp2" else "mcp.client.streamable_http")
            text = asyncio.run(asyncio.wait_for({"mcp2": mcp2, "mcp1": mcp1}[client](url), TIMEOUT + 5))
    except BaseException as exc:  # the verdict is the exit code; say why on stderr
        print(f"{client}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
