"""Teardown with 100 held connections: ``Sidecar.stop()`` while clients hold requests that a
blocking fault (Hang, Stall, freeze) keeps open, and never close them themselves.

Side by side: a bare aiohttp ``AppRunner.cleanup()`` with 100 requests held by hung handlers
(``shutdown_timeout=0.05``, the best a plain aiohttp server can do without aborting transports).
Target: ``stop()`` under 100 ms.
Run: ``.venv/bin/python benchmarks/teardown.py``
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import _bench
from aiohttp import web

from pytest_mcpfaults import Hang, Sidecar, Stall
from pytest_mcpfaults.transports import loop as sidecar_loop

N = 100
REPEAT = 7
TOOLS_CALL = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}'
)


def _open_held(port: int, n: int, path: str, body: bytes | None) -> list[socket.socket]:
    """``n`` raw client sockets, each with one request sent; none reads or closes."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if body is None:
            req = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        else:
            req = (
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                f"Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body
        s.sendall(req)
        socks.append(s)
    return socks


def _all_closed(socks: list[socket.socket]) -> bool:
    """Every client socket sees the server's end (EOF or reset) after reading what was sent."""
    ok = True
    for s in socks:
        s.settimeout(2)
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
        except TimeoutError:
            ok = False
        s.close()
    return ok


async def _thread_cpu() -> float:
    return time.thread_time()


def sidecar_stop(how: str) -> tuple[float, bool, float]:
    """Wall seconds of ``stop()``, whether every client saw its connection end, and the CPU seconds
    the sidecar loop thread spent on the stop (insensitive to other processes on a shared machine)."""
    if how == "hang":
        sc = Sidecar(patience=None, faults=[Hang(when="health")]).start()
        socks = _open_held(sc.port, N, "/health", None)
    elif how == "stall":
        sc = Sidecar(patience=None, faults=[Stall(after_bytes=10, when="tools/call")]).start()
        socks = _open_held(sc.port, N, "/mcp", TOOLS_CALL)
    else:
        sc = Sidecar(patience=None).start()
        sc.freeze()
        socks = _open_held(sc.port, N, "/mcp", TOOLS_CALL)
    sc.wait_held(N, timeout=30)
    c0 = sidecar_loop.run(_thread_cpu())
    t0 = time.perf_counter()
    sc.stop()
    took = time.perf_counter() - t0
    cpu = sidecar_loop.run(_thread_cpu()) - c0
    sc.check_errors()
    assert all(r.hold == "teardown" for r in sc.requests if r.held), sc.journal.format()
    return took, _all_closed(socks), cpu


def bare_cleanup(loop: asyncio.AbstractEventLoop) -> tuple[float, bool, float]:
    held = 0
    all_held = threading.Event()

    async def hung(_: web.Request) -> web.Response:
        nonlocal held
        held += 1
        if held == N:
            all_held.set()
        await asyncio.sleep(3600)
        return web.Response()

    async def start() -> tuple[web.AppRunner, int]:
        app = web.Application()
        app.router.add_get("/health", hung)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.05)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    runner, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    socks = _open_held(port, N, "/health", None)
    assert all_held.wait(30)
    c0 = asyncio.run_coroutine_threadsafe(_thread_cpu(), loop).result(10)
    t0 = time.perf_counter()
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(60)
    took = time.perf_counter() - t0
    cpu = asyncio.run_coroutine_threadsafe(_thread_cpu(), loop).result(10) - c0
    return took, _all_closed(socks), cpu


def main() -> None:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="bench-bare", daemon=True).start()
    rows: list[list[str]] = []
    worst = worst_cpu = 0.0

    def row(what: str, runs: list[tuple[float, bool, float]]) -> tuple[float, float]:
        wall, cpu = _bench.median([r[0] for r in runs]), _bench.median([r[2] for r in runs])
        rows.append(
            [what, _bench.fmt_s(wall), _bench.fmt_s(max(r[0] for r in runs)), _bench.fmt_s(cpu),
             str(all(r[1] for r in runs))]
        )  # fmt: skip
        return wall, cpu

    for how in ("hang", "stall", "freeze"):
        wall, cpu = row(
            f"Sidecar.stop(), {N} requests held by {how}", [sidecar_stop(how) for _ in range(REPEAT)]
        )
        worst, worst_cpu = max(worst, wall), max(worst_cpu, cpu)
    row(
        f"bare aiohttp AppRunner.cleanup(), {N} hung handlers, shutdown_timeout=0.05",
        [bare_cleanup(loop) for _ in range(3)],
    )
    _bench.table(
        f"teardown with {N} held connections whose clients never close (median of {REPEAT}; bare: 3)",
        rows,
        ["what", "median wall", "max wall", "median loop-thread CPU", "every client saw its connection end"],
    )
    print()
    print(
        _bench.verdict(
            worst < 0.1, f"slowest median Sidecar.stop() wall time {_bench.fmt_s(worst)} (target < 100 ms)"
        )
    )
    print(
        _bench.verdict(
            worst_cpu < 0.1,
            f"slowest median loop-thread CPU per stop {_bench.fmt_s(worst_cpu)} (target < 100 ms)",
        )
    )


if __name__ == "__main__":
    main()
