"""Server notifications on the MCP endpoint's ``GET`` event streams (the session era's standalone
SSE streams, ``get_stream=True``): ``notifications/tools/list_changed``, ``resources/list_changed``,
``prompts/list_changed`` to every open stream, and ``notifications/resources/updated`` to the streams
of the sessions subscribed to that URI. The core says what changed (its ``notify`` hook, from any
thread); this module writes it, on the loop thread. Each notification sent is counted by method
(:attr:`StreamNotices.sent`) and in its stream's journal record (``bytes_sent`` of the ``GET``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pytest_mcpfaults.sidecar.inject import Delivery
from pytest_mcpfaults.sidecar.journal import Journal
from pytest_mcpfaults.sidecar.mcp import encode

__all__ = ["StreamNotices"]


class StreamNotices:
    """The open ``GET`` streams of one sidecar, by session id, and what was sent on them."""

    def __init__(self, journal: Journal, subscribed: Callable[[str | None, str], bool]) -> None:
        self.journal = journal
        self.subscribed = subscribed  # (session, uri) -> whether that session subscribed to uri
        #: each open stream -> its session, its GET's journal record, what was sent on it so far
        self.streams: dict[web.StreamResponse, _Stream] = {}
        self.sent: dict[str, int] = {}  # method -> how many sent (a dict: a Counter costs each sidecar 5 µs)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def open(self, stream: web.StreamResponse, session: str | None, rid: int, out: Delivery) -> None:
        """A ``GET`` stream is open (``out``: what was sent on it, counted on); its record says so."""
        self.loop = asyncio.get_running_loop()
        self.streams[stream] = _Stream(session, rid, out)
        self.journal.update_request(rid, status=out.status, bytes_sent=out.bytes_sent)

    def close(self, stream: web.StreamResponse) -> None:
        self.streams.pop(stream, None)

    def post(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send ``method`` to the streams it is for, from any thread (nothing when none is open)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
            loop.call_soon_threadsafe(self._send, method, dict(params or {}))

    def _send(self, method: str, params: dict[str, Any]) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        data, _ = encode(message, True)
        uri = params.get("uri") if method == "notifications/resources/updated" else None
        for stream, open_ in list(self.streams.items()):
            if uri is not None and not self.subscribed(open_.session, uri):
                continue
            with self._lock:
                self.sent[method] = self.sent.get(method, 0) + 1
            open_.out.bytes_sent += len(data)
            self.journal.update_request(open_.rid, bytes_sent=open_.out.bytes_sent)
            task = asyncio.ensure_future(stream.write(data))
            task.add_done_callback(_quiet)


@dataclass
class _Stream:
    session: str | None
    rid: int
    out: Delivery


def _quiet(task: asyncio.Future[Any]) -> None:
    """A write to a stream the client has just closed fails: nothing to tell anyone."""
    if not task.cancelled():
        task.exception()
