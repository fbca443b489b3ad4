"""Replay's cost: ``tools/call`` answered from a cassette vs the live upstream and vs the fake's own tool.

The upstream is the mcp SDK's own ``MCPServer`` with an ``echo`` tool under uvicorn in a process of its
own, stateless with JSON replies (``proxy.py``'s lighter upstream). A cassette of one ``echo`` call is
recorded from it through ``Sidecar(upstream=..., record=...)``; then three connected mcp 2.x clients
(``mode='auto'``) call ``echo`` interleaved call by call, so the noise of a shared machine hits all
alike: straight to the live upstream, to a ``Sidecar(cassette=...)`` replaying the cassette (offline:
the same recorded answer every time, repeats on), and to a fake ``Sidecar()`` answering its own
built-in ``echo``. Each replayed answer is checked against the recorded one.

A fourth client calls a replay of a cassette recorded from the fake itself: the same answer as the
fake's, from a cassette, so the difference to the fake is the replay's own cost; the SDK server's
answers are bigger (``structuredContent``, checked by the client against the tool's output schema).

Target: replay no slower than the fake + 10 % (``replay <= 1.1 * fake``), for both cassettes.

Then the cassette's size: two written cassettes of ``tools/call echo`` exchanges with distinct
arguments, 10 and 100,000 (about 30 MB), each replayed (``cassette_once=False``) to a client calling
the last exchange's arguments, interleaved call by call: matching is indexed, so the large one answers
within 1.2x of the small one (the ratio printed). And ``/health`` of another sidecar of the process,
idle and while a client sends the large replay requests it has no answer for (each a nearest-miss
search), interleaved: within 2x of idle. ``--scale`` runs only this part.
Run (from the repository root, in the dev venv): ``.venv/bin/python benchmarks/cassette_rtt.py``
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path

import _bench
import httpx
from mcp.client import Client
from rtt import process

from pytest_mcpfaults import Sidecar, read_cassette

CALLS = 600
ROUNDS = 3
SIZES = (10, 100_000)
PROXY = str(Path(__file__).resolve().parent / "proxy.py")


async def record(url: str) -> None:
    async with Client(url, mode="auto") as client:
        await client.list_tools()
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]


async def interleaved(urls: list[str], n: int) -> list[list[float]]:
    """Seconds per ``tools/call echo`` through each client, interleaved call by call."""
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode="auto")) for url in urls]
        for client in clients:
            for _ in range(30):
                await client.call_tool("echo", {"text": "hi"})
        out: list[list[float]] = [[] for _ in urls]
        loop = asyncio.get_running_loop()
        for _ in range(n):
            for client, times in zip(clients, out, strict=True):
                t0 = loop.time()
                result = await client.call_tool("echo", {"text": "hi"})
                times.append(loop.time() - t0)
                assert result.content[0].text == "hi"  # type: ignore[union-attr]
    return out


def recorded_from(url: str, path: Path) -> Path:
    """A cassette of one ``echo`` call to ``url``, recorded through proxy mode."""
    with Sidecar(upstream=url, record=str(path), patience=None) as recording:
        asyncio.run(record(recording.mcp_url))
    assert [e.tool for e in read_cassette(path).exchanges if e.tool] == ["echo"]
    return path


def main() -> None:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    sdk = [sys.executable, PROXY, "--serve-sdk", "json"]
    with tempfile.TemporaryDirectory() as tmp, process(sdk, "line") as url, Sidecar(patience=None) as fake:
        of_sdk = recorded_from(url, Path(tmp) / "sdk.jsonl")
        of_fake = recorded_from(fake.mcp_url, Path(tmp) / "fake.jsonl")
        medians: list[list[float]] = [[], [], [], []]
        with Sidecar(cassette=str(of_sdk), patience=None) as replay, Sidecar(cassette=str(of_fake)) as again:
            targets = [url, replay.mcp_url, again.mcp_url, fake.mcp_url]
            for _ in range(ROUNDS):
                rounds = asyncio.run(interleaved(targets, CALLS))
                for acc, times in zip(medians, rounds, strict=True):
                    acc.append(_bench.median(times))
            for sc in (replay, again, fake):
                sc.check_errors()
            for sc in (replay, again):
                calls = [r for r in sc.requests if r.mcp_method == "tools/call"]
                assert calls
                assert not any(r.forwarded or r.error for r in calls)
    live, replayed, same, own = (min(m) for m in medians)  # the best round's median: the least disturbed
    rows = [
        [
            "the live upstream (mcp SDK MCPServer, uvicorn, own process)",
            _bench.fmt_s(live),
            f"{live / own:.2f}x",
        ],
        ["replay of the SDK server's cassette", _bench.fmt_s(replayed), f"{replayed / own:.2f}x"],
        [
            "replay of the fake's own cassette (its answer, from a cassette)",
            _bench.fmt_s(same),
            f"{same / own:.2f}x",
        ],
        ["the fake: Sidecar() answering its own echo", _bench.fmt_s(own), "1.00x"],
    ]
    _bench.table(
        f"MCP tools/call echo, mcp 2.x Client (mode='auto'), interleaved call by call, median of {CALLS} per "
        f"round, best of {ROUNDS} rounds",
        rows,
        ["answered by", "tools/call RTT", "vs the fake"],
    )
    print(f"\nreplay of the SDK server vs the live SDK server: {replayed / live:.2f}x")
    print(
        "(the SDK server's echo declares an outputSchema and answers structuredContent, which the client "
        "checks against it: its replay carries that answer, the fake's echo does not)"
    )
    print()
    budget = _bench.fmt_s(1.1 * own)
    for what, value in (("the fake's answer", same), ("the SDK server's answer", replayed)):
        print(
            _bench.verdict(
                value <= 1.1 * own, f"replaying {what} {_bench.fmt_s(value)} <= 1.1 x the fake = {budget}"
            )
        )


def written(path: Path, n: int) -> Path:
    """A cassette of ``n`` ``tools/call echo`` exchanges, each with its own arguments."""
    with path.open("w") as out:
        out.write('{"cassette": "pytest-mcpfaults", "format": 1}\n')
        for i in range(n):
            answer = {"content": [{"type": "text", "text": f"t{i}"}], "isError": False}
            out.write(
                json.dumps({
                    "http": "POST", "method": "tools/call", "status": 200, "id": i, "tool": "echo",
                    "era": "stateless", "params": {"name": "echo", "arguments": {"text": f"t{i}"}},
                    "response": {"jsonrpc": "2.0", "id": i, "result": answer},
                }) + "\n"
            )  # fmt: skip
    return path


async def last_calls(urls: list[str], texts: list[str], n: int) -> list[list[float]]:
    """Seconds per ``tools/call echo`` of each cassette's last arguments, interleaved call by call."""
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode="auto")) for url in urls]
        out: list[list[float]] = [[] for _ in urls]
        loop = asyncio.get_running_loop()
        for i in range(n + 30):
            for client, text, times in zip(clients, texts, out, strict=True):
                t0 = loop.time()
                result = await client.call_tool("echo", {"text": text})
                if i >= 30:  # after the warm-up
                    times.append(loop.time() - t0)
                assert result.content[0].text == text  # type: ignore[union-attr]
    return out


