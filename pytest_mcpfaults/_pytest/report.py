"""pytest glue for the CI gate: the fault matrix marker, the JSON report, the terminal summary, JUnit
properties, the xdist merge and the gates (required kinds, baseline).

Data flow: each test's :class:`~pytest_mcpfaults._pytest.records.TestRecord` (filled by the sidecar
fixtures at teardown and by the span gate) is serialized onto its teardown report as the attribute
``mcpfaults`` (a JSON-ready dict). pytest-xdist carries report attributes from workers to the
controller, so the controller sees every test's record in ``pytest_runtest_logreport``; it alone builds
the report, writes it, applies the gates and prints the summary. Workers only record.

A test that never sends its teardown report (its xdist worker died; the run was interrupted in it) is
still reported, from the running tally of :mod:`pytest_mcpfaults._pytest.progress`: as ``crashed``
(with a synthetic teardown report that carries its record, so JUnit gets its properties too) or as
``interrupted``.

Gate failures make the run exit with code 1, as pytest-cov's ``--cov-fail-under`` does.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest.progress import ProgressPlugin, Running
from pytest_mcpfaults._pytest.records import (
    GATED_BY_FINDINGS,
    MATRIX_FIXTURE,
    REPORT_SECTIONS,
    TestRecord,
    matrix_fault,
    record_for,
)

if TYPE_CHECKING:
    from pytest_mcpfaults.faults import Fault
    from pytest_mcpfaults.report import Outcome, Report, Violation

MATRIX_MARKER = "mcpfaults_matrix"
REQUIRE_INI = "mcpfaults_require"
REPORT_ATTR = "mcpfaults"
_MATRIX_ARGS = ("kinds", "exclude", "target", "faults")


@dataclasses.dataclass(eq=False)  # registered as a plugin: hashable
class _Run:
    """The report and gates a run asks for (validated at configure time), what the controller (or a
    plain run) gathers from the reports, and what it concluded. Registered at configure time: on the
    xdist controller it sees every worker's reports (xdist relays them through this hook), and the
    report xdist makes for a test whose worker crashed (``when='???'``)."""

    config: pytest.Config
    report_path: Path | None
    required: tuple[str, ...]
    baseline_path: Path | None
    baseline: Report | None
    progress: ProgressPlugin
    outcomes: dict[str, Outcome] = dataclasses.field(default_factory=dict)
    durations: dict[str, float] = dataclasses.field(default_factory=dict)
    # Each used test's record as a dict (TestEntry.from_dict's input), made into entries at the end:
    # the hook that takes a teardown report imports nothing, so a Ctrl-C cannot land in an import there.
    entries: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    report: Report | None = None
    missing: list[str] = dataclasses.field(default_factory=list)
    regressions: list[Violation] = dataclasses.field(default_factory=list)
    evaluated: bool = False
    write_error: str | None = None

    def _crashed(self, report: pytest.TestReport) -> None:
        """The worker running this test died. Close the test with a teardown report carrying what its
        worker's progress file shows (through this same hook: the entry, JUnit's properties)."""
        nodeid, node = report.nodeid, getattr(report, "node", None)
        workerinput = getattr(node, "workerinput", None)
        worker = workerinput.get("workerid") if isinstance(workerinput, dict) else None
        running = self.progress.unfinished(worker).get(nodeid)
        if nodeid in self.entries or running is None or not running.used:
            return  # its teardown report came before the crash, or it did not use the plugin
        data = _running_dict(running)
        props = [*_junit_properties(data), ("mcpfaults.crashed", "true")]
        teardown = pytest.TestReport(
            nodeid, report.location, {}, "passed", None, "teardown", user_properties=props
        )
        teardown.node = node  # type: ignore[attr-defined]  # as xdist's own reports: JUnit keys on it
        setattr(teardown, REPORT_ATTR, data)
        self.outcomes[nodeid] = "crashed"
        self.durations[nodeid] = max(0.0, time.time() - running.started)
        self.config.hook.pytest_runtest_logreport(report=teardown)

    @pytest.hookimpl(trylast=True)  # after JUnit's: the crash report opens its test case, ours closes it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        if str(report.when) == "???" and report.failed:  # pytest-xdist: the worker running it crashed
            self._crashed(report)
            return
        outcome = _phase_outcome(report, self.outcomes.get(nodeid))
        if outcome is not None:
            self.outcomes[nodeid] = outcome
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + float(report.duration or 0.0)
        if report.when != "teardown":
            return
        data = getattr(report, REPORT_ATTR, None)
        if isinstance(data, dict):
            outcome, duration = self.outcomes.get(nodeid, "passed"), self.durations.get(nodeid, 0.0)
            self.entries[nodeid] = {**data, "outcome": outcome, "duration": duration}
        self.outcomes.pop(nodeid, None)
        self.durations.pop(nodeid, None)


_RUN_KEY = pytest.StashKey[_Run]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpfaults")
    group.addoption(
        "--mcpfaults-report",
        metavar="PATH",
        dest="mcpfaults_report",
        default=None,
        help="Write the mcpfaults JSON report (schema pytest-mcpfaults/report, version 2) to PATH.",
    )
    group.addoption(
        "--mcpfaults-require",
        metavar="KIND,...",
        dest="mcpfaults_require",
        action="append",
        default=None,
        help="Fail the run (exit 1) when one of these fault kinds never fired ('all': every kind). "
        f"Repeatable; replaces the ini key {REQUIRE_INI}.",
    )
    group.addoption(
        "--mcpfaults-baseline",
        metavar="PATH",
        dest="mcpfaults_baseline",
        default=None,
        help="Compare with an earlier --mcpfaults-report file and fail the run (exit 1) on any invariant "
        "or patience violation it does not have; explore's runs are compared by finding (a new finding "
        "fails, a run whose finding is new is re-run once: unstable when it flips).",
    )
    parser.addini(
        REQUIRE_INI,
        "Fault kinds that must fire in the run (comma- or space-separated; 'all': every kind).",
        default="",
    )


# -- configuration -------------------------------------------------------------------------------


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _parse_required(config: pytest.Config) -> tuple[str, ...]:
    option: list[str] | None = config.getoption("mcpfaults_require", default=None)
    source = "--mcpfaults-require" if option else REQUIRE_INI
    raw = option if option else [str(config.getini(REQUIRE_INI))]
    for chunk in option or ():  # an empty one (an unset CI variable) must not turn the gate off
        if not chunk.replace(",", " ").split():
            raise pytest.UsageError(
                f"--mcpfaults-require={chunk} names no fault kind: give kinds (KIND,... or 'all'), "
                "or leave the option out"
            )
    names = [n for chunk in raw for n in chunk.replace(",", " ").split()]
    if not names:
        return ()  # nothing required: a run that does not use the plugin imports nothing more
    from pytest_mcpfaults.faults import check_kind_names, fault_kinds  # only when asked: see above

    valid = list(fault_kinds())
    out: list[str] = []
    for name in names:
        try:
            picked = valid if name == "all" else check_kind_names(source, [name], valid)
        except ValueError as exc:
            raise pytest.UsageError(f"{exc} (or 'all')") from None
        out += [k for k in picked if k not in out]
    return tuple(out)


def _output_problem(path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (checked by writing a probe file next to where it would
    go, so read-only file systems and permissions are seen as they are), or ``None``."""
    if path.is_dir():
        return "it is a directory"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{str(parent)!r} is a file, not a directory"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".mcpfaults-probe-")
    except OSError as exc:
        return f"cannot create files in {str(parent)!r}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def check_output_path(option: str, path: Path) -> None:
    """``pytest.UsageError`` naming ``option``, the path and why, when nothing can be written there."""
    problem = _output_problem(path)
    if problem is not None:
        raise pytest.UsageError(f"{option}={path}: cannot write the report there: {problem}")


