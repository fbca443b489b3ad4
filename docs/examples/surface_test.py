"""The server surface beside tools: resources, templates, prompts, completion, the logging level;
a test's own, the conformance set's, and faults aimed at them (docs/surface.md)."""

import asyncio
import json

import pytest
from mcp import types
from mcp.client import Client
from mcp.client.subscriptions import ResourceUpdated, SubscriptionLost, ToolsListChanged
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import JsonRpcError, Prompt, PromptArgument, Resource, ResourceTemplate, Status, Trigger


# --8<-- [start:own]
def order(id: str) -> str:  # called with the template's variables
    return json.dumps({"order": id, "status": "shipped"})


def summary(topic: str, tone: str = "plain") -> list[dict]:  # called with the client's arguments
    return [{"role": "user", "content": {"type": "text", "text": f"Summarise {topic}, {tone}."}}]


RESOURCES = [
    Resource("file:///notes.txt", "notes", text="remember the milk"),
    ResourceTemplate(
        "orders://{id}", "order", order, mime_type="application/json", completions={"id": ["a1", "a2"]}
    ),
]
PROMPTS = [Prompt("summary", summary, (PromptArgument("topic", required=True), PromptArgument("tone")))]


@pytest.mark.mcp_sidecar(resources=RESOURCES, prompts=PROMPTS)
async def test_a_harness_reads_resources_and_prompts(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        notes = await client.read_resource("file:///notes.txt")
        shipped = await client.read_resource("orders://a2")
        prompt = await client.get_prompt("summary", {"topic": "the incident"})
        ref = types.ResourceTemplateReference(type="ref/resource", uri="orders://{id}")
        offered = await client.complete(ref, {"name": "id", "value": "a"})
    assert notes.contents[0].text == "remember the milk"
    assert json.loads(shipped.contents[0].text)["order"] == "a2"
    assert prompt.messages[0].content.text == "Summarise the incident, plain."
    assert offered.completion.values == ["a1", "a2"]
    assert "POST resources/read orders://a2" in mcp_sidecar.journal.sequence()


# --8<-- [end:own]


# --8<-- [start:faults]
FAULTS = [
    JsonRpcError(-32001, "prompt store down", when="prompt:summary"),
    Status(503, when=Trigger("resource:file:///notes.txt", nth=2)),
]


@pytest.mark.mcp_sidecar(resources=RESOURCES, prompts=PROMPTS, faults=FAULTS)
async def test_faults_aimed_at_a_prompt_and_a_resource(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        with pytest.raises(MCPError, match="prompt store down"):
            await client.get_prompt("summary", {"topic": "x"})
        await client.read_resource("file:///notes.txt")  # the first read answers
        await client.read_resource("orders://a1")  # another resource: not counted
        with pytest.raises(MCPError):
            await client.read_resource("file:///notes.txt")  # the second: 503
    assert mcp_sidecar.fired == {"jsonrpc_error": 1, "status": 1}


# --8<-- [end:faults]


# --8<-- [start:session]
@pytest.mark.mcp_sidecar(tool_sets=["conformance"], era="session")
async def test_what_a_session_set(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        await client.set_logging_level("warning")
        await client.subscribe_resource("test://watched-resource")
        (session,) = mcp_sidecar.sessions
        assert mcp_sidecar.surface.log_levels == {session: "warning"}
        assert mcp_sidecar.surface.subscriptions == {session: {"test://watched-resource"}}
    assert mcp_sidecar.surface.subscriptions == {}  # gone with the session (its DELETE)


# --8<-- [end:session]


# --8<-- [start:changes]
@pytest.mark.mcp_sidecar(resources=RESOURCES, get_stream=True, era="session")
async def test_a_harness_is_told_the_resources_changed(mcp_sidecar):
    told = []

    async def on_message(message):
        told.append(getattr(message, "method", None))

    def stream_open(requests):
        return any(r.method == "GET" and r.status == 200 for r in requests)

    async with Client(mcp_sidecar.mcp_url, message_handler=on_message) as client:
        await client.subscribe_resource("file:///notes.txt")
        await asyncio.to_thread(mcp_sidecar.wait_for, stream_open)  # the client's GET stream is open
        mcp_sidecar.surface.add([Resource("file:///notes.txt", "notes", text="buy bread")])
        for _ in range(100):  # bounded: 5 s
            if told:
                break
            await asyncio.sleep(0.05)
        notes = await client.read_resource("file:///notes.txt")
    assert told == ["notifications/resources/updated"]
    assert notes.contents[0].text == "buy bread"


# --8<-- [end:changes]


# --8<-- [start:listen]
@pytest.mark.mcp_sidecar(resources=RESOURCES, era="stateless")
async def test_a_stateless_harness_listens_for_changes(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:  # 2026-07-28: no session, no GET stream
        async with client.listen(
            tools_list_changed=True, resource_subscriptions=["file:///notes.txt"]
        ) as changes:
            mcp_sidecar.add_tool("late", lambda: "x", input_schema={"type": "object"})
            mcp_sidecar.surface.add([Resource("file:///notes.txt", "notes", text="buy bread")])
            told = [await asyncio.wait_for(anext(aiter(changes)), 5) for _ in range(2)]  # bounded
        notes = await client.read_resource("file:///notes.txt")
    assert told == [ToolsListChanged(), ResourceUpdated(uri="file:///notes.txt")]
    assert notes.contents[0].text == "buy bread"
    (listen,) = [r for r in mcp_sidecar.requests if r.mcp_method == "subscriptions/listen"]
    assert listen.status == 200 and listen.era == "stateless"


# --8<-- [end:listen]


# --8<-- [start:listen_faults]
async def told_of(client, sidecar, name):
    async with client.listen(tools_list_changed=True) as changes:
        sidecar.add_tool(name, lambda: "x", input_schema={"type": "object"})
        return await asyncio.wait_for(anext(aiter(changes)), 5)


@pytest.mark.mcp_sidecar(era="stateless", faults=["close_stream@subscriptions/listen[times=1]"])
async def test_a_harness_re_listens_when_its_stream_drops(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url) as client:
        with pytest.raises(SubscriptionLost):  # the stream ended without the server's graceful close
            await told_of(client, mcp_sidecar, "late")
        event = await told_of(client, mcp_sidecar, "later")  # the client does not; the harness must
    assert event == ToolsListChanged()
    first, second = [r for r in mcp_sidecar.requests if r.mcp_method == "subscriptions/listen"]
    assert first.fault_kind == "close_stream" and second.fault_kind is None


# --8<-- [end:listen_faults]
