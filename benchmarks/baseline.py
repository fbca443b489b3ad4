"""This checkout vs an earlier revision of the package, side by side in one run: ``Sidecar`` start+stop
and an MCP ``tools/call`` round trip (httpx, kept-alive connection, stateless era, the ``echo`` tool).

The earlier revision is extracted with ``git archive`` into a temporary directory (nothing is checked
out); each version runs in a worker process of its own, with the same interpreter and dependencies,
and the rounds alternate between them so that the machine's noise falls on both alike. The default
baseline is ``84148ec``, main as it stood when the core issue (one sidecar core, thin transports) was
filed: the target is "no slower than that".

Run: ``.venv/bin/python benchmarks/baseline.py [REV]``
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import _bench

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "84148ec"
ROUNDS = 15
STARTSTOP = 200  # start+stop cycles per round
CALLS = 400  # tools/call round trips per round
SLACK = 1.10  # "no slower": within 10 % (the run-to-run noise of this shared machine)

WORKER = r"""
import json, statistics, sys, time
# The package from sys.argv[1] only: an editable install's import hook would otherwise win.
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (getattr(f, "__module__", "") or "")
                    + type(f).__module__]
sys.path.insert(0, sys.argv[1])
import httpx
from pytest_mcpfaults import Sidecar

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hi"}}}).encode()
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2026-07-28"}

def startstop(n):
    out = []
    c0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        Sidecar().start().stop()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), (time.process_time() - c0) / n

def rtt(n):
    with Sidecar() as sc, httpx.Client() as client:
        for _ in range(20):  # warm up the connection
            client.post(sc.mcp_url, content=BODY, headers=HEADERS)
        out = []
        c0 = time.process_time()
        for _ in range(n):
            t0 = time.perf_counter()
            r = client.post(sc.mcp_url, content=BODY, headers=HEADERS)
            out.append(time.perf_counter() - t0)
            assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "hi", r.text
    return statistics.median(out), (time.process_time() - c0) / n

import pytest_mcpfaults
print(json.dumps(pytest_mcpfaults.__file__), flush=True)
startstop(20)
for line in sys.stdin:
    what, n = line.split()
    print(json.dumps({"startstop": startstop, "rtt": rtt}[what](int(n))), flush=True)  # [wall, cpu]
"""


class Worker:
    def __init__(self, pythonpath: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(pythonpath)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

        assert self.proc.stdout is not None
        self.package = json.loads(self.proc.stdout.readline())
        if not self.package.startswith(str(pythonpath)):
            raise RuntimeError(f"worker imported {self.package}, not the package under {pythonpath}")

    def ask(self, what: str, n: int) -> tuple[float, float]:
        """(median wall seconds per operation, process CPU seconds per operation: both threads)."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(f"{what} {n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker for {what} exited (code {self.proc.wait()})")
        wall, cpu = json.loads(line)
        return float(wall), float(cpu)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def extract(rev: str, into: Path) -> str:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    )
    data = subprocess.run(
        ["git", "archive", rev, "pytest_mcpfaults"], cwd=ROOT, check=True, capture_output=True
    )
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(into, filter="data")
    return sha.stdout.strip()


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else BASELINE
    with tempfile.TemporaryDirectory(prefix="mcpfaults-baseline-") as tmp:
        sha = extract(rev, Path(tmp))
        base, here = Worker(Path(tmp)), Worker(ROOT)
        results: dict[str, dict[str, list[tuple[float, float]]]] = {
            "startstop": {"b": [], "h": []},
            "rtt": {"b": [], "h": []},
        }
        try:
            for i in range(ROUNDS):
                order = [("b", base), ("h", here)] if i % 2 == 0 else [("h", here), ("b", base)]
                for what, n in (("startstop", STARTSTOP), ("rtt", CALLS)):
                    for key, worker in order:
                        results[what][key].append(worker.ask(what, n))
        finally:
            base.close()
            here.close()
    rows, verdicts = [], []
    for what, label in (("startstop", "Sidecar().start().stop()"), ("rtt", "tools/call round trip (httpx)")):
        for col, unit in ((0, "wall, median"), (1, "CPU, both threads")):
            b = _bench.median([r[col] for r in results[what]["b"]])
            h = _bench.median([r[col] for r in results[what]["h"]])
            rows.append([f"{label} ({unit})", _bench.fmt_s(b), _bench.fmt_s(h), f"{h / b:.2f}x"])
            verdicts.append(
                _bench.verdict(
                    h <= b * SLACK, f"{label} ({unit}): this checkout {h / b:.2f}x {sha} (<= {SLACK:.2f}x)"
                )
            )
    _bench.table(
        f"This checkout vs {sha} (medians of {ROUNDS} alternating rounds)",
        rows,
        ["measure", f"baseline {sha}", "this checkout", "ratio"],
    )
    print()
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
