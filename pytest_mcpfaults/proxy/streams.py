"""How each answer relayed from an HTTP upstream ended, as an HTTP message (``Sidecar.upstream_server
.streams``; docs/proxy.md tells the ends apart): written on the loop thread, read as copies.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

Framing = Literal["chunked", "content-length", "close-delimited"]
StreamEnd = Literal["complete", "cut", "closed by the sidecar"]
#: The most answers kept (the oldest are dropped first).
MAX_STREAMS = 1000


@dataclass(slots=True)
class RelayedStream:
    """One answer of the upstream as the sidecar read it, written on the loop thread as it is read
    (:meth:`StreamLog.snapshot` hands out copies). Times are ``time.monotonic()`` seconds."""

    seq: int  # its place among the upstream's answers (1 for the first)
    method: str
    path: str
    session: str | None  # the request's Mcp-Session-Id
    via: str  # the sidecar's end of the connection ('127.0.0.1:53994': the peer the server's log names)
    status: int
    content_type: str
    framing: Framing
    opened_at: float = field(default_factory=time.monotonic)  # its status line and headers came
    ended_at: float | None = None
    bytes: int = 0  # body bytes read
    last_byte_at: float | None = None
    end: StreamEnd | None = None  # None: still open
    detail: str = ""  # what the reader saw at the end ('' when complete)

    @property
    def open(self) -> bool:
        return self.end is None

    def describe(self, now: float | None = None) -> str:
        """One line: the request, the answer's framing, how it ended (or how long it has been open)."""
        now = time.monotonic() if now is None else now
        sid = f"session {self.session}, " if self.session else ""
        answer = f"{self.status} {self.content_type}, {self.framing}"
        head = f"{self.method} {self.path} ({sid}from {self.via}): {answer}"
        if self.end is None:
            last = (
                f", its last byte {now - self.last_byte_at:.1f} s ago"
                if self.last_byte_at is not None
                else ""
            )
            return f"{head}: still open after {now - self.opened_at:.1f} s, {self.bytes} body bytes{last}"
        how = self.end if not self.detail else f"{self.end}: {self.detail}"
        took = (self.ended_at or now) - self.opened_at
        return f"{head}: {how} after {took:.1f} s, {self.bytes} body bytes"

    def read(self, n: int) -> None:
        self.bytes += n
        self.last_byte_at = time.monotonic()

    def ended(self, end: StreamEnd, detail: str = "") -> None:
        """How it ended; the first end named stays."""
        if self.end is None:
            self.end, self.detail, self.ended_at = end, detail, time.monotonic()


class StreamLog:
    """The answers of one upstream, the newest last (at most :data:`MAX_STREAMS`)."""

    def __init__(self) -> None:
        self._entries: deque[RelayedStream] = deque(maxlen=MAX_STREAMS)
        self._lock = threading.Lock()
        self._seq = 0

    def opened(self, entry: RelayedStream) -> RelayedStream:
        """Keep ``entry``, an answer just opened, numbered after the last (its ``seq``)."""
        with self._lock:
            self._seq += 1
            entry.seq = self._seq
            self._entries.append(entry)
        return entry

    def snapshot(self) -> list[RelayedStream]:
        with self._lock:
            return [copy.copy(e) for e in self._entries]
