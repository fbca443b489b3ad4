"""Soak: 10,000 sidecar start/stop cycles, each serving one request, with the process's file
descriptors (``/proc/self/fd``), threads and RSS (``/proc/self/status`` VmRSS) sampled; then 1,000
stops with handlers in flight (a ``delay(seconds=3600)`` on ``/health`` and a ``sleep 3600`` tool
call, clients never closing), counting the sidecar loop's tasks and the live ``Sidecar`` objects.

Targets: zero growth in file descriptors and threads; under 20 MB RSS growth; after the in-flight
stops, no task on the sidecar loop beyond those before and no ``Sidecar`` alive (``gc``).
Run: ``.venv/bin/python benchmarks/soak.py [cycles] [stops]``
"""

from __future__ import annotations

import asyncio
import gc
import http.client
import os
import socket
import sys
import threading
import time
import weakref

import _bench

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.transports import loop as sidecar_loop

CYCLES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
STOPS = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
SAMPLES = 10
TOOLS_CALL = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}'
)
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def cycle(i: int) -> None:
    """One sidecar lifetime: start, one request (alternating /health and an MCP POST), stop."""
    with Sidecar() as sc:
        conn = http.client.HTTPConnection("127.0.0.1", sc.port, timeout=5)
        try:
            if i % 2:
                conn.request("GET", "/health")
            else:
                conn.request("POST", "/mcp", body=TOOLS_CALL, headers=MCP_HEADERS)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, resp.status
        finally:
            conn.close()


def main() -> None:
    for i in range(200):  # warm up: the loop thread, imports, allocator pools
        cycle(i)
    gc.collect()
    base = (fds(), threading.active_count(), rss_kib())
    rows = [["0", str(base[0]), str(base[1]), f"{base[2] / 1024:.1f}", "-"]]
    t0 = time.perf_counter()
    step = CYCLES // SAMPLES
    for done in range(step, CYCLES + 1, step):
        ts = time.perf_counter()
        for i in range(step):
            cycle(i)
        per = (time.perf_counter() - ts) / step
        gc.collect()
        rows.append(
            [
                str(done),
                str(fds()),
                str(threading.active_count()),
                f"{rss_kib() / 1024:.1f}",
                _bench.fmt_s(per),
            ]
        )
    total = time.perf_counter() - t0
    end = (fds(), threading.active_count(), rss_kib())
    _bench.table(
        f"soak: {CYCLES} start/request/stop cycles in {total:.1f} s (after 200 warm-up cycles)",
        rows,
        ["cycles", "open fds", "threads", "RSS MiB", "mean cycle"],
    )
    growth = (end[2] - base[2]) / 1024
    print()
    print(_bench.verdict(end[0] <= base[0], f"file descriptors {base[0]} -> {end[0]} (target: no growth)"))
    print(_bench.verdict(end[1] <= base[1], f"threads {base[1]} -> {end[1]} (target: no growth)"))
    print(_bench.verdict(growth < 20, f"RSS growth {growth:.1f} MiB (target < 20 MiB)"))
    inflight()


SLEEP_CALL = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"seconds":3600}}}'
)
IN_FLIGHT = (
    b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
    + f"Content-Length: {len(SLEEP_CALL)}\r\n\r\n".encode()
    + SLEEP_CALL,
)


def loop_tasks() -> int:
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1  # not this one

    return sidecar_loop.run(count())


def stop_in_flight() -> weakref.ref[Sidecar]:
    """A sidecar stopped while a delay(3600) and a sleep-3600 tool call are being handled."""
    sc = Sidecar(faults=["delay(seconds=3600)@health"], tool_timeout=None).start()
    socks = [socket.create_connection(("127.0.0.1", sc.port)) for _ in IN_FLIGHT]
    for s, data in zip(socks, IN_FLIGHT, strict=True):
        s.sendall(data)
    sc.wait_for(lambda reqs: len(reqs) == 2 and reqs[1].tool == "sleep")
    sc.stop()
    for s in socks:
        s.close()
    return weakref.ref(sc)


def inflight() -> None:
    for _ in range(20):
        stop_in_flight()
    gc.collect()
    base = (loop_tasks(), fds(), rss_kib())
    t0 = time.perf_counter()
    refs = [stop_in_flight() for _ in range(STOPS)]
    total = time.perf_counter() - t0
    gc.collect()
    tasks, alive, end_fds, end_rss = loop_tasks(), sum(r() is not None for r in refs), fds(), rss_kib()
    _bench.table(
        f"soak: {STOPS} stops with a delay and a sleep in flight, in {total:.1f} s",
        [
            ["sidecar loop tasks", str(base[0]), str(tasks)],
            ["live Sidecar objects", "-", str(alive)],
            ["open fds", str(base[1]), str(end_fds)],
            ["RSS MiB", f"{base[2] / 1024:.1f}", f"{end_rss / 1024:.1f}"],
        ],
        ["what", "before", "after"],
    )
    print()
    print(_bench.verdict(tasks <= base[0], f"loop tasks {base[0]} -> {tasks} (target: no growth)"))
    print(_bench.verdict(alive == 0, f"{alive} of {STOPS} stopped Sidecars alive (target: 0)"))


if __name__ == "__main__":
    main()
