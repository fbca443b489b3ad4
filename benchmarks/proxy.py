"""Proxy mode's cost: ``tools/call`` through ``Sidecar(upstream=...)`` vs straight to the same upstream.

The upstream is the mcp SDK's own ``MCPServer`` with an ``echo`` tool under uvicorn in a process of its
own (as it is deployed), served twice: stateless with JSON replies (the lightest answer it gives), to
an mcp 2.x ``Client(mode='auto')``; and with its defaults, to a ``Client(mode='legacy')``, whose
session-era requests the SDK answers with SSE (the body relayed chunk by chunk; to a stateless-era
client the defaults answer JSON too, which the first version of this script measured twice without
saying so). For each, one connected client talks to the upstream directly and another through a
proxying sidecar in this process (the fixtures' arrangement), interleaved call by call so the noise of
a shared machine hits both alike. Before timing, one ``initialize`` through the proxy checks the
framing each row names (the stateless JSON upstream answers every request in JSON).

Target: through the proxy within 1.3x the direct call plus 0.5 ms (``proxy <= 1.3 * direct + 0.5 ms``).
Run (from the repository root, in the dev venv): ``.venv/bin/python benchmarks/proxy.py``
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

import _bench
import httpx
from mcp.client import Client
from rtt import process

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.transports import loop as sidecar_loop

CALLS = 600
#: upstream mode: (row label, the client's connect mode, the answer's Content-Type through the proxy)
MODES = {
    "json": ("stateless, JSON replies", "auto", "application/json"),
    "sse": ("defaults, session era: SSE replies", "legacy", "text/event-stream"),
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def sdk_app(mode: str) -> object:
    from mcp.server.mcpserver import MCPServer

    srv = MCPServer("bench-upstream", log_level="WARNING")

    @srv.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    if mode == "json":
        return srv.streamable_http_app(stateless_http=True, json_response=True)
    return srv.streamable_http_app()


def serve_sdk(mode: str) -> None:
    """``proxy.py --serve-sdk MODE``: the upstream alone in this process; prints its URL, serves until
    killed. The listener is ``IPPROTO_TCP`` so that asyncio sets ``TCP_NODELAY`` (see ``rtt.py``)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(sdk_app(mode), log_level="warning", access_log=False)  # type: ignore[arg-type]
    uvicorn.Server(config).run(sockets=[sock])


def loop_cpu() -> float:
    """CPU seconds the sidecar loop thread has used (``thread_time`` read on that thread): what proxying
    costs the sidecar, whatever else the shared machine runs."""

    async def read() -> float:
        return time.thread_time()

    return sidecar_loop.run(read())


async def pair(direct: str, proxied: str, n: int, mode: str) -> tuple[list[float], list[float], float]:
    """Seconds per ``tools/call echo``, direct and through the proxy, interleaved call by call; and
    the sidecar loop's CPU seconds per proxied call (median). ``mode``: the clients' connect mode."""
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode=mode)) for url in (direct, proxied)]
        for client in clients:
            for _ in range(30):
                await client.call_tool("echo", {"text": "hi"})
        out: tuple[list[float], list[float]] = ([], [])
        loop = asyncio.get_running_loop()
        cpu: list[float] = []
        for _ in range(n):
            for client, times in zip(clients, out, strict=True):
                c0 = loop_cpu() if times is out[1] else 0.0
                t0 = loop.time()
                result = await client.call_tool("echo", {"text": "hi"})
                times.append(loop.time() - t0)
                if times is out[1]:
                    cpu.append(loop_cpu() - c0)
                assert result.content[0].text == "hi"  # type: ignore[union-attr]
    return out[0], out[1], _bench.median(cpu)


async def fake_cpu_per_call(url: str, n: int) -> tuple[None, float]:
    """The sidecar loop's CPU seconds per ``tools/call echo`` the fake answers itself (median)."""
    async with Client(url, mode="auto") as client:
        for _ in range(30):
            await client.call_tool("echo", {"text": "hi"})
        cpu = []
        for _ in range(n):
            c0 = loop_cpu()
            await client.call_tool("echo", {"text": "hi"})
            cpu.append(loop_cpu() - c0)
    return None, _bench.median(cpu)


def main() -> None:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    here = str(Path(__file__).resolve())
    rows, verdicts = [], []
    for mode, (what, connect, framing) in MODES.items():
        with (
            process([sys.executable, here, "--serve-sdk", mode], "line") as url,
            Sidecar(upstream=url, patience=None) as sc,
        ):
            probe = httpx.post(sc.mcp_url, json=INITIALIZE, headers=ACCEPT, timeout=10)  # session era
            got = probe.headers.get("content-type", "")
            assert probe.status_code == 200, probe.status_code
            assert got.startswith(framing), f"{what}: the upstream answered {got!r} through the proxy"
            direct, proxied, cpu = asyncio.run(pair(url, sc.mcp_url, CALLS, connect))
            sc.check_errors()
            calls = [r for r in sc.requests if r.mcp_method == "tools/call"]
            assert calls
            assert all(r.forwarded and r.upstream.status == 200 for r in calls)
        d, p = _bench.median(direct), _bench.median(proxied)
        budget = 1.3 * d + 0.5e-3
        rows.append(
            [what, _bench.fmt_s(d), _bench.fmt_s(p), f"{p / d:.2f}x", _bench.fmt_s(p - d), _bench.fmt_s(cpu)]
        )
        verdicts.append(
            _bench.verdict(
                p <= budget,
                f"{what}: through the proxy {_bench.fmt_s(p)} <= 1.3 x direct + 0.5 ms "
                f"= {_bench.fmt_s(budget)}",
            )
        )
    with Sidecar(patience=None) as fake:  # the anchor of the CPU column: the fake answering the call itself
        _, fake_cpu = asyncio.run(fake_cpu_per_call(fake.mcp_url, CALLS))
    _bench.table(
        f"MCP tools/call echo to the mcp SDK's MCPServer (uvicorn, own process), mcp 2.x "
        f"Client (mode='auto' / 'legacy'), median of {CALLS} each, direct and through Sidecar(upstream=...) "
        "interleaved call by call",
        rows,
        ["upstream", "direct", "through the proxy", "ratio", "added", "sidecar loop CPU per proxied call"],
    )
    print(
        f"\nanchor: the fake sidecar (no upstream) answering the same tools/call itself: sidecar loop CPU "
        f"{_bench.fmt_s(fake_cpu)} per call (median of {CALLS})"
    )
    print()
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-sdk"]:
        serve_sdk(sys.argv[2])
    else:
        main()
