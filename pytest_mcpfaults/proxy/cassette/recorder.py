"""Recording a cassette in proxy mode: each exchange the proxy forwards, fed its answer's body as it
comes, kept with its SSE events and their timing once the answer ended whole (a cassette holds only
what the upstream really said), bounded (what was let go is counted in its ``cut``), written redacted.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.mcp.jsonrpc import McpRequest
from pytest_mcpfaults.proxy.cassette.fileformat import Cassette, Exchange, read_cassette, write_cassette
from pytest_mcpfaults.proxy.cassette.matching import Rules, same_request
from pytest_mcpfaults.proxy.cassette.redact import Redactor, redact_exchange, redact_text
from pytest_mcpfaults.proxy.sse_parse import SseParser

#: Request and answer headers not worth a cassette's line: the connection's, not MCP's.
_NOT_KEPT = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "date",
        "accept-encoding",
        "user-agent",
        "server",
    }
)


def recorded_event(event: Mapping[str, bytes | None]) -> dict[str, Any]:
    """A parsed SSE event (:class:`~pytest_mcpfaults.proxy.sse_parse.SseParser`) as a cassette keeps it:
    ``{"data": ..., "event": ..., "id": ..., "retry": ...}``, ``data`` parsed as JSON when it is (an
    empty or missing one is ``None``)."""
    out: dict[str, Any] = {
        name: value.decode("utf-8", errors="replace")
        for name, value in event.items()
        if name != "data" and value is not None
    }
    joined = (event.get("data") or b"").decode("utf-8", errors="replace")
    try:
        out["data"] = json.loads(joined) if joined else None
    except ValueError:
        out["data"] = joined
    return out


#: The most of one answer's notifications (its SSE events other than the answer) a recording keeps:
#: the rest are counted in the exchange's ``cut``, as an endless stream's are.
EVENTS_MAX_BYTES = 4 << 20
#: The most of one answer a recording keeps: a JSON body, or one SSE event; a longer one is not kept
#: (counted in ``cut``; the exchange has no answer to replay).
ANSWER_MAX_BYTES = 16 << 20


@dataclass
class Pending:
    """An exchange whose answer is still coming: its body so far (``feed``), bounded
    (:data:`EVENTS_MAX_BYTES`, :data:`ANSWER_MAX_BYTES`)."""

    exchange: Exchange
    sent_at: float
    sse: bool
    mid: Any
    body: bytearray = field(default_factory=bytearray)
    parser: SseParser = field(default_factory=lambda: SseParser(max_bytes=ANSWER_MAX_BYTES))
    kept: int = 0  # bytes of notifications kept
    cut_events: int = 0  # notifications not kept
    cut_bytes: int = 0  # their bytes, and those of a body too long to keep
    too_long: bool = False  # the JSON body is over ANSWER_MAX_BYTES: not kept

    def feed(self, chunk: bytes) -> None:
        if not self.sse:
            if self.too_long or len(self.body) + len(chunk) > ANSWER_MAX_BYTES:
                self.cut_bytes += len(self.body) + len(chunk)
                self.body, self.too_long = bytearray(), True
                return
            self.body += chunk
            return
        self._keep(self.parser.feed(chunk))

    def end(self) -> None:
        """The body ended: its last event, if it came without the blank line after it."""
        if self.sse:
            self._keep(self.parser.end())

    def cut(self) -> dict[str, int] | None:
        """What was not kept: ``{"events": N, "bytes": M}`` (``None``: all was)."""
        events = self.cut_events + self.parser.skipped
        size = self.cut_bytes + self.parser.skipped_bytes
        return {"events": events, "bytes": size} if events or size else None

    def _keep(self, events: list[dict[str, bytes | None]]) -> None:
        at = round(time.monotonic() - self.sent_at, 6)
        for event in events:
            size = len(event.get("data") or b"")
            if self.kept + size > EVENTS_MAX_BYTES:
                recorded = recorded_event(event) if b'"id"' in (event.get("data") or b"") else {}
                if not _answers(recorded.get("data"), self.mid):
                    self.cut_events += 1
                    self.cut_bytes += size
                    continue
            else:
                recorded = recorded_event(event)
                self.kept += size
            self.exchange.events.append({"at": at, **recorded})


class Recorder:
    """The exchanges of one sidecar's run, to be written to ``path`` (see the module docstring)."""

    def __init__(
        self, path: str, *, upstream: str, redact: Redactor | None = None, merge: bool = False
    ) -> None:
        self.path, self.upstream, self.redact, self.merge = path, upstream, redact, merge
        self.exchanges: list[Exchange] = []
        self._labels: dict[str, str] = {}  # real Mcp-Session-Id -> "session-N"

    def _label(self, sid: str | None) -> str | None:
        if not sid:
            return None
        return self._labels.setdefault(sid, f"session-{len(self._labels) + 1}")

    def start(
        self,
        http: str,
        headers: Mapping[str, str],
        m: McpRequest | None,
        *,
        status: int,
        response_headers: Iterable[tuple[str, str]],
        content_type: str,
        sent_at: float,
        headers_at: float,
    ) -> Pending:
        """A forwarded request (``m``: its JSON-RPC message, ``None`` for a ``DELETE``) whose answer's
        status line and headers came: its pending exchange, to be fed the body."""
        answer_headers = dict(response_headers)
        created = next((v for k, v in answer_headers.items() if k.lower() == "mcp-session-id"), None)
        sid = headers.get("Mcp-Session-Id") or created
        exchange = Exchange(
            http=http,
            method=m.method if m is not None else None,
            status=status,
            tool=m.tool if m is not None else None,
            params=(m.message.get("params") or {}) if m is not None else {},
            id=m.id if m is not None else None,
            era=m.era if m is not None else "session",
            version=headers.get("MCP-Protocol-Version"),
            session=self._label(sid),
            content_type=content_type,
            headers_at=round(headers_at - sent_at, 6),
            request_headers=self._kept(headers.items()),
            response_headers=self._kept(answer_headers.items()),
        )
        return Pending(exchange, sent_at, content_type == "text/event-stream", exchange.id)

    def _kept(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        out = {}
        for name, value in headers:
            lower = name.lower()
            if lower in _NOT_KEPT:
                continue
            out[name] = (self._label(value) or "") if lower == "mcp-session-id" else value
        return out

    def finish(self, pending: Pending, *, complete: bool) -> None:
        """The answer ended: keep the exchange if it came whole (``complete``)."""
        if not complete:
            return
        exchange = pending.exchange
        exchange.took = round(time.monotonic() - pending.sent_at, 6)
        if pending.sse:
            pending.end()
            exchange.response = next(
                (e["data"] for e in exchange.events if _answers(e.get("data"), pending.mid)), None
            )
        elif pending.body:
            try:
                message = json.loads(bytes(pending.body))
            except ValueError:
                message = None
            exchange.response = message if isinstance(message, dict) else None
        exchange.cut = pending.cut()
        self.exchanges.append(exchange)

    def save(self) -> None:
        """Write the exchanges redacted (and merged, for ``new_episodes``)."""
        kept = []
        for exchange in self.exchanges:
            data = redact_exchange(exchange.to_json(), self.redact)
            if data is not None:
                kept.append(Exchange.from_json(data, "record_redact's exchange"))
        if self.merge and os.path.exists(self.path):
            old = read_cassette(self.path).exchanges
            rules = Rules()
            kept = [*old, *(e for e in kept if not any(same_request(o, e, rules) for o in old))]
        write_cassette(self.path, Cassette(kept, upstream=redact_text(self.upstream)))


def _answers(message: Any, mid: Any) -> bool:
    return (
        isinstance(message, dict) and message.get("id") == mid and ("result" in message or "error" in message)
    )
