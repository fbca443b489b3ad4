"""Deciding the answer to one stdio message with the sidecar's MCP endpoint and plan, and writing it as a
line. A stdio message is a POST to the MCP endpoint, with the headers a Streamable HTTP client would
send once the session exists (the transport session id from the ``initialize`` reply)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar import core
from pytest_mcpfaults.sidecar.inject import Dropped
from pytest_mcpfaults.sidecar.mcp import Reply
from pytest_mcpfaults.sidecar.routing import classify, forced_reply, jitter

if TYPE_CHECKING:
    from pytest_mcpfaults.stdio.server import StdioServer

__all__ = ["Answer", "Transport", "decide", "reply_line"]


class Transport(Protocol):
    async def hold(self, fault: F.Fault) -> None: ...
    async def die(self, restart: bool) -> None: ...
    async def pause(self, seconds: float) -> None: ...


@dataclass
class Answer:
    reply: Reply
    fault: F.Fault | None


async def decide(
    server: StdioServer, rid: int, headers: Mapping[str, str], body: bytes, transport: Transport
) -> Answer:
    """Classify the message, pick the fault, apply answer-level faults through ``transport``, and
    return the reply; raises ``Dropped`` when the child died on it or a hold was not released."""
    j = server.journal
    info = classify("POST", server.mcp_path, headers, body, mcp_path=server.mcp_path, health_path=None,
                    endpoint=server._mcp)  # fmt: skip
    core.journal_classified(j, rid, info, headers.get("Mcp-Session-Id"))
    fault, state = core.choose_fault(server._request_plan(), info, j, rid)
    if isinstance(fault, F.Die):
        await transport.die(fault.restart)
        raise Dropped
    if isinstance(fault, (F.Freeze, F.Hang)):
        await transport.hold(fault)
    elif isinstance(fault, F.Delay):
        fired = state.fired if state is not None else 0
        await transport.pause(fault.seconds + jitter(fault, fired))
    reply = forced_reply(fault, info, server._mcp, server.service_url)
    if reply is None:
        if info.mcp is None:
            assert info.bad_body is not None
            reply = info.bad_body
        else:
            reply = await server._mcp.post(info.mcp, headers)
    return Answer(reply, fault)


def reply_line(reply: Reply) -> str | None:
    """The JSON-RPC line answering ``reply`` (``None``: nothing to write, e.g. for a notification)."""
    if reply.payload is None or not isinstance(reply.payload, dict) or "jsonrpc" not in reply.payload:
        return None
    return json.dumps(reply.payload, separators=(",", ":"))
