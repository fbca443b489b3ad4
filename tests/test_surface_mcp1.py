"""The server surface through the mcp 1.x client (``streamablehttp_client`` + ``ClientSession``,
session era only): the conformance set's resources, templates, prompts, completion, logging level and
subscriptions, a fault aimed at one prompt, and change notifications on the session's GET stream.
Runs in the tox env ``mcp1`` and under tests/test_mcp1_env.py; skipped where the installed mcp is 2.x."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_mcpfaults import JsonRpcError, Resource, Sidecar

streamable_http = pytest.importorskip(
    "mcp.client.streamable_http",
    reason="needs the mcp 1.x client (streamablehttp_client); the installed mcp is 2.x",
)
if not hasattr(streamable_http, "streamablehttp_client"):
    pytest.skip(
        "needs the mcp 1.x client (streamablehttp_client); the installed mcp is 2.x", allow_module_level=True
    )

from mcp import ClientSession, McpError, types  # noqa: E402
from pydantic import AnyUrl  # noqa: E402

streamablehttp_client = streamable_http.streamablehttp_client


async def test_mcp1_reads_resources_prompts_and_completion_and_sets_its_session_state() -> None:
    with Sidecar(tool_sets=["conformance"]) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, get_session_id):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                listed = await session.list_resources()
                templates = await session.list_resource_templates()
                text = await session.read_resource(AnyUrl("test://static-text"))
                templated = await session.read_resource(AnyUrl("test://template/7/data"))
                prompt = await session.get_prompt("test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
                ref = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
                completed = await session.complete(ref, {"name": "arg1", "value": "pa"})
                await session.set_logging_level("error")
                await session.subscribe_resource(AnyUrl("test://watched-resource"))
                sid = get_session_id()
                levels, subscriptions = dict(sc.surface.log_levels), dict(sc.surface.subscriptions)
    caps = init.capabilities
    assert (
        caps.resources is not None and caps.resources.subscribe and caps.prompts and caps.logging is not None
    )
    assert {str(r.uri) for r in listed.resources} >= {"test://static-text", "test://static-binary"}
    assert [t.uriTemplate for t in templates.resourceTemplates] == ["test://template/{id}/data"]
    assert text.contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
    assert json.loads(templated.contents[0].text)["id"] == "7"  # type: ignore[union-attr]
    assert prompt.messages[0].content.text == "Prompt with arguments: arg1='x', arg2='y'"  # type: ignore[union-attr]
    assert completed.completion.values == ["paris", "park"]
    assert levels == {sid: "error"}
    assert subscriptions == {sid: {"test://watched-resource"}}
    assert "POST resources/read test://template/7/data" in sc.journal.sequence()


async def test_mcp1_sees_a_fault_aimed_at_one_prompt_as_its_json_rpc_error() -> None:
    faults = [JsonRpcError(-32001, "prompt store down", when="prompt:test_simple_prompt")]
    with Sidecar(tool_sets=["conformance"], faults=faults) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(McpError) as down:
                    await session.get_prompt("test_simple_prompt")
                image = await session.get_prompt("test_prompt_with_image")
    assert (down.value.error.code, down.value.error.message) == (-32001, "prompt store down")
    assert [m.content.type for m in image.messages] == ["image", "text"]
    assert sc.fired == {"jsonrpc_error": 1}


async def test_mcp1_hears_a_change_on_its_get_stream() -> None:
    """mcp 1.x opens the session's GET stream after ``initialize``; with ``get_stream=True`` a tool
    added and a subscribed resource replaced reach its message handler."""
    told: list[str] = []

    async def on_message(message: object) -> None:
        root = getattr(message, "root", None)
        method = getattr(root, "method", None)
        if isinstance(method, str):
            told.append(method)

    def stream_open(reqs: tuple[object, ...]) -> bool:
        return any(getattr(r, "method", None) == "GET" and getattr(r, "status", None) == 200 for r in reqs)

    with Sidecar(tool_sets=["conformance"], get_stream=True) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(read, write, message_handler=on_message) as session:
                await session.initialize()
                await session.subscribe_resource(AnyUrl("test://watched-resource"))
                await asyncio.to_thread(sc.wait_for, stream_open)
                sc.add_tool("late", lambda: "x", input_schema={"type": "object"})
                sc.surface.add([Resource("test://watched-resource", "watched-resource", text="v2")])
                for _ in range(100):  # bounded: 5 s
                    if len(told) >= 2:
                        break
                    await asyncio.sleep(0.05)
    assert told == ["notifications/tools/list_changed", "notifications/resources/updated"]
