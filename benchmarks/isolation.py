"""Isolation: an unrelated sidecar's ``/health`` RTT while another sidecar runs a 3 s sync tool, against
the same RTT idle, measured side by side in one run; and what the rejected design (one loop thread
per sidecar) would add to start+stop.

Targets: the RTT during the blocking tool within 2x of idle; start+stop within 2x of bare aiohttp
(``startstop.py`` measures it fully; repeated here for the comparison of the two designs).
Run: ``.venv/bin/python benchmarks/isolation.py``
"""

from __future__ import annotations

import asyncio
import threading
import time

import _bench
import httpx
from aiohttp import web

from pytest_mcpfaults import Sidecar

ROUNDS = 3
CALLS = 100  # per phase and round
BLOCK = 3.0
REPEAT = 300
CALL = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_lookup","arguments":{"q":"x"}}}'
HEADERS = {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28"}


def rtts(client: httpx.Client, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.get(url).raise_for_status()
        out.append(time.perf_counter() - t0)
    return out


def health_during_block() -> tuple[float, float, int]:
    """Median /health RTT of sidecar C idle and while sidecar A runs a BLOCK-second sync tool."""
    idle: list[float] = []
    busy: list[float] = []
    with Sidecar() as a, Sidecar() as c, httpx.Client(timeout=30) as client:
        a.add_tool(
            "slow_lookup",
            lambda q: (time.sleep(BLOCK), q)[1],
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        )
        rtts(client, c.health_url, 20)  # warm-up: connection, loop
        for _ in range(ROUNDS):
            idle += rtts(client, c.health_url, CALLS)
            caller = threading.Thread(
                target=lambda: httpx.post(a.mcp_url, content=CALL, headers=HEADERS, timeout=30)
            )
            caller.start()
            a.wait_for(lambda reqs: any(r.tool == "slow_lookup" and not r.done for r in reqs))
            t0 = time.monotonic()
            busy += rtts(client, c.health_url, CALLS)
            assert time.monotonic() - t0 < BLOCK, "the busy phase outlived the blocking call"
            caller.join(30)
        a.check_errors()
    return _bench.median(idle), _bench.median(busy), len(busy)


def loop_thread_lifecycle() -> None:
    """What one loop per sidecar adds to each start+stop: a new loop, its thread, stop, join, close."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


async def _health(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def main() -> None:
    idle, busy, n = health_during_block()
    _bench.table(
        f"an unrelated sidecar's /health RTT while another runs a {BLOCK:g} s sync tool "
        f"(median of {n}, {ROUNDS} rounds, interleaved)",
        [
            ["idle", _bench.fmt_s(idle), "1.00x"],
            [f"during the {BLOCK:g} s sync tool", _bench.fmt_s(busy), f"{busy / idle:.2f}x"],
        ],
        ["unrelated sidecar", "median RTT", "vs idle"],
    )

    bare_loop = asyncio.new_event_loop()
    threading.Thread(target=bare_loop.run_forever, daemon=True).start()

    async def bare_start_stop() -> None:
        app = web.Application()
        app.router.add_get("/health", _health)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, shutdown_timeout=0.05)
        await site.start()
        await runner.cleanup()

    t_side = _bench.median(_bench.timed(lambda: Sidecar().start().stop(), REPEAT))
    t_bare = _bench.median(
        _bench.timed(
            lambda: asyncio.run_coroutine_threadsafe(bare_start_stop(), bare_loop).result(10), REPEAT
        )
    )
    t_loop = _bench.median(_bench.timed(loop_thread_lifecycle, REPEAT))
    _bench.table(
        f"the two designs' start+stop (median of {REPEAT})",
        [
            [
                "shared loop + sync handlers on worker threads (chosen)",
                _bench.fmt_s(t_side),
                f"{t_side / t_bare:.2f}x",
            ],
            [
                "one loop per sidecar (estimate: the above + a loop thread's lifecycle, "
                f"{_bench.fmt_s(t_loop)})",
                _bench.fmt_s(t_side + t_loop),
                f"{(t_side + t_loop) / t_bare:.2f}x",
            ],
            ["bare aiohttp AppRunner + TCPSite on a loop thread", _bench.fmt_s(t_bare), "1.00x"],
        ],
        ["design", "start+stop", "vs bare aiohttp"],
    )
    print()
    print(
        _bench.verdict(
            busy <= 2 * idle, f"/health during the blocking tool is {busy / idle:.2f}x idle (target <= 2x)"
        )
    )
    print(
        _bench.verdict(
            t_side <= 2 * t_bare, f"start+stop is {t_side / t_bare:.2f}x bare aiohttp (target <= 2x)"
        )
    )


if __name__ == "__main__":
    main()