def given_path(config: pytest.Config, dest: str, option: str) -> str | None:
    """The path ``option`` gives, ``None`` when it is not given; an empty one (an unset CI variable) is
    a usage error, not the option left out."""
    value: str | None = config.getoption(dest, default=None)
    if value is not None and not value.strip():
        raise pytest.UsageError(
            f"{option}={value} is an empty path: give a file's path, or leave the option out"
        )
    return value


def _read_settings(config: pytest.Config) -> _Run:
    base = config.invocation_params.dir
    report = given_path(config, "mcpfaults_report", "--mcpfaults-report")
    if report and not _is_worker(config):
        check_output_path("--mcpfaults-report", base / report)
    baseline_opt = given_path(config, "mcpfaults_baseline", "--mcpfaults-baseline")
    baseline_path = base / baseline_opt if baseline_opt else None
    baseline = None
    if baseline_path is not None and not _is_worker(config):
        from pytest_mcpfaults.report import ReportError, load_report

        try:
            baseline = load_report(baseline_path)
        except ReportError as exc:
            raise pytest.UsageError(f"--mcpfaults-baseline: {exc}") from None
    return _Run(
        config,
        report_path=base / report if report else None,
        required=_parse_required(config),
        baseline_path=baseline_path,
        baseline=baseline,
        progress=ProgressPlugin(config),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MATRIX_MARKER}(kinds=None, exclude=(), target=None, faults=None): run the test once per fault "
        "of the standard catalogue (or the chosen kinds, or the given faults), with readable IDs; the "
        f"fault reaches the mcp_sidecar fixture (first in its plan) and the {MATRIX_FIXTURE} fixture.",
    )
    run = config.stash[_RUN_KEY] = _read_settings(config)
    config.pluginmanager.register(run.progress, "mcpfaults-progress")
    config.pluginmanager.register(run, "mcpfaults-report-collector")


