"""Start+stop of a ``Sidecar`` vs a bare aiohttp site on a loop thread vs pytest-httpserver.

Targets: within 2x of the bare aiohttp site; at least 100x faster than pytest-httpserver.
Run: ``.venv/bin/python benchmarks/startstop.py``
"""

from __future__ import annotations

import asyncio
import threading

import _bench
from aiohttp import web
from pytest_httpserver import HTTPServer

from pytest_mcpfaults import Sidecar

REPEAT = 300
REPEAT_HTTPSERVER = 7


def _bare_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="bench-bare-loop", daemon=True).start()
    return loop


async def _health(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _bare_start_stop() -> None:
    app = web.Application()
    app.router.add_get("/health", _health)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, shutdown_timeout=0.05)
    await site.start()
    await runner.cleanup()


def main() -> None:
    loop = _bare_loop()

    def bare() -> None:
        asyncio.run_coroutine_threadsafe(_bare_start_stop(), loop).result(10)

    def sidecar() -> None:
        Sidecar().start().stop()

    def httpserver() -> None:
        s = HTTPServer(host="127.0.0.1", port=0)
        s.start()
        s.stop()

    t_side = _bench.median(_bench.timed(sidecar, REPEAT))
    t_bare = _bench.median(_bench.timed(bare, REPEAT))
    t_http = _bench.median(_bench.timed(httpserver, REPEAT_HTTPSERVER, warmup=1))
    rows = [
        ["Sidecar().start().stop()", _bench.fmt_s(t_side), "1.00x"],
        [
            "bare aiohttp AppRunner + TCPSite on a loop thread",
            _bench.fmt_s(t_bare),
            f"{t_side / t_bare:.2f}x",
        ],
        ["pytest-httpserver HTTPServer start+stop", _bench.fmt_s(t_http), f"{t_side / t_http:.4f}x"],
    ]
    _bench.table(
        f"start+stop (median of {REPEAT}; pytest-httpserver {REPEAT_HTTPSERVER})",
        rows,
        ["what", "median", "sidecar / this"],
    )
    print()
    print(
        _bench.verdict(
            t_side <= 2 * t_bare, f"sidecar is {t_side / t_bare:.2f}x the bare aiohttp site (target <= 2x)"
        )
    )
    print(
        _bench.verdict(
            t_http >= 100 * t_side,
            f"sidecar is {t_http / t_side:.0f}x faster than pytest-httpserver (target >= 100x)",
        )
    )


if __name__ == "__main__":
    main()
