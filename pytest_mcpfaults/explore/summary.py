"""Explore's results: gathered from every explore item's teardown report (on the xdist controller too),
written to the footprint cache, the terminal summary and the JSON report's ``explore`` section.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_mcpfaults._pytest.records import REPORT_SECTIONS
from pytest_mcpfaults.explore.findings import VERDICTS, in_run_order, step_of

#: The attribute of a teardown report carrying what an explore run observed (relayed by xdist).
REPORT_ATTR = "mcpfaults_explore"
_CACHE_PREFIX = "mcpfaults/explore/"
_BASELINE = pytest.StashKey[list[dict[str, Any]]]()


def cache_key(field: str, value: str) -> str:
    """The ``.pytest_cache`` key of a test's footprint (``field`` ``nodeid``), or of the list of a
    parametrized test function's explored tests (``function``)."""
    kind = "tests-" if field == "function" else ""
    return _CACHE_PREFIX + kind + hashlib.sha1(value.encode()).hexdigest()[:16]


def cached(cache: Any, field: str, value: str) -> dict[str, Any] | None:
    """The ``.pytest_cache`` entry for ``value`` (its ``field``): a hash of another node id is not."""
    data = cache.get(cache_key(field, value), None) if cache is not None else None
    return data if isinstance(data, dict) and data.get(field) == value else None