# -- the fault matrix ----------------------------------------------------------------------------


@pytest.fixture
def mcpfaults_fault(request: pytest.FixtureRequest) -> Fault | None:
    """The fault of this test's cell of the fault matrix (``@pytest.mark.mcpfaults_matrix``), or
    ``None`` outside a matrix. The ``mcp_sidecar`` fixture puts it first in its plan; with
    ``mcp_sidecar_factory`` pass it yourself: ``mcp_sidecar_factory(faults=[mcpfaults_fault])``."""
    return getattr(request, "param", None)


def _matrix_faults(marker: pytest.Mark) -> tuple[Fault, ...]:
    """The faults a matrix marker asks for; ``ValueError`` naming the bad argument otherwise."""
    from pytest_mcpfaults.faults import as_plan
    from pytest_mcpfaults.matrix import catalogue

    if marker.args:
        raise ValueError(
            f"takes keyword arguments only ({', '.join(_MATRIX_ARGS)}), got positional {marker.args!r}"
        )
    unknown = sorted(set(marker.kwargs) - set(_MATRIX_ARGS))
    if unknown:
        raise ValueError(f"unknown argument {unknown[0]!r}; valid arguments: {', '.join(_MATRIX_ARGS)}")
    kw = marker.kwargs
    if kw.get("faults") is not None:
        others = [k for k in ("kinds", "exclude", "target") if kw.get(k) is not None]
        if others:
            raise ValueError(f"faults= replaces the catalogue, so it cannot be combined with {others[0]}=")
        plan = as_plan(kw["faults"], argname="faults")
        if not plan:
            raise ValueError("faults= is empty: the matrix needs at least one fault")
        return plan
    return catalogue(kinds=kw.get("kinds"), exclude=kw.get("exclude") or (), target=kw.get("target"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MATRIX_MARKER)
    if marker is None:
        return
    where = f"{metafunc.definition.nodeid}: @pytest.mark.{MATRIX_MARKER}"
    try:
        faults = _matrix_faults(marker)
    except ValueError as exc:  # fails this module's collection (also under xdist, see _pytest.sidecar)
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    if MATRIX_FIXTURE not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{where}: the test uses neither the mcp_sidecar nor the {MATRIX_FIXTURE} fixture, so the "
            "matrix's fault would reach nothing"
        )
    metafunc.parametrize(MATRIX_FIXTURE, faults, ids=[str(f) for f in faults])


