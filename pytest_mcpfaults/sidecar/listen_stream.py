"""The socket transport's ``subscriptions/listen`` stream (2026-07-28): the answer of one listen
request, open until the client closes it or the sidecar stops. Its bytes are its ack, the change
notices queued for it (:class:`~pytest_mcpfaults.sidecar.notices.Listening`) and, when the sidecar
stops, the listen request's result (the graceful end the spec gives a server). The body fault aimed at
it (the target ``subscriptions/listen``) shapes those bytes as they go, as it shapes any answer's
(:class:`~pytest_mcpfaults.sidecar.body.BodyShaper`): ``reset`` / ``truncate`` cut the stream after
``after_bytes`` bytes, ``stall`` holds it there (bounded by patience only while the ack is not out: a
client awaiting its ack waits for an answer, one with its ack is listening, as it should), ``drip``
paces it, ``malformed_json`` cuts the ack's JSON in half, and ``close_stream`` ends it cleanly after
``after_events`` events without the result (a dropped stream: no event ids, 2026-07-28 has no
resumption). What was sent is counted in the request's journal record (``status``, ``bytes_sent``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from pytest_mcpfaults.sidecar.body import PLAIN, BodyShaper, Step, halve_event, shape_of
from pytest_mcpfaults.sidecar.core import Answer
from pytest_mcpfaults.sidecar.errors import Dropped
from pytest_mcpfaults.sidecar.inject import Delivery, reset_transport, write_steps
from pytest_mcpfaults.sidecar.journal import Journal
from pytest_mcpfaults.sidecar.mcp import encode
from pytest_mcpfaults.sidecar.notices import Listening

__all__ = ["SSE_HEADERS", "serve_listen"]

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: ``hold(bounded)``: hold the stream (a ``stall``), bounded by patience or not.
HoldStream = Callable[[bool], Awaitable[None]]


async def serve_listen(
    request: web.BaseRequest,
    answer: Answer,
    listening: Listening,
    *,
    lost: asyncio.Future[None],
    hold: HoldStream,
    out: Delivery,
    journal: Journal,
    rid: int,
) -> web.StreamResponse:
    """Serve one listen stream until the client closes it (raises :class:`Dropped`), the sidecar
    stops (the result, then the end of the stream) or its body fault ends it."""
    listen = listening.listen
    shape = shape_of(answer.fault)
    if shape.resets_at_once:  # RST before the status line
        reset_transport(request.transport)
        raise Dropped
    events_left = shape.resumable[0] if shape.resumable is not None else None  # close_stream
    shaper = BodyShaper(PLAIN if shape.resumable is not None else shape)
    ack = encode(listen.ack(), True)[0]
    if shape.halves:
        ack = halve_event(ack)

    async def held() -> None:
        if listening.closing.done():  # stopping: a held stream just ends
            raise Dropped
        await hold(out.bytes_sent < len(ack))  # the ack is the stream's first bytes

    resp = web.StreamResponse(status=answer.reply.status, headers={**answer.reply.headers, **SSE_HEADERS})
    await resp.prepare(request)
    out.status = resp.status

    async def send(steps: list[Step]) -> None:
        await write_steps(request, resp, steps, held, out)
        journal.update_request(rid, status=out.status, bytes_sent=out.bytes_sent)

    sent = 0
    if events_left != 0:  # close_stream(after_events=0): not even the ack
        await send([*shaper.start(), *shaper.feed(ack)])
        sent = 1
    while events_left is None or sent < events_left:
        nxt = asyncio.ensure_future(listening.queue.get())
        await asyncio.wait((nxt, listening.closing, lost), return_when=asyncio.FIRST_COMPLETED)
        if not nxt.done():
            nxt.cancel()
            if lost.done():  # the client closed its stream: its subscription ends
                raise Dropped
            await send([*shaper.feed(encode(listen.closing(), True)[0]), *shaper.end()])  # stopping
            break
        await send(shaper.feed(nxt.result()))
        sent += 1
    await resp.write_eof()
    return resp
