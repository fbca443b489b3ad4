"""A reply as the line a stdio child writes: JSON-RPC, one line, the request's id on every error."""

from __future__ import annotations

import json
from typing import Any

from pytest_mcpfaults.sidecar.mcp import Reply

__all__ = ["reply_line", "request_id"]


def request_id(body: bytes) -> Any:
    """The ``id`` of a message (``None`` when it has none or is not JSON)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return message.get("id") if isinstance(message, dict) else None


def reply_line(reply: Reply, request_id: Any = None) -> str | None:
    """The JSON-RPC line answering ``reply`` (``None``: nothing to write, e.g. for a notification).

    An error the HTTP sidecar answers with ``id: null`` (its HTTP status tells the client which POST
    failed, e.g. ``server/discover`` refused in the session era) carries the request's id over
    stdio, where replies are matched to requests by id alone."""
    payload = reply.payload
    if not isinstance(payload, dict) or "jsonrpc" not in payload:
        return None
    if "error" in payload and payload.get("id") is None and request_id is not None:
        payload = {**payload, "id": request_id}
    return json.dumps(payload, separators=(",", ":"))