# -- per-test data: record → teardown report (→ xdist controller) --------------------------------


def _record_dict(item: pytest.Item) -> dict[str, Any] | None:
    rec = record_for(item)
    matrix = matrix_fault(item)
    if not rec.used and matrix is None:
        return None
    return {**dataclasses.asdict(rec), "matrix": matrix}


def _junit_properties(data: dict[str, Any]) -> list[tuple[str, str]]:
    from pytest_mcpfaults.report import TestEntry  # its violations, as the JSON report derives them

    props: list[tuple[str, str]] = []
    if data["matrix"]:
        props.append(("mcpfaults.matrix", data["matrix"]))
    if data["fired"]:
        props.append(("mcpfaults.fired", ",".join(f"{k}:{n}" for k, n in sorted(data["fired"].items()))))
    plans = [spec for plan in data["plans"] for spec in plan]
    if plans:
        props.append(("mcpfaults.plan", "; ".join(plans)))
    failed = dict.fromkeys(f"{v.kind}:{v.name}" for v in TestEntry.from_dict(data).violations())
    if failed:
        props.append(("mcpfaults.violations", ",".join(failed)))
    return props


@pytest.hookimpl(wrapper=True, tryfirst=True)  # around explore's: what a run found is known after it
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    data = _record_dict(item) if call.when == "teardown" else None
    if data is not None:
        if GATED_BY_FINDINGS in item.stash:
            data["explore"] = item.stash[GATED_BY_FINDINGS]
        props = _junit_properties(data)  # JUnit XML <properties> of this test
        item.user_properties.extend(props)
        report.user_properties.extend(props)
        setattr(report, REPORT_ATTR, data)
    return report


def _phase_outcome(report: pytest.TestReport, current: Outcome | None) -> Outcome | None:
    xfail, call = hasattr(report, "wasxfail"), report.when == "call"
    if report.failed:  # in setup or teardown: an error, unless the call failed already
        return "failed" if call or current == "failed" else "error"
    if report.skipped and (call or current is None):
        return "xfailed" if xfail else "skipped"
    if call:
        return "xpassed" if xfail else "passed"
    return current


def _running_dict(running: Running) -> dict[str, Any]:
    """A record (as :func:`_record_dict` makes) from a running tally: what is known of a test that
    never reached teardown. Its sidecars' URLs, eras and journal lengths are not known (``None``)."""
    sidecars = [{"url": None, "era": None, "requests": None} for _ in range(running.sidecars)]
    rec = TestRecord(running.nodeid, sidecars=sidecars, fired=dict(running.fired))
    return {**dataclasses.asdict(rec), "matrix": running.matrix}


# -- the end of the run: report, gates, summary (controller only) --------------------------------


