"""MCP Streamable HTTP: JSON-RPC dispatch for both protocol eras, transport sessions, replies.

* Stateless era (2026-07-28): ``server/discover`` answers a complete ``DiscoverResult``; every request
  is self-contained; results carry ``resultType: "complete"``. No session, no GET stream, no DELETE.
* Session era: ``initialize`` assigns ``Mcp-Session-Id``; later requests carry it; ``DELETE`` ends
  the session; an unknown or ended session gets 404.

This module decides *what* to answer (a :class:`Reply`); the transports decide *how*.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any, Literal, Protocol, get_args

from pytest_mcpfaults.mcp.calls import ToolCalls
from pytest_mcpfaults.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    McpRequest,
    Reply,
    RequestEra,
    client_error,
    ok,
    rpc_error,
    sse_message,
)
from pytest_mcpfaults.mcp.listen import LISTEN_METHOD, listen_request
from pytest_mcpfaults.mcp.outbound import Link
from pytest_mcpfaults.mcp.surface import SURFACE_METHODS, SurfaceError
from pytest_mcpfaults.mcp.tools import Tool

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
Era = Literal["auto", "stateless", "session"]
"""The protocol era(s) a sidecar serves: ``'auto'`` is both."""
ERAS: tuple[Era, ...] = get_args(Era)
#: The session-era methods 2026-07-28 removed (answered -32601 in the stateless era).
STATELESS_REMOVED = ("ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe")
#: The methods whose 2026-07-28 results carry the caching hints (``cacheScope``, ``ttlMs``).
CACHEABLE = ("tools/list", "resources/list", "resources/read", "resources/templates/list", "prompts/list")
UNSUPPORTED_PROTOCOL_VERSION = -32022
SERVER_INFO = {"name": "mcpfaults-sidecar", "version": "0.1.0"}


def _valid_id(rid: Any) -> bool:
    if isinstance(rid, bool):
        return False
    return isinstance(rid, (str, int)) or (isinstance(rid, float) and math.isfinite(rid))


def envelope_problem(message: Mapping[str, Any]) -> Reply | None:
    """The error for a JSON-RPC 2.0 object whose members have the wrong types (``id: null`` but for
    bad ``params``: JSON-RPC's when the id cannot be trusted), or ``None``."""
    if "id" in message and not _valid_id(message["id"]):
        return client_error(
            INVALID_REQUEST,
            "Invalid Request: id must be a string or a finite number (not null, a boolean, NaN, "
            "Infinity, an object or an array)",
        )
    if "method" in message:
        if not isinstance(message["method"], str):
            return client_error(INVALID_REQUEST, "Invalid Request: method must be a string")
    elif "result" not in message and "error" not in message:
        return client_error(INVALID_REQUEST, "Invalid Request: neither a request nor a response")
    params = message.get("params")
    if params is not None and not isinstance(params, dict):  # null: absent, as the mcp SDK reads it
        return client_error(
            INVALID_PARAMS,
            f"Invalid params: params must be an object, got {type(params).__name__}",
            message.get("id"),
        )
    return None


def fit_structured(result: dict[str, Any], real: dict[str, Any]) -> None:
    """Give a forced successful tool result the shape of the upstream's real one: a tool with an output
    schema returns ``structuredContent`` (clients check that it is there); the forced text goes in it
    as the SDK wraps a plain value (``{"result": text}``), or as the object it is."""
    structured = real.get("structuredContent")
    if structured is None or result.get("isError"):
        return
    text = (result.get("content") or [{}])[0].get("text", "")
    if isinstance(structured, dict) and set(structured) == {"result"}:
        result["structuredContent"] = {"result": text}
        return
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    result["structuredContent"] = value if isinstance(value, dict) else {"result": text}


def learn_listing(schemas: dict[str, Mapping[str, Any]], response: Mapping[str, Any] | None) -> None:
    """Proxy mode: keep in ``schemas`` the output schema of each tool an upstream's ``tools/list``
    ``response`` lists (for :meth:`McpEndpoint.fit_forced`)."""
    result = response.get("result") if response is not None else None
    tools = result.get("tools") if isinstance(result, dict) else None
    for tool in tools if isinstance(tools, list) else ():
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str):
            continue
        schema = tool.get("outputSchema")
        if isinstance(schema, Mapping):
            schemas[name] = schema
        else:
            schemas.pop(name, None)


