"""The JSON-RPC notifications in an SSE body as it is relayed, parsed chunk by chunk.

A proxying sidecar relays its upstream's SSE answer to a ``POST`` as it comes (:mod:`.relay`); the
upstream's own ``notifications/progress`` and ``notifications/message`` on it are journaled in
``journal.server_messages`` as the fake's tools' are. :class:`NotificationTap` is an upstream
response's ``tap``: fed each body chunk as it is read, it keeps only the event being received (at most
:data:`EVENT_MAX_BYTES`; a longer event is skipped) and hands each notification it completes to its
callback. Events with no data (a priming event), responses and requests are passed over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["EVENT_MAX_BYTES", "NotificationTap"]

#: The longest SSE event looked into for a notification; a longer one (a large result) is skipped.
EVENT_MAX_BYTES = 1 << 20


class NotificationTap:
    """An SSE body's notifications, handed to ``notified(method, params)`` as each event ends; chained
    before the tap ``then`` (which gets every chunk, unchanged)."""

    def __init__(self, notified: Callable[[str, Any], None], then: Callable[[bytes], None] | None) -> None:
        self.notified, self.then = notified, then
        self._line = b""  # the line being received (its bytes so far)
        self._data: list[bytes] = []  # the event's data lines so far
        self._size = 0  # the event's bytes so far
        self._skipping = False  # the event is too long to look into
        self._cut = False  # the line being received was too long: its bytes so far were let go

    def feed(self, chunk: bytes) -> None:
        if self.then is not None:
            self.then(chunk)
        if self._cut:  # the rest of a line let go (nothing of it is kept): up to its end
            end = chunk.find(b"\n")
            if end < 0:
                return
            chunk, self._cut = chunk[end + 1 :], False
        *lines, rest = (self._line + chunk).split(b"\n")
        for line in lines:
            self._on_line(line.removesuffix(b"\r"))
        self._line = rest
        if len(rest) + self._size > EVENT_MAX_BYTES:
            self._skip()
            self._line, self._cut = b"", True

    def _skip(self) -> None:
        self._data, self._skipping = [], True

    def _on_line(self, line: bytes) -> None:
        if not line:  # the event ends
            if not self._skipping and self._data:
                self._event(b"\n".join(self._data))
            self._data, self._size, self._skipping = [], 0, False
            return
        self._size += len(line) + 1
        if self._skipping:
            return
        if self._size > EVENT_MAX_BYTES:
            self._skip()
        elif line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)

    def _event(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
            self.notified(message["method"], message.get("params"))
