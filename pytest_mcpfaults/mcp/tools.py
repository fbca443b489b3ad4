"""Tools the sidecar serves, the ``basic`` set (echo, sleep) and the ``benchmark`` set (the other sets:
:mod:`pytest_mcpfaults.mcp.builtin`).

The benchmark set is modelled on real exgentic MCP sidecars: benchmark sessions are created and
deleted through tools, independently of the MCP transport session, and answer JSON text in
``content[0].text`` with exactly the real payload shapes.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.mcp.schema import ArgumentCheck, argument_checker, schema_problem

ToolHandler = Callable[..., Any] | Callable[..., Awaitable[Any]]
#: The name of the handler parameter that gets the call's ``ToolContext``.
CONTEXT = "ctx"


class ToolResultError(Exception):
    """Raise from a tool handler to answer a tool result with ``isError: true`` and this message.
    Any other exception is a bug in the handler: answered the same way, and re-raised in the test."""


@dataclass(frozen=True)
class ToolContent:
    """Return from a tool handler to answer these content blocks as they are (e.g. ``{"type": "image",
    "data": "<base64>", "mimeType": "image/png"}``) rather than one text block."""

    items: tuple[Mapping[str, Any], ...]

    def __post_init__(self) -> None:
        items = self.items
        if not isinstance(items, tuple) or not all(isinstance(i, Mapping) and "type" in i for i in items):
            raise ValueError(
                f"ToolContent: items must be a tuple of content blocks (mappings with a 'type', e.g. "
                f"{{'type': 'text', 'text': 'hi'}}), got {items!r}"
            )


@dataclass(frozen=True)
class Tool:
    """A tool: a plain sync or async callable, called with the call's arguments as keywords.

    A call's arguments are checked against ``input_schema`` (a JSON Schema object) before the handler
    runs. A handler returns a ``str`` (sent as text), a :class:`ToolContent` or any JSON value (sent
    as JSON text). On the socket sidecar a sync handler runs on a worker thread, off the shared loop;
    an async one runs on the loop and must not block it; both are bounded by ``tool_timeout``.

    A handler with a parameter named ``ctx`` gets the call's
    :class:`~pytest_mcpfaults.mcp.outbound.ToolContext` there (``async def``), or a
    :class:`~pytest_mcpfaults.mcp.worker_calls.SyncToolContext` (``def``): a thread cannot be
    killed, so a long sync handler polls its ``ctx.cancelled``.
    """

    name: str
    handler: ToolHandler
    input_schema: Mapping[str, Any]
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Tool: name must be a non-empty string, got {self.name!r}")
        if not callable(self.handler):
            raise ValueError(f"Tool {self.name!r}: handler must be callable, got {self.handler!r}")
        schema = self.input_schema
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise ValueError(
                f'Tool {self.name!r}: input_schema must be a JSON Schema object with "type": "object" '
                f"(e.g. {{'type': 'object', 'properties': {{}}}}), got {schema!r}"
            )
        problem = schema_problem(schema)
        if problem is not None:  # the arguments' check would misread it: every call refused, or none
            raise ValueError(f"Tool {self.name!r}: input_schema: {problem}")
        if self.wants_context and CONTEXT in schema.get("properties", {}):
            raise ValueError(
                f"Tool {self.name!r}: input_schema declares an argument {CONTEXT!r}, the name of the "
                "handler's context parameter: rename the argument"
            )

    @functools.cached_property
    def wants_context(self) -> bool:
        """Whether the handler takes ``ctx``."""
        accepts = self._accepts
        return accepts is not None and CONTEXT in accepts[0]

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether the handler is a coroutine function."""
        return inspect.iscoroutinefunction(self.handler)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": dict(self.input_schema)}

    @functools.cached_property
    def check_arguments(self) -> ArgumentCheck:
        """The input schema's check, read once at the first call (a later change to it is not seen)."""
        return argument_checker(self.input_schema)

    @functools.cached_property
    def _accepts(self) -> tuple[frozenset[str], bool] | None:
        """The keyword names the handler takes and whether it takes ``**kwargs`` (``None``: unknown)."""
        try:
            params = inspect.signature(self.handler).parameters.values()
        except (TypeError, ValueError):
            return None
        names = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        return names, any(p.kind is p.VAR_KEYWORD for p in params)

    def keywords(self, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The keywords to call the handler with, and the names left out: arguments the input schema
        does not declare and the handler does not take (as the mcp SDK's ``MCPServer`` ignores them).
        A declared argument the handler does not take is passed: that mismatch is the tool's bug."""
        accepts = self._accepts
        declared = self.input_schema.get("properties", {})
        if accepts is None or accepts[1]:
            return dict(arguments), []
        kwargs, ignored = {}, []
        for key, value in arguments.items():
            if key == CONTEXT and self.wants_context:  # the sidecar's, never the client's
                ignored.append(key)
            elif key in declared or key in accepts[0]:
                kwargs[key] = value
            else:
                ignored.append(key)
        return kwargs, ignored


@dataclass(frozen=True)
class BuiltinTool(Tool):
    """A tool of the sidecar's own sets: its sync handlers never block, so they run on the loop.
    ``client_paced``: its duration is the client's (``sleep``): running past ``tool_timeout`` is no bug."""

    client_paced: bool = False

    def __post_init__(self) -> None:  # the sidecar's own, written valid: not checked per sidecar
        pass


# -- basic tools -----------------------------------------------------------------------------------


def _echo(text: str) -> str:
    return text


async def _sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


#: The basic set is stateless: one copy serves every sidecar (handlers' facts cached once).
BASIC_TOOLS = (
    BuiltinTool(
        "echo",
        _echo,
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "Return the text unchanged.",
    ),
    BuiltinTool(
        "sleep",
        _sleep,
        {
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0}},
            "required": ["seconds"],
        },
        "Sleep for the given number of seconds, then answer.",
        client_paced=True,
    ),
)