def _gates(run: _Run) -> dict[str, Any]:
    return {
        "required": list(run.required),
        "missing_required": list(run.missing),
        "baseline": str(run.baseline_path) if run.baseline_path else None,
        "new_violations": [dataclasses.asdict(v) for v in run.regressions],
        "failed": bool(run.missing or run.regressions),
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    config = session.config
    completed = False
    try:
        result = yield
        completed = True
        return result
    finally:
        if not _is_worker(config) and not config.option.collectonly:
            _finish(session, evaluate=completed)


def _finish(session: pytest.Session, *, evaluate: bool) -> None:
    run = session.config.stash[_RUN_KEY]
    if not run.entries and not run.required and run.baseline is None and run.report_path is None:
        return  # the plugin was not used and no gate or report was asked for: nothing to build
    from pytest_mcpfaults import __version__
    from pytest_mcpfaults.report import Report, TestEntry, missing_required, new_violations, write_report

    if not evaluate:  # interrupted (or the loop failed): the tests that were running are reported too
        for nodeid, running in run.progress.unfinished().items():
            if nodeid not in run.entries and running.used:
                duration = max(0.0, time.time() - running.started)
                run.entries[nodeid] = {
                    **_running_dict(running),
                    "outcome": "interrupted",
                    "duration": duration,
                }
    entries = [TestEntry.from_dict(data) for data in run.entries.values()]
    report = run.report = Report(entries, plugin_version=__version__)
    if evaluate:
        run.evaluated = True
        run.missing = missing_required(report, run.required)
        if run.baseline is not None:
            run.regressions = [  # explore's runs are gated by finding (explore_findings)
                v for v in new_violations(run.baseline, report) if v.kind != "explore"
            ]
        if run.missing or run.regressions:
            session.testsfailed += 1  # exit code 1, as a failed test
    if run.report_path is not None:
        try:
            extra = {k: f() for k, f in session.config.stash.get(REPORT_SECTIONS, {}).items()}
            extra = {k: v for k, v in extra.items() if v is not None}
            write_report(report, run.report_path, _gates(run), extra=extra)
        except OSError as exc:  # checked at configure time; the disk can still fill up or go away
            run.write_error = f"{exc.strerror or exc} ({exc.filename or run.report_path})"
            session.testsfailed += 1


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _is_worker(config):
        return
    run = config.stash[_RUN_KEY]
    report = run.report
    if report is None:
        if config.option.collectonly and run.report_path is not None:  # as explore's page says it
            terminalreporter.write_line("mcpfaults report not written: --collect-only ran no test")
        return
    from pytest_mcpfaults.report import summary_lines

    gated = bool(run.required or run.baseline is not None)
    lines = summary_lines(report, verbose=config.get_verbosity() >= 2)
    if not lines and not gated and run.report_path is None:
        return  # the plugin was not used: print nothing
    tr = terminalreporter
    tr.write_sep("=", "mcpfaults: fault coverage", bold=True)
    if not lines:
        tr.write_line("no test used an mcpfaults sidecar or span check")
    bad = False
    for i, line in enumerate(lines):
        bad = bad or line.startswith("violations (")
        if i == len(lines) - 1:  # the one-line summary
            clean = not report.violations() and not report.missing()
            tr.write_line(line, bold=True, green=clean, yellow=not clean and not bad, red=bad)
        else:
            tr.write_line(line, red=bad)
    if run.write_error is not None:
        tr.write_line(f"mcpfaults report NOT written: {run.write_error}", red=True, bold=True)
    elif run.report_path is not None:
        tr.write_line(f"mcpfaults report: {run.report_path}")
    if not run.evaluated:
        return
    if run.required and not run.missing:
        tr.write_line(f"mcpfaults gate passed: every required fault kind fired ({', '.join(run.required)})")
    if run.missing:
        s = "s" if len(run.missing) != 1 else ""
        tr.write_line(
            f"mcpfaults gate FAILED: required fault kind{s} never fired: {', '.join(run.missing)} "
            f"(required: {', '.join(run.required)})",
            red=True,
            bold=True,
        )
    if run.baseline is not None:
        known = len(run.baseline.violations())
        if run.regressions:
            n = len(run.regressions)
            tr.write_line(
                f"mcpfaults gate FAILED: {n} new violation{'s' if n != 1 else ''} not in baseline "
                f"{run.baseline_path}:",
                red=True,
                bold=True,
            )
            for v in run.regressions:
                tr.write_line(f"  regressed: {v.describe()}", red=True)
        else:
            tr.write_line(
                f"mcpfaults baseline {run.baseline_path}: no new violations ({known} in the baseline)"
            )
