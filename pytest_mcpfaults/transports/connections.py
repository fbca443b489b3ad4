"""The connections of one socket listener: each one's journal record, who closed it, the request it
is on, and its idle bound (a complete request must come within ``idle_timeout``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web_protocol

from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import ClosedBy
from pytest_mcpfaults.transports.inject import reset_transport


@dataclass(eq=False)
class Conn:
    id: int
    transport: asyncio.Transport
    lost: asyncio.Future[None]
    closed_by_us: bool = False
    current: int | None = None
    busy: int = 0  # requests being handled (mounted ones too)
    idle_timer: asyncio.TimerHandle | None = None
    idle_since: float = 0.0  # loop time the connection last became idle (opened, or a request ended)

    def reset(self) -> None:
        self.closed_by_us = True
        reset_transport(self.transport)

    def idle(self) -> float:
        return 0.0 if self.busy else max(0.0, asyncio.get_running_loop().time() - self.idle_since)


class Connections:
    """The live connections of one listening socket, by their aiohttp handler. Loop thread only."""

    def __init__(self, journal: Journal, idle_timeout: float | None) -> None:
        self.journal, self.idle_timeout = journal, idle_timeout
        self.live: dict[web_protocol.RequestHandler, Conn] = {}

    def made(self, handler: web_protocol.RequestHandler, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername")
        cid = self.journal.add_connection(f"{peer[0]}:{peer[1]}" if peer else "?")
        conn = self.live[handler] = Conn(cid, transport, asyncio.get_running_loop().create_future())
        self.arm_idle(conn)

    def lost(self, handler: web_protocol.RequestHandler) -> None:
        """Journal the close of a connection and forget it; its ``lost`` is done once the caller's own
        writes are (callbacks run later)."""
        conn = self.live.pop(handler, None)
        if conn is None:
            return
        if conn.idle_timer is not None:
            conn.idle_timer.cancel()
            conn.idle_timer = None
        by: ClosedBy = "sidecar" if conn.closed_by_us else "client"
        self.journal.update_connection(conn.id, closed_at=self.journal.now(), closed_by=by)
        if not conn.lost.done():
            conn.lost.set_result(None)

    def arm_idle(self, conn: Conn) -> None:
        """The connection is idle from now: (re)start its idle bound, a complete request must come
        within idle_timeout.

        Lazy, as aiohttp's keep-alive timer is: each request only moves ``idle_since``; the one timer
        re-arms itself for the new deadline when it fires early, and does nothing while a request is
        being handled (its end calls this again) or once the connection is gone."""
        if conn.busy or conn.lost.done():
            return
        loop = asyncio.get_running_loop()
        conn.idle_since = loop.time()  # read by blackhole(idle=) too, with or without idle_timeout
        if self.idle_timeout is not None and conn.idle_timer is None:
            conn.idle_timer = loop.call_at(conn.idle_since + self.idle_timeout, self.idle_expired, conn)

    def idle_expired(self, conn: Conn) -> None:
        conn.idle_timer = None
        if conn.busy or conn.lost.done() or conn.transport.is_closing():
            return
        assert self.idle_timeout is not None
        loop = asyncio.get_running_loop()
        deadline = conn.idle_since + self.idle_timeout
        if loop.time() < deadline:  # a request came and went since the timer was set
            conn.idle_timer = loop.call_at(deadline, self.idle_expired, conn)
            return
        conn.closed_by_us = True
        self.journal.update_connection(conn.id, timed_out=True)
        conn.transport.close()  # FIN, as servers end idle keep-alive / slow-header connections

    def abort_all(self) -> None:
        for conn in list(self.live.values()):
            conn.reset()
