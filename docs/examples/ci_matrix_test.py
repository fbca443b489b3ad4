"""The fault matrix: one test, every fault of the standard catalogue at the harness's cleanup call.

The harness below ends a benchmark session the way real runners do: ``delete_session`` through an MCP
``tools/call``, with a short timeout, never raising (cleanup must not flip the outcome of the work
before it). The matrix checks that promise against each fault at that very call.
"""

import json

import httpx
import pytest

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
}


def call_tool(client, url, name, arguments):
    """One stateless-era MCP tools/call; returns the tool's JSON payload (raises on any failure)."""
    reply = client.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
        headers={**HEADERS, "Mcp-Name": name},
    )
    reply.raise_for_status()
    if reply.headers["content-type"].startswith("text/event-stream"):
        message = sse_response(reply.text, 1)
    else:
        message = reply.json()
    if "error" in message:
        raise RuntimeError(f"JSON-RPC error {message['error']['code']}")
    result = message["result"]
    if result.get("isError"):
        raise RuntimeError(f"tool error: {result['content'][0]['text']}")
    return json.loads(result["content"][0]["text"])


def sse_response(text, request_id):
    """The JSON-RPC response to ``request_id`` in an SSE answer. Events are split on blank lines and
    an event's ``data:`` lines joined; an event with empty data is skipped (the priming event a
    2025-11-25 server opens its streams with), and so are the notifications before the response."""
    for event in text.replace("\r\n", "\n").split("\n\n"):
        lines = event.split("\n")
        data = "\n".join(line[5:].removeprefix(" ") for line in lines if line.startswith("data:"))
        if not data:
            continue
        message = json.loads(data)
        if message.get("id") == request_id and ("result" in message or "error" in message):
            return message
    raise ValueError("no JSON-RPC response in the SSE answer")


# --8<-- [start:harness]
def close_session(client, url, session_id):
    """The harness's cleanup: delete the benchmark session. Never raises; says what happened."""
    try:
        payload = call_tool(client, url, "delete_session", {"session_id": session_id})
    except (httpx.HTTPError, ValueError, RuntimeError) as exc:
        return f"failed: {type(exc).__name__}"
    if "no longer alive" in payload.get("error", "").lower():
        return "already gone"
    return "deleted" if payload.get("status") == "success" else "failed: " + payload.get("error", "?")


# --8<-- [end:harness]


# --8<-- [start:matrix]
@pytest.mark.mcpfaults_matrix(exclude=["flap", "absent"])  # this harness never probes /health
def test_cleanup_never_raises(mcp_sidecar, mcpfaults_fault):
    with httpx.Client(timeout=0.5) as client:  # the harness's own budget, well under the sidecar's patience
        session = call_tool(client, mcp_sidecar.mcp_url, "create_session", {"task_id": "task-1"})
        outcome = close_session(client, mcp_sidecar.mcp_url, session["session_id"])

    assert mcp_sidecar.fired == {mcpfaults_fault.kind: 1}  # the fault really hit the cleanup call
    if mcpfaults_fault.kind in ("delay", "drip"):  # slow, but within the harness's budget
        assert outcome == "deleted"
    elif mcpfaults_fault.kind == "backend_gone":
        assert outcome == "already gone"
    else:
        assert outcome.startswith("failed: ")


# --8<-- [end:matrix]
