"""pytest glue for from-trace (``--mcpfaults-from-trace=PATH``, ``--mcpfaults-from-trace-id=ID``, each
repeatable, ``@pytest.mark.mcp_from_trace(PATH, trace_id=None)``): production traces' MCP failures
replayed against a clean test, as explore runs (see docs/from-trace.md).

The option turns explore on for the tests explore selects, the marker for its test; either way the
test's campaign is the trace's replay, not explore's own: after the clean run, each trace's plan is
inserted through explore's expansion hook as the item ``test_x[from-trace:<trace id>]``, and while a
replay's shape differs from the trace's the next plan is tried (``…:plan2``). Bad input is refused at
once: the option's file when pytest configures, the marker's when the test is collected.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest.records import FROM_TRACE_DEST, explore_run
from pytest_mcpfaults.explore.items import (
    EXPANSION,
    SIDECAR_FIXTURE_NAMES,
    explore_options,
    explored_test,
    function_id,
)
from pytest_mcpfaults.explore.items import MARKER as EXPLORE_MARKER

if TYPE_CHECKING:
    from pytest_mcpfaults.explore.plan import Run
    from pytest_mcpfaults.from_trace.infer import Inferred, SpanNames
    from pytest_mcpfaults.from_trace.read import Read
    from pytest_mcpfaults.from_trace.trace import Trace

OPTION = "--mcpfaults-from-trace"
ID_OPTION = "--mcpfaults-from-trace-id"
ID_DEST = "mcpfaults_from_trace_id"
MARKER = "mcp_from_trace"


@dataclasses.dataclass
class _Source:
    """A trace to replay: where it came from (for messages), the trace, and how it was read."""

    source: str
    trace: Trace
    read_note: str


@dataclasses.dataclass
class _Replay:
    source: _Source
    inferred: Inferred | None = None
    plans: list[tuple[str, ...]] = dataclasses.field(default_factory=list)
    tried: list[tuple[str, list[str]]] = dataclasses.field(default_factory=list)  # (run id, differences)
    problem: str = ""  # why nothing was replayed

    def lines(self) -> list[str]:
        from pytest_mcpfaults.from_trace.render import inferred_lines

        if self.inferred is None:
            return [f"trace {self.source.trace.trace_id_hex} ({self.source.source}): {self.problem}"]
        return inferred_lines(self.inferred, f"{self.source.source}: {self.source.read_note}")


_OPTION_SOURCES = pytest.StashKey[list[_Source]]()  # the option's traces, in the order given
_MARKED = pytest.StashKey[dict[str, _Source]]()  # test function node id -> its marker's trace
_REPLAYS = pytest.StashKey[dict[tuple[str, str], _Replay]]()  # (explored test, trace id) -> its replay
_PROBLEM = pytest.StashKey[str]()  # why the marked test's trace could not be replayed (its clean item)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpfaults")
    group.addoption(
        OPTION,
        metavar="PATH",
        action="append",
        dest=FROM_TRACE_DEST,
        default=None,
        help="Replay a production trace's MCP failures (an OTLP/JSON or OTLP/protobuf export, or the "
        "plugin's span JSON) against each clean test explore selects: run it clean, infer the faults, "
        "run it again as test_x[from-trace:<trace id>] (see docs/from-trace.md). Repeatable: one item "
        "per trace.",
    )
    group.addoption(
        ID_OPTION,
        metavar="ID",
        action="append",
        dest=ID_DEST,
        default=None,
        help=f"A trace of {OPTION}'s files to replay (32 hex digits), when a file holds several. "
        "Repeatable: a file replays each trace named that it holds, else its only one.",
    )


def _names(config: pytest.Config, item: pytest.Item | None = None) -> SpanNames:
    """The gate's span names (the run's, or a test's with its ``mcpfaults_spans`` marker)."""
    from pytest_mcpfaults._pytest.spans import item_settings, settings_for
    from pytest_mcpfaults.from_trace.infer import SpanNames

    settings = item_settings(item) if item is not None else settings_for(config)
    return SpanNames.of(settings.session)


def _decode(path: Path, shown: str) -> Read:
    from pytest_mcpfaults.from_trace.driver import read_file
    from pytest_mcpfaults.from_trace.read import decode_trace

    return decode_trace(read_file(str(path)), shown)


