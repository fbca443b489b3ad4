"""The JSON-RPC notifications in an SSE body as it is relayed, parsed chunk by chunk.

A proxying sidecar relays its upstream's SSE answer to a ``POST`` as it comes (:mod:`.relay`); the
upstream's own ``notifications/progress`` and ``notifications/message`` on it are journaled in
``journal.server_messages`` as the fake's tools' are. :class:`NotificationTap` is an upstream
response's ``tap``: fed each body chunk as it is read, it parses it
(:class:`~pytest_mcpfaults.sse_parse.SseParser`, which keeps only the event being received, at most
:data:`EVENT_MAX_BYTES`; a longer event is skipped) and hands each notification it completes to its
callback. Events with no data (a priming event), responses and requests are passed over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pytest_mcpfaults.sse_parse import SseParser

__all__ = ["EVENT_MAX_BYTES", "NotificationTap"]

#: The longest SSE event looked into for a notification; a longer one (a large result) is skipped.
EVENT_MAX_BYTES = 1 << 20


class NotificationTap:
    """An SSE body's notifications, handed to ``notified(method, params)`` as each event ends; chained
    before the tap ``then`` (which gets every chunk, unchanged)."""

    def __init__(self, notified: Callable[[str, Any], None], then: Callable[[bytes], None] | None) -> None:
        self.notified, self.then = notified, then
        self._parser = SseParser(EVENT_MAX_BYTES)

    def feed(self, chunk: bytes) -> None:
        if self.then is not None:
            self.then(chunk)
        for event in self._parser.feed(chunk):
            data = event["data"]
            if data:
                self._event(data)

    def _event(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
            self.notified(message["method"], message.get("params"))
