"""Request round trip: the sidecar vs a bare aiohttp handler (``/health``, httpx keep-alive) and vs
the mcp SDK's own server (an MCP ``tools/call`` through one connected mcp 2.x ``Client``).

The SDK's ``MCPServer`` (stateless, JSON responses) runs under uvicorn in a process of its own, as it
is deployed; the sidecar both in the client's process (as the fixtures run it) and as
``python -m pytest_mcpfaults serve`` (a process of its own, like the SDK server). All three are
measured in the same run, interleaved call by call. The SDK server under uvicorn on a thread of the client's
own process (this script's earlier anchor) is printed last. That anchor once measured 48-62 ms a call:
not the thread, but its listener socket (see :func:`tcp_socket`), which cost every SDK response
about 40 ms and made the sidecar look 5-20x faster than the SDK server. Measured with the fix, the
sidecar is about 2x faster.

Targets: sidecar ``/health`` RTT within 1.2x of bare aiohttp; sidecar ``tools/call`` (as ``serve``,
out of process like the SDK server) no slower than the SDK's own server.
Run (from the repository root, in the dev venv): ``.venv/bin/python benchmarks/rtt.py``
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import _bench
import httpx
import uvicorn
from aiohttp import web
from mcp.client import Client
from mcp.server.mcpserver import MCPServer

from pytest_mcpfaults import Sidecar

HTTP_CALLS = 2000
MCP_CALLS = 600


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


def sdk_app() -> object:
    """The mcp SDK's ``MCPServer`` with an ``echo`` tool: stateless, JSON replies."""
    srv = MCPServer("bench", log_level="WARNING")

    @srv.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return srv.streamable_http_app(stateless_http=True, json_response=True)


def tcp_socket() -> socket.socket:
    """A loopback socket for uvicorn, on a free port. ``IPPROTO_TCP`` explicitly: asyncio sets
    ``TCP_NODELAY`` on accepted connections only when the listener's protocol is ``IPPROTO_TCP``, and
    ``socket.socket()`` says 0; without it every response written in two parts (uvicorn writes the
    headers, then the body) waits out the client's delayed ACK, about 40 ms a request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    return sock


def serve_sdk() -> None:
    """``rtt.py --serve-sdk``: the SDK server alone in this process; prints its URL, serves until killed."""
    sock = tcp_socket()
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(sdk_app(), log_level="warning", access_log=False)).run(sockets=[sock])


@contextmanager
def process(args: list[str], url_of: str) -> Iterator[str]:
    """A server in a process of its own; its first line of output gives the URL (``url_of``: 'line' or
    the JSON key); bounded start, terminated at the end."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        timer = threading.Timer(30, proc.kill)  # a server that never prints its URL must not hang us
        timer.start()
        line = proc.stdout.readline() if proc.stdout else ""
        timer.cancel()
        if not line:
            raise RuntimeError(f"{args} printed no URL (exit status {proc.poll()})")
        url = line.strip() if url_of == "line" else str(json.loads(line)[url_of])
        with httpx.Client() as http:  # ready when it answers
            deadline = time.monotonic() + 10
            while True:
                try:
                    http.post(url, json={})
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class SdkServerOnAThread:
    """The same SDK server under uvicorn on a thread of this (the client's) process."""

    def __enter__(self) -> str:
        app = sdk_app()
        sock = tcp_socket()
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)  # type: ignore[arg-type]
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


async def mcp_rtt(urls: list[str], n: int) -> list[list[float]]:
    """Seconds per ``tools/call echo`` for each URL, through one connected mcp 2.x client each,
    interleaved call by call (A, B, C, A, B, C ...) so that the noise of a shared machine hits all alike."""
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode="auto")) for url in urls]
        for client in clients:
            for _ in range(20):
                await client.call_tool("echo", {"text": "hi"})
        out: list[list[float]] = [[] for _ in urls]
        for _ in range(n):
            for client, times in zip(clients, out, strict=True):
                t0 = time.perf_counter()
                result = await client.call_tool("echo", {"text": "hi"})
                times.append(time.perf_counter() - t0)
                assert result.content[0].text == "hi"  # type: ignore[union-attr]
    return out


def main() -> None:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    here = str(Path(__file__).resolve())
    contenders = ["sidecar, in-process", "sidecar, `python -m pytest_mcpfaults serve`", "SDK, own process"]
    mcp: dict[str, list[float]] = {name: [] for name in [*contenders, "SDK, thread in the client"]}
    with Sidecar(patience=None) as sc:
        # The HTTP phase runs without uvicorn in the process: its thread competes for the GIL and
        # made both contenders 2-4x slower and noisier in trials.
        with BareAiohttp() as bare_url:
            side_h, bare_h = http_rtt_pair((sc.health_url, bare_url), HTTP_CALLS)
        serve = [sys.executable, "-m", "pytest_mcpfaults", "serve", "--json", "--patience", "none"]
        with (
            process(serve, "mcp_url") as serve_url,
            process([sys.executable, here, "--serve-sdk"], "line") as sdk_url,
        ):
            times = asyncio.run(mcp_rtt([sc.mcp_url, serve_url, sdk_url], MCP_CALLS))
            mcp.update(zip(contenders, times, strict=True))
        with SdkServerOnAThread() as thread_url:  # after the others: its thread would slow them down
            (mcp["SDK, thread in the client"],) = asyncio.run(mcp_rtt([thread_url], MCP_CALLS // 2))
        sc.check_errors()
        era = {r.era for r in sc.requests if r.mcp_method == "tools/call"}
    h_s, h_b = _bench.median(side_h), _bench.median(bare_h)
    m = {name: _bench.median(xs) for name, xs in mcp.items()}
    sdk = m["SDK, own process"]
    _bench.table(
        f"GET /health, httpx keep-alive (median of {HTTP_CALLS} each, interleaved call by call)",
        [
            ["Sidecar /health", _bench.fmt_s(h_s), "1.00x"],
            ["bare aiohttp handler", _bench.fmt_s(h_b), f"{h_s / h_b:.2f}x"],
        ],
        ["what", "median RTT", "sidecar / this"],
    )
    labels = {
        "sidecar, in-process": "Sidecar in the client's process (the fixtures)",
        "sidecar, `python -m pytest_mcpfaults serve`": "Sidecar, `python -m pytest_mcpfaults serve`",
        "SDK, own process": "mcp SDK MCPServer (stateless, json), uvicorn, own process",
        "SDK, thread in the client": "the same SDK server on a thread of the client's process (old anchor)",
    }
    _bench.table(
        f"MCP tools/call echo, mcp 2.x Client(mode='auto') (median of {MCP_CALLS} each, interleaved call "
        f"by call; the old anchor {MCP_CALLS // 2}, alone; sidecar era: {', '.join(sorted(map(str, era)))})",
        [[labels[n], _bench.fmt_s(t), f"{t / sdk:.2f}x"] for n, t in m.items()],
        ["what", "median RTT", "this / SDK own process"],
    )
    print()
    print(
        _bench.verdict(
            h_s <= 1.2 * h_b, f"sidecar /health RTT is {h_s / h_b:.2f}x bare aiohttp (target <= 1.2x)"
        )
    )
    served, inproc = m["sidecar, `python -m pytest_mcpfaults serve`"], m["sidecar, in-process"]
    print(
        _bench.verdict(
            served <= sdk,
            f"sidecar (serve) tools/call RTT is {served / sdk:.2f}x the SDK's own server in its own process "
            f"(target <= 1x); in-process: {inproc / sdk:.2f}x",
        )
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve-sdk"]:
        serve_sdk()
    else:
        main()
