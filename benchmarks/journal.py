"""``serve`` under load: 100,000 requests, then the journal read while ``/health`` is probed.

Two ``serve`` processes side by side in one run, loaded alike (10 keep-alive connections, ``GET
/health``): the default (``--journal-limit 10000``) and, as the anchor, one that keeps everything
(``--journal-limit 1000000000``, what ``serve`` did before the limit). For each: the process's RSS
(``/proc/<pid>/status`` VmRSS) before and after the load, ``GET /_mcpfaults/journal`` size and time, and
a ``/health`` round trip idle and while the journal is being read (median of 5 reads).

Targets: RSS growth under 20 MiB with the default limit; ``/health`` while the journal is read within
50 ms of idle (it used to stall about 2 s at 50,000 requests).
Run: ``.venv/bin/python benchmarks/journal.py [requests]``
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

import _bench

TOTAL = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
READS = 5


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def _worker(port: int, n: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(n):
        w.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        await w.drain()
        head = await r.readuntil(b"\r\n\r\n")
        await r.readexactly(int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
    w.close()


async def _load(port: int, total: int) -> None:
    await asyncio.gather(*(_worker(port, total // 10) for _ in range(10)))


def probe(url: str) -> float:
    t = time.perf_counter()
    urllib.request.urlopen(url, timeout=60).read()
    return time.perf_counter() - t


def measure(limit: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest_mcpfaults", "serve", "--json", "--journal-limit", str(limit)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        info = json.loads(p.stdout.readline())
        port = int(info["url"].rsplit(":", 1)[1])
        rss0 = rss_mib(p.pid)
        asyncio.run(_load(port, TOTAL))
        rss1 = rss_mib(p.pid)
        idle = _bench.median([probe(info["health_url"]) for _ in range(READS)])
        fetch: list[float] = []
        during: list[float] = []
        size = 0
        for _ in range(READS):
            res: dict[str, float] = {}

            def read(res: dict[str, float] = res) -> None:
                req = urllib.request.Request(
                    info["control_url"] + "/journal",
                    headers={"Authorization": f"Bearer {info['control_token']}"},
                )
                t = time.perf_counter()
                res["size"] = len(urllib.request.urlopen(req, timeout=120).read())
                res["t"] = time.perf_counter() - t

            th = threading.Thread(target=read)
            th.start()
            time.sleep(0.02)
            during.append(probe(info["health_url"]))
            th.join()
            fetch.append(res["t"])
            size = int(res["size"])
        return {"rss0": rss0, "rss1": rss1, "idle": idle, "during": _bench.median(during),
                "fetch": _bench.median(fetch), "size": size}  # fmt: skip
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


def main() -> None:
    bounded = measure(10_000)
    unbounded = measure(1_000_000_000)
    rows = []
    for name, m in (("--journal-limit 10000 (default)", bounded), ("keep everything (anchor)", unbounded)):
        rows.append(
            [
                name,
                f"{m['rss0']:.1f} -> {m['rss1']:.1f}",
                f"{m['size'] / 2**20:.1f} MiB in {_bench.fmt_s(m['fetch'])}",
                _bench.fmt_s(m["idle"]),
                _bench.fmt_s(m["during"]),
            ]
        )
    _bench.table(
        f"serve: {TOTAL} requests, then GET /_mcpfaults/journal ({READS} reads, medians)",
        rows,
        ["journal", "RSS MiB", "GET /journal", "/health idle", "/health during the read"],
    )
    growth = bounded["rss1"] - bounded["rss0"]
    late = bounded["during"] - bounded["idle"]
    print()
    anchor_growth = max(unbounded["rss1"] - unbounded["rss0"], 0.1)
    print(f"ratios vs the anchor: RSS growth {growth / anchor_growth:.2f}x, "
          f"/health during the read {bounded['during'] / unbounded['during']:.2f}x")  # fmt: skip
    print(
        _bench.verdict(growth < 20, f"RSS growth {growth:.1f} MiB with the default limit (target < 20 MiB)")
    )
    print(
        _bench.verdict(late < 0.05, f"/health during the read {late * 1e3:.0f} ms over idle (target < 50 ms)")
    )


if __name__ == "__main__":
    main()
