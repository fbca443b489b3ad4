"""The conformance set's tools that talk back to the client during the call, as the suite's reference
server's do: logging and progress notifications, ``sampling/createMessage`` and ``elicitation/create``
(the SEP-1034 defaults and SEP-1330 enum schemas included), each through the call's
:class:`~pytest_mcpfaults.sidecar.outbound.ToolContext`. A client's failure to answer is reported in
the result's text, as the reference server does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from pytest_mcpfaults.sidecar.outbound import ToolContext

__all__ = ["CONFORMANCE_CTX_TOOLS"]

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
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
_TITLED = [
    {"const": f"value{i}", "title": t}
    for i, t in ((1, "First Option"), (2, "Second Option"), (3, "Third Option"))
]
_OPTIONS = ["option1", "option2", "option3"]
#: SEP-1330: the five enum schema variants.
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": _OPTIONS},
        "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": _TITLED},
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
            "items": {
                "anyOf": [
                    {"const": f"value{i}", "title": t}
                    for i, t in ((1, "First Choice"), (2, "Second Choice"), (3, "Third Choice"))
                ]
            },
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
