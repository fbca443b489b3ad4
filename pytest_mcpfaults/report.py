"""The CI report: per-test fault and invariant records, the JSON schema, merge, baseline comparison,
and the terminal summary text. Pure: no pytest, no I/O beyond :func:`load_report` / :func:`write_report`.

The pytest glue (``pytest_mcpfaults._pytest.report``) turns each test's record into a
:class:`TestEntry`, builds a :class:`Report` on the controller (merged across xdist workers), writes it
with ``--mcpfaults-report=PATH``, prints :func:`summary_lines`, and applies the gates
(:func:`missing_required`, :func:`new_violations`). The schema is documented in ``docs/ci.md``.
"""

from __future__ import annotations

import json
import math
import types
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict, Union, get_args, get_origin, get_type_hints, is_typeddict

from pytest_mcpfaults.explore.findings import plan_kind, primary
from pytest_mcpfaults.faults import fault_kinds

__all__ = [
    "FAILED_OUTCOMES",
    "OUTCOMES",
    "READS",
    "SCHEMA",
    "VERSION",
    "KindCoverage",
    "Outcome",
    "Report",
    "ReportError",
    "TestEntry",
    "Violation",
    "ViolationKind",
    "load_report",
    "merge",
    "missing_required",
    "new_violations",
    "plan_kind",
    "summary_line",
    "summary_lines",
    "write_report",
]

#: The ``"schema"`` value of every report file.
SCHEMA = "pytest-mcpfaults/report"
#: The schema version this module writes. Bumped on any incompatible change.
VERSION = 2
#: The schema versions this module reads (no release wrote version 1, before explore's ``findings``: a
#: baseline of it would call every finding new).
READS = (2,)
#: Every outcome a test entry can have. ``interrupted``: the run was interrupted (SIGINT) in this test.
Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed", "interrupted"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
#: Test outcomes that count as failures in the coverage table and totals. ``crashed``: the process
#: running the test died in it (a pytest-xdist worker crash); its entry has the faults fired up to then.
FAILED_OUTCOMES: frozenset[Outcome] = frozenset({"failed", "error", "crashed"})
#: What a :class:`Violation` is of: a failed invariant, a patience violation the test did not expect,
#: or an explore run that found something (one each: what it found, as explore counts them).
ViolationKind = Literal["invariant", "patience", "explore"]


class ReportError(ValueError):
    """A report file that is not a pytest-mcpfaults report of a version this module reads."""


_RUN = {"id": str, "verdict": str, "found?": [str], "plan?": [{"step": str, "fault": str}], "at?": int}
#: The sections beside ``tests`` as their readers take them (``merge-reports``, the findings baseline):
#: an object's keys (``?``: may be absent) and their types, a list's items.
_SECTIONS: dict[str, Any] = {
    "gates": {"required?": [str], "new_violations?": [dict]},
    "findings": [{"key": str, "title": str, "tests?": [str], "runs?": [str]}],
    "explore": [
        {
            "nodeid": str,
            "runs?": [_RUN],
            "clean_checks?": [{**_RUN, "verdict?": str}],
            "violations?": [{"id": str, "plan": object, "found?": [str]}],
            "pruned?": [{"run": str}],
            "over_budget?": int,
        }
    ],
}


def _check_shape(value: object, shape: Any, where: str) -> None:
    """``ReportError`` naming the place (``explore[0].runs[2]``) where ``value`` is not ``shape``."""
    kind = list if isinstance(shape, list) else dict if isinstance(shape, dict) else shape
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {list: "a list", dict: "an object"}
        raise ReportError(f"{where} must be {names.get(kind, kind.__name__)}, got {type(value).__name__}")
    if isinstance(shape, list):
        for i, item in enumerate(value):
            _check_shape(item, shape[0], f"{where}[{i}]")
    elif isinstance(shape, dict):
        for key, sub in shape.items():
            name = key.rstrip("?")
            if name in value:
                _check_shape(value[name], sub, f"{where}.{name}")
            elif not key.endswith("?"):
                raise ReportError(f"{where} has no {name!r}")


#: A JSON value's name, and its plural, for the types of :class:`TestEntry`'s fields.
_JSON_NAMES = {
    str: ("a string", "strings"),
    int: ("an integer", "integers"),
    float: ("a finite number", "finite numbers"),
    bool: ("true or false", "true or false"),
    type(None): ("null", "nulls"),
    Any: ("any value", "any values"),
}