def health_while_missing(replay: Sidecar) -> tuple[float, float]:
    """Median ``/health`` RTT of another sidecar idle, and while a thread sends ``replay`` requests it
    has no answer for (each a nearest-miss search), interleaved round by round."""
    stop = threading.Event()

    def miss() -> None:
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
        with httpx.Client(headers=headers, timeout=30) as c:
            for i in itertools.count():
                if stop.is_set():
                    return
                call = {"name": "echo", "arguments": {"text": f"nope-{i}"}}
                c.post(
                    replay.mcp_url, json={"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call}
                )

    idle: list[float] = []
    busy: list[float] = []
    with Sidecar() as victim, httpx.Client(timeout=10) as client:
        for _ in range(ROUNDS):
            for times, load in ((idle, False), (busy, True)):
                thread = threading.Thread(target=miss) if load else None
                if thread is not None:
                    stop.clear()
                    thread.start()
                times += _bench.timed(lambda: client.get(victim.health_url), CALLS // 3)
                if thread is not None:
                    stop.set()
                    thread.join()
    return _bench.median(idle), _bench.median(busy)


def scale() -> None:
    """Replay RTT against the cassette's size (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [written(Path(tmp) / f"{n}.jsonl", n) for n in SIZES]
        loads, sidecars = [], []
        try:
            for path in paths:
                t0 = time.perf_counter()
                sidecars.append(Sidecar(cassette=str(path), patience=None).start())
                loads.append(time.perf_counter() - t0)
            texts = [f"t{n - 1}" for n in SIZES]
            medians: list[list[float]] = [[] for _ in SIZES]
            for _ in range(ROUNDS):
                rounds = asyncio.run(last_calls([sc.mcp_url for sc in sidecars], texts, CALLS // 2))
                for acc, times in zip(medians, rounds, strict=True):
                    acc.append(_bench.median(times))
            for sc in sidecars:
                sc.check_errors()
            health = health_while_missing(sidecars[-1])  # its misses are errors of its own: not checked
        finally:
            for sc in sidecars:
                sc.stop()
    best = [min(m) for m in medians]
    rows = [
        [f"{n:,} exchanges", _bench.fmt_s(b), f"{load:.1f} s", f"{b / best[0]:.2f}x"]
        for n, b, load in zip(SIZES, best, loads, strict=True)
    ]
    _bench.table(
        f"replay tools/call echo of the last exchange, mcp 2.x Client, interleaved, median of {CALLS // 2} "
        f"per round, best of {ROUNDS} rounds",
        rows,
        ["cassette", "tools/call RTT", "made in", f"vs {SIZES[0]} exchanges"],
    )
    ratio = best[-1] / best[0]
    print(f"\n{SIZES[-1]:,} vs {SIZES[0]} exchanges: {ratio:.2f}x")
    idle, busy = health
    print(
        f"/health of another sidecar: {_bench.fmt_s(idle)} idle, {_bench.fmt_s(busy)} while a client misses "
        f"on the {SIZES[-1]:,}-exchange replay ({busy / idle:.2f}x)"
    )
    print(_bench.verdict(busy <= 2 * idle, f"/health while missing {busy / idle:.2f}x idle (<= 2x)"))
    print(
        _bench.verdict(
            ratio <= 1.2, f"replay RTT of {SIZES[-1]:,} exchanges {ratio:.2f}x that of {SIZES[0]} (<= 1.2x)"
        )
    )


if __name__ == "__main__":
    if "--scale" not in sys.argv:
        main()
    scale()
