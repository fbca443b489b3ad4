"""aiohttp plumbing that the sidecar's listener and the OTLP receiver's own listener share: a low-level
server that reports each connection's opening and loss and stamps every response it sends, and a
bounded read of a request body."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web, web_protocol, web_server

__all__ = ["ConnectionReportingServer", "Stamp", "read_body"]

#: What every response of a server is given just before its status line and headers go out.
Stamp = Callable[[web.StreamResponse], None]


class _StampedRequest(web.BaseRequest):
    """A request whose every response — the handler's, an event stream's, the adapter's own error
    answers, aiohttp's own (400 for a malformed request) — passes its server's stamp when prepared:
    ``StreamResponse.prepare`` awaits the request's ``_prepare_hook`` (aiohttp's hook for
    ``on_response_prepare``, a no-op on ``BaseRequest``) before it writes the headers."""

    ATTRS = getattr(web.BaseRequest, "ATTRS", frozenset()) | frozenset(["_stamp"])  # aiohttp DEBUG checks it
    _stamp: Stamp | None = None

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        if self._stamp is not None:
            self._stamp(response)


class ConnectionReportingServer(web_server.Server):
    """aiohttp's low-level server, with each connection's opening and loss reported to its owner
    (the sidecar's listener and the OTLP receiver's own both journal their connections)."""

    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
        made: Callable[[web_protocol.RequestHandler, asyncio.Transport], None],
        lost: Callable[[web_protocol.RequestHandler], None],
        stamp: Stamp | None = None,
        **kwargs: Any,
    ) -> None:
        if stamp is not None:

            def stamped(
                message: Any, payload: Any, protocol: Any, writer: Any, task: Any
            ) -> web.BaseRequest:  # aiohttp's request_factory: the Server's own, with our class
                loop = asyncio.get_running_loop()
                request = _StampedRequest(message, payload, protocol, writer, task, loop)
                request._stamp = stamp
                return request

            kwargs["request_factory"] = stamped
        super().__init__(handler, **kwargs)
        self._made, self._lost = made, lost

    def connection_made(self, handler: web_protocol.RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self._made(handler, transport)

    def connection_lost(self, handler: web_protocol.RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self._lost(handler)


async def read_body(request: web.BaseRequest, max_bytes: int) -> bytes | None:
    """The request's whole body, or ``None`` once it is over ``max_bytes`` (announced or received:
    never buffered beyond that)."""
    announced = request.content_length
    if announced is not None and announced > max_bytes:
        return None
    if announced is not None and "Content-Encoding" not in request.headers:
        # The body is exactly the announced bytes (a compressed body inflates to more): usually one
        # read, with no second read for its end.
        first = await request.content.read(announced)
        if len(first) == announced or not first:
            return first
        chunks, size = [first], len(first)
    else:
        chunks, size = [], 0
    while chunk := await request.content.read(65536):
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