def _fits(value: object, hint: Any) -> bool:
    """Whether a JSON ``value`` is of the type ``hint`` (a field's annotation; a float is finite)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items()
        )
    if is_typeddict(hint):  # its required keys present, each key given of its type
        hints = get_type_hints(hint)
        return (
            isinstance(value, dict)
            and hint.__required_keys__ <= value.keys()
            and all(_fits(value[k], h) for k, h in hints.items() if k in value)
        )
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return hint is Any or isinstance(value, hint)


def _json_type(hint: Any, plural: bool = False) -> str:
    """``a list of strings or null``: what ``hint`` is in JSON's words."""
    origin, args = get_origin(hint), get_args(hint)
    if is_typeddict(hint):
        return "objects" if plural else "an object"
    if origin is Literal:
        return f"one of {', '.join(args)}"
    if origin in (Union, types.UnionType):
        return " or ".join(_json_type(a, plural) for a in args)
    if origin in (list, dict):
        of = f" of {_json_type(args[-1], plural=True)}" if args[-1] is not Any else ""
        return (
            ("lists" if plural else "a list") + of
            if origin is list
            else ("objects" if plural else "an object") + of
        )
    return _JSON_NAMES[hint][plural]


def _misfit(where: str, value: object, hint: Any) -> str:
    """Why ``value`` does not fit ``hint`` (``where`` names it): in a list of objects, the object's key
    at fault (``invariants[0] has no 'name' (a string)``, ``invariants[1].ok must be ...``)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is list and is_typeddict(args[0]) and isinstance(value, list):
        i = next(i for i, item in enumerate(value) if not _fits(item, args[0]))
        return _misfit(f"{where}[{i}]", value[i], args[0])
    if is_typeddict(hint) and isinstance(value, dict):
        hints = get_type_hints(hint)
        absent = next((k for k in hints if k in hint.__required_keys__ and k not in value), None)
        if absent is not None:
            return f"{where} has no {absent!r} ({_json_type(hints[absent])})"
        key = next(k for k, h in hints.items() if k in value and not _fits(value[k], h))
        return _misfit(f"{where}.{key}", value[key], hints[key])
    got = json.dumps(value)
    return f"{where} must be {_json_type(hint)}, got {got if len(got) <= 60 else got[:57] + '...'}"


class _Invariant(TypedDict):  # the required key (a base class: Python 3.10 has no ``Required``)
    name: str


class _InvariantItem(_Invariant, total=False):
    """An item of a test entry's ``invariants`` (``_pytest.records.InvariantResult``); without ``ok``
    it failed, without ``violations`` it counts one."""

    ok: bool
    message: str
    violations: list[str]


class _PatienceItem(TypedDict, total=False):
    """An item of a test entry's ``patience_violations``, as :meth:`TestEntry.violations` reads it (the
    rest of the hang's record is kept as it is)."""

    fault: str | None
    kind: str
    message: str
    expected: bool


