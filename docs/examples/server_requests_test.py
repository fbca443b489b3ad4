"""Server-to-client requests: tools that ask the client (elicitation, sampling, roots), a harness that
answers them, and one that never does.

``test_harness_that_never_answers`` fails with the patience verdict on purpose: it is marked
``xfail(raises=PatienceError, strict=True)`` so this file passes as a whole, and
``tests/test_patience_plugin.py`` runs it with ``--runxfail`` to capture the verdict that
``docs/server-requests.md`` quotes.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp import types
from mcp.client import Client

from pytest_mcpfaults import Tool, ToolContext, ToolResultError
from pytest_mcpfaults.verdicts.patience import PatienceError


# --8<-- [start:answers]
async def confirm(context, params):  # the harness's elicitation callback: the user says yes
    return types.ElicitResult(action="accept", content={"answer": "yes"})


@pytest.mark.mcp_sidecar(tool_sets=("basic", "client"))
async def test_harness_answers_the_tools_question(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, elicitation_callback=confirm) as client:
        result = await client.call_tool("ask_user", {"message": "Delete the branch?"})
    assert json.loads(result.content[0].text) == {"action": "accept", "content": {"answer": "yes"}}
    (asked,) = mcp_sidecar.journal.server_messages
    assert asked.method == "elicitation/create" and asked.outcome == "answered"
    assert asked.params["message"] == "Delete the branch?"


# --8<-- [end:answers]


# --8<-- [start:refuses]
@pytest.mark.mcp_sidecar(era="session", tool_sets=("basic", "client"))
async def test_harness_without_the_callback_refuses_at_once(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:  # no elicitation_callback
        result = await client.call_tool("ask_user", {"message": "Delete the branch?"})
    assert result.is_error  # the tool got the client's error, and said so
    assert result.content[0].text.endswith("error -32600: Elicitation not supported")
    (asked,) = mcp_sidecar.journal.server_messages
    assert asked.outcome == "error"


# --8<-- [end:refuses]


@pytest.mark.xfail(raises=PatienceError, strict=True, reason="shows the patience verdict")
# --8<-- [start:never]
@pytest.mark.mcp_sidecar(era="session", tool_sets=("basic", "client"), patience=1.0)
async def test_harness_that_never_answers(mcp_sidecar):
    async def wait_for_a_human(context, params):  # a UI that never comes back, and no bound on it
        await asyncio.Event().wait()

    async with Client(mcp_sidecar.mcp_url, elicitation_callback=wait_for_a_human) as client:
        await client.call_tool("ask_user", {"message": "Delete the branch?"})


# --8<-- [end:never]


# --8<-- [start:own]
async def deploy(ctx: ToolContext, service: str) -> str:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    answer = await ctx.elicit(f"Deploy {service}?", schema)
    if answer.get("action") != "accept" or not answer["content"].get("ok"):
        raise ToolResultError(f"deploy of {service} not confirmed")
    roots = await ctx.list_roots()
    summary = await ctx.sample(f"Summarise deploying {service} from {roots[0]['uri']}", max_tokens=50)
    return summary["content"]["text"]


DEPLOY = Tool(
    "deploy",
    deploy,
    {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]},
)


async def say_ok(context, params):
    return types.ElicitResult(action="accept", content={"ok": True})


async def one_root(context):
    return types.ListRootsResult(roots=[types.Root(uri="file:///srv/app")])


async def model(context, params):
    text = types.TextContent(type="text", text="deployed")
    return types.CreateMessageResult(role="assistant", content=text, model="stub")


@pytest.mark.mcp_sidecar(tools=[DEPLOY])
@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the session era, then the stateless one
async def test_own_tool_asks_lists_roots_and_samples(mcp_sidecar, mode):
    async with Client(
        mcp_sidecar.mcp_url, mode=mode,
        elicitation_callback=say_ok, list_roots_callback=one_root, sampling_callback=model,
    ) as client:  # fmt: skip
        result = await client.call_tool("deploy", {"service": "api"})
    assert result.content[0].text == "deployed"
    sent = mcp_sidecar.journal.server_messages.requests()
    assert [m.method for m in sent] == ["elicitation/create", "roots/list", "sampling/createMessage"]


# --8<-- [end:own]
