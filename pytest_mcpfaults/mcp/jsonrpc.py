"""The JSON-RPC messages of the MCP endpoint: a parsed request, what to answer, and the replies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pytest_mcpfaults.mcp.listen import Listen
from pytest_mcpfaults.mcp.tools import ToolContent

_T = TypeVar("_T")
RequestEra = Literal["stateless", "session"]
"""The era of one request (:attr:`McpRequest.era`, ``RequestRecord.era``)."""
ErrorBy = Literal["client", "tool", "sidecar", "upstream"]
"""Whose mistake an error was (``RequestRecord.error_by``)."""

#: The headers of every SSE answer.
EVENT_STREAM = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR = -32603


@dataclass
class Reply:
    """What to answer (``sse=None``: the sidecar's configured reply mode)."""

    status: int
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    sse: bool | None = None
    error: str | None = None  # what went wrong, for the journal
    error_by: ErrorBy | None = None  # whose mistake: "client" or "tool" (see RequestRecord.error_by)
    text: str | None = None  # a plain-text body instead of a JSON payload (HTTP-level refusals)
    #: JSON-RPC notifications sent as SSE events before the payload's (a replayed answer's progress and
    #: logs); not sent when the reply is framed as JSON.
    notifications: list[dict[str, Any]] = field(default_factory=list)
    events: bytes | None = None  # an event stream's bytes, framed already (a resumable stream)
    #: A ``subscriptions/listen`` answer: a transport that keeps streams open serves it until the
    #: sidecar stops; any other sends ``notifications`` (the ack) and the payload (the graceful end).
    listen: Listen | None = None


@dataclass
class McpRequest:
    """A POST to the MCP endpoint, parsed."""

    message: dict[str, Any]
    method: str | None
    id: Any
    session_id: str | None
    era: RequestEra
    #: Who sent it, with ``auth=``: the principal its bearer token stands for (``None``: no ``auth=``).
    #: A transport session is bound to the principal that opened it (:meth:`McpEndpoint.check_session`).
    principal: str | None = None

    @property
    def is_notification(self) -> bool:
        return "id" not in self.message

    @property
    def tool(self) -> str | None:
        return self._param("name", str) if self.method == "tools/call" else None

    @property
    def meta(self) -> dict[str, Any]:
        return self._param("_meta", dict) or {}

    @property
    def prompt(self) -> str | None:
        return self._param("name", str) if self.method == "prompts/get" else None

    @property
    def resource(self) -> str | None:
        return self._param("uri", str) if self.method in _RESOURCE_METHODS else None

    @property
    def arguments(self) -> dict[str, Any]:
        return self._param("arguments", dict) or {}

    def _param(self, name: str, kind: type[_T]) -> _T | None:
        params = self.message.get("params")
        value = params.get(name) if isinstance(params, dict) else None
        return value if isinstance(value, kind) else None


_RESOURCE_METHODS = ("resources/read", "resources/subscribe", "resources/unsubscribe")


def rpc_error(code: int, message: str, id: Any = None, status: int = 200, data: Any = None) -> Reply:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return Reply(status, {"jsonrpc": "2.0", "id": id, "error": err}, sse=False if status != 200 else None)


def client_error(code: int, message: str, id: Any = None, status: int = 400) -> Reply:
    """A JSON-RPC error answering a client's mistake: journaled as the client's, never a sidecar error."""
    reply = rpc_error(code, message, id, status)
    reply.error, reply.error_by = message, "client"
    return reply


def tool_result(payload: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A ``CallToolResult`` of ``payload`` (JSON text unless a ``str``, or a :class:`ToolContent`)."""
    if isinstance(payload, ToolContent):
        return {"content": [dict(item) for item in payload.items], "isError": is_error}
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def ok(req: McpRequest, result: dict[str, Any]) -> Reply:
    return Reply(200, {"jsonrpc": "2.0", "id": req.id, "result": result})


def sse_message(data: bytes) -> bytes:
    """``data`` framed as one SSE ``message`` event."""
    return b"event: message\ndata: " + data + b"\n\n"
