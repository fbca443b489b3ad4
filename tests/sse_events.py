"""Reading an SSE answer's JSON-RPC messages, as a client must: the events are split on blank lines and
each event's ``data:`` lines joined; an event with no data is skipped (the priming event, ``id: <n>-0``
and an empty ``data:``, a 2025-11-25 server opens every answer stream with: docs/resumption.md), as
are the notifications and requests before the response."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["sse_messages", "sse_response"]


def sse_messages(body: bytes | str) -> list[dict[str, Any]]:
    """Every JSON-RPC message of an SSE body, in order (events with empty data skipped)."""
    text = body.decode() if isinstance(body, bytes) else body
    messages = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:"))
        if data:
            messages.append(dict(json.loads(data)))
    return messages


def sse_response(body: bytes | str, rid: Any = None) -> dict[str, Any]:
    """The JSON-RPC response of an SSE body (to ``rid``, when given): its first message carrying a
    ``result`` or an ``error``."""
    for message in sse_messages(body):
        if ("result" in message or "error" in message) and (rid is None or message.get("id") == rid):
            return message
    raise AssertionError(f"no JSON-RPC response in {body!r}")
