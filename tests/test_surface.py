"""The server surface beside tools, through the mcp 2.x ``Client`` in both eras: resources (listed,
read, templated, subscribed), prompts, completion, the logging level; the conformance tool set's
content kinds; a test's own resources and prompts; faults aimed at ``prompt:NAME``,
``resource:URI`` and the surface's methods; and the argument checks."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import (
    Delay,
    Hang,
    JsonRpcError,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    Sidecar,
    SidecarError,
    Status,
    Tool,
    ToolContent,
    Trigger,
)

MODES = ["auto", "legacy"]  # the stateless era (2026-07-28) and the session era (2025-11-25)
STATELESS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


def _user_prompt(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": {"type": "text", "text": text}}]


@pytest.mark.parametrize("mode", MODES)
async def test_the_conformance_set_answers_resources_prompts_and_completion(mode: str) -> None:
    with Sidecar(tool_sets=["basic", "conformance"]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            caps = client.server_capabilities
            listed = await client.list_resources()
            templates = await client.list_resource_templates()
            text = await client.read_resource("test://static-text")
            blob = await client.read_resource("test://static-binary")
            templated = await client.read_resource("test://template/123/data")
            prompts = await client.list_prompts()
            got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
            ref = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
            completed = await client.complete(ref, {"name": "arg1", "value": "par"})
            image = await client.call_tool("test_image_content", {})
            mixed = await client.call_tool("test_multiple_content_types", {})
            failed = await client.call_tool("test_error_handling", {})
    assert caps is not None and caps.resources is not None and caps.prompts is not None
    assert caps.completions is not None
    assert {r.uri for r in listed.resources} == {
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    }
    assert [t.uri_template for t in templates.resource_templates] == ["test://template/{id}/data"]
    assert text.contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
    assert blob.contents[0].mime_type == "image/png" and blob.contents[0].blob  # type: ignore[union-attr]
    assert json.loads(templated.contents[0].text)["id"] == "123"  # type: ignore[union-attr]
    assert templated.contents[0].uri == "test://template/123/data"
    assert [p.name for p in prompts.prompts][:2] == ["test_simple_prompt", "test_prompt_with_arguments"]
    assert got.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"  # type: ignore[union-attr]
    assert completed.completion.values == ["paris", "park"]
    assert [c.type for c in image.content] == ["image"]
    assert [c.type for c in mixed.content] == ["text", "image", "resource"]
    assert failed.is_error
    assert failed.content[0].text == "This tool intentionally returns an error for testing"  # type: ignore[union-attr]
    sc.wait_idle(5)
    labels = sc.journal.sequence()
    assert "POST resources/read test://template/123/data" in labels
    assert "POST prompts/get test_prompt_with_arguments" in labels
    reads = [r for r in sc.requests if r.mcp_method == "resources/read"]
    assert [r.resource for r in reads] == [
        "test://static-text",
        "test://static-binary",
        "test://template/123/data",
    ]
    assert [r.error for r in sc.requests if r.error is not None] == []


async def test_the_session_era_keeps_each_sessions_log_level_and_subscriptions_while_it_lives() -> None:
    with Sidecar(tool_sets=["conformance"], era="session") as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            await client.set_logging_level("warning")
            await client.subscribe_resource("test://watched-resource")
            await client.subscribe_resource("test://static-text")
            await client.unsubscribe_resource("test://static-text")
            assert client.server_capabilities is not None
            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe is True
            (sid,) = sc.sessions
            assert sc.surface.log_levels == {sid: "warning"}
            assert sc.surface.subscriptions == {sid: {"test://watched-resource"}}
        assert sc.ended_sessions == (sid,)
        assert sc.surface.log_levels == {} and sc.surface.subscriptions == {}  # gone with the session
        subscribes = [r for r in sc.requests if r.mcp_method and r.mcp_method.startswith("resources/")]
        assert [(r.mcp_method, r.resource) for r in subscribes] == [
            ("resources/subscribe", "test://watched-resource"),
            ("resources/subscribe", "test://static-text"),
            ("resources/unsubscribe", "test://static-text"),
        ]


async def test_the_stateless_era_refuses_the_methods_2026_07_28_removed() -> None:
    """``logging/setLevel`` and the subscribe pair are gone in 2026-07-28: -32601, as ``ping``."""
    with Sidecar(tool_sets=["conformance"]) as sc, httpx.Client(timeout=5) as http:
        for method, params in (
            ("logging/setLevel", {"level": "info"}),
            ("resources/subscribe", {"uri": "x"}),
        ):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            answer = http.post(sc.mcp_url, json=body, headers=STATELESS).json()
            assert answer["error"] == {
                "code": -32601,
                "message": f"Method not found: {method} (removed in 2026-07-28)",
            }


@pytest.mark.parametrize("mode", MODES)
async def test_a_tests_own_resources_and_prompts(mode: str) -> None:
    seen: list[dict[str, str]] = []

    def order(id: str) -> str:
        seen.append({"id": id})
        return json.dumps({"order": id, "status": "shipped"})

    def summarise(topic: str, tone: str = "plain") -> list[dict[str, Any]]:
        return _user_prompt(f"Summarise {topic}, {tone}.")

    resources: list[Resource | ResourceTemplate] = [
        Resource("file:///notes.txt", "notes", text="remember the milk"),
        ResourceTemplate(
            "orders://{id}",
            "order",
            order,
            mime_type="application/json",
            completions={"id": ["a1", "a2", "b1"]},
        ),
    ]
    prompts = [Prompt("summary", summarise, (PromptArgument("topic", required=True), PromptArgument("tone")))]
    with Sidecar(resources=resources, prompts=prompts, tool_sets=[]) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            notes = await client.read_resource("file:///notes.txt")
            shipped = await client.read_resource("orders://a2")
            summary = await client.get_prompt("summary", {"topic": "the incident"})
            ref = types.ResourceTemplateReference(type="ref/resource", uri="orders://{id}")
            offered = await client.complete(ref, {"name": "id", "value": "a"})
            with pytest.raises(MCPError) as missing:
                await client.read_resource("file:///absent.txt")
            with pytest.raises(MCPError) as no_topic:
                await client.get_prompt("summary", {})
            assert (await client.list_tools()).tools == []
    assert notes.contents[0].text == "remember the milk"  # type: ignore[union-attr]
    assert json.loads(shipped.contents[0].text) == {"order": "a2", "status": "shipped"}  # type: ignore[union-attr]
    assert seen == [{"id": "a2"}]
    assert summary.messages[0].content.text == "Summarise the incident, plain."  # type: ignore[union-attr]
    assert offered.completion.values == ["a1", "a2"]
    assert (missing.value.code, missing.value.message) == (-32002, "Resource not found: file:///absent.txt")
    assert no_topic.value.code == -32602 and "needs argument(s) topic" in no_topic.value.message
    errors = [(r.mcp_method, r.error_by) for r in sc.requests if r.error is not None]
    assert errors == [("resources/read", "client"), ("prompts/get", "client")]


@pytest.mark.parametrize("mode", MODES)
async def test_faults_aimed_at_one_prompt_and_one_resource(mode: str) -> None:
    """``prompt:NAME`` and ``resource:URI`` count only the requests naming them: the other prompt and
    resource answer normally, and the trigger's ``nth`` counts matching requests only."""
    faults = [
        JsonRpcError(-32001, "prompt store down", when="prompt:test_simple_prompt"),
        Status(503, when=Trigger("resource:test://static-text", nth=2)),
    ]
    with Sidecar(tool_sets=["conformance"], faults=faults) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:
            with pytest.raises(MCPError) as down:
                await client.get_prompt("test_simple_prompt")
            other = await client.get_prompt("test_prompt_with_image")
            first = await client.read_resource("test://static-text")
            binary = await client.read_resource("test://static-binary")
            with pytest.raises(MCPError):
                await client.read_resource("test://static-text")
    assert (down.value.code, down.value.message) == (-32001, "prompt store down")
    assert [m.content.type for m in other.messages] == ["image", "text"]
    assert first.contents[0].text and binary.contents[0].blob  # type: ignore[union-attr]
    assert sc.fired == {"jsonrpc_error": 1, "status": 1}
    hit = [(r.label, r.status) for r in sc.requests if r.fault_kind == "status"]
    assert hit == [("POST resources/read test://static-text", 503)]


