"""The test suite's wall and CPU time by area (the area markers of tests/areas.py), so the next slow test
is seen where it lands.

    .venv/bin/python benchmarks/suite_time.py                 # the README's test command, timed
    .venv/bin/python benchmarks/suite_time.py -m docs          # any pytest arguments: one area, a file, -k
    .venv/bin/python benchmarks/suite_time.py --top 20 -- -m 'not slow'
    .venv/bin/python benchmarks/suite_time.py --write-durations   # and refresh tests/durations.json

Runs ``.venv/bin/pytest`` (this interpreter's ``pytest``) from the repository root with the
``suite_timer`` plugin, which records each test's wall and CPU time (its own process's and that of the
children it waited for) in each xdist worker; then prints the run's wall and CPU (every process it
started, waited for), a table by area and the files that cost the most CPU. With no pytest arguments
pytest runs its ``testpaths`` as the README's command does (on ``SUITE_WORKERS`` xdist workers:
tests/conftest.py).

The machine's speed moves between runs (on the 2-core machine the same tree took 245 s and, an hour
later, 326 s: 435 s of CPU, then 604 s), so the run is bracketed by a fixed workload
(:func:`machine_speed`: compiling a standard-library module and a JSON round trip, in this process
alone, best of seven): its CPU seconds, printed before and after, tell a slow machine from a slow
suite. Compare wall times only between runs whose workload took about the same.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
ENV = "MCPFAULTS_SUITE_TIME_DIR"  # suite_timer.ENV
#: Each module's measured wall (tests/areas.py's ``DURATIONS``): written by ``--write-durations``.
DURATIONS = ROOT / "tests" / "durations.json"


@dataclass
class Total:
    """What a group of tests cost: how many, their summed wall and CPU seconds, the costliest one."""

    tests: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    top: tuple[float, str] = (0.0, "")
    nodeids: set[str] = field(default_factory=set)

    def add(self, record: dict[str, object]) -> None:
        cpu, wall, nodeid = float(record["cpu"]), float(record["wall"]), str(record["nodeid"])  # type: ignore[arg-type]
        self.tests += 1
        self.wall += wall
        self.cpu += cpu
        self.top = max(self.top, (cpu, nodeid))


def read_records(where: Path) -> list[dict[str, object]]:
    """Every record the workers wrote under ``where``."""
    return [
        json.loads(line) for path in sorted(where.glob("*.jsonl")) for line in path.read_text().splitlines()
    ]


def group(records: Iterable[dict[str, object]], key: str) -> dict[str, Total]:
    """The records summed by ``key`` (``"area"``, ``"file"``), costliest CPU first."""
    totals: dict[str, Total] = defaultdict(Total)
    for record in records:
        totals[str(record[key])].add(record)
    return dict(sorted(totals.items(), key=lambda kv: -kv[1].cpu))


def table(totals: dict[str, Total], label: str, limit: int | None = None) -> str:
    """A Markdown table of ``totals``: tests, summed wall and CPU, CPU share, the costliest test."""
    cpu_all = sum(t.cpu for t in totals.values()) or 1.0
    rows = [
        f"| {label} | tests | wall (s) | CPU (s) | CPU share | costliest test (CPU s) |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for name, t in list(totals.items())[:limit]:
        test = t.top[1].split("::", 1)[-1]
        rows.append(
            f"| {name} | {t.tests} | {t.wall:.1f} | {t.cpu:.1f} | {100 * t.cpu / cpu_all:.0f} % "
            f"| {test} ({t.top[0]:.1f}) |"
        )
    if limit is None:
        tests, wall, cpu = (sum(getattr(t, a) for t in totals.values()) for a in ("tests", "wall", "cpu"))
        rows.append(f"| **all tests** | {tests} | {wall:.1f} | {cpu:.1f} | 100 % | |")
    return "\n".join(rows)


def tails(records: Sequence[dict[str, object]], t1: float, window: float = 60.0) -> str:
    """Each xdist worker's end of the run: when it ran its last test (seconds before the run ended,
    its idle tail) and the modules it ran in the run's last ``window`` seconds, with their wall: a
    module that holds one worker long at the end (``--dist loadscope`` keeps a module on one worker)
    stretches the run while the other workers wait."""
    by_worker: dict[str, list[dict[str, object]]] = defaultdict(list)
    for record in records:
        if "start" in record:
            by_worker[str(record["worker"])].append(record)
    rows = [
        f"| worker | tests | idle at the end (s) | its modules in the last {window:.0f} s (wall s) |",
        "|---|--:|--:|---|",
    ]
    for worker, mine in sorted(by_worker.items()):
        end = max(float(r["start"]) + float(r["wall"]) for r in mine)  # type: ignore[arg-type]
        late: dict[str, float] = defaultdict(float)
        for r in mine:
            r_start, r_wall = float(r["start"]), float(r["wall"])  # type: ignore[arg-type]
            if r_start + r_wall > t1 - window:
                late[str(r["file"]).removeprefix("tests/")] += r_wall
        shown = ", ".join(f"{name} ({wall:.0f})" for name, wall in late.items()) or "-"
        rows.append(f"| {worker} | {len(mine)} | {t1 - end:.0f} | {shown} |")
    return "\n".join(rows)


#: The source the fixed workload compiles: a large standard-library module, the same for every tree
#: timed with this Python (the package's own modules change between the trees compared).
_WORKLOAD_SOURCE = Path(argparse.__file__)


def machine_speed(rounds: int = 7) -> float:
    """CPU seconds of a fixed single-threaded workload, the best of ``rounds``: process CPU time, not
    wall (on two cores, load 18 raised it from 0.26 s to 0.37 s: compare quiet runs)."""
    source = _WORKLOAD_SOURCE.read_text()
    data = {"rows": [{"k": i, "v": str(i) * 3} for i in range(3000)]}
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(12):
            compile(source, str(_WORKLOAD_SOURCE), "exec")
        for _ in range(25):
            json.loads(json.dumps(data))
        best = min(best, time.process_time() - t0)
    return best


def run(pytest_args: Sequence[str], where: Path) -> tuple[int, float, float, float]:
    """``pytest -p suite_timer ARGS`` from the repository root: its exit code, wall and CPU seconds, and
    the epoch second it started."""
    env = dict(os.environ)
    env[ENV] = str(where)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    t0 = time.perf_counter()
    code = subprocess.call(
        [sys.executable, "-m", "pytest", "-p", "suite_timer", *pytest_args], cwd=ROOT, env=env
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, wall, cpu, started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--top", type=int, default=15, help="how many of the costliest files to list (default 15)"
    )
    parser.add_argument(
        "--write-durations",
        action="store_true",
        help="write each module's wall to tests/durations.json (the order xdist deals modules in); "
        "the whole suite only, and only if it passed",
    )
    args, pytest_args = parser.parse_known_args(argv)
    pytest_args = [a for a in pytest_args if a != "--"]
    if args.write_durations and pytest_args:
        parser.error(f"--write-durations measures the whole suite: drop the pytest arguments {pytest_args}")
    speed_before = machine_speed()
    with tempfile.TemporaryDirectory(prefix="mcpfaults-suite-time-") as tmp:
        code, wall, cpu, started = run(pytest_args, Path(tmp))
        records = read_records(Path(tmp))
    speed_after = machine_speed()
    if not records:
        print(f"no test ran (pytest exit code {code})")
        return code or 1
    by_area = group(records, "area")
    in_tests = sum(t.cpu for t in by_area.values())
    print()
    print(f"suite: {len(records)} tests, pytest exit code {code}")
    print(f"wall {wall:.1f} s, CPU {cpu:.1f} s ({cpu / wall:.2f} cores busy); CPU outside tests "
          f"(start-up, collection, xdist) {max(cpu - in_tests, 0.0):.1f} s")  # fmt: skip
    print(f"machine: the fixed workload took {speed_before:.3f} s of CPU before the run, "
          f"{speed_after:.3f} s after (lower is faster; compare runs whose figures agree)")  # fmt: skip
    print()
    print(table(by_area, "area"))
    print()
    print(table(group(records, "file"), "file", limit=args.top))
    if len({r.get("worker") for r in records}) > 1:
        print()
        print(tails(records, started + wall))
    if args.write_durations:
        if code != 0:
            print(f"\n{DURATIONS.relative_to(ROOT)} not written: the suite failed (exit code {code})")
        else:
            write_durations(records)
            print(f"\nwrote {DURATIONS.relative_to(ROOT)}: {len(module_walls(records))} modules")
    return code


def module_walls(records: Iterable[dict[str, object]]) -> dict[str, float]:
    """Each test module's wall seconds (its tests' summed, rounded to 0.1 s), by file stem."""
    return {Path(f).stem: round(t.wall, 1) for f, t in sorted(group(records, "file").items())}


def write_durations(records: Iterable[dict[str, object]]) -> None:
    """:data:`DURATIONS`, from a whole-suite run's records."""
    DURATIONS.write_text(json.dumps(module_walls(records), indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
