"""Start+stop of a stdio server (spawn to first reply, to exit) vs a bare ``python -c`` child.

Both children are spawned the same way (``subprocess.Popen`` with pipes, as a harness does), sent one
``initialize`` line, timed to the first reply line, then stdin is closed and they are timed to their
exit. The anchor is the least a Python stdio server can cost: ``python -c`` reading the line and
writing a canned reply. The stdio server starts the same interpreter, connects back to the test
process over loopback and answers through the sidecar core there. Rounds alternate the two, in one run.

Target: spawn to exit within 1.5x of the bare child.
Run: ``.venv/bin/python benchmarks/stdio_startstop.py [rounds]``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import _bench

from pytest_mcpfaults import StdioServer

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "b", "version": "1"},
            },
        }
    )
    + "\n"
).encode()
BARE = (
    "import sys\n"
    "line = sys.stdin.readline()\n"
    'sys.stdout.write(\'{"jsonrpc":"2.0","id":1,"result":{}}\\n\'); sys.stdout.flush()\n'
    "sys.stdin.read()\n"
)


def one(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds from spawn to the first reply line, seconds from spawn to exit)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(INIT)
    proc.stdin.flush()
    line = proc.stdout.readline()
    first = time.perf_counter() - t0
    assert line.startswith(b'{"jsonrpc":"2.0","id":1,"result":{'), line
    proc.stdin.close()
    proc.wait(10)
    proc.stdout.close()
    return first, time.perf_counter() - t0


def main() -> None:
    server = StdioServer().start()
    env = {**os.environ, **server.env}
    stdio_argv, bare_argv = [server.command, *server.args], [sys.executable, "-c", BARE]
    results: dict[str, list[tuple[float, float]]] = {"stdio": [], "bare": []}
    for _ in range(3):  # warm the page cache for both
        one(stdio_argv, env)
        one(bare_argv, env)
    for _ in range(ROUNDS):
        results["stdio"].append(one(stdio_argv, env))
        results["bare"].append(one(bare_argv, env))
    server.stop()
    exits = [c.exit_how for c in server.children]
    assert exits == ["stdin closed"] * len(exits), exits

    med = {
        k: (_bench.median([a for a, _ in v]), _bench.median([b for _, b in v])) for k, v in results.items()
    }
    rows = [
        [
            name,
            _bench.fmt_s(med[key][0]),
            _bench.fmt_s(med[key][1]),
            f"{med[key][1] / med['bare'][1]:.2f}x",
        ]
        for name, key in (
            ("`python -m pytest_mcpfaults stdio` (StdioServer)", "stdio"),
            ("bare `python -c`", "bare"),
        )
    ]
    _bench.table(
        f"stdio start+stop, median of {ROUNDS} rounds (alternating)",
        rows,
        ["child", "spawn → first reply", "spawn → exit", "exit vs bare"],
    )
    ratio = med["stdio"][1] / med["bare"][1]
    print()
    print(
        _bench.verdict(
            ratio <= 1.5, f"stdio server spawn→exit {ratio:.2f}x the bare python -c child (target ≤ 1.5x)"
        )
    )


if __name__ == "__main__":
    main()
