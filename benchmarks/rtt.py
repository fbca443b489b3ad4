"""Request round trip: the sidecar vs a bare aiohttp handler (``/health``, httpx keep-alive) and vs
the mcp SDK's own server (an MCP ``tools/call`` through one connected mcp 2.x ``Client``).

Targets: sidecar ``/health`` RTT within 1.2x of bare aiohttp; sidecar ``tools/call`` no slower than
the SDK's ``MCPServer`` (stateless, JSON responses, under uvicorn on a thread).
Run: ``/work/venv/bin/python benchmarks/rtt.py``
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

import _bench
import httpx
import uvicorn
from aiohttp import web
from mcp.client import Client
from mcp.server.mcpserver import MCPServer

from pytest_mcpfaults import Sidecar

HTTP_CALLS = 2000
MCP_CALLS = 250
ROUNDS = 5  # alternate the contenders, median of the per-round medians


# -- anchors ---------------------------------------------------------------------------------------
class BareAiohttp:
    """A bare aiohttp ``/health`` on its own loop thread."""

    def __enter__(self) -> str:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="bench-bare", daemon=True).start()

        async def health(_: web.Request) -> web.Response:
            return web.json_response({"status": "ok"})

        async def start() -> int:
            app = web.Application()
            app.router.add_get("/health", health)
            self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

        port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        return f"http://127.0.0.1:{port}/health"

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


class SdkServer:
    """The mcp SDK's ``MCPServer`` (stateless, JSON replies) under uvicorn on a thread."""

    def __enter__(self) -> str:
        srv = MCPServer("bench", log_level="WARNING")

        @srv.tool()
        def echo(text: str) -> str:
            """Echo the text."""
            return text

        app = srv.streamable_http_app(stateless_http=True, json_response=True)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{port}/mcp"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


# -- measurements ----------------------------------------------------------------------------------
def http_rtt_pair(urls: tuple[str, str], n: int) -> tuple[list[float], list[float]]:
    """Seconds per GET for two URLs, interleaved call by call (A, B, A, B ...) so that the noise of a
    shared machine hits both alike; each over its own kept-alive httpx connection."""
    out: tuple[list[float], list[float]] = ([], [])
    with httpx.Client() as ca, httpx.Client() as cb:
        clients = (ca, cb)
        for c, url in zip(clients, urls, strict=True):
            for _ in range(50):
                assert c.get(url).status_code == 200
        for _ in range(n):
            for c, url, times in zip(clients, urls, out, strict=True):
                t0 = time.perf_counter()
                r = c.get(url)
                times.append(time.perf_counter() - t0)
                assert r.status_code == 200
    return out


async def mcp_rtt(url: str, n: int) -> float:
    """Median seconds per ``tools/call echo`` through one connected mcp 2.x client."""
    async with Client(url, mode="auto") as client:
        for _ in range(20):
            await client.call_tool("echo", {"text": "hi"})
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            result = await client.call_tool("echo", {"text": "hi"})
            times.append(time.perf_counter() - t0)
            assert result.content[0].text == "hi"  # type: ignore[union-attr]
    return _bench.median(times)


def main() -> None:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    side_m: list[float] = []
    sdk_m: list[float] = []
    with Sidecar(patience=None) as sc:
        # The HTTP phase runs without uvicorn in the process: its thread competes for the GIL and
        # made both contenders 2-4x slower and noisier in trials.
        with BareAiohttp() as bare_url:
            side_h, bare_h = http_rtt_pair((sc.health_url, bare_url), HTTP_CALLS)
        with SdkServer() as sdk_url:
            for _ in range(ROUNDS):
                side_m.append(asyncio.run(mcp_rtt(sc.mcp_url, MCP_CALLS // ROUNDS)))
                sdk_m.append(asyncio.run(mcp_rtt(sdk_url, MCP_CALLS // ROUNDS)))
        sc.check_errors()
        era = {r.era for r in sc.requests if r.mcp_method == "tools/call"}
    h_s, h_b, m_s, m_k = (_bench.median(x) for x in (side_h, bare_h, side_m, sdk_m))
    _bench.table(
        f"GET /health, httpx keep-alive (median of {HTTP_CALLS} each, interleaved call by call)",
        [
            ["Sidecar /health", _bench.fmt_s(h_s), "1.00x"],
            ["bare aiohttp handler", _bench.fmt_s(h_b), f"{h_s / h_b:.2f}x"],
        ],
        ["what", "median RTT", "sidecar / this"],
    )
    _bench.table(
        f"MCP tools/call echo, mcp 2.x Client(mode='auto') "
        f"(median of {MCP_CALLS}; sidecar era: {', '.join(sorted(e or '?' for e in era))})",
        [
            ["Sidecar", _bench.fmt_s(m_s), "1.00x"],
            ["mcp SDK MCPServer (stateless, json) under uvicorn", _bench.fmt_s(m_k), f"{m_s / m_k:.2f}x"],
        ],
        ["what", "median RTT", "sidecar / this"],
    )
    print()
    print(
        _bench.verdict(
            h_s <= 1.2 * h_b, f"sidecar /health RTT is {h_s / h_b:.2f}x bare aiohttp (target <= 1.2x)"
        )
    )
    print(
        _bench.verdict(
            m_s <= m_k, f"sidecar tools/call RTT is {m_s / m_k:.2f}x the SDK's own server (target <= 1x)"
        )
    )


if __name__ == "__main__":
    main()
