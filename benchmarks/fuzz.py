"""Fuzzing throughput: examples per second for a full session lifecycle, socket sidecar vs in-process.

One example = a fresh sidecar with a fault plan drawn by ``fault_plans`` (kinds both backends
support, delays excluded so only overhead is timed), one session of the docs' tiny harness (plain
httpx: create_session, list_tasks, evaluate_session, delete_session, spans recorded), the sidecar
stopped. Measured twice: replaying pre-drawn plans (the backends alone), and as a real ``@given``
run (Hypothesis' own cost included). The backends alternate; medians of the rounds, per wall-clock
second and per CPU second of this process (both sidecar threads included: steadier on a shared box).

Targets: >= 100 examples/s with sockets; in-process >= 10x that.
Run: ``/work/venv/bin/python benchmarks/fuzz.py``
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _bench
import httpx
from hypothesis import given, settings
from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults import Fault, Sidecar
from pytest_mcpfaults.inprocess import SUPPORTED_KINDS, intercepting, mock_sidecar
from pytest_mcpfaults.spans import SpanRecorder
from pytest_mcpfaults.strategies import fault_plans

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "examples"))
from fuzzing_harness import HarnessError, Runner

EXAMPLES = 200
ROUNDS = 3
KINDS = [k for k in SUPPORTED_KINDS if k != "delay"]
PLANS = fault_plans(max_faults=2, kinds=KINDS)

recorder = SpanRecorder()
tracer = recorder.attach(TracerProvider()).get_tracer("bench")
client = httpx.Client(timeout=5.0)


def lifecycle(make: Callable[..., Any], plan: list[Fault]) -> None:
    recorder.clear()
    with make(faults=plan) as side, contextlib.suppress(HarnessError):
        Runner(client, side.mcp_url, tracer, hardened=True).run()


def draw(n: int) -> list[list[Fault]]:
    out: list[list[Fault]] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(plan=PLANS)
    def collect(plan: list[Fault]) -> None:
        out.append(plan)

    collect()
    return out


Rate = tuple[float, float]  # examples per wall-clock second, per CPU second of this process


def _rate(n: int, t0: float, c0: float) -> Rate:
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def replay(make: Callable[..., Any], plans: list[list[Fault]]) -> Rate:
    t0, c0 = time.perf_counter(), time.process_time()
    for plan in plans:
        lifecycle(make, plan)
    return _rate(len(plans), t0, c0)


def under_given(make: Callable[..., Any], n: int) -> Rate:
    count = 0

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(plan=PLANS)
    def prop(plan: list[Fault]) -> None:
        nonlocal count
        count += 1
        lifecycle(make, plan)

    t0, c0 = time.perf_counter(), time.process_time()
    prop()
    return _rate(count, t0, c0)


def main() -> None:
    backends: dict[str, Callable[..., Any]] = {"socket Sidecar": Sidecar, "in-process (respx)": mock_sidecar}
    plans = draw(EXAMPLES)
    for make in backends.values():  # warm-up
        replay(make, plans[:20])
    rates: dict[tuple[str, str], list[Rate]] = {}
    with intercepting():  # respx installed once; each in-process example registers its own sidecar
        run_rounds(backends, plans, rates)
    report(rates)


def run_rounds(
    backends: dict[str, Callable[..., Any]],
    plans: list[list[Fault]],
    rates: dict[tuple[str, str], list[float]],
) -> None:
    for _ in range(ROUNDS):
        for name, make in backends.items():
            rates.setdefault((name, "replay"), []).append(replay(make, plans))
            rates.setdefault((name, "@given"), []).append(under_given(make, EXAMPLES))


def report(rates: dict[tuple[str, str], list[Rate]]) -> None:
    wall = {key: _bench.median([r[0] for r in v]) for key, v in rates.items()}
    cpu = {key: _bench.median([r[1] for r in v]) for key, v in rates.items()}
    rows = []
    for mode in ("replay", "@given"):
        for clock, med in (("wall", wall), ("CPU", cpu)):
            sock, inproc = med[("socket Sidecar", mode)], med[("in-process (respx)", mode)]
            rows.append([mode, clock, f"{sock:.0f}/s", f"{inproc:.0f}/s", f"{inproc / sock:.1f}x"])
    _bench.table(
        f"Fuzzing throughput: full session lifecycle per example ({EXAMPLES} examples, median of {ROUNDS})",
        rows,
        ["mode", "per second of", "socket Sidecar", "in-process (respx)", "in-process / socket"],
    )
    sock, inproc = wall[("socket Sidecar", "@given")], wall[("in-process (respx)", "@given")]
    print()
    print(_bench.verdict(sock >= 100, f"socket sidecar {sock:.0f} examples/s under @given (target >= 100/s)"))
    print(
        _bench.verdict(
            inproc >= 10 * sock, f"in-process {inproc / sock:.1f}x the socket rate (target >= 10x)"
        )
    )
    print(f"(load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
