"""Who may answer a tool's request to the client: only the client it went to. An answer POSTed from
outside the call's session is refused, journaled, and the tool keeps waiting for its real client."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp import types
from mcp.client import Client


# --8<-- [start:refused]
@pytest.mark.mcp_sidecar(era="session", tool_sets=("basic", "client"))
async def test_an_answer_from_outside_the_session_is_refused(mcp_sidecar):
    async def confirm(context, params):  # someone else answers first, with no session of the call's
        forged = {"jsonrpc": "2.0", "id": context.request_id, "result": {"action": "decline"}}
        async with httpx.AsyncClient() as other:
            headers = {"Accept": "application/json, text/event-stream"}
            refused = await other.post(mcp_sidecar.mcp_url, json=forged, headers=headers)
        assert refused.status_code == 400  # Bad Request: Missing session ID
        return types.ElicitResult(action="accept", content={"answer": "yes"})  # the real answer

    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        result = await client.call_tool("ask_user", {"message": "Delete the branch?"})
    assert json.loads(result.content[0].text) == {"action": "accept", "content": {"answer": "yes"}}
    (asked,) = mcp_sidecar.journal.server_messages
    assert asked.outcome == "answered" and asked.refused == 1
    (post,) = [r for r in mcp_sidecar.requests if r.mcp_method is None and r.status == 400]
    assert post.error_by == "client" and post.error.startswith("refused: ")


# --8<-- [end:refused]
