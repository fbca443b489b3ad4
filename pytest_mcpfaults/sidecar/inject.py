"""Applying one fault to one response: how the bytes of a reply reach (or fail to reach) the client.

Everything here runs on the sidecar loop. Holding a request (``hold``) is the server's job because it
involves every connection; this module only asks for it through the ``hold`` callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.core import Answer, Dropped
from pytest_mcpfaults.sidecar.mcp import reply_body

__all__ = ["Delivery", "Dropped", "deliver", "reset_transport"]


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


async def deliver(
    request: web.BaseRequest,
    answer: Answer,
    *,
    hold: Callable[[F.Fault], Awaitable[None]],
    out: Delivery,
) -> web.StreamResponse:
    """Write the answer's reply to the client, shaped by its body fault (stall, drip, truncate, reset,
    malformed JSON, endless SSE) when there is one. Raises :class:`Dropped` when the connection was
    deliberately cut; ``hold`` raises it too when a held request does not end in a release."""
    reply, fault, sse = answer.reply, answer.fault, answer.sse
    body, ctype = reply_body(reply, sse)
    if isinstance(fault, F.MalformedJson):
        body = body[: max(1, len(body) // 2)]
    headers = dict(reply.headers)
    if isinstance(fault, F.Reset) and fault.after_bytes == 0:
        reset_transport(request.transport)
        raise Dropped
    out.status = reply.status
    if not isinstance(fault, (F.Stall, F.Drip, F.Truncate, F.Reset, F.EndlessSse)):
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
    first = len(body) if isinstance(fault, F.EndlessSse) else getattr(fault, "after_bytes", len(body))
    if isinstance(fault, F.Drip):
        for i in range(0, len(body), fault.chunk_bytes):
            chunk = body[i : i + fault.chunk_bytes]
            await resp.write(chunk)
            out.bytes_sent += len(chunk)
            if i + fault.chunk_bytes < len(body):
                await asyncio.sleep(fault.interval)
        await resp.write_eof()
        return resp
    head = body[:first]
    if head:
        await resp.write(head)
        out.bytes_sent = len(head)
    else:
        await resp.write(b"")  # aiohttp buffers the headers until the first body write: send them now
    if isinstance(fault, F.Truncate):
        transport = request.transport
        if transport is not None:
            transport.close()  # FIN after a short body: the client sees an incomplete response
        raise Dropped
    if isinstance(fault, F.Reset):
        reset_transport(request.transport)
        raise Dropped
    await hold(fault)  # Stall and EndlessSse: the body never ends until released
    rest = body[first:]
    if rest:
        await resp.write(rest)
        out.bytes_sent += len(rest)
    await resp.write_eof()
    return resp
