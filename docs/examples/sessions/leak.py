"""The runner that never ends its session (docs/sessions.md): it fails at teardown with the session
hygiene verdict. Not run with the other examples (they are the files directly under docs/examples/);
``tests/test_session_hygiene.py`` runs it."""

from __future__ import annotations

import httpx
import pytest

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
RUNNER = {"name": "runner", "version": "1"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": RUNNER}}  # fmt: skip
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}


# --8<-- [start:leak]
@pytest.mark.mcp_sidecar(era="session")
def test_a_runner_that_never_ends_its_session(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        sid = http.post(mcp_sidecar.mcp_url, json=INIT, headers=HEADERS).headers["Mcp-Session-Id"]
        session = {**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
        http.post(mcp_sidecar.mcp_url, json=CALL, headers=session)
    # returns without `DELETE /mcp`: the session stays open on the server


# --8<-- [end:leak]


# --8<-- [start:lost]
@pytest.mark.mcp_sidecar(era="session", faults=["session_expired@tool:echo[nth=2]"])
def test_a_runner_that_keeps_calling_a_lost_session(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        sid = http.post(mcp_sidecar.mcp_url, json=INIT, headers=HEADERS).headers["Mcp-Session-Id"]
        session = {**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
        for _ in range(3):  # the second call gets 404: the session is gone; the third reuses it anyway
            http.post(mcp_sidecar.mcp_url, json=CALL, headers=session)


# --8<-- [end:lost]
