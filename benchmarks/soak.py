"""Soak: 10,000 sidecar start/stop cycles, each serving one request, with the process's file
descriptors (``/proc/self/fd``), threads and RSS (``/proc/self/status`` VmRSS) sampled.

Targets: zero growth in file descriptors and threads; under 20 MB RSS growth.
Run: ``.venv/bin/python benchmarks/soak.py [cycles]``
"""

from __future__ import annotations

import gc
import http.client
import os
import sys
import threading
import time

import _bench

from pytest_mcpfaults import Sidecar

CYCLES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
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


if __name__ == "__main__":
    main()
