"""Fuzzing throughput: examples per second for a full session lifecycle, socket sidecar vs in-process,
each beside the anchor that bounds it, measured in one run.

One example = a fresh sidecar with a fault plan drawn by ``fault_plans`` (kinds both backends
support, delays excluded so only overhead is timed), one session of the docs' tiny harness (plain
httpx: create_session, list_tasks, evaluate_session, delete_session, spans recorded), the sidecar
stopped. Measured three ways: with no faults (the backends' own cost, comparable with the anchors),
replaying pre-drawn plans (the backends alone), and as a real ``@given`` run (Hypothesis' own cost
included).

The anchors run the same harness, the same way, against backends that do no sidecar work at all
(they ignore the plan and answer every call with one canned reply, so only their "no faults" column
compares like with like):

* ``bare aiohttp``: a fresh aiohttp low-level server per example on the same loop thread. No
  socket sidecar can beat it, so its rate bounds the socket target on this machine.
* ``httpx MockTransport``: the harness's client with a do-nothing transport (no respx, no sockets).
  No in-process backend can beat it, so ``MockTransport / bare aiohttp`` bounds the in-process
  speed-up with this harness: it is what the harness's own httpx client and spans cost.
* ``Hypothesis alone``: ``@given`` over the same strategy with an empty body.

The contenders alternate within each round; medians of the rounds, per wall-clock second and per
CPU second of this process (the sidecar loop thread included: steadier on a shared box).

Targets: >= 100 examples/s with sockets; in-process >= 10x that.
Run: ``.venv/bin/python benchmarks/fuzz.py``
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _bench
import httpx
from aiohttp import web
from hypothesis import given, settings
from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults import Fault, Sidecar
from pytest_mcpfaults.inprocess import SUPPORTED_KINDS, intercepting, mock_sidecar
from pytest_mcpfaults.spans import SpanRecorder
from pytest_mcpfaults.strategies import fault_plans
from pytest_mcpfaults.transports import loop as sidecar_loop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "examples"))
from fuzzing_harness import HarnessError, Runner

EXAMPLES = 200
ROUNDS = 3
KINDS = [k for k in SUPPORTED_KINDS if k != "delay"]
PLANS = fault_plans(max_faults=2, kinds=KINDS)

recorder = SpanRecorder()
tracer = recorder.attach(TracerProvider()).get_tracer("bench")

# One tools/call reply that satisfies every step of the harness (create_session reads session_id).
CANNED = (
    b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text",'
    b'"text":"{\\"session_id\\":\\"s-1\\"}"}],"isError":false}}'
)


class _Null:
    """The do-nothing in-process anchor: the plan is ignored, the harness's client never leaves."""

    mcp_url = "http://anchor.test/mcp"

    def __init__(self, **_: Any) -> None:
        pass

    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


async def _canned(request: web.BaseRequest) -> web.Response:
    await request.read()
    return web.Response(body=CANNED, content_type="application/json")


@contextlib.contextmanager
def _bare(**_: Any) -> Iterator[Any]:
    """The socket anchor: a fresh bare aiohttp low-level server on the sidecar loop thread."""

    async def up() -> tuple[web.ServerRunner, int]:
        runner = web.ServerRunner(web.Server(_canned), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, shutdown_timeout=0.05)
        await site.start()
        return runner, runner.addresses[0][1]

    runner, port = sidecar_loop.run(up())
    try:
        yield type("Bare", (), {"mcp_url": f"http://127.0.0.1:{port}/mcp"})
    finally:
        sidecar_loop.run(runner.cleanup())


_socket_client = httpx.Client(timeout=5.0)
_null_client = httpx.Client(
    timeout=5.0,
    transport=httpx.MockTransport(
        lambda _: httpx.Response(200, headers={"Content-Type": "application/json"}, content=CANNED)
    ),
)

#: name -> (how to make a per-example backend, the harness's client for it)
BACKENDS: dict[str, tuple[Callable[..., Any], httpx.Client]] = {
    "socket Sidecar": (Sidecar, _socket_client),
    "bare aiohttp (anchor)": (_bare, _socket_client),
    "in-process (respx)": (mock_sidecar, _socket_client),
    "httpx MockTransport (anchor)": (_Null, _null_client),
}