@dataclass(frozen=True)
class Violation:
    """One violation of one test: a failed invariant (``kind='invariant'``) or a patience violation
    the test did not expect (``kind='patience'``, ``name`` = the fault that held the request)."""

    nodeid: str
    kind: ViolationKind
    name: str
    message: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """What a baseline comparison matches on: test, kind and name (not the message)."""
        return (self.nodeid, self.kind, self.name)

    def describe(self) -> str:
        """``<nodeid>: invariant <name>: <first line of the message>``."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if len(first) > 120:
            first = first[:117] + "..."
        return f"{self.nodeid}: {self.kind} {self.name}" + (f": {first}" if first else "")


@dataclass
class TestEntry:
    """One test in the report: what the plugin observed, and how the test ended."""

    __test__ = False  # not a test class, despite the name

    nodeid: str
    outcome: Outcome = "passed"
    duration: float = 0.0
    matrix: str | None = None
    sidecars: list[dict[str, Any]] = field(default_factory=list)
    plans: list[list[str]] = field(default_factory=list)
    fired: dict[str, int] = field(default_factory=dict)
    invariants: list[_InvariantItem] = field(default_factory=list)
    patience_violations: list[_PatienceItem] = field(default_factory=list)
    expected_hang: bool = False
    #: An explore run's findings (its ``found``: empty when it found nothing); ``None``: not an explore run.
    explore: list[str] | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES

    def planned_kinds(self) -> set[str]:
        """Kinds in this test's plans (and its matrix fault)."""
        kinds = {plan_kind(spec) for plan in self.plans for spec in plan}
        if self.matrix:
            kinds.add(plan_kind(self.matrix))
        return kinds

    def violations(self) -> list[Violation]:
        """Failed invariants (one per distinct violation: per span at fault) and unexpected patience
        violations, in the order recorded; an explore run's, one for the run (what it found)."""
        if self.explore is not None:
            if not self.explore:
                return []
            first = primary(self.explore)
            also = [f for f in self.explore if f != first]
            return [Violation(self.nodeid, "explore", first, f"also {', '.join(also)}" if also else "")]
        out = [
            Violation(self.nodeid, "invariant", str(inv["name"]), str(message))
            for inv in self.invariants
            if not inv.get("ok", False)
            # one per distinct violation (per span at fault); reports without the list count one
            for message in (inv.get("violations") or [inv.get("message", "")])
        ]
        out += [
            # a hang with no fault (the idle verdict) is named by its kind, not ``None``
            Violation(
                self.nodeid,
                "patience",
                str(pv.get("fault") or pv.get("kind") or "?"),
                str(pv.get("message", "")),
            )
            for pv in self.patience_violations
            if not pv.get("expected", False)
        ]
        return out

    def expected_patience(self) -> int:
        """Patience violations the test expected (reported, not failing)."""
        return sum(1 for pv in self.patience_violations if pv.get("expected", False))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)  # the fields in their order; ``explore`` only for an explore run
        explore = data.pop("explore")
        return {
            **data,
            "duration": round(self.duration, 6),
            "fired": dict(sorted(self.fired.items())),
            **({"explore": explore} if explore is not None else {}),
            "violations": [{"kind": v.kind, "name": v.name, "message": v.message} for v in self.violations()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TestEntry:
        """Inverse of :meth:`to_dict` (derived keys such as ``violations`` are recomputed)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("nodeid"), str):
            raise ReportError(f"test entry without a nodeid: {data!r}")
        outcome = data.get("outcome", "passed")
        if outcome not in OUTCOMES:
            raise ReportError(f"{data['nodeid']}: unknown outcome {outcome!r}; valid: {', '.join(OUTCOMES)}")
        for name, hint in get_type_hints(cls).items():  # null: the field's default (as absent)
            if data.get(name) is not None and not _fits(data[name], hint):
                raise ReportError(f"{data['nodeid']}: {_misfit(name, data[name], hint)}")
        return cls(
            nodeid=data["nodeid"],
            outcome=outcome,
            duration=float(data.get("duration", 0.0)),
            matrix=data.get("matrix"),
            sidecars=[dict(s) for s in data.get("sidecars", [])],
            plans=[list(p) for p in data.get("plans", [])],
            fired={str(k): int(v) for k, v in dict(data.get("fired", {})).items()},
            invariants=[i.copy() for i in data.get("invariants", [])],
            patience_violations=[p.copy() for p in data.get("patience_violations", [])],
            expected_hang=bool(data.get("expected_hang", False)),
            explore=[str(f) for f in data["explore"]] if data.get("explore") is not None else None,
        )


@dataclass(frozen=True)
class KindCoverage:
    """One row of the coverage table: a fault kind, the tests that planned or fired it, the tests it
    fired in, how often it fired in all, and how many of its tests failed."""

    kind: str
    tests: int
    fired_in: int
    times: int
    failed: int


@dataclass
class Report:
    """A run's report: its tests (sorted by node id) plus derived totals and coverage."""

    tests: list[TestEntry] = field(default_factory=list)
    plugin_version: str = ""

    def __post_init__(self) -> None:
        self.tests = sorted(self.tests, key=lambda t: t.nodeid)

    @property
    def used(self) -> bool:
        """Whether the plugin took part in the run at all (else the summary prints nothing)."""
        return bool(self.tests)

    def fired(self) -> dict[str, int]:
        """How often each kind fired over the whole run."""
        out: Counter[str] = Counter()
        for t in self.tests:
            out.update(t.fired)
        return dict(sorted(out.items()))

    def kinds(self) -> list[str]:
        """Kinds planned or fired anywhere in the run, in catalogue order then by name."""
        kinds = {k for t in self.tests for k in (*t.planned_kinds(), *t.fired)}
        return sorted(kinds, key=_kind_order)

    def missing(self) -> list[str]:
        """Kinds planned somewhere that never fired."""
        fired = self.fired()
        return [k for k in self.kinds() if not fired.get(k)]

    def coverage(self) -> list[KindCoverage]:
        """The coverage table, one row per kind planned or fired."""
        rows = []
        for kind in self.kinds():
            tests = [t for t in self.tests if kind in t.fired or kind in t.planned_kinds()]
            fired = [t for t in tests if t.fired.get(kind)]
            rows.append(
                KindCoverage(
                    kind=kind,
                    tests=len(tests),
                    fired_in=len(fired),
                    times=sum(t.fired.get(kind, 0) for t in fired),
                    failed=sum(1 for t in tests if t.failed),
                )
            )
        return rows

    def violations(self) -> list[Violation]:
        """Every violation of every test (invariants and unexpected patience violations)."""
        return [v for t in self.tests for v in t.violations()]

    def totals(self) -> dict[str, Any]:
        """The ``totals`` object of the JSON report."""
        outcomes = dict.fromkeys(OUTCOMES, 0) | Counter(t.outcome for t in self.tests)
        violations = self.violations()
        return {
            "tests": len(self.tests),
            "outcomes": outcomes,
            "failed": sum(n for outcome, n in outcomes.items() if outcome in FAILED_OUTCOMES),
            "sidecars": sum(len(t.sidecars) for t in self.tests),
            "kinds": self.kinds(),
            "fired": self.fired(),
            "missing": self.missing(),
            "coverage": [asdict(r) for r in self.coverage()],
            "invariants_checked": sum(len(t.invariants) for t in self.tests),
            "invariant_violations": sum(1 for v in violations if v.kind == "invariant"),
            "patience_violations": sum(1 for v in violations if v.kind == "patience"),
            "explore_violations": sum(1 for v in violations if v.kind == "explore"),
            "patience_violations_expected": sum(t.expected_patience() for t in self.tests),
            "violations": len(violations),
        }

    def to_dict(
        self, gates: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The JSON document (schema ``pytest-mcpfaults/report`` version 2); ``extra``: further
        top-level sections (``explore``, when the run explored), after the others."""
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "plugin_version": self.plugin_version,
            "tests": [t.to_dict() for t in self.tests],
            "totals": self.totals(),
            "gates": dict(gates) if gates is not None else {},
            **(extra or {}),
        }

    @classmethod
    def from_dict(cls, data: object, *, source: str = "report") -> Report:
        """Read a JSON document written by :meth:`to_dict`; raise :class:`ReportError` otherwise."""
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            got = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
            raise ReportError(
                f"{source}: not a pytest-mcpfaults report (schema {got!r}, expected {SCHEMA!r})"
            )
        if data.get("version") not in READS:
            raise ReportError(
                f"{source}: report schema version {data.get('version')!r} is not supported (this "
                f"pytest-mcpfaults reads version{'s' * (len(READS) > 1)} {', '.join(map(str, READS))})"
            )
        tests = data.get("tests")
        if not isinstance(tests, list):
            raise ReportError(f"{source}: 'tests' must be a list, got {type(tests).__name__}")
        for name, shape in _SECTIONS.items():
            if data.get(name) is not None:
                try:
                    _check_shape(data[name], shape, name)
                except ReportError as exc:
                    raise ReportError(f"{source}: {exc}") from None
        try:
            entries = [TestEntry.from_dict(t) for t in tests]
        except (TypeError, ValueError) as exc:
            raise ReportError(f"{source}: {exc}") from None
        return cls(entries, plugin_version=str(data.get("plugin_version", "")))


def _kind_order(kind: str) -> tuple[int, str]:
    order = list(fault_kinds())
    return (order.index(kind), kind) if kind in order else (len(order), kind)


def merge(*reports: Report) -> Report:
    """One report from several (xdist workers, CI shards). A test present in more than one keeps the
    last one given (a rerun replaces the earlier result)."""
    by_id = {t.nodeid: t for r in reports for t in r.tests}
    version = next((r.plugin_version for r in reports if r.plugin_version), "")
    return Report(list(by_id.values()), plugin_version=version)


def load_report(path: str | Path) -> Report:
    """Read a report file; raise :class:`ReportError` naming the path on any problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot read report {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"report {str(p)!r} is not UTF-8 text: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"report {str(p)!r} is not JSON: {exc}") from None
    except RecursionError:
        raise ReportError(f"report {str(p)!r} is not JSON: nested too deeply to read") from None
    return Report.from_dict(data, source=f"report {str(p)!r}")


def write_report(
    report: Report,
    path: str | Path,
    gates: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write ``report`` as JSON (parent directories created); ``extra``: see :meth:`Report.to_dict`."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report.to_dict(gates, extra), indent=2, sort_keys=False)
    p.write_text(text + "\n", encoding="utf-8")


def missing_required(report: Report, required: Iterable[str]) -> list[str]:
    """The required kinds that never fired in ``report``, in the order given."""
    fired = report.fired()
    return [k for k in required if not fired.get(k)]


def new_violations(baseline: Report, current: Report) -> list[Violation]:
    """Violations of ``current`` whose (test, kind, name) the baseline does not have."""
    known = {v.key for v in baseline.violations()}
    return [v for v in current.violations() if v.key not in known]


# -- terminal text -------------------------------------------------------------------------------


def _plural(n: int, noun: str) -> str:
    """``1 kind``, ``2 kinds``."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


def summary_line(report: Report) -> str:
    """``mcpfaults: 18 kinds, 17 fired, 0 violations; missing: flap``."""
    totals = report.totals()
    text = (
        f"mcpfaults: {_plural(len(totals['kinds']), 'kind')}, {len(totals['fired'])} fired, "
        f"{_plural(totals['violations'], 'violation')}"
    )
    expected = totals["patience_violations_expected"]
    if expected:
        text += f" ({_plural(expected, 'expected hang')})"
    if totals["missing"]:
        text += f"; missing: {', '.join(totals['missing'])}"
    return text


def summary_lines(report: Report, *, verbose: bool = False) -> list[str]:
    """The coverage table, the violations (first line of each message; identical lines once, with
    their count) and :func:`summary_line`.
    Empty when the plugin was not used. ``verbose`` lists every test with what fired in it."""
    if not report.used:
        return []
    rows = report.coverage()
    width = max([len("fault kind"), *(len(r.kind) for r in rows)])
    head = f"{'fault kind':<{width}}  {'tests':>5}  {'fired in':>8}  {'times':>5}  {'failed':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        note = "  never fired" if r.times == 0 else ""
        lines.append(f"{r.kind:<{width}}  {r.tests:>5}  {r.fired_in:>8}  {r.times:>5}  {r.failed:>6}{note}")
    if not rows:
        lines.append("(no fault planned or fired)")
    lines.append("")
    totals = report.totals()
    stdio = sum(1 for t in report.tests for s in t.sidecars if str(s.get("url") or "").startswith("stdio:"))
    sidecars = totals["sidecars"] - stdio
    checks = totals["invariants_checked"]
    used = [_plural(sidecars, "sidecar")] if sidecars or not stdio else []
    used += [_plural(stdio, "stdio server")] if stdio else []
    used += [_plural(checks, "invariant check")] if checks else []
    crashed, interrupted = totals["outcomes"]["crashed"], totals["outcomes"]["interrupted"]
    used.append(f"{totals['failed']} failed" + (f", {crashed} of them crashed" if crashed else ""))
    used += [f"{interrupted} interrupted"] if interrupted else []
    lines.append(f"{_plural(len(report.tests), 'test')} used the plugin ({', '.join(used)})")
    if verbose:
        for t in report.tests:
            fired = ",".join(f"{k}:{n}" for k, n in sorted(t.fired.items())) or "-"
            lines.append(f"  {t.outcome.upper():<8} {t.nodeid}  fired: {fired}")
    violations = report.violations()
    if violations:
        lines.append(f"violations ({len(violations)}):")
        # identical lines (the same test, kind, name and headline) are listed once, with their count
        counts = Counter(v.describe() for v in violations)
        lines += [f"  {text}" + (f" ({n} times)" if n > 1 else "") for text, n in counts.items()]
    lines.append(summary_line(report))
    return lines
