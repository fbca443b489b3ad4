"""A harness with four known bugs, for explore's findings (docs/explore.md, "Findings").

1. ``list_items`` raises its own ``HarnessError`` when the server fails: its own failure mode, not yet
   named in ``raises=``;
2. ``list_items`` reads ``["result"]`` from a JSON-RPC error answer, which has none (``KeyError``);
3. ``fetch`` calls without a timeout, so it waits out an answer the server holds;
4. ``finish`` leaves its client open when the cleanup call fails.
"""

import httpx

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
CLIENTS = []  # kept: an unclosed client's connection stays open


class HarnessError(Exception):
    """The harness's own failure mode."""


def start():
    client = httpx.Client()
    CLIENTS.append(client)
    return client


def post(client, sidecar, tool, timeout):
    return client.post(
        sidecar.mcp_url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"text": "hi", "session_id": "s-1"}},
        },
        headers={**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": tool},
        timeout=timeout,
    )


def list_items(client, sidecar):
    try:
        reply = post(client, sidecar, "echo", 0.5)
    except httpx.TimeoutException:
        raise HarnessError("the server did not answer in time") from None
    if reply.status_code != 200:
        raise HarnessError(f"the server answered {reply.status_code}")  # bug 1: not named in raises=
    return reply.json()["result"]  # bug 2: a JSON-RPC error has no result


def fetch(client, sidecar):
    reply = post(client, sidecar, "echo", None)  # bug 3: no timeout
    return reply.json().get("result") if reply.status_code == 200 else None


def finish(client, sidecar):
    try:
        post(client, sidecar, "delete_session", 0.5).raise_for_status()
    except httpx.HTTPError:
        return  # bug 4: the client is left open when the cleanup call fails
    client.close()
