"""Replaying a cassette: the fake sidecar whose tools and answers come from the cassette (:class:`Replay`,
the endpoint's :class:`~pytest_mcpfaults.mcp.endpoint.AnswerSource`), so argument checks, ``tool:NAME``
triggers and every fault act on the real server's tools and answers as on the fake's. The endpoint
keeps the sessions and ids and frames the result for the client's era (what is recorded is the same in
both). Notifications recorded during an answer are replayed before it; the server's requests are not.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.mcp.jsonrpc import McpRequest
from pytest_mcpfaults.mcp.tools import Tool
from pytest_mcpfaults.proxy.cassette.fileformat import Cassette, CassetteError, nests_deeper
from pytest_mcpfaults.proxy.cassette.matching import Matcher, Rules

_SERVER_INFO = {"name": "mcpfaults-cassette", "version": "0.1.0"}
#: How deep a recorded tool's ``tools/list`` entry (its schemas included) may nest: it is copied and
#: its schema checks every call's arguments, each a level at a time.
MAX_TOOL_DEPTH = 64


def _never(**_: Any) -> Any:  # a recorded tool's answer comes from the cassette, never from a handler
    raise RuntimeError("a recorded tool is answered from its cassette")


@dataclass(frozen=True)
class RecordedTool(Tool):
    """A tool as the recorded server listed it (``listed``: its ``tools/list`` entry, kept whole)."""

    listed: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.listed))


class Replay:
    """The answers of one cassette (see the module docstring). Loop thread only."""

    def __init__(self, cassette: Cassette, rules: Rules | None = None) -> None:
        self.cassette = cassette
        where = f"cassette {cassette.path}" if cassette.path else "the cassette"
        self.matcher = Matcher(cassette.exchanges, rules or Rules(), where)
        self.server_info: Mapping[str, Any] = _SERVER_INFO
        self.capabilities: Mapping[str, Any] = {"tools": {"listChanged": False}}
        self.instructions: str | None = None
        self.tools: dict[str, RecordedTool] = {}
        for e in cassette.exchanges:
            result = (e.response or {}).get("result")
            if not isinstance(result, dict):
                continue
            if e.method in ("initialize", "server/discover") and self.server_info is _SERVER_INFO:
                self._server(e.method, result)
            elif e.method == "tools/list":
                for listed in result.get("tools") or []:
                    self._tool(listed, f"{where}, line {e.line}")
        for e in cassette.exchanges:  # called but never listed: served with a schema taking any object
            if e.tool is not None and e.tool not in self.tools:
                self._tool({"name": e.tool, "inputSchema": {"type": "object"}}, f"{where}, line {e.line}")

    def _server(self, method: str, result: Mapping[str, Any]) -> None:
        info = result.get("serverInfo")
        if method == "server/discover":
            info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo")
        if isinstance(info, dict):
            self.server_info = info
        if isinstance(result.get("capabilities"), dict):
            self.capabilities = result["capabilities"]
        if isinstance(result.get("instructions"), str):
            self.instructions = result["instructions"]

    def _tool(self, listed: Any, where: str) -> None:
        name = listed.get("name") if isinstance(listed, dict) else None
        if not isinstance(name, str) or name in self.tools:
            return
        if at := nests_deeper(listed, MAX_TOOL_DEPTH):
            raise CassetteError(
                f"{where}: recorded tool {name[:80]!r} cannot be served: its tools/list entry nests "
                f"deeper than {MAX_TOOL_DEPTH} levels (at {at})"
            )
        try:
            self.tools[name] = RecordedTool(
                name, _never, listed.get("inputSchema") or {}, listed.get("description") or "", listed=listed
            )
        except ValueError as exc:
            raise CassetteError(f"{where}: recorded tool {name!r} cannot be served: {exc}") from None

    def answer(self, req: McpRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The recorded JSON-RPC response for ``req`` (its top level and its result's copied: the
        endpoint sets the id and frames the result) and the notifications the server sent before it
        (a progress notification with the client's own progress token, or left out when the client
        asked for none); :class:`CassetteError` when none matches."""
        params = req.message.get("params") or {}
        exchange = self.matcher.match(req.method, params if isinstance(params, dict) else {})
        assert exchange.response is not None
        message = dict(exchange.response)
        if isinstance(message.get("result"), dict):
            message["result"] = dict(message["result"])
        return message, _notifications(exchange.events, params if isinstance(params, dict) else {})


def _notifications(events: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    out = []
    for event in events:
        data = event.get("data")
        if not isinstance(data, dict) or "id" in data or not isinstance(data.get("method"), str):
            continue
        if data["method"] == "notifications/progress":
            if token is None:
                continue
            data = {**data, "params": {**(data.get("params") or {}), "progressToken": token}}
        out.append(data)
    return out
