"""An upstream whose event stream says one thing and then nothing for ever (tests/test_proxy.py's relayed
``GET`` stream, tests/test_proxy_surfaces.py's relayed ``subscriptions/listen``): what a proxying sidecar
does with a quiet long-lived stream, and whether the upstream's side ends when the client goes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Quiet:
    url: str
    #: set once the stream's first bytes are written
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    #: set when the handler was cancelled: the sidecar closed its connection to the upstream
    gone: asyncio.Event = field(default_factory=asyncio.Event)


@contextlib.asynccontextmanager
async def quiet_stream(method: str, first: bytes) -> AsyncIterator[Quiet]:
    """An aiohttp upstream on loopback answering ``method /mcp`` with an event stream: ``first``, then
    silence for 60 s (or until its connection is closed)."""
    quiet: Quiet | None = None

    async def stream(request: web.Request) -> web.StreamResponse:
        assert quiet is not None
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(first)
        quiet.opened.set()
        try:
            await asyncio.sleep(60)
        finally:
            quiet.gone.set()  # cancelled when the sidecar closed its connection
        return resp

    app = web.Application()
    app.router.add_route(method, "/mcp", stream)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    quiet = Quiet(f"http://127.0.0.1:{port}/mcp")
    try:
        yield quiet
    finally:
        await runner.cleanup()