def _pick(read: Read, shown: str, trace_id: str | None, names: SpanNames) -> _Source:
    """The trace ``trace_id`` of ``read`` (``None``: its only one, or its only one with a session span);
    ``TraceError`` saying what is wrong."""
    from pytest_mcpfaults.from_trace.trace import pick_trace

    trace = pick_trace(read.spans, shown, names.session, trace_id)
    return _Source(shown, trace, read.summary(len(trace.spans), trace.duplicates))


def _option_sources(config: pytest.Config, paths: list[str], trace_ids: list[str]) -> list[_Source]:
    """The option's traces: each file's traces an id names, else its only one (or its only one with a
    session span); a ``UsageError`` naming the option (or options) at fault and what is wrong."""
    from pytest_mcpfaults.from_trace.read import TraceError
    from pytest_mcpfaults.from_trace.trace import listed

    names = _names(config)
    reads: dict[str, Read] = {}
    for path in dict.fromkeys(paths):
        try:
            reads[path] = _decode(config.invocation_params.dir / path, path)
        except TraceError as exc:
            raise pytest.UsageError(f"{OPTION}={path}: {exc}") from None
    wanted: dict[str, list[str | None]] = {path: [] for path in reads}
    spelt: dict[int, str] = {}  # trace id -> the first spelling of it given
    for t in dict.fromkeys(trace_ids):
        try:
            want: int | None = int(t.removeprefix("0x"), 16)
        except ValueError:
            want = None  # not a trace id: each file's own error says so
        if want is not None and spelt.setdefault(want, t) != t:
            raise pytest.UsageError(
                f"{ID_OPTION}={spelt[want]} {ID_OPTION}={t}: both name trace {want:032x}; each trace is "
                "replayed once, as the item test_x[from-trace:<trace id>]: give it once"
            )
        holders = [p for p, r in reads.items() if want is None or any(s.trace_id == want for s in r.spans)]
        if not holders and len(reads) > 1:
            has = "; ".join(
                f"{p} has {listed(sorted({s.trace_id for s in r.spans}))}" for p, r in reads.items()
            )
            raise pytest.UsageError(f"{ID_OPTION}={t}: no trace with trace_id={t} in any file: {has}")
        for path in holders or list(reads)[:1]:  # one file: its own error lists its traces
            wanted[path].append(t)
    sources: list[_Source] = []
    for path, ids in wanted.items():
        for one in ids or [None]:
            try:
                sources.append(_pick(reads[path], path, one, names))
            except TraceError as exc:
                flag = f"{OPTION}={path}" + (f" {ID_OPTION}={one}" if one is not None else "")
                raise pytest.UsageError(f"{flag}: {exc}") from None
    seen: dict[int, str] = {}
    for source in sources:
        other = seen.setdefault(source.trace.trace_id, source.source)
        if other != source.source:
            raise pytest.UsageError(
                f"{OPTION}={other} {OPTION}={source.source}: trace {source.trace.trace_id_hex} is in both; "
                "each trace is replayed once, as the item test_x[from-trace:<trace id>]: give it once"
            )
    return sources


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path, trace_id=None): replay the trace at path (relative to the test's file) against "
        f"this clean test, as {OPTION} does (see docs/from-trace.md).",
    )
    config.stash[_MARKED] = {}
    config.stash[_REPLAYS] = {}
    config.stash[EXPANSION] = _expand
    paths: list[str] = config.getoption(FROM_TRACE_DEST, default=None) or []
    trace_ids: list[str] = config.getoption(ID_DEST, default=None) or []
    config.stash[_OPTION_SOURCES] = []
    if not paths:
        if trace_ids:
            raise pytest.UsageError(
                f"{ID_OPTION}={trace_ids[0]}: needs {OPTION}=PATH (the file it picks from)"
            )
        return
    # xdist (-n, or workers named by --tx with --dist): its workers add no item during a run
    if config.getoption("numprocesses", default=None) or config.getoption("dist", default="no") != "no":
        raise pytest.UsageError(
            f"{OPTION}={paths[0]}: its replays are made during the run; run it without -n (or --dist)"
        )
    config.stash[_OPTION_SOURCES] = _option_sources(config, paths, trace_ids)


