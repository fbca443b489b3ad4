"""Busy processes beside the suite, to run it under load: ``N`` processes that spin on the CPU and stop
by themselves after ``SECONDS`` (or at Ctrl-C), so a forgotten one cannot outlive its bound.

    .venv/bin/python benchmarks/busy.py 6 600 &   # six busy processes for at most ten minutes
    .venv/bin/pytest                              # the suite beside them

The same load as Debian's ``stress-ng --cpu 6 --timeout 600``, with nothing to install. Not a
measurement: it prints what it started and when it stopped."""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time

#: The longest it may run: a load left behind by a killed shell stops within this.
MAX_SECONDS = 3600.0


def spin(until: float) -> None:
    n = 0
    while time.monotonic() < until:
        for _ in range(10_000):  # look at the clock now and then, not on every turn
            n += 1


def main(argv: list[str]) -> int:
    try:
        processes = int(argv[0]) if argv else 6
        seconds = float(argv[1]) if len(argv) > 1 else 300.0
    except ValueError:
        print("usage: busy.py [PROCESSES (default 6)] [SECONDS (default 300)]", file=sys.stderr)
        return 2
    if not 1 <= processes <= 64 or not 0 < seconds <= MAX_SECONDS:
        print(f"busy.py: PROCESSES must be 1-64 and SECONDS 0-{MAX_SECONDS:.0f}", file=sys.stderr)
        return 2
    until = time.monotonic() + seconds
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a kill stops the busy ones too (finally below)
    workers = [multiprocessing.Process(target=spin, args=(until,), daemon=True) for _ in range(processes)]
    for w in workers:
        w.start()
    print(f"busy.py: {processes} busy processes for at most {seconds:.0f} s", flush=True)
    try:
        for w in workers:
            w.join(timeout=max(0.0, until - time.monotonic()) + 5)
    except KeyboardInterrupt:
        pass
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
    print("busy.py: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
