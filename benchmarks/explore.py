"""Explore: the campaign's size with and without reduction on the example harness (M vs Σkᵢ), runs per
second, explore's own overhead against the same runs written by hand as tests, and ``-n 2`` against
``-n 0`` over a cached campaign (the same findings, wall time).

Findings: what grouping a campaign's failing runs into findings costs (each failing run's harness
frame, ``explore_where``, plus ``explore_findings.findings`` three times: summary, JSON report, page),
against the wall time of a campaign whose every faulted run escapes (the harness re-raises).

Targets: explore's overhead ≤ 10 % of the runs' time; findings < 5 % of a campaign's wall time.
Run: ``.venv/bin/python benchmarks/explore.py``
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench

ROOT = Path(__file__).resolve().parent.parent
REPEAT = 3
INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"

HARNESS = """
import httpx

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


def call(sidecar, tool, arguments):
    reply = httpx.post(
        sidecar.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": tool, "arguments": arguments}},
        headers={**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": tool},
        timeout=1.0,
    )
    reply.raise_for_status()
    return reply.json()


def body(sidecar):
    try:
        for tool, args in [("create_session", {"task_id": "t"}), ("echo", {"text": "x"}),
                           ("evaluate_session", {"session_id": "t"})]:
            call(sidecar, tool, args)
    except Exception:
        pass
    finally:
        try:
            call(sidecar, "delete_session", {"session_id": "t"})
        except Exception:
            pass
"""
#: The non-blocking kinds: every run costs about the same, so the comparison is of the machinery.
KINDS = (
    "die,delay,status,terminating,truncate,reset,malformed_json,jsonrpc_error,tool_error,session_expired,"
    "backend_gone"
)
EXPLORED = f'''
import pytest
from harness import body

@pytest.mark.mcp_explore(kinds="{KINDS}")
@pytest.mark.mcp_sidecar(era="stateless")
def test_flow(mcp_sidecar):
    body(mcp_sidecar)
'''


#: The same harness letting every failure escape: each faulted run is a violation with a frame.
FAILING = HARNESS.replace("    except Exception:\n        pass\n    finally:", "    finally:")


def findings_cost(where: Path, report: Path, wall: float) -> tuple[float, int, int]:
    """Seconds the findings of ``report``'s campaign cost (frames + grouping), violating runs, findings."""
    import httpx

    from pytest_mcpfaults.explore.findings import findings
    from pytest_mcpfaults.explore.where import where_of

    entries = json.loads(report.read_text())["explore"]
    failing = sum(1 for e in entries for r in e["runs"] if r["verdict"] == "violation")

    def harness_call() -> BaseException:  # a real traceback through httpx, as a harness's failure has
        try:
            httpx.post("http://127.0.0.1:9/mcp", timeout=0.5)
        except httpx.HTTPError as exc:
            return exc
        raise AssertionError("port 9 answered")

    exc = harness_call()
    frames = _bench.median(_bench.timed(lambda: where_of(exc, str(where)), repeat=200))
    grouping = _bench.median(_bench.timed(lambda: [f.to_dict() for f in findings(entries)], repeat=20))
    return failing * frames + 3 * grouping, failing, len(findings(entries))


def pytest_run(
    where: Path, *args: str, timeout: float = 600
) -> tuple[float, subprocess.CompletedProcess[str]]:
    cmd = [sys.executable, "-m", "pytest", "-p", "mcpfaults", "-q", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - t0, proc


def campaign_size(tmp: Path) -> list[list[str]]:
    """Σkᵢ and M on the example harness's clean scenario, with and without reduction (the clean run
    only, once: the campaign's size is planned from its footprint)."""
    where = tmp / "examples"
    shutil.copytree(ROOT / "examples", where, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    (where / "pytest.ini").write_text(INI)
    rows = []
    for reduce in ("true", "false"):
        pytest_run(
            where,
            "test_example_faults.py",
            "--mcpfaults-explore",
            "-o",
            f"mcpfaults_explore=reduce={reduce}",
            "-k",
            "explore:clean",
            "--mcpfaults-report",
            f"r-{reduce}.json",
        )
        data = json.loads((where / f"r-{reduce}.json").read_text())
        [entry] = data["explore"]
        planned, pruned = entry["planned"], len(entry["pruned"])
        rows.append(
            [
                f"reduce={reduce}",
                str(entry["steps"]),
                str(len(entry["kinds"])),
                str(planned),
                str(pruned),
                str(planned - pruned),
            ]
        )
    return rows


def make_handwritten(where: Path, plans: list[list[str]]) -> None:
    lines = ["import pytest", "from harness import body", ""]
    for i, plan in enumerate(plans):
        lines += [
            f"@pytest.mark.mcp_sidecar(era='stateless', faults={plan!r})",
            f"def test_{i}(mcp_sidecar):",
            "    body(mcp_sidecar)",
            "",
        ]
    (where / "test_hand.py").write_text("\n".join(lines))


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mcpfaults-explore-bench-"))
    try:
        size = campaign_size(tmp)
        _bench.table(
            "The example harness's campaign (test_clean_run)",
            size,
            ["", "steps N", "kinds K", "Σkᵢ (M before reduction)", "pruned R", "runs M"],
        )

        where = tmp / "small"
        where.mkdir()
        (where / "pytest.ini").write_text(INI)
        (where / "harness.py").write_text(HARNESS)
        (where / "test_flow.py").write_text(EXPLORED)
        pytest_run(where, "test_flow.py", "--mcpfaults-report", "r.json")  # records, then explores
        entry = json.loads((where / "r.json").read_text())["explore"][0]
        plans = [[p["fault"] for p in r["plan"]] for r in entry["runs"]]
        make_handwritten(where, plans)
        runs = len(plans) + 1
        explore_t, hand_t, par_t = [], [], []
        for _ in range(REPEAT):  # interleaved: the campaign from the cache vs the same runs by hand
            t, proc = pytest_run(where, "test_flow.py", "-p", "no:randomly")
            explore_t.append(t)
            t, _ = pytest_run(where, "test_hand.py")
            hand_t.append(t)
            t, par = pytest_run(where, "test_flow.py", "-p", "xdist", "-n", "2")
            par_t.append(t)
        e, h, p = _bench.median(explore_t), _bench.median(hand_t), _bench.median(par_t)
        overhead = (e - h) / h
        _bench.table(
            f"{runs} runs of a small harness ({len(plans)} faulted + the clean run), pytest wall time",
            [
                ["explore (campaign from the cache)", _bench.fmt_s(e), f"{runs / e:.1f}"],
                ["the same runs written by hand", _bench.fmt_s(h), f"{runs / h:.1f}"],
                ["explore, -n 2", _bench.fmt_s(p), f"{runs / p:.1f}"],
            ],
            ["run", "median wall", "runs/s"],
        )
        outcome = proc.stdout.splitlines()[-1].split(" in ")[0]
        spread = par.stdout.splitlines()[-1].split(" in ")[0]
        print(
            f"\n-n 2 vs -n 0: {p / e:.2f}x the wall time; the same outcomes: {outcome == spread} "
            f"({outcome!r} / {spread!r})"
        )
        print(
            _bench.verdict(
                overhead <= 0.10,
                f"explore's overhead {overhead:+.1%} of the hand-written runs' time (≤ 10 %)",
            )
        )

        failing = tmp / "failing"
        failing.mkdir()
        (failing / "pytest.ini").write_text(INI)
        (failing / "harness.py").write_text(FAILING)
        (failing / "test_flow.py").write_text(EXPLORED)
        pytest_run(failing, "test_flow.py")  # records the footprint, then explores
        walls = [
            pytest_run(failing, "test_flow.py", "--mcpfaults-report", "r.json")[0] for _ in range(REPEAT)
        ]
        wall = _bench.median(walls)
        cost, violating, found = findings_cost(failing, failing / "r.json", wall)
        print(
            f"\nfindings: {violating} violating runs → {found} findings; their frames and grouping "
            f"{cost * 1000:.1f} ms of the campaign's {_bench.fmt_s(wall)}"
        )
        print(
            _bench.verdict(
                cost / wall < 0.05, f"findings add {cost / wall:.2%} to the campaign's wall time (< 5 %)"
            )
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