@pytest.hookimpl(tryfirst=True)  # before explore's: the marker turns explore on for its test
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    node = metafunc.definition
    marker = node.get_closest_marker(MARKER)
    if marker is None:
        if metafunc.config.stash[_OPTION_SOURCES] and node.get_closest_marker(EXPLORE_MARKER) is not None:
            _refuse_own_faults(metafunc, f"{node.nodeid}: {OPTION}")  # explored, so replayed
        return
    where = f"{node.nodeid}: @pytest.mark.{MARKER}"
    usage = f"{MARKER}(path, trace_id=None): path a trace file, trace_id 32 hex digits or None"
    unknown = set(marker.kwargs) - {"trace_id", "path"}
    args = (*marker.args, *([marker.kwargs["path"]] if "path" in marker.kwargs else []))  # path= as named
    if len(args) != 1 or not isinstance(args[0], (str, os.PathLike)) or not args[0] or unknown:
        got = ", ".join([*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
        raise pytest.Collector.CollectError(f"{where}: expected {usage}; got ({got})")
    if (n := sum(m.name == MARKER for m in node.own_markers)) > 1:
        raise pytest.Collector.CollectError(
            f"{where}: one trace per test ({usage}); the test has it {n} times"
        )
    path, trace_id = os.fspath(args[0]), marker.kwargs.get("trace_id")
    if trace_id is not None and not isinstance(trace_id, str):
        raise pytest.Collector.CollectError(f"{where}: expected {usage}; got trace_id={trace_id!r}")
    if not set(SIDECAR_FIXTURE_NAMES) & set(metafunc.fixturenames):
        raise pytest.Collector.CollectError(
            f"{where}: the test uses no sidecar fixture ({', '.join(SIDECAR_FIXTURE_NAMES)}), so there is no "
            "clean run to replay the trace against"
        )
    _refuse_own_faults(metafunc, where)
    from pytest_mcpfaults.from_trace.read import TraceError

    full = Path(str(node.path)).parent / path
    try:
        source = _pick(_decode(full, path), path, trace_id, _names(metafunc.config, node))
    except TraceError as exc:
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    if hasattr(metafunc.config, "workerinput"):  # an xdist worker adds no item during a run
        raise pytest.Collector.CollectError(
            f"{where}: its replays are made during the run; run it without -n"
        )
    metafunc.config.stash[_MARKED][node.nodeid] = source
    if node.get_closest_marker(EXPLORE_MARKER) is None:
        node.add_marker(getattr(pytest.mark, EXPLORE_MARKER)())


def _refuse_own_faults(metafunc: pytest.Metafunc, where: str) -> None:
    """A ``CollectError`` for a test whose sidecar marker plans faults: its clean run would run under them."""
    from pytest_mcpfaults._pytest.settings import marker_kwargs
    from pytest_mcpfaults.explore.plan import FIXTURE_MARKERS

    for fixture, name in FIXTURE_MARKERS.items():
        try:
            faults = marker_kwargs(metafunc.definition, name).get("faults")
        except ValueError:
            continue  # the sidecar glue reports the bad marker
        if faults and fixture in metafunc.fixturenames:
            raise pytest.Collector.CollectError(
                f"{where}: the test's @pytest.mark.{name} has faults= ({faults!r}): its clean run, the "
                "trace's replay is inferred against, would run under them; drop faults= (a replay runs "
                "the trace's faults)"
            )


def _sources_for(item: pytest.Item) -> list[_Source]:
    """The traces this test replays: its marker's, else the option's; none: not a from-trace test."""
    marked = item.config.stash[_MARKED].get(function_id(item))
    return [marked] if marked is not None else item.config.stash[_OPTION_SOURCES]


@pytest.hookimpl(trylast=True)  # after explore's: a from-trace test runs its clean run and its replays only
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Explore's runs of a from-trace test cached by an earlier explore run are deselected."""
    if not config.stash[_OPTION_SOURCES] and not config.stash[_MARKED]:
        return  # no test replays a trace: a plain run imports none of it
    from pytest_mcpfaults.from_trace.infer import TraceRun

    other = [
        item
        for item in items
        if (run := explore_run(item)) is not None
        and run.plan
        and not isinstance(run, TraceRun)
        and _sources_for(item)
    ]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [i for i in items if i not in other]


def _expand(item: pytest.Item, run: Run, detail: dict[str, Any]) -> list[Run] | None:
    """Explore's expansion hook: after a from-trace test's clean run, each trace's first replay; after
    a replay whose shape is not its trace's, that trace's next plan (``None``: not a from-trace test)."""
    sources = _sources_for(item)
    if not sources:
        return None
    from pytest_mcpfaults.from_trace.infer import TraceRun

    names = _names(item.config, item)
    replays = item.config.stash[_REPLAYS]
    test = explored_test(item)
    if not run.plan:
        runs: list[Run] = []
        problems = []
        for source in sources:
            fresh = replays[(test, source.trace.trace_id_hex)] = _Replay(source)
            first = _infer(item, fresh, names, detail)
            if first:
                runs.append(TraceRun.of(source.trace.trace_id_hex, first))
            elif fresh.inferred is not None:  # inferred, but nothing maps: what was inferred, too
                problems.append("\n".join([fresh.problem, *fresh.lines()]))
            else:
                problems.append(fresh.problem)
        if problems:
            item.stash[_PROBLEM] = "\n".join(problems)
        return runs
    if not isinstance(run, TraceRun) or (replay := replays.get((test, run.trace_id))) is None:
        return []
    from pytest_mcpfaults.from_trace.read import TraceError, plugin_spans
    from pytest_mcpfaults.from_trace.shape import shape_differences

    try:
        spans = plugin_spans(detail["spans"], f"{test} ({run.id})")
        differences = shape_differences(replay.source.trace, spans, names.session)
    except TraceError as exc:
        differences = [f"its spans could not be read: {exc}"]
    again = any(rid == run.id for rid, _ in replay.tried)  # a rerun's attempt (pytest-rerunfailures)
    replay.tried = [t for t in replay.tried if t[0] != run.id] + [(run.id, differences)]  # the last stands
    if again or not differences or run.attempt >= len(replay.plans):
        return []  # (a rerun's first attempt made the next plan already, if it was to be made)
    return [TraceRun.of(run.trace_id, replay.plans[run.attempt], run.attempt + 1)]


def _infer(item: pytest.Item, replay: _Replay, names: SpanNames, detail: dict[str, Any]) -> tuple[str, ...]:
    """Infer the trace's faults against the clean run ``detail``; the first plan (empty: none)."""
    from pytest_mcpfaults.from_trace.footprint import clean_run_from_detail
    from pytest_mcpfaults.from_trace.infer import infer
    from pytest_mcpfaults.from_trace.read import TraceError

    options = explore_options(item)
    budget = (options.patience if options is not None else None) or 5.0
    try:
        clean = clean_run_from_detail(detail, f"{explored_test(item)} (its clean run)", names.session)
    except TraceError as exc:
        replay.problem = f"nothing replayed: {exc}"
        return ()
    replay.inferred = infer(replay.source.trace, clean, names, budget)
    replay.plans = replay.inferred.plans()
    if not replay.inferred.plan:
        replay.problem = "nothing replayed: no failure of the trace maps to a request of the clean run"
    return replay.inferred.plan


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A replay's failure says what was inferred and why; a marked test whose trace maps to nothing
    fails its clean run's teardown saying why."""
    report: pytest.TestReport = yield
    if not item.config.stash[_OPTION_SOURCES] and not item.config.stash[_MARKED]:
        return report  # no test replays a trace: a plain run imports none of it
    from pytest_mcpfaults.from_trace.infer import TraceRun

    run = explore_run(item)
    if isinstance(run, TraceRun) and call.when == "call" and report.failed:
        replay = item.config.stash[_REPLAYS].get((explored_test(item), run.trace_id))
        if replay is not None:
            report.sections.append(("mcpfaults from-trace", "\n".join(replay.lines())))
    marked = function_id(item) in item.config.stash[_MARKED]  # asked for by the test itself
    if call.when == "teardown" and _PROBLEM in item.stash and not report.failed and marked:
        report.outcome = "failed"
        report.longrepr = f"from-trace ({MARKER}): {item.stash[_PROBLEM]}"
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    replays: dict[tuple[str, str], _Replay] = config.stash.get(_REPLAYS, {})
    sources = config.stash.get(_OPTION_SOURCES, [])
    if not replays and not sources:
        return
    tr = terminalreporter
    tr.section("mcpfaults from-trace")
    for source in sources if not replays else ():  # the option was given, and nothing replayed its traces
        tr.write_line(
            f"trace {source.trace.trace_id_hex} ({source.source}): not replayed: no test explore selects "
            "ran clean and passed (a test using a sidecar fixture with no faults= of its own, see "
            "docs/explore.md)"
        )
    shown = None
    for (test, _), replay in replays.items():
        if test != shown:
            tr.write_line(f"{test}:")
            shown = test
        for line in replay.lines():
            tr.write_line(f"  {line}")
        for rid, differences in replay.tried:
            if not differences:
                tr.write_line(f"  {rid}: the replay has the trace's shape (the same spans ERROR)")
                continue
            tr.write_line(f"  {rid}: the replay's shape differs from the trace's:")
            for d in differences:
                tr.write_line(f"    {d}")