class AnswerSource(Protocol):
    """Where a replaying sidecar's answers come from (a cassette): the server it describes, and the
    recorded response to a request the endpoint does not answer itself."""

    server_info: Mapping[str, Any]
    capabilities: Mapping[str, Any]
    instructions: str | None

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The tools it lists (served in place of the sidecar's own)."""

    def answer(self, req: McpRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The recorded response to ``req`` and the notifications sent before it; a ``ValueError``
        saying why when there is none."""


class McpEndpoint:
    """The MCP side of one sidecar. Loop thread only."""

    def __init__(self, era: Era, get_stream: bool, calls: ToolCalls, source: AnswerSource | None) -> None:
        self.era, self.get_stream, self.calls, self.source = era, get_stream, calls, source
        self.tools, self.on_error, self.messages = calls.tools, calls.on_error, calls.messages
        self.sessions, self.surface = calls.sessions, calls.sessions.surface
        #: Proxy mode: the output schema of each upstream tool, as its relayed ``tools/list`` declared it.
        self.listed_schemas: dict[str, Mapping[str, Any]] = {}
        if source is not None:
            calls.replay = self.recorded

    def parse(self, headers: Mapping[str, str], body: bytes) -> McpRequest | Reply:
        """A POST body, or the error reply for one that is not one JSON-RPC message."""
        try:
            message = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return client_error(PARSE_ERROR, "Parse error: body is not JSON")
        except ValueError:  # JSON, but a number past the int-string limit (an id of 5,000 digits)
            limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
            return client_error(
                INVALID_REQUEST, f"Invalid Request: a number of over {limit} digits, too large to read"
            )
        except RecursionError:
            return client_error(PARSE_ERROR, "Parse error: JSON nested too deeply")
        if isinstance(message, list):
            return client_error(INVALID_REQUEST, "Invalid Request: batches are not supported")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return client_error(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
        problem = envelope_problem(message)
        if problem is not None:
            return problem
        method = message.get("method")
        meta = (message.get("params") or {}).get("_meta")  # params: an object or absent, as checked
        version = meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
        modern = method == "server/discover" or headers.get("MCP-Protocol-Version", "") in MODERN_VERSIONS
        era: RequestEra = "stateless" if modern or version in MODERN_VERSIONS else "session"
        return McpRequest(message, method, message.get("id"), headers.get("Mcp-Session-Id"), era)

    async def post(
        self, req: McpRequest, headers: Mapping[str, str], link: Link | None = None, rid: int = -1
    ) -> Reply:
        """``link`` and ``rid`` (its journal id): for the messages a tool sends on its own (``None``: a
        tool taking ``ctx`` cannot be served here)."""
        if req.method is None:  # a response from the client (to a tool's request): hand it over
            return _client_answer(self, req)
        if req.era == "stateless":
            return await self._stateless(req, headers, link, rid)
        return await self._session(req, link, rid)

    async def _stateless(
        self, req: McpRequest, headers: Mapping[str, str], link: Link | None, rid: int
    ) -> Reply:
        if self.era == "session":
            return client_error(INVALID_REQUEST, "Bad Request: Missing session ID")
        header_method = headers.get("Mcp-Method")
        if header_method is not None and header_method != req.method:
            return client_error(
                INVALID_REQUEST, f"Mcp-Method header {header_method!r} does not match {req.method!r}", req.id
            )
        if req.is_notification:
            return Reply(202)
        if req.method == "server/discover":
            result: dict[str, Any] = {
                "supportedVersions": list(MODERN_VERSIONS),
                "capabilities": self._capabilities("stateless"),
                "cacheScope": "private",
                "ttlMs": 0,
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": self._server_info()},
            }
            if self.source is not None and self.source.instructions is not None:
                result["instructions"] = self.source.instructions
            return ok(req, result)
        if req.method == LISTEN_METHOD:  # its stream; a filter that is not one: 400, as the mcp SDK
            made = listen_request(req.id, req.message.get("params") or {})
            if isinstance(made, str):
                return client_error(INVALID_PARAMS, f"Invalid params: {made}", req.id, 400)
            return Reply(200, made.closing(), notifications=[made.ack()], sse=True, listen=made)
        if req.method in STATELESS_REMOVED:
            return rpc_error(
                METHOD_NOT_FOUND, f"Method not found: {req.method} (removed in 2026-07-28)", req.id
            )
        reply = await self._common(req, link, rid)
        if isinstance(reply.payload, dict) and isinstance(reply.payload.get("result"), dict):
            reply.payload["result"].setdefault("resultType", "complete")
            if req.method in CACHEABLE:
                reply.payload["result"].update(cacheScope="private", ttlMs=0)
        return reply

    async def _session(self, req: McpRequest, link: Link | None, rid: int) -> Reply:
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
            sid = self.sessions.open(version, req.principal)
            result = {
                "protocolVersion": version,
                "capabilities": self._capabilities("session"),
                "serverInfo": self._server_info(),
            }
            if self.source is not None and self.source.instructions is not None:
                result["instructions"] = self.source.instructions
            reply = ok(req, result)
            reply.headers["Mcp-Session-Id"] = sid
            return reply
        problem = self.check_session(req.session_id, req.principal)
        if problem is not None:
            return problem
        assert req.session_id is not None
        if req.is_notification:
            reply = Reply(202)
        elif req.method == "ping":
            reply = ok(req, {})
        elif req.method == "logging/setLevel":  # the session's tools log at that level and above
            level = self.sessions.set_level(req.session_id, (req.message.get("params") or {}).get("level"))
            reply = (
                ok(req, {})
                if level is None
                else client_error(INVALID_PARAMS, f"Invalid params: {level}", req.id, 200)
            )
        else:
            reply = await self._common(req, link, rid)
        reply.headers["Mcp-Session-Id"] = req.session_id
        return reply

    def check_session(self, session_id: str | None, principal: str | None = None) -> Reply | None:
        """The 400/404 reply for a missing or unknown transport session, or ``None`` when it is live.
        A session is bound to the principal that opened it: another's gets the 404 of an unknown
        session, as the mcp SDK's session manager answers."""
        if self.era == "stateless":
            return client_error(INVALID_REQUEST, "Bad Request: this server is stateless (no sessions)")
        if not session_id:
            return client_error(INVALID_REQUEST, "Bad Request: Missing session ID")
        if not self.sessions.live(session_id, principal):
            return rpc_error(INVALID_REQUEST, "Session not found", status=404)
        return None

    async def _common(self, req: McpRequest, link: Link | None = None, rid: int = -1) -> Reply:
        if req.method == "tools/list":
            return ok(req, {"tools": [t.describe() for t in self.tools.values()]})
        if req.method == "tools/call":
            return await self.calls.call(req, link, rid)
        if self.source is not None:
            return self.recorded(req, rid)
        if req.method in SURFACE_METHODS:
            return self.answer_surface(req)
        return rpc_error(METHOD_NOT_FOUND, f"Method not found: {req.method}", req.id)

    def fit_forced(self, reply: Reply, req: McpRequest) -> None:
        """Give a fault's forced successful result for a tool declaring an ``outputSchema`` the
        ``structuredContent`` the spec says a server MUST provide (the mcp 2.x client refuses a result
        without it)."""
        payload = reply.payload
        result = payload.get("result") if isinstance(payload, dict) else None
        if req.method != "tools/call" or not isinstance(result, dict) or "structuredContent" in result:
            return
        name = req.tool or ""
        schema = self.listed_schemas.get(name)
        if schema is None:
            tool = self.tools.get(name)
            schema = tool.describe().get("outputSchema") if tool is not None else None
        if not isinstance(schema, Mapping):
            return
        props = schema.get("properties")
        wraps = isinstance(props, Mapping) and set(props) == {"result"}
        fit_structured(result, {"structuredContent": {"result": None} if wraps else {}})

    def _capabilities(self, era: RequestEra) -> dict[str, Any]:
        if self.source is not None:
            return dict(self.source.capabilities)
        # listChanged: a session's GET stream can tell, and a stateless client's subscriptions/listen
        told = era == "stateless" or self.get_stream
        surface = self.surface.capabilities(list_changed=told)
        return {"tools": {"listChanged": told}, "logging": {}, **surface}

    def _server_info(self) -> Mapping[str, Any]:
        return self.source.server_info if self.source is not None else SERVER_INFO

    def recorded(self, req: McpRequest, rid: int = -1) -> Reply:
        """A replaying sidecar's answer: the recorded response to ``req`` with the client's id, or for
        a request the cassette has no answer for, an error saying why, also re-raised in the test."""
        assert self.source is not None
        try:
            message, notifications = self.source.answer(req)
        except ValueError as exc:
            self.on_error("cassette", exc)
            return client_error(INTERNAL_ERROR, str(exc), req.id, 200)
        if "error" in message:
            reply = Reply(200, {"jsonrpc": "2.0", "id": req.id, "error": message["error"]})
        else:
            result = message.get("result")
            result = result if isinstance(result, dict) else {}
            if req.era == "session":  # recorded in the stateless era: framed for the session era
                for key in ("resultType", "cacheScope", "ttlMs"):
                    result.pop(key, None)
            reply = ok(req, result)
        if notifications:  # sent as the recorded server sent them: on an SSE answer
            reply.notifications, reply.sse = notifications, True
            if rid >= 0:
                for note in notifications:
                    self.messages.notified(note["method"], note.get("params"), rid, req.tool)
        return reply

    def answer_surface(self, req: McpRequest) -> Reply:
        """A surface request: a client's mistake is its JSON-RPC error (HTTP 200, as the mcp SDK
        answers); a template's or prompt's function that raises is the tool's bug (re-raised)."""
        assert req.method is not None
        params = req.message.get("params") or {}
        try:
            return ok(req, self.surface.answer(req.method, params, req.session_id))
        except SurfaceError as exc:
            return client_error(exc.code, str(exc), req.id, 200)
        except Exception as exc:  # a bug in a user's template or prompt function
            what = f"{req.method} {req.prompt or req.resource or ''}".strip()
            self.on_error(what, exc)
            reply = rpc_error(INTERNAL_ERROR, f"Internal error in {what}: {exc}", req.id)
            reply.error, reply.error_by = f"{type(exc).__name__}: {exc}", "tool"
            return reply

    def delete(self, session_id: str | None, principal: str | None = None) -> Reply:
        if self.era == "stateless":
            return Reply(405, headers={"Allow": "POST"})
        problem = self.check_session(session_id, principal)
        if problem is not None:
            return problem
        assert session_id is not None
        self.sessions.end(session_id)
        return Reply(200, headers={"Mcp-Session-Id": session_id})

    def forget_all(self) -> None:
        self.sessions.end_all()
        self.calls.rounds.forget()


def _client_answer(endpoint: McpEndpoint, req: McpRequest) -> Reply:
    """A client's JSON-RPC response: ``400`` in the stateless era, as the mcp SDK's 2026-07-28 transport
    answers; in a live session ``202``, as the SDK's does, handed to the tool only if its id names a
    request the sidecar sent that session."""
    if req.era == "stateless" and endpoint.era != "session":  # a session-only server knows no such era
        refused: Reply | None = client_error(
            INVALID_REQUEST,
            "Invalid Request: a POSTed JSON-RPC response answers nothing in the stateless era "
            "(2026-07-28): an input request is answered by retrying the call with its inputResponses "
            "and requestState",
        )
    else:
        refused = endpoint.check_session(req.session_id, req.principal)
    if refused is not None:
        endpoint.messages.refused(req.message)
        text = refused.error or refused.payload["error"]["message"]
        refused.error, refused.error_by = f"refused: a response to a server request: {text}", "client"
        return refused
    status, problem = endpoint.messages.answer_status(req.message, req.session_id)
    return Reply(status, error=problem, error_by="client" if problem is not None else None)


def reply_body(reply: Reply, sse: bool) -> tuple[bytes, str]:
    """The body bytes and content type of ``reply`` (empty for a reply without a body)."""
    if reply.text is not None:
        return reply.text.encode(), "text/plain"
    if reply.events is not None:
        return reply.events, "text/event-stream"
    if reply.payload is None:
        return b"", "application/json"
    if sse and reply.notifications:
        before = b"".join(encode(n, True)[0] for n in reply.notifications)
        data, ctype = encode(reply.payload, True)
        return before + data, ctype
    return encode(reply.payload, sse)


#: ``json.dumps(..., separators=(",", ":"))`` makes an encoder per call; every answer is encoded.
_compact = json.JSONEncoder(separators=(",", ":"))


def encode(payload: Any, sse: bool) -> tuple[bytes, str]:
    """The body bytes and content type of a JSON payload, as JSON or as one SSE ``message`` event."""
    data = _compact.encode(payload).encode()
    if sse:
        return sse_message(data), "text/event-stream"
    return data, "application/json"