Rate = tuple[float, float]  # examples per wall-clock second, per CPU second of this process


def lifecycle(make: Callable[..., Any], client: httpx.Client, plan: list[Fault]) -> None:
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


def _rate(n: int, t0: float, c0: float) -> Rate:
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


MODES = ("no faults", "replaying plans", "under @given")


def replay(name: str, plans: list[list[Fault]]) -> Rate:
    make, client = BACKENDS[name]
    t0, c0 = time.perf_counter(), time.process_time()
    for plan in plans:
        lifecycle(make, client, plan)
    return _rate(len(plans), t0, c0)


def under_given(name: str | None, n: int) -> Rate:
    """``@given`` over ``n`` examples running the lifecycle on ``name`` (``None``: an empty body)."""
    make, client = BACKENDS[name] if name is not None else (None, None)
    count = 0

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(plan=PLANS)
    def prop(plan: list[Fault]) -> None:
        nonlocal count
        count += 1
        if make is not None and client is not None:
            lifecycle(make, client, plan)

    t0, c0 = time.perf_counter(), time.process_time()
    prop()
    return _rate(count, t0, c0)


HYPOTHESIS = "Hypothesis alone (anchor)"


def main() -> None:
    plans = draw(EXAMPLES)
    no_faults: list[list[Fault]] = [[] for _ in plans]
    rates: dict[tuple[str, str], list[Rate]] = {}
    with intercepting():  # respx installed once; each in-process example registers its own sidecar
        for name in BACKENDS:  # warm-up
            replay(name, plans[:20])
        for _ in range(ROUNDS):
            for name in BACKENDS:
                rates.setdefault((name, MODES[0]), []).append(replay(name, no_faults))
                rates.setdefault((name, MODES[1]), []).append(replay(name, plans))
                rates.setdefault((name, MODES[2]), []).append(under_given(name, EXAMPLES))
            rates.setdefault((HYPOTHESIS, MODES[2]), []).append(under_given(None, EXAMPLES))
    report(rates)


def report(rates: dict[tuple[str, str], list[Rate]]) -> None:
    wall = {key: _bench.median([r[0] for r in v]) for key, v in rates.items()}
    cpu = {key: _bench.median([r[1] for r in v]) for key, v in rates.items()}

    def cell(name: str, mode: str) -> str:
        key = (name, mode)
        return f"{wall[key]:.0f}/s ({cpu[key]:.0f}/s)" if key in wall else "-"

    rows = [[name, *(cell(name, mode) for mode in MODES)] for name in [*BACKENDS, HYPOTHESIS]]
    _bench.table(
        f"Fuzzing throughput: full session lifecycle per example ({EXAMPLES} examples, median of {ROUNDS}; "
        "per wall-clock second, per CPU second in brackets)",
        rows,
        ["backend", *MODES],
    )
    sock, bare = "socket Sidecar", "bare aiohttp (anchor)"
    inproc, null = "in-process (respx)", "httpx MockTransport (anchor)"
    ratios = []
    for label, top, bottom in (
        ("socket Sidecar / bare aiohttp (the sidecar's cost)", bare, sock),
        ("in-process / MockTransport (the backend's cost)", null, inproc),
        ("in-process / socket Sidecar (the speed-up)", inproc, sock),
        ("MockTransport / bare aiohttp (the most any in-process backend could gain)", null, bare),
    ):
        ratios.append([label, *(f"{wall[(top, m)] / wall[(bottom, m)]:.2f}x" for m in MODES)])
    _bench.table("Ratios (wall clock)", ratios, ["ratio", *MODES])

    s, b = wall[(sock, MODES[2])], wall[(bare, MODES[2])]
    gain, ceiling = wall[(inproc, MODES[2])] / s, wall[(null, MODES[2])] / b
    print()
    print(
        _bench.verdict(
            s >= 100,
            f"socket sidecar {s:.0f} examples/s under @given (target >= 100/s; "
            f"the bare aiohttp anchor reaches {b:.0f}/s)",
        )
    )
    print(
        _bench.verdict(
            gain >= 10,
            f"in-process {gain:.1f}x the socket rate under @given (target >= 10x; "
            f"a do-nothing transport reaches {ceiling:.1f}x the bare aiohttp anchor)",
        )
    )
    print(f"(load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
