"""Faults on the server-request path: a malformed server request, one sent twice, and a client answer
lost on its way, each aimed at the call whose tool sends the request (``tool:ask_user``).

``test_an_unbounded_harness_waits_for_a_lost_answer`` fails with the patience verdict on purpose: it is
marked ``xfail(raises=PatienceError, strict=True)`` so this file passes as a whole, and
``tests/test_faults_server_requests.py`` runs it with ``--runxfail`` to check the verdict that
``docs/server-requests.md`` quotes.
"""

from __future__ import annotations

import pytest
from mcp import types
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import DropClientAnswer, DuplicateServerRequest, MalformedServerRequest
from pytest_mcpfaults.verdicts.patience import PatienceError


async def confirm(context, params):  # the harness's elicitation callback: the user says yes
    return types.ElicitResult(action="accept", content={"answer": "yes"})


# --8<-- [start:malformed]
@pytest.mark.mcp_sidecar(
    era="session",
    tool_sets=("basic", "client"),
    faults=[MalformedServerRequest("no_id", when="tool:ask_user")],
)
async def test_harness_skips_a_request_without_an_id(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        result = await client.call_tool("ask_user", {"message": "Delete the branch?"})
    assert not result.is_error  # it skipped the broken copy and answered the request that followed
    asked, broken = mcp_sidecar.journal.server_messages
    assert (asked.outcome, broken.outcome) == ("answered", "malformed")


@pytest.mark.mcp_sidecar(
    era="session", tool_sets=("basic", "client"), faults=[MalformedServerRequest(when="tool:ask_user")]
)
async def test_mcp2_fails_the_call_on_half_a_json_text_and_keeps_the_session(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        with pytest.raises(MCPError, match="Failed to parse SSE message"):
            await client.call_tool("ask_user", {"message": "Delete the branch?"})
        after = await client.call_tool("echo", {"text": "still here"})  # the session goes on
    assert after.content[0].text == "still here"
    asked, broken = mcp_sidecar.journal.server_messages
    assert (asked.outcome, broken.outcome) == ("unanswered", "malformed")


# --8<-- [end:malformed]


# --8<-- [start:duplicate]
@pytest.mark.mcp_sidecar(
    era="session", tool_sets=("basic", "client"), faults=[DuplicateServerRequest(when="tool:ask_user")]
)
async def test_harness_answers_each_copy_of_a_repeated_request(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        result = await client.call_tool("ask_user", {"message": "Delete the branch?"})
    assert not result.is_error
    first, again = mcp_sidecar.journal.server_messages
    assert first.id == again.id and again.outcome == "duplicate"
    assert again.answered_at is not None  # the harness answered the copy too (asked twice, once per ask)


# --8<-- [end:duplicate]


# --8<-- [start:dropped]
@pytest.mark.mcp_sidecar(
    era="session",
    tool_sets=("basic", "client"),
    faults=[DropClientAnswer(when="tool:ask_user")],
    patience=5.0,
)
async def test_a_bounded_harness_gives_up_on_a_lost_answer(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        with pytest.raises(MCPError, match="timed out"):  # its own bound, well within the budget
            await client.call_tool("ask_user", {"message": "Delete the branch?"}, read_timeout_seconds=0.5)
    (asked,) = mcp_sidecar.journal.server_messages
    assert asked.outcome == "dropped" and asked.result["action"] == "accept"  # it did answer


# --8<-- [end:dropped]


@pytest.mark.xfail(raises=PatienceError, strict=True, reason="shows the patience verdict")
# --8<-- [start:unbounded]
@pytest.mark.mcp_sidecar(
    era="session",
    tool_sets=("basic", "client"),
    faults=[DropClientAnswer(when="tool:ask_user")],
    patience=1.0,
)
async def test_an_unbounded_harness_waits_for_a_lost_answer(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        await client.call_tool("ask_user", {"message": "Delete the branch?"})  # no bound of its own


# --8<-- [end:unbounded]