def baseline(config: pytest.Config) -> list[dict[str, Any]]:
    """``--mcpfaults-baseline``'s findings (empty without one)."""
    if _BASELINE not in config.stash:
        import contextlib
        import json

        data: Any = {}
        path = config.getoption("mcpfaults_baseline", default=None)
        with contextlib.suppress(OSError, ValueError):  # refused at configure time when unreadable
            if path:
                data = json.loads((config.invocation_params.dir / path).read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
        found = [f for f in data.get("findings", None) or [] if isinstance(f, dict) and "key" in f]
        config.stash[_BASELINE] = found
    return config.stash[_BASELINE]


def _run_entry(rid: str, d: Mapping[str, Any]) -> dict[str, Any]:
    """One run of the JSON report's ``runs``; a run that found something carries what its finding needs."""
    out = {"id": rid, "verdict": d["verdict"], "found": d["found"], "note": d.get("note", "")}
    out["plan"] = d["run"]["plan"]
    if d["verdict"] in ("violation", "known"):
        from pytest_mcpfaults.explore.plan import Run, regression_line

        out["where"] = d.get("where", "")
        out["own_exception"] = bool(d.get("own_exception"))
        out["unstable"] = bool(d.get("unstable"))
        run = Run.from_dict(d["run"])
        out["plan_line"] = regression_line(run, str(d.get("transport", "http")), d.get("makers", ()))
    return out


def _violations(runs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each violating run with its plan to paste; not a pair whose first fault alone gave the same."""
    out = []
    for rid, r in runs.items():  # in the order they ran
        first = runs.get(rid.partition("+")[0]) if "+" in rid else None  # a pair's first run
        if r["verdict"] != "violation" or (
            first and first["verdict"] == "violation" and set(r["found"]) <= set(first["found"])
        ):
            continue  # not a violation, or its first fault alone gives it: reported under that run
        out.append({"id": rid, "found": r["found"], "plan": r["plan_line"]})
    return out


def _ordered(runs: list[dict[str, Any]], camp: Any) -> list[dict[str, Any]]:
    """The runs in the campaign's order, each with ``at``: its first step's index in the footprint (so
    merged shards sort alike)."""
    if camp is None:  # no footprint here (the clean run was not selected): the order they ran
        for i, r in enumerate(runs):
            r["at"] = i
        return runs
    steps = {s.id: i for i, s in enumerate(camp.steps)}
    for r in runs:
        r["at"] = steps.get(step_of(r), len(steps))
    return in_run_order(runs)


class ExploreReport:
    """Registered at configure time (every process); only a controller or plain run summarizes."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, dict[str, dict[str, Any]]] = {}  # test -> run id -> data
        self.html_written: str | None = None
        self.html_error: str | None = None
        sections = config.stash.setdefault(REPORT_SECTIONS, {})
        # the JSON report's sections, none when nothing was explored; the report leads with the findings
        sections["findings"] = lambda: self.findings() if self.results else None
        sections["findings_gate"] = lambda: gate.to_dict() if self.results and (gate := self.gate()) else None
        sections["explore"] = lambda: self.tests() if self.results else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if report.when == "teardown" and isinstance(data, dict):
            self.results.setdefault(str(data["test"]), {})[str(data["run"]["id"])] = data

    # -- the campaign of each test, recomputed from its footprint (pure) --------------------------

    def _campaign(self, runs: Mapping[str, dict[str, Any]]) -> Any:
        from pytest_mcpfaults.explore.plan import Step, parse_options, plan_campaign

        clean = runs.get("explore:clean")
        if clean is None or "footprint" not in clean:
            return None
        steps = tuple(Step.from_dict(s) for s in clean["footprint"])
        opts = parse_options({k: v for k, v in clean.get("options", {}).items() if v is not None})
        return plan_campaign(steps, opts, str(clean.get("transport", "http")))

    def tests(self) -> list[dict[str, Any]]:
        """One summary per explored test (the JSON report's ``explore`` section)."""
        out = []
        for test, runs in sorted(self.results.items()):
            camp = self._campaign(runs)
            ran = {rid: d for rid, d in runs.items() if d["run"]["plan"]}
            entries = {rid: _run_entry(rid, d) for rid, d in ran.items()}
            counts = {v: sum(1 for d in ran.values() if d["verdict"] == v) for v in VERDICTS}
            clean = runs.get("explore:clean", {})
            pruned = [{"run": p.run.id, "why": p.why} for p in camp.pruned] if camp else []
            pruned += [p for d in runs.values() for p in d.get("pruned_pairs", ())]
            pairs = sum(1 for d in ran.values() if len(d["run"]["plan"]) > 1)
            entry: dict[str, Any] = {
                "nodeid": test,
                # whose runs these are: explore's campaign, or a trace's replay (from-trace's, after the
                # clean run: explore's campaign is not run for its test)
                "campaign": clean.get("campaign", "explore"),
                "clean": clean.get("verdict"),
                "clean_failure": clean.get("note") or ", ".join(clean.get("found", [])) or None,
                # a clean run that failed generic checks only (kept off for its campaign): a finding
                "clean_checks": _clean_checks(clean),
                "steps": len(camp.steps) if camp else None,
                "kinds": list(camp.kinds) if camp else None,
                # depth 1's (step, kind) pairs where the kind applies, plus the pairs planned at depth 2
                "planned": len(camp.runs) + len(camp.over_budget) + len(pruned) + pairs if camp else None,
                "pruned": pruned,
                "over_budget": len(camp.over_budget) if camp else 0,
                "ran": len(ran),
                "verdicts": counts,
                "runs": _ordered(list(entries.values()), camp),
                "violations": _violations(entries),
            }
            out.append(entry)
        return out

    def findings(self) -> list[dict[str, Any]]:
        """The run's findings (the JSON report's ``findings``), from the per-test entries."""
        from pytest_mcpfaults.explore.findings import findings

        return [f.to_dict() for f in findings(self.tests())]

    def gate(self) -> Any:
        """The findings against ``--mcpfaults-baseline``'s, ``None`` without a baseline."""
        from pytest_mcpfaults.explore.findings import compare

        old = baseline(self.config)
        if self.config.getoption("mcpfaults_baseline", default=None) is None:
            return None
        ran = [test for test, runs in self.results.items() if any(d["run"]["plan"] for d in runs.values())]
        # a baseline run that did not run here was left out (-k, --lf, a shard, max_runs), unless the test's
        # campaign, known from its clean run here, no longer has it (its footprint changed)
        camps = {test: self._campaign(runs) for test, runs in self.results.items()}
        planned = {
            test: {r.id for r in (*camp.runs, *camp.over_budget)}
            for test, camp in camps.items()
            if camp is not None
        }
        unrun = [
            key
            for f in old
            for key in map(str, f.get("runs", ()))
            for test, _, rid in [key.partition("::explore:")]
            if f"explore:{rid}" not in self.results.get(test, {})
            and f"explore:{rid}" in planned.get(test, {f"explore:{rid}"})
        ]
        return compare(old, self.findings(), ran, unrun)

    # -- cache, summary ---------------------------------------------------------------------------

    def _write_html(self) -> None:
        html = self.config.getoption("mcpfaults_html", default=None)
        if not html or hasattr(self.config, "workerinput") or self.config.option.collectonly:
            return  # --collect-only: no run to show (the last run's page stays, as its JSON report does)
        from pytest_mcpfaults.explore.html import render

        details = {
            f"{test}::{rid}": d["detail"]
            for test, runs in self.results.items()
            for rid, d in runs.items()
            if "detail" in d
        }
        path = self.config.invocation_params.dir / html
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(self.tests(), details, self.findings()), encoding="utf-8")
        except OSError as exc:  # checked at configure time; the disk can still fill up or go away
            self.html_error = f"{exc.strerror or exc} ({exc.filename or path})"
            return
        self.html_written = str(path)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._write_html()
        if self.html_error is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # as an unwritten report does
        cache = getattr(self.config, "cache", None)
        if cache is None or hasattr(self.config, "workerinput"):
            return
        self._write_index(cache)
        for test, runs in self.results.items():
            data = cached(cache, "nodeid", test) or {"nodeid": test}
            clean = runs.get("explore:clean")
            if clean is not None:
                if clean["verdict"] != "ok" and not clean.get("kept_off"):
                    data = {"nodeid": test}  # a failing clean run is not explored, next time either
                elif clean.get("footprint") != data.get("footprint"):
                    data = {"nodeid": test, "footprint": clean["footprint"]}
                data["checks_off"] = list(clean.get("kept_off", []))
            observed = data.setdefault("observed", {})
            for rid, d in runs.items():
                if d["run"]["plan"] and len(d["run"]["plan"]) == 1 and "footprint" in d:
                    observed[rid] = {k: d[k] for k in ("footprint", "labels", "error")}
            cache.set(cache_key("nodeid", test), data)

    def _write_index(self, cache: Any) -> None:
        """Per parametrized function, the explored tests seen (added to those cached before)."""
        functions: dict[str, list[str]] = {}
        for test, runs in self.results.items():
            function = next((str(d["function"]) for d in runs.values() if "function" in d), test)
            if function != test:
                functions.setdefault(function, []).append(test)
        for function, tests in functions.items():
            known = (cached(cache, "function", function) or {}).get("tests", [])
            entry = {"function": function, "tests": sorted({*known, *tests})}
            cache.set(cache_key("function", function), entry)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        not_written = f"mcpfaults explore page NOT written: {self.html_error}"
        if hasattr(self.config, "workerinput") or not self.results:
            if self.html_error is not None:  # nothing explored: the page alone
                terminalreporter.write_line(not_written, red=True, bold=True)
            elif self.config.option.collectonly and self.config.getoption("mcpfaults_html", default=None):
                terminalreporter.write_line("mcpfaults explore page not written: --collect-only ran no test")
            return
        from pytest_mcpfaults.explore.findings import summary_lines as findings_lines

        tr = terminalreporter
        tr.write_sep("=", "mcpfaults: explore", bold=True)
        tests, found = self.tests(), self.findings()
        for line in findings_lines(found, tests):
            tr.write_line(line, red=line[:1].isdigit() and "[known" not in line)
        gate = self.gate()
        if gate is not None:
            for line in gate_lines(gate, self.config.getoption("mcpfaults_baseline")):
                tr.write_line(line, red=line.startswith("  new") or "FAILED" in line)
        tr.write_line("")
        for entry in tests:
            for line in summary_lines(entry):
                tr.write_line(line, red=line.lstrip().startswith(("V ", "violation")))
        if getattr(self.config, "cache", None) is None and any(not e["ran"] and e["planned"] for e in tests):
            tr.write_line(
                "the cache is off (-p no:cacheprovider): no footprint is kept for the next run, so a "
                "campaign left out of this one does not run then either (under xdist, -n, none ever runs: "
                "explore without -n, or with the cache)",
                yellow=True,
            )
        if self.html_written is not None:
            tr.write_line(f"mcpfaults explore page: {self.html_written}")
        if self.html_error is not None:
            tr.write_line(not_written, red=True, bold=True)


def gate_lines(gate: Any, baseline: str) -> list[str]:
    """What the findings gate says (see ``explore_findings.compare``)."""
    counts = f"{len(gate.known)} known, {len(gate.fixed)} fixed, {len(gate.unstable)} unstable"
    if gate.failed:
        head = (
            f"mcpfaults explore gate FAILED: {len(gate.new)} new finding(s) not in baseline {baseline} "
            f"({counts})"
        )
    else:
        head = f"mcpfaults explore baseline {baseline}: no new finding ({counts})"
    lines = [head]
    lines += [f"  new: {f['title']} ({f['key']})" for f in gate.new]
    lines += [f"  unstable (flipped on a re-run, not failing): {f['title']}" for f in gate.unstable]
    lines += [f"  fixed (in the baseline, no longer found): {f['title']} ({f['key']})" for f in gate.fixed]
    return lines


def _clean_checks(clean: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The clean run as a run record when it failed generic checks only (kept off for its campaign)."""
    if not clean.get("kept_off"):
        return []
    from pytest_mcpfaults.explore.checks import check_of

    return [
        {
            "id": "explore:clean",
            "verdict": clean["verdict"],
            "found": clean["found"],
            "oracles": [check_of(f) for f in clean["found"]],
            "note": f"a clean-run check failure: the campaign ran with {', '.join(clean['kept_off'])} off",
            "plan": [],
        }
    ]


def summary_lines(entry: Mapping[str, Any]) -> list[str]:
    """The terminal summary of one explored test."""
    lines = [str(entry["nodeid"])]
    if entry["clean"] is None:
        lines.append(
            f"  {entry['ran']} ran (the clean run was not selected: its footprint is the cached one)"
        )
    elif entry.get("clean_checks"):
        for rec in entry["clean_checks"]:
            lines.append(f"  violation of the clean run itself: {', '.join(rec['found'])} ({rec['note']})")
    elif entry["clean"] != "ok":
        lines.append(f"  the clean run did not pass ({entry['clean_failure']}): not explored")
        return lines
    v = entry["verdicts"]
    if entry.get("campaign") == "from-trace":  # its runs are a trace's replay, not explore's campaign
        if not entry["ran"]:  # no campaign left out of this session: nothing to replay
            lines.append("  from-trace: nothing replayed (why: see mcpfaults from-trace)")
            return lines
        lines.append(
            f"  from-trace: {entry['ran']} replayed: {v['violation']} violations, {v['behaviour']} behaviour "
            f"under fault, {v['ok']} ok, {v['unreached']} unreached"
        )
    elif entry["clean"] is not None and entry["steps"] is not None:
        lines.append(
            f"  {entry['steps']} steps × {len(entry['kinds'])} kinds → {entry['planned']} runs (where the "
            f"kind applies), "
            f"{len(entry['pruned'])} pruned, {entry['over_budget']} over budget; {entry['ran']} ran: "
            f"{v['violation']} violations, {v['behaviour']} behaviour under fault, {v['ok']} ok, "
            f"{v['unreached']} unreached" + (f", {v['known']} known (in the baseline)" if v["known"] else "")
        )
    elif entry["clean"] is not None:
        lines.append(f"  {entry['ran']} ran (footprint from the cache): {v['violation']} violations")
    if not entry["ran"] and entry["planned"]:
        lines.append(
            "  the campaign did not run in this session (under xdist a first run only records the "
            "footprint, or -k left it out): run again to explore it"
        )
    lines += ["  " + row for row in matrix_lines(entry["runs"])]
    if entry["violations"]:
        lines.append("  violations (paste the plan above a regression test):")
        for viol in entry["violations"]:
            lines.append(f"    {viol['id']}: {', '.join(viol['found'])}")
            lines.append(f"      {viol['plan']}")
    return lines


def matrix_lines(runs: list[Mapping[str, Any]]) -> list[str]:
    """The step × fault matrix of the depth-1 runs that ran (cells: :data:`VERDICTS`); pairs counted below."""
    from pytest_mcpfaults.explore.html import grid

    steps, kinds, runs_at = grid(runs)
    if not runs_at:
        return []
    cell = {at: VERDICTS[r["verdict"]][0] for at, r in runs_at.items()}
    width = max(len(s) for s in steps)
    out = [" " * width + "  " + " ".join(f"{i:>2}" for i in range(1, len(kinds) + 1))]
    for s in steps:
        out.append(f"{s:<{width}}  " + " ".join(f"{cell.get((s, k), ' '):>2}" for k in kinds))
    out.append("kinds: " + ", ".join(f"{i}={k}" for i, k in enumerate(kinds, 1)))
    pairs = [r for r in runs if len(r["plan"]) > 1]
    if pairs:
        bad = sum(1 for r in pairs if r["verdict"] == "violation")
        out.append(f"depth 2: {len(pairs)} pairs ran, {bad} violations")
    return out
