"""Shared helpers for the benchmark scripts: timing, medians, a side-by-side table.

Benchmarks are scripts, not tests: the machine is shared and noisy, so each one repeats its
measurement, reports medians and prints ratios against an anchor measured in the same run.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# Let `python benchmarks/<name>.py` import the package from a source checkout too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(fn: Callable[[], object], repeat: int, warmup: int = 3) -> list[float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times; the durations in seconds."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def fmt_s(seconds: float) -> str:
    """A duration with a sensible unit."""
    if seconds < 0:
        return "-" + fmt_s(-seconds)
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def table(title: str, rows: Sequence[Sequence[str]], header: Sequence[str]) -> None:
    """Print a Markdown table (copied verbatim into docs/performance.md)."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def verdict(ok: bool, text: str) -> str:
    return f"{'MET' if ok else 'NOT MET'}: {text}"