async def test_a_hang_on_resources_read_is_caught_by_patience_and_a_delay_by_the_clients_timeout() -> None:
    hang = Hang(when="resources/read")
    with Sidecar(tool_sets=["conformance"], patience=0.5, expect_hang=True, faults=[hang]) as sc:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/read",
            "params": {"uri": "test://watched-resource"},
        }
        async with httpx.AsyncClient(timeout=5) as http:
            with pytest.raises(httpx.TransportError):  # the sidecar aborts the held request at patience
                await http.post(sc.mcp_url, json=body, headers=STATELESS)
        await asyncio.to_thread(sc.wait_idle, 5)
        assert len(sc.journal.violations) == 1
        (read,) = [r for r in sc.requests if r.mcp_method == "resources/read"]
        assert read.held and read.hold == "patience" and read.resource == "test://watched-resource"
    with Sidecar(tool_sets=["conformance"], faults=[Delay(0.6, when="completion/complete")]) as sc:
        async with Client(sc.mcp_url, mode="auto", read_timeout_seconds=0.2) as client:
            ref = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
            with pytest.raises(MCPError, match="timed out"):
                await client.complete(ref, {"name": "arg1", "value": "p"})
            assert (await client.list_prompts()).prompts  # the next request answers
        assert sc.fired == {"delay": 1}


