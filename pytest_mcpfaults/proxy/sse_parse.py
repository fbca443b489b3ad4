"""Server-sent events parsed as the bytes come: a sans-IO parser that keeps only the event being
received, and lets an event longer than ``max_bytes`` go as it comes. Each byte is looked at once: a
16 MB event in 64 KiB chunks costs milliseconds.
"""

from __future__ import annotations

_FIELDS = (b"event", b"id", b"retry")


class SseParser:
    """The events of one SSE body, each its fields as bytes: ``data`` (its lines joined with ``\\n``,
    ``None`` when it had none) and ``event``, ``id``, ``retry`` when given; other fields are passed over."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self._line: list[bytes] = []  # the line being received: its pieces so far
        self._held = 0  # their bytes
        self._event: dict[str, bytes | None] = {}  # the event's fields so far
        self._data: list[bytes] | None = None  # its data lines so far (None: none yet)
        self._size = 0  # the event's bytes so far
        self._skipping = False  # the event is too long to keep
        self._cut = False  # the line being received was too long: its bytes so far were let go
        self.skipped = 0  # events skipped for being longer than max_bytes
        self.skipped_bytes = 0  # their bytes (lines with their line ends)

    def feed(self, chunk: bytes) -> list[dict[str, bytes | None]]:
        """The events ``chunk`` completes."""
        done: list[dict[str, bytes | None]] = []
        start = 0
        if self._cut:  # the rest of a line let go (nothing of it is kept): up to its end
            start = chunk.find(b"\n") + 1
            if start == 0:
                return done
            self._cut = False
        while (end := chunk.find(b"\n", start)) >= 0:
            line = b"".join((*self._line, chunk[start:end])) if self._line else chunk[start:end]
            self._line, self._held = [], 0
            self._on_line(line.removesuffix(b"\r"), done)
            start = end + 1
        if start < len(chunk):  # a line still coming: its pieces kept, joined once it ends
            self._line.append(chunk[start:])
            self._held += len(chunk) - start
        if self.max_bytes is not None and self._held + self._size > self.max_bytes:
            self._skip()
            self._line, self._held, self._cut = [], 0, True
        return done

    def end(self) -> list[dict[str, bytes | None]]:
        """The last event, when the body ended without the blank line after it."""
        done: list[dict[str, bytes | None]] = []
        if self._line:
            self._on_line(b"".join(self._line).removesuffix(b"\r"), done)
        self._line, self._held, self._cut = [], 0, False
        self._on_line(b"", done)
        return done

    def _skip(self) -> None:
        self._event, self._data, self._skipping = {}, None, True

    def _on_line(self, line: bytes, done: list[dict[str, bytes | None]]) -> None:
        if not line:  # the event ends
            if self._skipping:
                self.skipped += 1
                self.skipped_bytes += self._size
            elif self._data is not None or self._event:
                data = b"\n".join(self._data) if self._data is not None else None
                done.append({**self._event, "data": data})
            self._event, self._data, self._size, self._skipping = {}, None, 0, False
            return
        self._size += len(line) + 1
        if self._skipping:
            return
        if self.max_bytes is not None and self._size > self.max_bytes:
            self._skip()
            return
        name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if name == b"data":
            if self._data is None:
                self._data = []
            self._data.append(value)
        elif name in _FIELDS:
            self._event[name.decode()] = value
