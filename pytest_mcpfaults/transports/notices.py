"""Server notifications on the MCP endpoint's open streams: the session era's ``GET`` event streams
(``get_stream=True``) and the stateless era's ``subscriptions/listen`` answers. The core says what
changed (its ``notify`` hook, from any thread); this module writes it on the loop thread, counted by
method (:attr:`StreamNotices.sent`) and in its stream's journal record. A ``GET`` stream whose client
went away is *dormant*: what would have been sent on it is kept, with its event ids, for the client
to resume it (docs/resumption.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.mcp.endpoint import encode
from pytest_mcpfaults.mcp.listen import Listen
from pytest_mcpfaults.transports.inject import Delivery

#: The notices a listen stream may have waiting to be written; one more and the stream is cut (a
#: client that does not read its stream re-listens, as the spec says, rather than growing the queue).
LISTEN_BACKLOG = 1024
#: The dormant GET streams a sidecar keeps events for (one per session), the oldest forgotten first.
DORMANT_STREAMS = 64


class StreamNotices:
    """The open ``GET`` streams of one sidecar, by session id, and what was sent on them."""

    def __init__(
        self,
        journal: Journal,
        subscribed: Callable[[str | None, str], bool],
        with_id: Callable[[int, bytes], bytes],
    ) -> None:
        self.journal = journal
        self.subscribed = subscribed  # (session, uri) -> whether that session subscribed to uri
        self.with_id = with_id  # (stream, event) -> the event as the stream's next, with its id (kept)
        #: each open stream -> its session, its GET's journal record, what was sent on it so far
        self.streams: dict[web.StreamResponse, OpenStream] = {}
        self.listens: set[Listening] = set()  # the open subscriptions/listen streams
        self.sent: dict[str, int] = {}  # method -> how many sent (a dict: a Counter costs each sidecar 5 µs)
        #: each session's GET stream whose client went away, by its key: what would have been sent on it
        #: is kept (with its ids) for the client to resume it; the session's next plain GET forgets it
        self.dormant: dict[str, int] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def open(self, stream: web.StreamResponse, open_: OpenStream) -> None:
        """A ``GET`` stream is open; its record says so."""
        self.loop = asyncio.get_running_loop()
        self.streams[stream] = open_
        if open_.session is not None:  # resumed, or a fresh stream: the session's old one is gone either way
            self.dormant.pop(open_.session, None)
        self.journal.update_request(open_.rid, status=open_.out.status, bytes_sent=open_.out.bytes_sent)

    def close(self, stream: web.StreamResponse) -> None:
        """The client went away from ``stream``: it goes dormant, unless another response writes it."""
        gone = self.streams.pop(stream, None)
        if gone is None or gone.session is None:
            return
        if all(o.key != gone.key for o in self.streams.values()):
            self.dormant[gone.session] = gone.key
            while len(self.dormant) > DORMANT_STREAMS:  # the oldest first (sessions long gone, mostly)
                del self.dormant[next(iter(self.dormant))]

    def listen(self, listen: Listen, cut: Callable[[], None]) -> Listening:
        """A listen stream opens: the notices its filter selects are queued for it from now on (so
        none made once the client has the ack is lost); ``cut`` resets its connection."""
        self.loop = loop = asyncio.get_running_loop()
        listening = Listening(listen, asyncio.Queue(LISTEN_BACKLOG), loop.create_future(), cut)
        self.listens.add(listening)
        return listening

    def unlisten(self, listening: Listening) -> None:
        self.listens.discard(listening)
        if not listening.ended.done():
            listening.ended.set_result(None)

    async def end_listens(self, timeout: float) -> None:
        """The sidecar stops: each listen stream ends gracefully (its writer sends the listen
        request's result), within ``timeout`` seconds whatever its client does."""
        ending = list(self.listens)
        for listening in ending:
            if not listening.closing.done():
                listening.closing.set_result(None)
        if ending:
            await asyncio.wait([listening.ended for listening in ending], timeout=timeout)

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
        framed: dict[int, bytes] = {}  # one event per stream, however many responses write it
        for stream, open_ in list(self.streams.items()):
            if uri is not None and not self.subscribed(open_.session, uri):
                continue
            with self._lock:
                self.sent[method] = self.sent.get(method, 0) + 1
            if open_.key not in framed:
                framed[open_.key] = self.with_id(open_.key, data)
            event, then = framed[open_.key], None
            if open_.cut_at is not None and open_.out.bytes_sent + len(event) >= open_.cut_at:
                event, then = event[: open_.cut_at - open_.out.bytes_sent], open_.cut
                open_.cut_at = None  # it cuts once
            open_.out.bytes_sent += len(event)
            self.journal.update_request(open_.rid, bytes_sent=open_.out.bytes_sent)
            task = asyncio.ensure_future(_write(stream, event, then))
            task.add_done_callback(_quiet)
        for session, key in self.dormant.items():  # kept for the client to resume, not sent
            if key not in framed and (uri is None or self.subscribed(session, uri)):
                self.with_id(key, data)
        for listening in list(self.listens):
            if listening.listen.wants(method, params):
                self._queue(listening, method, params)

    def _queue(self, listening: Listening, method: str, params: dict[str, Any]) -> None:
        with self._lock:
            self.sent[method] = self.sent.get(method, 0) + 1
        try:
            listening.queue.put_nowait(encode(listening.listen.stamped(method, params), True)[0])
        except asyncio.QueueFull:  # its client does not read: cut, as the mcp SDK's server ends it
            self.listens.discard(listening)
            listening.cut()


@dataclass(eq=False)
class Listening:
    """One open listen stream: its request, the notices waiting for its writer, ``closing`` (set when
    the sidecar stops: end it gracefully), ``ended`` (set once its writer is done) and ``cut``."""

    listen: Listen
    queue: asyncio.Queue[bytes]
    closing: asyncio.Future[None]
    cut: Callable[[], None]
    ended: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class OpenStream:
    """An open ``GET`` stream: its session, its ``GET``'s journal record, what was sent on it (``out``,
    counted on), ``key`` (the stream its event ids name: the ``GET`` that opened it or the one it
    resumes) and ``cut`` (what cuts its connection once ``cut_at`` bytes of it are sent: a fault aimed
    at it)."""

    session: str | None
    rid: int
    out: Delivery
    key: int
    cut_at: int | None = None
    cut: Callable[[], None] | None = None


async def _write(stream: web.StreamResponse, data: bytes, then: Callable[[], None] | None) -> None:
    """Write ``data`` on ``stream``, then (a fault's cut) ``then``."""
    try:
        await stream.write(data)
    finally:
        if then is not None:
            then()


def _quiet(task: asyncio.Future[Any]) -> None:
    """A write to a stream the client has just closed fails: nothing to tell anyone."""
    if not task.cancelled():
        task.exception()
