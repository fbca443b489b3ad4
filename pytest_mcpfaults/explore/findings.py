"""Explore's findings: a campaign's failing runs grouped by root cause. Pure: no I/O, no pytest.

Runs filed under the same *primary* verdict kind (:func:`primary`) at the same harness frame (its line
not compared, so an edit above it keeps the finding) are one :class:`Finding`, whose key the baseline
compares (docs/explore.md's "Findings"). Input: the JSON report's ``explore`` section, so merged shards
give the same findings as one machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

#: Each oracle (the part of a ``found`` entry before ``:``) and the class of bug it is, in report order.
CLASSES: dict[str, str] = {
    "invariant": "span flip",
    "patience": "hang",
    "left_open": "leak",
    "sessions": "session hygiene",
    "exception": "escaped exception",
    "teardown": "escaped exception",
    "own_assert": "behaviour",
}
#: The classes in the order findings are reported (the incident's class first).
ORDER: tuple[str, ...] = tuple(dict.fromkeys(CLASSES.values()))
#: The verdicts of a run (see docs/explore.md), each with its cell in the terminal summary's matrix and
#: its colour on the HTML page.
VERDICTS: dict[str, tuple[str, str]] = {
    "ok": (".", "#cfe8cf"),
    "violation": ("V", "#e05050"),
    "behaviour": ("b", "#f3dc8a"),
    "unreached": ("u", "#d8d8d8"),
    "not explored": ("s", "#b0b0b0"),
    "known": ("k", "#e8b0b0"),
}
#: The verdicts of a run that count as having found something.
FOUND_VERDICTS = ("violation", "known")

_INVARIANT_TITLES = {
    "cleanup_never_flips": "a failed cleanup flips a completed session's span to ERROR",
    "cleanup_at_most": "the harness cleans up a session more than once",
    "all_spans_ended": "the harness leaves a span unended",
}
_INVARIANT_HINTS = {
    "cleanup_never_flips": "a cleanup's failure must not change the outcome of the work it cleans up after: "
    "record it (a log line, a span event) instead of setting the session span's status to ERROR",
    "cleanup_at_most": "clean up once: mark the session closed before the cleanup call, not after it "
    "succeeds",
    "all_spans_ended": "end every span on every path (a `with` block, or end it in a `finally`)",
}
_WHAT = {
    "left_open": "the harness leaves its connection to the server open after a failure",
    "sessions": "the harness breaks session hygiene after a failure (a session never ended, a lost session "
    "called again, or calls failed in the client)",
    "teardown": "the sidecar saw an error at the test's teardown",
}
_HINTS = {
    "patience": "give the MCP client a read timeout (the mcp SDK: ClientSession(read_timeout_seconds=...); "
    "httpx: timeout=...), so a cut or held answer ends the call",
    "left_open": "close the client on every path (`async with`, or try/finally), a failed initialize "
    "included",
    "sessions": "end every session the client opens with a `DELETE`, on the error path too; on a 404 for "
    "its session id, open a new session instead of calling the lost one; after a failed call, send the "
    "next one instead of failing it in the client (the run's failure says which: docs/sessions.md)",
}


def oracle_of(found: str) -> str:
    """``exception:ReadError`` → ``exception``."""
    return found.split(":", 1)[0]


#: Oracles checked once the test is over: a run that also found something while it ran is filed under
#: that (a connection left open after an escaped exception is the escape's doing, not a bug of its own).
AFTERWARDS = ("left_open", "sessions", "teardown")


def primary(found: Sequence[str]) -> str:
    """The verdict kind a run is filed under: the first of ``found`` in :data:`ORDER`, those of
    :data:`AFTERWARDS` only when nothing else was found."""
    during = [f for f in found if oracle_of(f) not in AFTERWARDS]
    return min(during or found, key=_rank)


def _rank(found: str) -> int:
    cls = CLASSES.get(oracle_of(found))
    return ORDER.index(cls) if cls is not None else len(ORDER)


def _frame_id(where: str) -> str:
    head, sep, func = where.partition(" in ")
    return f"{head.rsplit(':', 1)[0]}{sep}{func}"


def finding_key(found: str, where: str, test: str) -> str:
    """A finding's identity: its verdict kind and the harness frame without the line (else the test)."""
    return f"{found} at {_frame_id(where)}" if where else f"{found} in {test}"


