"""The ``conformance`` tool set: the fixtures the official MCP conformance suite's server scenarios
(``@modelcontextprotocol/conformance``) call, as its reference server (``everything-server.ts``)
serves them, talking back to the client as its tools do. Opt-in; ``benchmarks/conformance.py`` runs
the suite against ``serve``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from pytest_mcpfaults.mcp.outbound import ToolContext
from pytest_mcpfaults.mcp.surface import Prompt, PromptArgument, Resource, ResourceTemplate
from pytest_mcpfaults.mcp.tools import BuiltinTool, ToolContent, ToolResultError

#: A 1x1 red PNG pixel and a minimal WAV file, base64 (the reference server's).
IMAGE_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
#: SEP-1613: a JSON Schema 2020-12 input schema, listed as it is ($schema, $defs, additionalProperties).
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
_IMAGE = {"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _embedded(uri: str, text: str, mime_type: str = "text/plain") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}}


def _simple_text() -> str:
    return "This is a simple text response for testing."


def _image() -> ToolContent:
    return ToolContent((_IMAGE,))


def _audio() -> ToolContent:
    return ToolContent(({"type": "audio", "data": WAV_AUDIO, "mimeType": "audio/wav"},))


def _embedded_resource() -> ToolContent:
    return ToolContent((_embedded("test://embedded-resource", "This is an embedded resource content."),))


def _mixed() -> ToolContent:
    data = json.dumps({"test": "data", "value": 123})
    return ToolContent(
        (
            _text("Multiple content types test:"),
            _IMAGE,
            _embedded("test://mixed-content-resource", data, "application/json"),
        )
    )


def _error() -> str:
    raise ToolResultError("This tool intentionally returns an error for testing")


def _schema_tool(**arguments: Any) -> str:
    return f"JSON Schema 2020-12 tool called with: {json.dumps(arguments)}"


def conformance_tools() -> list[BuiltinTool]:
    return [
        BuiltinTool("test_simple_text", _simple_text, _NO_ARGS, "Tests simple text content response"),
        BuiltinTool("test_image_content", _image, _NO_ARGS, "Tests image content response"),
        BuiltinTool("test_audio_content", _audio, _NO_ARGS, "Tests audio content response"),
        BuiltinTool(
            "test_embedded_resource", _embedded_resource, _NO_ARGS, "Tests embedded resource content response"
        ),
        BuiltinTool(
            "test_multiple_content_types",
            _mixed,
            _NO_ARGS,
            "Tests response with multiple content types (text, image, resource)",
        ),
        BuiltinTool("test_error_handling", _error, _NO_ARGS, "Tests error response handling"),
        BuiltinTool(
            "json_schema_2020_12_tool",
            _schema_tool,
            JSON_SCHEMA_2020_12,
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        ),
        *(BuiltinTool(n, h, s, d, client_paced=True) for n, h, s, d in CONFORMANCE_CTX_TOOLS),
    ]


def _template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


def conformance_resources() -> list[Resource | ResourceTemplate]:
    return [
        Resource(
            "test://static-text",
            "static-text",
            text="This is the content of the static text resource.",
            title="Static Text Resource",
            description="A static text resource for testing",
        ),
        Resource(
            "test://static-binary",
            "static-binary",
            blob=IMAGE_PNG,
            mime_type="image/png",
            title="Static Binary Resource",
            description="A static binary resource (image) for testing",
        ),
        Resource(
            "test://watched-resource",
            "watched-resource",
            text="Watched resource content",
            title="Watched Resource",
            description="A resource to subscribe to",
        ),
        ResourceTemplate(
            "test://template/{id}/data",
            "template",
            _template_data,
            mime_type="application/json",
            title="Resource Template",
            description="A resource template with parameter substitution",
        ),
    ]


def _simple_prompt() -> list[dict[str, Any]]:
    return [{"role": "user", "content": _text("This is a simple prompt for testing.")}]


def _prompt_with_arguments(arg1: str, arg2: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": _text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")}]


def _prompt_with_resource(resourceUri: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": _embedded(resourceUri, "Embedded resource content for testing.")},
        {"role": "user", "content": _text("Please process the embedded resource above.")},
    ]


def _prompt_with_image() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": _IMAGE},
        {"role": "user", "content": _text("Please analyze the image above.")},
    ]


def conformance_prompts() -> list[Prompt]:
    return [
        Prompt(
            "test_simple_prompt",
            _simple_prompt,
            title="Simple Test Prompt",
            description="A simple prompt without arguments",
        ),
        Prompt(
            "test_prompt_with_arguments",
            _prompt_with_arguments,
            (
                PromptArgument("arg1", "First test argument", required=True, completions=("paris", "park")),
                PromptArgument("arg2", "Second test argument", required=True),
            ),
            title="Prompt With Arguments",
            description="A prompt with required arguments",
        ),
        Prompt(
            "test_prompt_with_embedded_resource",
            _prompt_with_resource,
            (PromptArgument("resourceUri", "URI of the resource to embed", required=True),),
            title="Prompt With Embedded Resource",
            description="A prompt that includes an embedded resource",
        ),
        Prompt(
            "test_prompt_with_image",
            _prompt_with_image,
            title="Prompt With Image",
            description="A prompt that includes image content",
        ),
    ]


# The tools that talk back to the client during the call.

_LOGGER = "conformance-test-server"
#: SEP-1034: a default for each primitive type.
DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


def _titled(word: str) -> list[dict[str, str]]:
    return [
        {"const": f"value{i}", "title": f"{n} {word}"} for i, n in enumerate(("First", "Second", "Third"), 1)
    ]


_OPTIONS = ["option1", "option2", "option3"]
#: SEP-1330: the five enum schema variants.
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": _OPTIONS},
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": _titled("Option"),
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": _OPTIONS},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {"anyOf": _titled("Choice")},
        },
    },
    "required": [],
}


async def _with_logging(ctx: ToolContext) -> str:
    for i, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if i:
            await asyncio.sleep(0.05)
        await ctx.notify("notifications/message", {"level": "info", "logger": _LOGGER, "data": text})
    return "Tool with logging executed successfully"


async def _with_progress(ctx: ToolContext) -> str:
    for i, step in enumerate((0, 50, 100)):
        if i:
            await asyncio.sleep(0.05)
        await ctx.progress(step, 100, f"Completed step {step} of 100")
    return str(ctx.progress_token if ctx.progress_token is not None else 0)


async def _sampling(ctx: ToolContext, prompt: str) -> str:
    try:
        result = await ctx.sample(prompt, max_tokens=100)
    except Exception as exc:  # the client could not or would not: said in the result, as the reference does
        return f"Sampling not supported or error: {exc}"
    content = result.get("content") if isinstance(result, Mapping) else None
    text = content.get("text") if isinstance(content, Mapping) else None
    return f"LLM response: {text or 'No response'}"


async def _elicit(ctx: ToolContext, message: str, schema: Mapping[str, Any], done: str) -> str:
    try:
        result = await ctx.elicit(message, schema)
    except Exception as exc:
        return f"Elicitation not supported or error: {exc}"
    return f"{done}: action={result.get('action')}, content={json.dumps(result.get('content') or {})}"


async def _elicitation(ctx: ToolContext, message: str) -> str:
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    return await _elicit(ctx, message, schema, "User response")


async def _defaults(ctx: ToolContext) -> str:
    message = "Please review and update the form fields with defaults"
    return await _elicit(ctx, message, DEFAULTS_SCHEMA, "Elicitation completed")


async def _enums(ctx: ToolContext) -> str:
    return await _elicit(
        ctx, "Please select options from the enum fields", ENUMS_SCHEMA, "Elicitation completed"
    )


def _one(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


#: (name, handler, input schema, description) of each.
CONFORMANCE_CTX_TOOLS: tuple[tuple[str, Any, Mapping[str, Any], str], ...] = (
    (
        "test_tool_with_logging",
        _with_logging,
        _NO_ARGS,
        "Tests tool that emits log messages during execution",
    ),
    ("test_tool_with_progress", _with_progress, _NO_ARGS, "Tests tool that reports progress notifications"),
    ("test_sampling", _sampling, _one("prompt"), "Tests server-initiated sampling (LLM completion request)"),
    (
        "test_elicitation",
        _elicitation,
        _one("message"),
        "Tests server-initiated elicitation (user input request)",
    ),
    (
        "test_elicitation_sep1034_defaults",
        _defaults,
        _NO_ARGS,
        "Tests elicitation with default values per SEP-1034",
    ),
    (
        "test_elicitation_sep1330_enums",
        _enums,
        _NO_ARGS,
        "Tests elicitation with enum schema improvements per SEP-1330",
    ),
)