async def test_a_template_function_that_raises_is_the_tools_bug_re_raised_in_the_test() -> None:
    def broken(id: str) -> str:
        raise RuntimeError(f"no order {id}")

    sc = Sidecar(resources=[ResourceTemplate("orders://{id}", "order", broken)]).start()
    try:
        async with Client(sc.mcp_url, mode="auto") as client:
            with pytest.raises(MCPError) as exc_info:
                await client.read_resource("orders://7")
    finally:
        sc.stop()
    assert exc_info.value.code == -32603 and "no order 7" in exc_info.value.message
    (read,) = [r for r in sc.requests if r.mcp_method == "resources/read"]
    assert read.error_by == "tool"
    with pytest.raises(
        SidecarError, match="in resources/read orders://7"
    ) as raised:  # as `with Sidecar` does
        sc.check_errors()
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_tool_content_answers_its_blocks_as_they_are() -> None:
    blocks = ({"type": "text", "text": "see"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"})
    with Sidecar(tools=[Tool("shot", lambda: ToolContent(blocks), {"type": "object"})], tool_sets=[]) as sc:
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "shot", "arguments": {}},
        }
        result = httpx.post(sc.mcp_url, json=call, headers=STATELESS, timeout=5).json()["result"]
    assert result["content"] == list(blocks) and result["isError"] is False


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Resource("", "x", text="t"), "Resource: uri must be a non-empty string, got ''"),
        (
            lambda: Resource("a://b", "b", text="t", blob="AA"),
            "give exactly one of text= (a text resource) or blob=",
        ),
        (lambda: ResourceTemplate("a://b", "b", str), "uri_template must hold at least one {variable}"),
        (lambda: ResourceTemplate("a://{x}", "b", "text"), "read must be callable, got 'text'"),
        (lambda: Prompt("p", "hello"), "Prompt 'p': messages must be callable, got 'hello'"),
        (lambda: Prompt("p", list, ("topic",)), "Prompt 'p': arguments must be PromptArgument instances"),
        (
            lambda: Sidecar(resources=[Prompt("p", list)]),
            "Sidecar: resources must be a list of pytest_mcpfaults Resource",
        ),
        (
            lambda: Sidecar(prompts="p"),
            "Sidecar: prompts must be a list of pytest_mcpfaults Prompt values, got 'p'",
        ),
        (lambda: ToolContent(["text"]), "ToolContent: items must be a tuple of content blocks"),  # type: ignore[arg-type]
        (lambda: Trigger("prompt:"), "Trigger: target 'prompt:' is unknown; valid targets: '*'"),
        (
            lambda: Sidecar(upstream="http://127.0.0.1:9/mcp", prompts=[Prompt("p", list)]),
            "Sidecar: resources= and prompts= are served by the fake; with an upstream",
        ),
    ],
)
def test_bad_surface_arguments_are_refused_by_name(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


async def test_changes_at_run_time_are_told_on_the_sessions_get_stream() -> None:
    """With ``get_stream=True`` the capabilities say ``listChanged`` and a change made while the
    client is connected reaches its open ``GET`` stream: a new tool, a new resource, new prompts;
    ``resources/updated`` only for a URI the session subscribed to."""
    told: list[str] = []
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(message.params.uri)
        method = getattr(message, "method", None)
        if isinstance(method, str) and method.startswith("notifications/"):
            told.append(method)

    def stream_open(reqs: tuple[Any, ...]) -> bool:
        return any(r.method == "GET" and r.status == 200 for r in reqs)

    with Sidecar(tool_sets=["conformance"], get_stream=True, era="session") as sc:
        async with Client(sc.mcp_url, mode="legacy", message_handler=on_message) as client:
            caps = client.server_capabilities
            await client.subscribe_resource("test://watched-resource")
            await asyncio.to_thread(sc.wait_for, stream_open)
            sc.add_tool("late", lambda: "x", input_schema={"type": "object"})
            sc.surface.add(
                [
                    Resource("test://watched-resource", "watched-resource", text="v2"),  # subscribed: updated
                    Resource("test://static-text", "static-text", text="v2"),  # not subscribed: nothing
                    Resource("test://new", "new", text="n"),
                ],
                [Prompt("late_prompt", lambda: _user_prompt("hi"))],
            )
            for _ in range(100):  # bounded: 5 s
                if len(told) >= 4:
                    break
                await asyncio.sleep(0.05)
            read = await client.read_resource("test://watched-resource")
    assert caps is not None and caps.tools is not None and caps.tools.list_changed is True
    assert caps.resources is not None and caps.resources.list_changed is True
    assert told == [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    ]
    assert updated == ["test://watched-resource"]
    assert read.contents[0].text == "v2"  # type: ignore[union-attr]
    (get,) = [r for r in sc.requests if r.method == "GET"]
    assert get.bytes_sent > len(b": stream open\n\n") and get.status == 200


async def test_without_a_get_stream_nothing_says_list_changed() -> None:
    with Sidecar(tool_sets=["conformance"]) as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            caps = client.server_capabilities
            sc.add_tool("late", lambda: "x", input_schema={"type": "object"})
            assert "late" in {t.name for t in (await client.list_tools()).tools}
    assert (
        caps is not None
        and caps.tools is not None
        and caps.resources is not None
        and caps.prompts is not None
    )
    assert (caps.tools.list_changed, caps.resources.list_changed, caps.prompts.list_changed) == (
        False,
        False,
        False,
    )


def test_the_in_process_backend_serves_a_tests_own_resources_and_prompts_and_checks_them() -> None:
    from pytest_mcpfaults.inprocess import mock_sidecar

    prompt = Prompt("hello", lambda: _user_prompt("hi"))
    with mock_sidecar(resources=[Resource("file:///a", "a", text="A")], prompts=[prompt]) as side:
        for method, params in (("resources/read", {"uri": "file:///a"}), ("prompts/get", {"name": "hello"})):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            answered = httpx.post(side.mcp_url, json=body, headers=STATELESS).json()["result"]
            assert answered.get("contents", answered.get("messages"))
        assert [r.resource or r.prompt for r in side.requests] == ["file:///a", "hello"]
    with pytest.raises(ValueError, match="mock_sidecar: prompts must be a list of pytest_mcpfaults Prompt"):
        mock_sidecar(prompts=["hello"])


async def _elicit_defaults(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"response": f"seen: {params.message}"})


async def _sample_reply(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="forty-two"), model="fake"
    )


async def test_the_conformance_tools_that_talk_back_reach_the_mcp2_clients_callbacks() -> None:
    told: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str) and method.startswith("notifications/"):
            told.append(method)

    with Sidecar(tool_sets=["conformance"], era="session") as sc:
        async with Client(
            sc.mcp_url,
            mode="legacy",
            elicitation_callback=_elicit_defaults,
            sampling_callback=_sample_reply,
            message_handler=on_message,
        ) as client:
            asked = await client.call_tool("test_elicitation", {"message": "ok?"})
            sampled = await client.call_tool("test_sampling", {"prompt": "meaning?"})
            logged = await client.call_tool("test_tool_with_logging", {})
    assert asked.content[0].text == 'User response: action=accept, content={"response": "seen: ok?"}'  # type: ignore[union-attr]
    assert sampled.content[0].text == "LLM response: forty-two"  # type: ignore[union-attr]
    assert logged.content[0].text == "Tool with logging executed successfully"  # type: ignore[union-attr]
    assert told.count("notifications/message") == 3
    sent = [m.method for m in sc.journal.server_messages]
    assert sent.count("elicitation/create") == 1 and sent.count("sampling/createMessage") == 1
