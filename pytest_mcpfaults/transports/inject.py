"""Applying one fault to one response: how the bytes of a reply reach (or fail to reach) the client.

Everything here runs on the sidecar loop. Holding a request (``hold``) is the server's job because it
involves every connection; this module only asks for it through the ``hold`` callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import BodyShaper, Cut, Hold, Sleep, Step, Write, halve, shape_of
from pytest_mcpfaults.core.core import Answer
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.mcp.endpoint import reply_body


@dataclass
class Delivery:
    """What was actually sent for one request."""

    status: int | None = None
    bytes_sent: int = 0
    body_bytes: int | None = None  # the announced Content-Length of a streamed body (None: SSE)


def reset_transport(transport: asyncio.BaseTransport | None) -> None:
    """Close a connection with a TCP reset (RST), not a clean FIN."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed by the peer: abort() still closes it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()  # type: ignore[attr-defined]


def cut(transport: asyncio.BaseTransport | None, how: str = "rst") -> Dropped:
    """Cut a connection mid-answer, with a FIN (``how='fin'``: the client sees an incomplete
    response) or a reset; returns the :class:`Dropped` for the caller to raise."""
    if how == "rst":
        reset_transport(transport)
    elif transport is not None:
        transport.close()
    return Dropped()


async def deliver(
    request: web.BaseRequest,
    answer: Answer,
    *,
    hold: Callable[[F.Fault], Awaitable[None]],
    out: Delivery,
) -> web.StreamResponse:
    """Write the answer's reply to the client, shaped by its body fault
    (:mod:`~pytest_mcpfaults.behaviour.body`). Raises :class:`Dropped` when the connection was cut
    (``hold`` too, when a held request does not end in a release)."""
    reply, fault, sse = answer.reply, answer.fault, answer.sse
    shape = shape_of(fault)
    body, ctype = reply_body(reply, sse)
    if shape.halves:
        body = halve(body)
    headers = dict(reply.headers)
    if shape.resets_at_once:
        raise cut(request.transport)
    out.status = reply.status
    if not shape.streams:
        if body:
            headers["Content-Type"] = ctype  # what the content_type setter writes, without its parsing
        out.bytes_sent = len(body)
        return web.Response(status=reply.status, body=body or None, headers=headers)

    resp = web.StreamResponse(status=reply.status, headers=headers)
    resp.content_type = ctype
    if sse:
        resp.headers["Cache-Control"] = "no-cache"
    else:
        resp.content_length = out.body_bytes = len(body)
    await resp.prepare(request)
    assert fault is not None  # a shape that streams is a body fault's

    async def held() -> None:
        await hold(fault)  # stall and endless_sse: the body never ends until released

    shaper = BodyShaper(shape)
    await write_steps(request, resp, [*shaper.start(), *shaper.feed(body), *shaper.end()], held, out)
    await resp.write_eof()
    return resp


async def write_steps(
    request: web.BaseRequest,
    resp: web.StreamResponse,
    steps: Iterable[Step],
    hold: Callable[[], Awaitable[None]],
    out: Delivery,
) -> None:
    """Run a :class:`~pytest_mcpfaults.behaviour.body.BodyShaper`'s steps on an aiohttp response,
    counting ``out.bytes_sent``."""
    for step in steps:
        match step:
            case Write(data=data):
                await resp.write(data)  # b"": aiohttp sends the headers it buffered until now
                out.bytes_sent += len(data)
            case Sleep(seconds=seconds):
                await asyncio.sleep(seconds)
            case Hold():
                await hold()
            case Cut(how=how):
                raise cut(request.transport, how)