@dataclass
class Finding:
    """One root cause, the runs it covers, and its plan (the smallest run's)."""

    key: str
    found: str
    where: str
    runs: list[dict[str, Any]] = field(default_factory=list)  # {test, id, verdict, kind, step, plan}
    own_exception: bool = False
    blocking_only: bool = False
    unstable: bool = False

    @property
    def oracle(self) -> str:
        return oracle_of(self.found)

    @property
    def klass(self) -> str:
        return CLASSES.get(self.oracle, "behaviour")

    @property
    def tests(self) -> list[str]:
        return list(dict.fromkeys(str(r["test"]) for r in self.runs))

    @property
    def known(self) -> bool:
        return all(r["verdict"] == "known" for r in self.runs)

    def what(self) -> str:
        name = self.found.partition(":")[2]
        if self.oracle == "invariant":
            return _INVARIANT_TITLES.get(name, f"the span invariant {name} breaks")
        if self.oracle == "patience":
            if self.blocking_only:
                return "the harness waits without a timeout on a request the server holds"
            return "the MCP client never times out a call whose answer is cut"
        if self.oracle == "exception":
            func = self.where.partition(" in ")[2]
            return f"{name} escapes the harness" + (f" from {func}()" if func else "")
        return _WHAT.get(self.oracle, "the test's own assertion fails under a fault")

    @property
    def title(self) -> str:
        n = len(self.runs)
        return f"{self.what()}: {n} run{'s' if n != 1 else ''}"

    @property
    def hint(self) -> str:
        name = self.found.partition(":")[2]
        if self.oracle == "invariant":
            return _INVARIANT_HINTS.get(name, "")
        if self.oracle == "exception" and self.own_exception:
            return (
                f"{name} is defined in the harness's own code: if it is one of the harness's own failure "
                f'modes, name it: @pytest.mark.mcp_explore(raises=["{name}"]) (or ini mcpfaults_explore = '
                f"raises={name})"
            )
        return _HINTS.get(self.oracle, "")

    def to_dict(self) -> dict[str, Any]:
        first = min(self.runs, key=lambda r: (r["depth"], r["at"]))  # to paste: fewest faults, earliest step
        return {
            "key": self.key,
            "title": self.title,
            "class": self.klass,
            "oracle": self.oracle,
            "found": self.found,
            "where": self.where,
            "runs": [f"{r['test']}::{r['id']}" for r in self.runs],
            "kinds": list(dict.fromkeys(r["kind"] for r in self.runs)),
            "steps": list(dict.fromkeys(r["step"] for r in self.runs)),
            "tests": self.tests,
            "plan": first["plan"],
            "plan_run": f"{first['test']}::{first['id']}",
            "hint": self.hint,
            "known": self.known,
            "unstable": self.unstable,
        }


def plan_kind(spec: str) -> str:
    """The fault kind of a fault's text form (``'stall(after_bytes=3)@tools/call'`` → ``'stall'``)."""
    from pytest_mcpfaults.faults import KIND_NAME

    match = re.match(rf"\s*({KIND_NAME})", spec)
    return match.group(1) if match else spec


def kind_of(run: Mapping[str, Any]) -> str:
    plan = run.get("plan") or []
    return plan_kind(str(plan[0]["fault"])) if plan else ""


def step_of(run: Mapping[str, Any]) -> str:
    plan = run.get("plan") or []
    return str(plan[0]["step"]) if plan else ""


#: A run of a report's ``explore`` section (a mapping), as given.
RunT = TypeVar("RunT", bound=Mapping[str, Any])


def in_run_order(runs: Iterable[RunT]) -> list[RunT]:
    """``runs`` in their campaign's order (footprint, then catalogue; pairs after their first run)."""
    from pytest_mcpfaults.faults import fault_kinds

    rank = {kind: i for i, kind in enumerate(fault_kinds())}
    return sorted(
        runs,
        key=lambda r: (int(r.get("at", 0)), len(r.get("plan") or ()), rank.get(kind_of(r), len(rank))),
    )


