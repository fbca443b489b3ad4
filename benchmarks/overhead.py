"""Plugin overhead: ``pytest -p mcpfaults`` vs ``pytest -p no:mcpfaults`` on a generated 200-test
suite that does not use the plugin (subprocess runs, interleaved, repeated; medians).

Target: under 50 ms of added wall time per run.
Run: ``.venv/bin/python benchmarks/overhead.py``
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench

TESTS = 200
REPEAT = 15


def make_suite(root: Path) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")  # keep the project's config out of the way
    for m in range(10):
        body = ["import pytest", ""]
        for t in range(TESTS // 10):
            if t % 4 == 0:
                body += [
                    f"@pytest.mark.parametrize('x', [{t}])",
                    f"def test_{t}(x, tmp_path):",
                    "    assert x >= 0",
                    "",
                ]
            else:
                body += [f"def test_{t}():", f"    assert {t} + 1 == {t + 1}", ""]
        (root / f"test_mod{m}.py").write_text("\n".join(body))


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(root: Path, plugin_arg: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one pytest subprocess run."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", plugin_arg, str(root)]
    c0, t0 = _child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
    took, cpu = time.perf_counter() - t0, _child_cpu() - c0
    if proc.returncode != 0 or f"{TESTS} passed" not in proc.stdout:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return took, cpu


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mcpfaults-overhead-") as d:
        root = Path(d)
        make_suite(root)
        on: list[tuple[float, float]] = []
        off: list[tuple[float, float]] = []
        run(root, "mcpfaults")
        run(root, "no:mcpfaults")
        for _ in range(REPEAT):  # interleaved, so machine noise hits both alike
            on.append(run(root, "mcpfaults"))
            off.append(run(root, "no:mcpfaults"))
    rows = []
    result = {}
    for col, what in ((0, "wall"), (1, "CPU (user+sys)")):
        a, b = _bench.median([r[col] for r in on]), _bench.median([r[col] for r in off])
        paired = _bench.median([x[col] - y[col] for x, y in zip(on, off, strict=True)])
        result[what] = a - b
        rows.append([what, _bench.fmt_s(a), _bench.fmt_s(b), _bench.fmt_s(a - b), _bench.fmt_s(paired)])
    _bench.table(
        f"pytest on a {TESTS}-test suite that does not use the plugin "
        f"(median of {REPEAT} interleaved subprocess runs each)",
        rows,
        [
            "measure",
            "-p mcpfaults",
            "-p no:mcpfaults",
            "overhead (difference of medians)",
            "median paired difference",
        ],
    )
    print()
    for what, over in result.items():
        print(
            _bench.verdict(
                over < 0.05, f"plugin overhead, {what}: {_bench.fmt_s(over)} per run (target < 50 ms)"
            )
        )


if __name__ == "__main__":
    main()
