"""MCP Streamable HTTP: JSON-RPC dispatch for both protocol eras, transport sessions, replies.

* Stateless era (2026-07-28): ``server/discover`` answers a complete ``DiscoverResult``; every request
  is self-contained (``MCP-Protocol-Version: 2026-07-28``, ``Mcp-Method``, ``Mcp-Name`` headers);
  results carry ``resultType: "complete"``. No session, no GET stream, no DELETE.
* Session era (2025-03-26, 2025-06-18, 2025-11-25): ``initialize`` assigns ``Mcp-Session-Id``;
  later requests carry it; ``DELETE`` ends the session; an unknown or ended session gets 404.

This module decides *what* to answer (a :class:`Reply`); ``inject`` and ``server`` decide *how*.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.sidecar.tools import Tool, ToolResultError

__all__ = ["ERAS", "HANDSHAKE_VERSIONS", "MODERN_VERSIONS", "McpEndpoint", "McpRequest", "Reply"]

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
ERAS = ("auto", "stateless", "session")

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
UNSUPPORTED_PROTOCOL_VERSION = -32022
SERVER_INFO = {"name": "mcpfaults-sidecar", "version": "0.1.0"}


@dataclass
class Reply:
    """What to answer: an HTTP status, an optional JSON payload, headers, and the body format
    (``sse=None``: the sidecar's configured reply mode)."""

    status: int
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    sse: bool | None = None


@dataclass
class McpRequest:
    """A POST to the MCP endpoint, parsed."""

    message: dict[str, Any]
    method: str | None
    id: Any
    session_id: str | None
    era: str  # "stateless" or "session"

    @property
    def is_notification(self) -> bool:
        return "id" not in self.message

    @property
    def tool(self) -> str | None:
        if self.method != "tools/call":
            return None
        name = (self.message.get("params") or {}).get("name")
        return name if isinstance(name, str) else None

    @property
    def arguments(self) -> dict[str, Any]:
        args = (self.message.get("params") or {}).get("arguments") or {}
        return args if isinstance(args, dict) else {}


def rpc_error(code: int, message: str, id: Any = None, status: int = 200, data: Any = None) -> Reply:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return Reply(status, {"jsonrpc": "2.0", "id": id, "error": err}, sse=False if status != 200 else None)


def tool_result(payload: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A ``CallToolResult`` whose ``content[0].text`` is ``payload`` (JSON text unless a ``str``)."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _modern_version(headers: Mapping[str, str], message: Mapping[str, Any]) -> bool:
    if headers.get("MCP-Protocol-Version", "") in MODERN_VERSIONS:
        return True
    meta = (message.get("params") or {}).get("_meta") if isinstance(message.get("params"), dict) else None
    return isinstance(meta, dict) and meta.get("io.modelcontextprotocol/protocolVersion") in MODERN_VERSIONS


class McpEndpoint:
    """The MCP side of one sidecar: its era, tools and live transport sessions. Loop thread only."""

    def __init__(
        self,
        *,
        era: str,
        tools: Mapping[str, Tool],
        get_stream: bool,
        on_error: Callable[[str, BaseException], None],
    ) -> None:
        self.era = era
        self.on_error = on_error
        self.tools = tools
        self.get_stream = get_stream
        self.sessions: dict[str, str] = {}  # session id -> negotiated protocol version
        self.ended: set[str] = set()

    # -- parsing ---------------------------------------------------------------------------
    def parse(self, headers: Mapping[str, str], body: bytes) -> McpRequest | Reply:
        """Parse a POST body, or the error reply for a body that is not one JSON-RPC message."""
        try:
            message = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return rpc_error(PARSE_ERROR, "Parse error: body is not JSON", status=400)
        if isinstance(message, list):
            return rpc_error(INVALID_REQUEST, "Invalid Request: batches are not supported", status=400)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return rpc_error(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message", status=400)
        method = message.get("method")
        method = method if isinstance(method, str) else None
        era = "stateless" if method == "server/discover" or _modern_version(headers, message) else "session"
        return McpRequest(message, method, message.get("id"), headers.get("Mcp-Session-Id"), era)

    # -- dispatch --------------------------------------------------------------------------
    async def post(self, req: McpRequest, headers: Mapping[str, str]) -> Reply:
        if req.method is None:  # a response from the client (e.g. to a sampling request): accept
            return Reply(202)
        if req.era == "stateless":
            return await self._stateless(req, headers)
        return await self._session(req, headers)

    async def _stateless(self, req: McpRequest, headers: Mapping[str, str]) -> Reply:
        if self.era == "session":
            return rpc_error(INVALID_REQUEST, "Bad Request: Missing session ID", status=400)
        header_method = headers.get("Mcp-Method")
        if header_method is not None and header_method != req.method:
            return rpc_error(
                INVALID_REQUEST,
                f"Mcp-Method header {header_method!r} does not match {req.method!r}",
                req.id,
                400,
            )
        if req.is_notification:
            return Reply(202)
        if req.method == "server/discover":
            result: dict[str, Any] = {
                "supportedVersions": list(MODERN_VERSIONS),
                "capabilities": {"tools": {"listChanged": False}},
                "cacheScope": "private",
                "ttlMs": 0,
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
            }
            return self._ok(req, result)
        if req.method == "ping":
            return rpc_error(METHOD_NOT_FOUND, "Method not found: ping (removed in 2026-07-28)", req.id)
        reply = await self._common(req)
        if isinstance(reply.payload, dict) and isinstance(reply.payload.get("result"), dict):
            reply.payload["result"]["resultType"] = "complete"
            if req.method == "tools/list":
                reply.payload["result"].update(cacheScope="private", ttlMs=0)
        return reply

    async def _session(self, req: McpRequest, headers: Mapping[str, str]) -> Reply:
        if req.method == "initialize":
            if self.era == "stateless":
                return rpc_error(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version: this server speaks only the stateless era",
                    req.id,
                    data={"supported": list(MODERN_VERSIONS)},
                )
            asked = (req.message.get("params") or {}).get("protocolVersion")
            version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
            sid = uuid.uuid4().hex
            self.sessions[sid] = version
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": SERVER_INFO,
            }
            reply = self._ok(req, result)
            reply.headers["Mcp-Session-Id"] = sid
            return reply
        problem = self.check_session(req.session_id)
        if problem is not None:
            return problem
        assert req.session_id is not None
        reply_headers = {"Mcp-Session-Id": req.session_id}
        if req.is_notification:
            return Reply(202, headers=reply_headers)
        if req.method == "ping":
            reply = self._ok(req, {})
        else:
            reply = await self._common(req)
        reply.headers.update(reply_headers)
        return reply

    def check_session(self, session_id: str | None) -> Reply | None:
        """The 400/404 reply for a missing or unknown transport session, or ``None`` when it is live."""
        if self.era == "stateless":
            return rpc_error(
                INVALID_REQUEST, "Bad Request: this server is stateless (no sessions)", status=400
            )
        if not session_id:
            return rpc_error(INVALID_REQUEST, "Bad Request: Missing session ID", status=400)
        if session_id not in self.sessions:
            return rpc_error(INVALID_REQUEST, "Session not found", status=404)
        return None

    async def _common(self, req: McpRequest) -> Reply:
        if req.method == "tools/list":
            return self._ok(req, {"tools": [t.describe() for t in self.tools.values()]})
        if req.method == "tools/call":
            return await self.call_tool(req)
        return rpc_error(METHOD_NOT_FOUND, f"Method not found: {req.method}", req.id)

    async def call_tool(self, req: McpRequest) -> Reply:
        tool = self.tools.get(req.tool or "")
        if tool is None:
            return rpc_error(INVALID_PARAMS, f"Unknown tool: {req.tool}", req.id)
        problem = tool.check_arguments(req.arguments)
        if problem is not None:
            return rpc_error(INVALID_PARAMS, f"Invalid arguments for tool {tool.name}: {problem}", req.id)
        try:
            value = await tool.call(req.arguments)
        except ToolResultError as exc:
            return self._ok(req, tool_result(str(exc), is_error=True))
        except Exception as exc:  # a bug in the tool handler: answer like a real server, re-raise in the test
            self.on_error(tool.name, exc)
            return self._ok(req, tool_result(f"Error executing tool {tool.name}: {exc}", is_error=True))
        return self._ok(req, tool_result(value))

    def delete(self, session_id: str | None) -> Reply:
        problem = self.check_session(session_id)
        if problem is not None:
            if self.era == "stateless":
                return Reply(405, headers={"Allow": "POST"})
            return problem
        assert session_id is not None
        self.end_session(session_id)
        return Reply(200, headers={"Mcp-Session-Id": session_id})

    def end_session(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)
        self.ended.add(session_id)

    def forget_all(self) -> None:
        self.ended.update(self.sessions)
        self.sessions.clear()

    @staticmethod
    def _ok(req: McpRequest, result: dict[str, Any]) -> Reply:
        return Reply(200, {"jsonrpc": "2.0", "id": req.id, "result": result})


def encode(payload: Any, sse: bool) -> tuple[bytes, str]:
    """The body bytes and content type of a JSON payload, as JSON or as one SSE ``message`` event."""
    data = json.dumps(payload, separators=(",", ":")).encode()
    if sse:
        return b"event: message\ndata: " + data + b"\n\n", "text/event-stream"
    return data, "application/json"