# -- benchmark-session tools ---------------------------------------------------------------------------


@dataclass
class BenchmarkSession:
    """A benchmark session as the sidecar holds it (inspect through ``sidecar.benchmark``)."""

    session_id: str
    task_id: str
    evaluations: int = 0
    deleted: bool = False


@dataclass
class BenchmarkSessions:
    """State of the ``benchmark`` tool set: the tasks offered and the sessions created."""

    tasks: list[str] = field(default_factory=lambda: ["task-1", "task-2", "task-3"])
    sessions: dict[str, BenchmarkSession] = field(default_factory=dict)
    score: float = 1.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def live(self) -> list[BenchmarkSession]:
        """Sessions created and not deleted."""
        with self._lock:
            return [s for s in self.sessions.values() if not s.deleted]

    @property
    def deleted(self) -> list[BenchmarkSession]:
        with self._lock:
            return [s for s in self.sessions.values() if s.deleted]

    def forget(self) -> None:
        with self._lock:
            self.sessions.clear()

    def list_tasks(self) -> dict[str, Any]:
        return {"tasks": list(self.tasks)}

    def create_session(self, task_id: str) -> dict[str, Any]:
        if task_id not in self.tasks:
            return {"error": f"Unknown task_id {task_id}"}
        sid = str(uuid.uuid4())
        with self._lock:
            self.sessions[sid] = BenchmarkSession(sid, task_id)
        return {
            "status": "success",
            "session_id": sid,
            "task_id": task_id,
            "task": f"Solve {task_id}.",
            "context": {"task_id": task_id},
        }

    def evaluate_session(self, session_id: str) -> dict[str, Any]:
        with self._lock:
            s = self.sessions.get(session_id)
            if s is None or s.deleted:
                return {"error": f"No session found with session_id {session_id}"}
            s.evaluations += 1
        return {"status": "success", "success": self.score >= 1.0, "score": self.score, "is_finished": True}

    def delete_session(self, session_id: str) -> dict[str, Any]:
        with self._lock:
            s = self.sessions.get(session_id)
            if s is None or s.deleted:
                return {"error": f"No session found with session_id {session_id}"}
            s.deleted = True
        return {"status": "success"}

    def tools(self) -> list[BuiltinTool]:
        sid = {"type": "object", "properties": {"session_id": {"type": "string"}}, "required": ["session_id"]}
        return [
            BuiltinTool(
                "list_tasks",
                self.list_tasks,
                {"type": "object", "properties": {}},
                "List the benchmark's tasks.",
            ),
            BuiltinTool(
                "create_session",
                self.create_session,
                {"type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]},
                "Create a benchmark session for a task.",
            ),
            BuiltinTool("evaluate_session", self.evaluate_session, sid, "Evaluate a benchmark session."),
            BuiltinTool("delete_session", self.delete_session, sid, "Delete a benchmark session."),
        ]


#: Every built-in tool set; the sets served unless told otherwise.
TOOL_SETS = ("basic", "benchmark", "client", "conformance")
DEFAULT_TOOL_SETS = ("basic", "benchmark")