def findings(entries: Iterable[Mapping[str, Any]]) -> list[Finding]:
    """The findings of explore entries, by class (:data:`ORDER`), then by their first run's order. A
    run not among its entry's ``violations`` (a pair its first fault alone explains) is left out."""
    from pytest_mcpfaults.faults import fault_kinds

    out: dict[str, Finding] = {}
    for entry in entries:
        test = str(entry["nodeid"])
        plans = {str(v["id"]): str(v["plan"]) for v in entry.get("violations", ())}
        # a clean run that failed generic checks only is a finding of its own (its campaign ran with
        # those checks off): its record stands beside the runs, with no plan to paste
        clean = [dict(r, clean=True) for r in entry.get("clean_checks", ())]
        for run in [*clean, *entry.get("runs", ())]:
            rid = str(run["id"])
            found = list(run.get("found") or ())
            if run.get("verdict") not in FOUND_VERDICTS or not found:
                continue
            if run.get("verdict") == "violation" and rid not in plans and not run.get("clean"):
                continue  # reported under its first fault alone
            kind = primary(found)
            where = str(run.get("where") or "")
            key = finding_key(kind, where, test)
            f = out.setdefault(key, Finding(key, kind, where, blocking_only=True, unstable=True))
            plan = run.get("plan") or []
            f.runs.append(
                {
                    "test": test,
                    "id": rid,
                    "verdict": run["verdict"],
                    "kind": kind_of(run),
                    "step": step_of(run),
                    "depth": len(plan),
                    "at": int(run.get("at", 0)),
                    "plan": plans.get(rid, run.get("plan_line", "")),
                }
            )
            f.own_exception = f.own_exception or bool(run.get("own_exception"))
            kinds = [fault_kinds().get(plan_kind(str(p["fault"]))) for p in plan]
            f.blocking_only = f.blocking_only and all(k is not None and k.blocking for k in kinds)
            f.unstable = f.unstable and bool(run.get("unstable"))
    return sorted(out.values(), key=lambda f: ORDER.index(f.klass))


@dataclass
class Gate:
    """A run's findings against a baseline's: ``new`` fail the gate, ``unstable`` (new, every run
    flipped on its re-run) and ``known`` do not, ``fixed`` are the baseline's of tests that ran here."""

    new: list[dict[str, Any]] = field(default_factory=list)
    unstable: list[dict[str, Any]] = field(default_factory=list)
    known: list[dict[str, Any]] = field(default_factory=list)
    fixed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.new)

    def to_dict(self) -> dict[str, Any]:
        keys = {
            name: [f["key"] for f in getattr(self, name)] for name in ("new", "unstable", "known", "fixed")
        }
        return {**keys, "failed": self.failed}


def compare(
    baseline: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]],
    ran: Iterable[str],
    unrun: Iterable[str] = (),
) -> Gate:
    """Compare finding dicts by key. ``ran``: the explored tests whose campaign ran here (a baseline
    finding of another test is not "fixed": it was not looked for); ``unrun``: runs of those campaigns
    (``<test>::<run id>``) left out here (``-k``, ``--lf``, a shard): a finding with one is not either."""
    gate = Gate()
    old = {str(f["key"]): f for f in baseline}
    here = {str(f["key"]) for f in current}
    tests = set(ran)
    left_out = set(unrun)
    for f in current:
        if f["key"] in old:
            gate.known.append(dict(f))
        elif f.get("unstable"):
            gate.unstable.append(dict(f))
        else:
            gate.new.append(dict(f))
    for key, f in old.items():
        if key not in here and set(f.get("tests", ())) & tests and not set(f.get("runs", ())) & left_out:
            gate.fixed.append(dict(f))
    return gate


def violating_runs(entries: Iterable[Mapping[str, Any]]) -> int:
    """The explore runs that found something, a pair its first fault explains included (as the coverage
    section counts them: one violation each), and a clean run whose failed checks are a finding."""
    runs = (r for e in entries for r in (*e.get("clean_checks", ()), *e.get("runs", ())))
    return sum(1 for r in runs if r.get("verdict") in FOUND_VERDICTS)


def summary_lines(found: Sequence[Mapping[str, Any]], entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The findings of explore ``entries``, as the terminal summary and ``merge-reports`` lead with them."""
    n, runs = len(found), violating_runs(entries)
    lines = [f"{n} finding{'s' if n != 1 else ''} in {runs} violating run{'s' if runs != 1 else ''}:"]
    for i, f in enumerate(found, 1):
        tags = [t for t, on in (("known", f.get("known")), ("unstable", f.get("unstable"))) if on]
        lines.append(f"{i}. {f['title']}" + (f" [{', '.join(tags)}]" if tags else ""))
        lines.append(
            f"   oracle: {f['found']}; kinds: {', '.join(f['kinds'])}; steps: {', '.join(f['steps'])}"
        )
        if f.get("where"):
            lines.append(f"   where: {f['where']}")
        lines.append(f"   plan: {f['plan']}")
        if f.get("hint"):
            lines.append(f"   fix: {f['hint']}")
    return lines
