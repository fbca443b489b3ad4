"""``python -m pytest_mcpfaults merge-reports OUT IN...``: the JSON reports of a run's shards merged into
one report (and the next run's baseline).

``tests`` merge as :func:`pytest_mcpfaults.report.merge` does; each explored test's ``explore`` entry is
the union of its shards' runs, and the ``findings`` are computed again from them, so they are what one
machine would have found. With ``--baseline PATH`` a new finding exits 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from pytest_mcpfaults.report import Report, ReportError, load_report, merge, missing_required, write_report


def _union(entries: Sequence[Mapping[str, Any]], key: str, ident: str) -> list[Any]:
    out: dict[str, Any] = {}
    for e in entries:
        for x in e.get(key) or ():
            out[str(x[ident]) if isinstance(x, Mapping) else str(x)] = x
    return list(out.values())


def _pairs(entry: Mapping[str, Any]) -> int:
    """The depth-2 pairs an entry counts in its ``planned``: those it ran and those it pruned."""
    ids = [r["id"] for r in entry.get("runs") or ()] + [p["run"] for p in entry.get("pruned") or ()]
    return sum(1 for rid in ids if "+" in str(rid))


def merge_explore(sections: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The ``explore`` sections of several reports as one."""
    from pytest_mcpfaults.explore.findings import VERDICTS, in_run_order

    by_test: dict[str, list[Mapping[str, Any]]] = {}
    for section in sections:
        for entry in section:
            by_test.setdefault(str(entry["nodeid"]), []).append(entry)
    out = []
    for test, entries in sorted(by_test.items()):
        first = next((e for e in entries if e.get("steps") is not None), entries[0])
        runs = in_run_order(_union(entries, "runs", "id"))
        merged = {**first, "nodeid": test}
        merged["clean"] = next((e["clean"] for e in entries if e.get("clean") is not None), None)
        merged["runs"] = runs
        merged["ran"] = len(runs)
        merged["verdicts"] = {v: sum(1 for r in runs if r["verdict"] == v) for v in VERDICTS}
        merged["violations"] = _union(entries, "violations", "id")
        merged["pruned"] = _union(entries, "pruned", "run")
        if isinstance(first.get("planned"), int):  # a pair is planned where its first run ran: every shard's
            merged["planned"] = first["planned"] - _pairs(first) + _pairs(merged)
        out.append(merged)
    return out


def left_out(baseline: Sequence[Mapping[str, Any]], explore: Sequence[Mapping[str, Any]]) -> list[str]:
    """The baseline's runs (``<test>::<run id>``) of campaigns the merged reports did not run whole (a
    shard's report missing) that are not among their runs: a finding with one was not looked for."""
    runs = {
        str(e["nodeid"]): {str(r["id"]) for r in e.get("runs") or ()}
        for e in explore
        if not isinstance(e.get("planned"), int)
        or len(e.get("runs") or ())
        < e["planned"] - len(e.get("pruned") or ()) - int(e.get("over_budget") or 0)
    }
    return [
        key
        for f in baseline
        for key in map(str, f.get("runs", ()))
        for test, _, rid in [key.partition("::explore:")]
        if test in runs and f"explore:{rid}" not in runs[test]
    ]


def _raw(path: str) -> dict[str, Any]:
    load_report(path)  # the schema and version checked, naming the file
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return dict(data)


def merge_files(out: str, inputs: Sequence[str], baseline: str | None, say: TextIO) -> int:
    """Merge ``inputs`` into ``out``, print the findings; 1 for a new finding."""
    from pytest_mcpfaults import __version__
    from pytest_mcpfaults.explore.findings import compare, findings, summary_lines

    raws = [_raw(p) for p in inputs]
    report = merge(*(Report.from_dict(r, source=p) for r, p in zip(raws, inputs, strict=True)))
    report.plugin_version = __version__
    explore = merge_explore([r.get("explore") or [] for r in raws])
    found = [f.to_dict() for f in findings(explore)]
    gates = [r.get("gates") or {} for r in raws]
    required = list(dict.fromkeys(k for g in gates for k in g.get("required", ())))
    extra: dict[str, Any] = {}
    gate = None
    if baseline is not None:
        old = _raw(baseline).get("findings") or []
        gate = compare(old, found, [e["nodeid"] for e in explore], left_out(old, explore))
        extra["findings_gate"] = gate.to_dict()
    if explore:
        extra = {"findings": found, **extra, "explore": explore}
    missing = missing_required(report, required)
    new = [v for g in gates for v in g.get("new_violations", ())]
    gates_out = {
        "required": required,
        "missing_required": missing,
        "baseline": baseline,
        "new_violations": new,
        "failed": bool(missing or new or (gate is not None and gate.failed)),
    }
    write_report(report, out, gates_out, extra=extra)
    runs = sum(len(e["runs"]) for e in explore)
    lines = [
        f"merged {len(inputs)} reports into {out}: {len(report.tests)} tests, {runs} explore runs, "
        f"{len(found)} findings",
        *(summary_lines(found, explore) if explore else []),
    ]
    if gate is not None:
        lines.append(
            f"baseline {baseline}: {len(gate.new)} new, {len(gate.known)} known, {len(gate.fixed)} fixed, "
            f"{len(gate.unstable)} unstable"
        )
        lines += [f"  new: {f['title']} ({f['key']})" for f in gate.new]
        lines += [f"  fixed: {f['title']} ({f['key']})" for f in gate.fixed]
    try:
        say.write("".join(f"{line}\n" for line in lines))
        say.flush()
    except BrokenPipeError:  # the reader stopped early (`| head -1`): the file is written, the gate stands
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, say.fileno())  # what is left to flush at exit goes nowhere
        os.close(devnull)
    return 1 if gate is not None and gate.failed else 0


def main(out: str, inputs: Sequence[str], baseline: str | None, say: TextIO, err: TextIO) -> int:
    """The subcommand: 2 (with the file named) for an unreadable input."""
    try:
        return merge_files(out, inputs, baseline, say)
    except ReportError as exc:
        err.write(f"python -m pytest_mcpfaults merge-reports: {exc}\n")
        return 2
    except OSError as exc:
        err.write(f"python -m pytest_mcpfaults merge-reports: cannot write {out!r}: {exc.strerror or exc}\n")
        return 2
