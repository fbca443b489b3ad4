"""Writing a legacy HTTP+SSE stream to the client, shaped by body faults. Runs on the sidecar loop.

Two kinds of body fault shape a stream. One aimed at the stream itself (``stall@GET /sse``) acts on the
stream's bytes from its start: ``stall`` / ``truncate`` / ``reset`` once ``after_bytes`` bytes of the
stream are sent (0: the status and headers, and not even the endpoint event), ``endless_sse`` after
the endpoint event, ``drip`` on every event, ``malformed_json`` on every message event. One aimed at a
message (``stall@tool:echo``) acts on the event that carries its reply, from that event's first byte.
A hold (``stall``, ``endless_sse``) blocks the whole stream until released, as a server stuck writing
does; the socket adapter journals it on the stream's ``GET`` record, with the fault that holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import Cut, Hold, halve_event, shape_of
from pytest_mcpfaults.transports.inject import Delivery, cut
from pytest_mcpfaults.transports.legacy_sse import StreamEvent


@dataclass
class StreamWriter:
    """Writes the events of one stream; ``fault`` is the body fault aimed at the stream (or ``None``);
    ``hold`` holds the stream (raises :class:`Dropped` unless released)."""

    request: web.BaseRequest
    resp: web.StreamResponse
    out: Delivery
    hold: Callable[[F.Fault], Awaitable[None]]
    fault: F.Fault | None

    def __post_init__(self) -> None:
        self.shape = shape_of(self.fault)
        # a stream fault that ends or holds acts once, at stream offset `at` (None: after the first event)
        self.pending = self.fault if self.shape.ending is not None else None
        self.at: int | None = self.shape.cut

    async def event(self, ev: StreamEvent) -> None:
        data = ev.data
        message = ev.rid is not None
        shape = shape_of(ev.fault)
        if message and (shape.halves or self.shape.halves):
            data = halve_event(data)
        drip = shape.drip or self.shape.drip
        cuts: list[tuple[int, F.Fault]] = []
        if shape.ending is not None and ev.fault is not None:  # at its offset in the event, or its end
            cuts.append((len(data) if shape.cut is None else min(shape.cut, len(data)), ev.fault))
        if self.pending is not None:
            if self.at is None:  # endless_sse: once the first event (the endpoint) is sent
                self.at = self.out.bytes_sent + len(data)
            offset = self.at - self.out.bytes_sent
            if offset <= len(data):
                cuts.append((max(offset, 0), self.pending))
                self.pending = None
        cuts.sort(key=lambda c: c[0])
        pos = 0
        for offset, fault in cuts:
            await self._write(data[pos:offset], drip)
            pos = offset
            await self._act(fault)
        await self._write(data[pos:], drip)

    async def _write(self, data: bytes, drip: tuple[int, float] | None) -> None:
        if not data:
            return
        step = drip[0] if drip is not None else len(data)
        for i in range(0, len(data), step):
            if i and drip is not None:
                await asyncio.sleep(drip[1])
            chunk = data[i : i + step]
            await self.resp.write(chunk)
            self.out.bytes_sent += len(chunk)

    async def _act(self, fault: F.Fault) -> None:
        ending = shape_of(fault).ending
        if isinstance(ending, Hold):
            await self.hold(fault)  # the stream goes quiet until released
            return
        raise cut(self.request.transport, ending.how if isinstance(ending, Cut) else "rst")  # mid-event
