"""Tools the sidecar serves: a registry, the ``basic`` set (echo, sleep) and the ``benchmark`` set.

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

__all__ = ["TOOL_SETS", "BenchmarkSession", "BenchmarkSessions", "Tool", "ToolResultError", "builtin_tools"]

ToolHandler = Callable[..., Any] | Callable[..., Awaitable[Any]]
_JSON_TYPES = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


class ToolResultError(Exception):
    """Raise from a tool handler to answer a tool result with ``isError: true`` and this message.

    Any other exception is a bug in the handler: it is answered the same way, and also re-raised
    in the test at teardown.
    """


@dataclass(frozen=True)
class Tool:
    """A tool: a plain sync or async callable, called with the call's arguments as keywords.

    ``input_schema`` is required (a JSON Schema object with ``"type": "object"``). A handler returns
    a ``str`` (sent as text) or any JSON value (sent as JSON text in ``content[0].text``).
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

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether the handler is a coroutine function (its calls await)."""
        return inspect.iscoroutinefunction(self.handler)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": dict(self.input_schema)}

    def check_arguments(self, arguments: Mapping[str, Any]) -> str | None:
        """A message naming the first bad argument, or ``None`` (required keys and top-level types)."""
        for key in self.input_schema.get("required", ()):
            if key not in arguments:
                return f"missing required argument {key!r}"
        props = self.input_schema.get("properties", {})
        for key, value in arguments.items():
            want = props.get(key, {}).get("type")
            types = _JSON_TYPES.get(want) if isinstance(want, str) else None
            if types and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
                return f"argument {key!r} must be of type {want}, got {value!r}"
        return None

    async def call(self, arguments: Mapping[str, Any]) -> Any:
        result = self.handler(**arguments)
        if inspect.isawaitable(result):
            result = await result
        return result


# -- basic tools -----------------------------------------------------------------------------------


def _echo(text: str) -> str:
    return text


async def _sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def basic_tools() -> list[Tool]:
    return [
        Tool(
            "echo",
            _echo,
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "Return the text unchanged.",
        ),
        Tool(
            "sleep",
            _sleep,
            {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
            "Sleep for the given number of seconds, then answer.",
        ),
    ]


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

    def tools(self) -> list[Tool]:
        sid = {"type": "object", "properties": {"session_id": {"type": "string"}}, "required": ["session_id"]}
        return [
            Tool(
                "list_tasks",
                self.list_tasks,
                {"type": "object", "properties": {}},
                "List the benchmark's tasks.",
            ),
            Tool(
                "create_session",
                self.create_session,
                {"type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]},
                "Create a benchmark session for a task.",
            ),
            Tool("evaluate_session", self.evaluate_session, sid, "Evaluate a benchmark session."),
            Tool("delete_session", self.delete_session, sid, "Delete a benchmark session."),
        ]


TOOL_SETS = ("basic", "benchmark")


def builtin_tools(tool_sets: tuple[str, ...], benchmark: BenchmarkSessions) -> dict[str, Tool]:
    tools: list[Tool] = []
    if "basic" in tool_sets:
        tools += basic_tools()
    if "benchmark" in tool_sets:
        tools += benchmark.tools()
    return {t.name: t for t in tools}
