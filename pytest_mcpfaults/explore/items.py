"""pytest glue for explore (``--mcpfaults-explore``, ``@pytest.mark.mcp_explore``, ini
``mcpfaults_explore``): campaign items, their oracles, the footprint cache.

How a campaign is collected (from a footprint cached by an earlier run, else inserted after the clean
run once it passed, never under xdist) and what fails a run are docs/explore.md's "First run, second
run, xdist" and "The oracles".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest.records import (
    EXPLORE_PARAM,
    EXPLORE_SWITCH,
    GATED_BY_FINDINGS,
    LEFT_OPEN,
    SERVERS,
    SESSION_PROBLEMS,
    explore_on,
    explore_run,
    faults_for_next,
    forget,
    record_for,
    server_made,
)
from pytest_mcpfaults._pytest.spans import record_invariants, span_mark
from pytest_mcpfaults.explore import shard as explore_shard
from pytest_mcpfaults.explore.summary import (
    REPORT_ATTR,
    ExploreReport,
    baseline,
    cached,
)
from pytest_mcpfaults.explore.where import where_of

if TYPE_CHECKING:
    from collections.abc import Callable  # noqa: F401 (EXPANSION's type, in a string)

    from pytest_mcpfaults.explore.plan import Options, Run, Step
    from pytest_mcpfaults.spans.records import RecordedSpan  # noqa: F401 (_SPANS's type, in a string)

MARKER = "mcp_explore"
INI = EXPLORE_SWITCH
#: Generic checks kept off per directory, file or test (node-id prefix), or everywhere.
CHECKS_INI = "mcpfaults_explore_exclude_checks"
OPTION = "--mcpfaults-explore"
HTML_OPTION = "--mcpfaults-html"

#: The fixtures explore can drive, and the transport of each. A test that asks for explore's own
#: fixture alone opens an in-process ``mock_sidecar`` itself (:mod:`pytest_mcpfaults.explore.ambient`).
_SIDECAR_FIXTURES = {
    "mcp_sidecar": "http",
    "mcp_stdio_server": "stdio",
    "mcp_sidecar_factory": "http",
    EXPLORE_PARAM: "inprocess",
}
SIDECAR_FIXTURE_NAMES = tuple(_SIDECAR_FIXTURES)


@dataclasses.dataclass
class _Test:
    """One explored test in this process: made at collection, with the runs planned from its cached
    footprint (``collected``) when it has one."""

    options: Options
    transport: str = "http"
    clean: pytest.Function | None = None
    collected: set[str] = dataclasses.field(default_factory=lambda: {"explore:clean"})
    clean_failed: str | None = None
    #: checks the clean run failed without cutting its path short: its campaign runs with them off
    checks_off: set[str] = dataclasses.field(default_factory=set)
    footprint: tuple[Step, ...] | None = None
    first_outcomes: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)


#: Whether explore is on for every test, and the ini key's options (``None``: the defaults).
_SETTINGS = pytest.StashKey[tuple[bool, "Options | None"]]()
_FUNCTIONS = pytest.StashKey[dict[str, tuple["Options", str]]]()  # explored function -> options, transport
_TESTS = pytest.StashKey[dict[str, _Test]]()
_ERROR = pytest.StashKey[str]()  # the exception that escaped the call phase, "Type: message"
_VERDICT = pytest.StashKey[dict[str, Any]]()
_SPANS = pytest.StashKey["list[RecordedSpan]"]()
_WHERE = pytest.StashKey[dict[str, Any]]()  # where the failure left the harness (explore_where)
_INI_CHECKS = pytest.StashKey[list[tuple[str, tuple[str, ...]]]]()  # (node-id prefix, checks off)
_GATE_TEXT = pytest.StashKey[str]()  # the run's span invariant violations, as the span gate prints them
#: From-trace's hook, called at every explore run's teardown with its item, run and :func:`run_detail`:
#: the runs it returns are inserted instead of explore's own campaign or pairs (``None``: not its test).
EXPANSION = pytest.StashKey["Callable[[pytest.Item, Run, dict[str, Any]], list[Run] | None]"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpfaults")
    group.addoption(
        OPTION,
        action="store_true",
        dest=EXPLORE_SWITCH,
        help="Explore: run every selected clean mcp_sidecar test once, record its footprint, and run it "
        "again under each catalogue fault at each step (see docs/explore.md).",
    )
    group.addoption(
        HTML_OPTION,
        metavar="PATH",
        dest="mcpfaults_html",
        help="Write explore's page to PATH: one self-contained HTML file with each explored test's step × "
        "fault grid and, for each violation, its span timeline and journal.",
    )
    explore_shard.addoption(group)
    parser.addini(
        INI,
        "Explore's run-wide options, space-separated key=value (kinds=die,hang exclude=... steps=... "
        "depth=1|2 max_runs=N reduce=true|false own_asserts=behaviour|must_hold); a non-empty value "
        f"(or 'true') turns explore on as {OPTION} does.",
        default="",
    )
    parser.addini(
        CHECKS_INI,
        "Explore's generic checks kept off, one line each: 'left_open, cleanup_at_most' (every explored "
        "test) or '<node-id prefix> = left_open' (the tests under a directory, in a file, or one test).",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): explore this test (see {OPTION}); options: kinds, exclude, steps, depth, "
        "max_runs, reduce, own_asserts, patience, raises, checks, exclude_checks.",
    )
    raw = str(config.getini(INI)).strip()
    enabled = explore_on(config)  # the span glue watches providers from configure on when it is
    base = None
    if raw:  # the planning module is imported only when explore is configured
        from pytest_mcpfaults.explore.plan import parse_options

        given: dict[str, str] = {}
        try:
            for part in (p for p in raw.split() if p.lower() != "true"):
                key, eq, value = part.partition("=")
                if not eq or not key:
                    raise ValueError(f"expected key=value items (or 'true'), got {part!r}")
                given[key] = value
            base = parse_options(given)
        except ValueError as exc:
            raise pytest.UsageError(f"ini option {INI} = {raw!r}: {exc}") from None
    config.stash[_SETTINGS] = (enabled, base)
    explore_shard.configure(config, explored_test)
    config.stash[_INI_CHECKS] = []
    for line in map(str, config.getini(CHECKS_INI)):
        from pytest_mcpfaults.explore.checks import check_names  # only when the key is set

        prefix, _, names = line.rpartition("=")
        try:
            config.stash[_INI_CHECKS].append((prefix.strip(), check_names(CHECKS_INI, names)))
        except ValueError as exc:
            raise pytest.UsageError(f"ini option {exc}") from None
    html = config.getoption("mcpfaults_html", default=None)
    if html is not None and not hasattr(config, "workerinput"):
        from pytest_mcpfaults._pytest.report import check_output_path, given_path

        html = given_path(config, "mcpfaults_html", HTML_OPTION)
        check_output_path(HTML_OPTION, config.invocation_params.dir / str(html))
    config.stash[_TESTS] = {}
    config.stash[_FUNCTIONS] = {}
    config.pluginmanager.register(ExploreReport(config), "mcpfaults-explore-report")
    if config.getoption("mcpfaults_baseline", default=None):  # even for the marker alone
        from pytest_mcpfaults.explore.rerun import Rerun

        config.pluginmanager.register(Rerun(), "mcpfaults-explore-rerun")


# -- collection ------------------------------------------------------------------------------------


def _options_for(metafunc: pytest.Metafunc) -> Options | None:
    """The test's campaign options, ``None`` when it is not explored; ``CollectError`` when wrong."""
    from pytest_mcpfaults._pytest.settings import marker_kwargs

    enabled, base = metafunc.config.stash[_SETTINGS]

    node = metafunc.definition
    marker = node.get_closest_marker(MARKER)
    where = f"{node.nodeid}: @pytest.mark.{MARKER}"
    uses = [f for f in _SIDECAR_FIXTURES if f in metafunc.fixturenames]
    given = getattr(metafunc.function, "is_hypothesis_test", False)  # Hypothesis's @given
    if marker is None:
        if not enabled or not uses or given or node.get_closest_marker("mcpfaults_matrix") is not None:
            return None  # with @given each example makes servers of its own: no one footprint
        try:
            from pytest_mcpfaults.explore.plan import FIXTURE_MARKERS, parse_options

            marker_name = FIXTURE_MARKERS.get(uses[0])
            planned = marker_kwargs(node, marker_name).get("faults") if marker_name else None
        except ValueError:
            return None  # the sidecar glue reports the bad marker
        return parse_options({}, base) if not planned else None  # a written fault scenario is not explored
    if marker.args:
        raise pytest.Collector.CollectError(f"{where} takes keyword options only, got {marker.args!r}")
    if not uses:
        raise pytest.Collector.CollectError(
            f"{where}: the test uses no sidecar fixture ({', '.join(list(_SIDECAR_FIXTURES)[:-1])}; or "
            f"{EXPLORE_PARAM} for a mock_sidecar it opens itself), so there is no footprint to explore"
        )
    if node.get_closest_marker("mcpfaults_matrix") is not None:
        raise pytest.Collector.CollectError(f"{where}: cannot be combined with @pytest.mark.mcpfaults_matrix")
    if given:
        raise pytest.Collector.CollectError(
            f"{where}: cannot be combined with Hypothesis's @given (each example makes its own requests, "
            "so there is no one footprint to explore)"
        )
    from pytest_mcpfaults.explore.plan import parse_options

    try:
        return parse_options(marker.kwargs, base)
    except ValueError as exc:
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None


def planned_runs(
    options: Options, steps: tuple[Step, ...], cached: dict[str, Any] | None, transport: str = "http"
) -> list[Run]:
    """The campaign's runs from a footprint (and, at depth 2, the pairs after its cached first runs)."""
    from pytest_mcpfaults.explore.plan import Step, plan_campaign, plan_pairs, same_outcome

    camp = plan_campaign(steps, options, transport)
    runs = list(camp.runs)
    if options.depth < 2 or not cached:
        return runs
    seen: list[dict[str, Any]] = []
    observed: dict[str, Any] = cached.get("observed", {})
    for run in camp.runs:
        obs = observed.get(run.id)
        if not obs or (options.reduce and any(same_outcome(obs, s) for s in seen)):
            continue
        seen.append(obs)
        after = tuple(Step.from_dict(s) for s in obs.get("footprint", ()))
        runs += plan_pairs(run, steps, after, options, transport)
    return runs[: options.max_runs]


@pytest.hookimpl(trylast=True)  # after the test's own parametrizations: ids `test_x[a-explore:clean]`
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    options = _options_for(metafunc)
    if options is None:
        return
    from pytest_mcpfaults.explore.plan import CLEAN, Step

    function = metafunc.definition.nodeid
    transport = next(t for f, t in _SIDECAR_FIXTURES.items() if f in metafunc.fixturenames)
    # each parametrization is explored as its own test, with its own cached footprint; the explore
    # parameter takes the union of their runs, and collection keeps each test's own (see
    # pytest_collection_modifyitems)
    cache = getattr(config, "cache", None)
    index = cached(cache, "function", function) or {}
    keys = [function, *(str(k) for k in index.get("tests", []))]  # the parametrizations with a footprint
    runs: dict[str, Run] = {CLEAN.id: CLEAN}
    for key in keys:
        data = cached(cache, "nodeid", key)
        if data is None:
            continue
        try:
            steps = tuple(Step.from_dict(s) for s in data.get("footprint", ()))
            mine = planned_runs(options, steps, data, transport)
        except (TypeError, ValueError, KeyError, AttributeError):
            continue  # cached by another version of the plugin (or edited): as if none, recorded again
        off = {str(c) for c in data.get("checks_off", ())}
        config.stash[_TESTS][key] = _Test(
            options, transport, collected={CLEAN.id, *(r.id for r in mine)}, checks_off=off
        )
        runs.update((r.id, r) for r in mine if r.id not in runs)
    config.stash[_FUNCTIONS][function] = (options, transport)
    if EXPLORE_PARAM not in metafunc.fixturenames:
        metafunc.fixturenames.append(EXPLORE_PARAM)
    metafunc.parametrize(EXPLORE_PARAM, list(runs.values()), ids=list(runs))


def function_id(item: pytest.Item) -> str:
    """The node id of the item's test function (without any parametrization)."""
    name = getattr(item, "originalname", item.name)
    return item.nodeid[: len(item.nodeid) - len(item.name)] + name


def explored_test(item: pytest.Item) -> str:
    """The explored test an explore item belongs to: its function's node id with the item's other
    parameters (``test_x.py::test_x[a]`` for ``test_x[a-explore:die-at-tool:x[1]]``)."""
    run = explore_run(item)
    params = item.name[len(getattr(item, "originalname", item.name)) + 1 : -1]
    rest = f"-{params}-".replace(f"-{run.id if run is not None else ''}-", "-", 1)[1:-1]
    return f"{function_id(item)}[{rest}]" if rest else function_id(item)


def _test(item: pytest.Item) -> _Test | None:
    return item.config.stash[_TESTS].get(explored_test(item))


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect: the items of other parametrizations go first
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An item whose run was planned for another parametrization of its function (the explore
    parameter took the union of their runs) is deselected."""
    functions, tests = config.stash[_FUNCTIONS], config.stash[_TESTS]
    keep: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        run = explore_run(item)
        fn = functions.get(function_id(item)) if run is not None else None
        if fn is None:
            keep.append(item)
            continue
        t = tests.setdefault(explored_test(item), _Test(*fn))
        if run.id not in t.collected:
            other.append(item)  # planned for another parametrization of the function
            continue
        if not run.plan and isinstance(item, pytest.Function):
            t.clean = item
        keep.append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = keep


# -- running ---------------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    run = explore_run(item)
    if run is None:
        return (yield)
    from pytest_mcpfaults.explore.ambient import HAND, Hand  # by its full name, as inprocess reads it

    token = HAND.set(Hand(partial(faults_for_next, item, run), partial(server_made, item)))
    try:
        return (yield)
    finally:
        HAND.reset(token)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    forget(item, _ERROR, _VERDICT, _SPANS, _WHERE, _GATE_TEXT)  # a rerun's attempt reads none of the last
    run = explore_run(item)
    t = _test(item) if run is not None else None
    if t is not None and run.plan and t.clean_failed is not None:
        pytest.skip(f"explore: not explored, the clean run failed ({t.clean_failed})")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    if explore_run(item) is None:
        return (yield)
    from pytest_mcpfaults.spans.recorder import global_recorder

    mark = span_mark(item)
    try:
        return (yield)
    except BaseException as exc:
        item.stash[_ERROR] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        item.stash[_WHERE] = where_of(exc, str(item.config.rootpath))
        raise
    finally:
        if mark is not None:
            item.stash[_GATE_TEXT] = record_invariants(item, mark) or ""
            item.stash[_SPANS] = global_recorder().spans()


def _off(item: pytest.Item, t: _Test) -> frozenset[str]:
    """The generic checks off for this run: its options', the ini key's lines naming its test, and, for a
    fault's run, those its clean run failed (the clean run is checked by them every time)."""
    from pytest_mcpfaults.explore.checks import kept_off

    test = explored_test(item)
    ini = [
        c
        for prefix, names in item.config.stash.get(_INI_CHECKS, [])
        if test.startswith(prefix)
        for c in names
    ]
    run = explore_run(item)
    clean = set() if run is None or not run.plan else t.checks_off
    return kept_off(t.options.checks, (*t.options.exclude_checks, *ini, *clean))


def _classify(
    item: pytest.Item, call: pytest.CallInfo[None], options: Options, off: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The verdict of a run's call phase; a failure of a check kept off is behaviour under fault."""
    rec = record_for(item)
    found = [f"invariant:{i.name}" for i in rec.invariants if not i.ok]
    exc = call.excinfo.value if call.excinfo is not None else None
    note = ""
    if isinstance(exc, (pytest.skip.Exception, pytest.xfail.Exception)):
        return {"verdict": "not explored", "found": [], "note": str(exc)}
    name = type(exc).__name__ if exc is not None else ""
    if name == "PatienceError":
        found.append("patience")
    elif name == "SpanInvariantError" or (found and isinstance(exc, (AssertionError, pytest.fail.Exception))):
        pass  # its invariants are recorded above (raised by the test's assert_* or the span gate)
    elif isinstance(exc, AssertionError):
        if options.own_asserts == "must_hold":
            found.append("own_assert")
        note = item.stash.get(_ERROR, name)
    elif exc is not None and any(c.__name__ in options.raises for c in type(exc).__mro__):
        note = item.stash.get(_ERROR, name)  # one of the harness's own failure modes (raises=)
    elif exc is not None:
        found.append(f"exception:{name}")
    from pytest_mcpfaults.explore.checks import check_of

    found, dropped = [f for f in found if check_of(f) not in off], [f for f in found if check_of(f) in off]
    if dropped and exc is not None and not note:
        note = f"{', '.join(dropped)} (kept off)"
    verdict = "violation" if found else ("behaviour" if note else "ok")
    return {"verdict": verdict, "found": found, "note": note}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    run = explore_run(item)
    t = _test(item) if run is not None else None
    if t is None or run is None:
        return report
    if call.when == "call":
        verdict = _classify(item, call, t.options, _off(item, t))
        item.stash[_VERDICT] = verdict
        if not run.plan:  # the clean run: a failure means its campaign is not explored, but a check's
            if report.failed or verdict["verdict"] != "ok":
                _clean_failed(report, t, verdict)
            else:  # its rerun passed (pytest-rerunfailures): the last attempt stands, as its outcome does
                t.clean_failed = None
        elif verdict["verdict"] == "behaviour":
            report.outcome = "skipped"
            report.wasxfail = f"behaviour under fault: {verdict['note']}"
        elif verdict["verdict"] == "violation" and _known(item, run, verdict):
            verdict["verdict"] = "known"
            report.outcome = "skipped"
            report.wasxfail = f"known finding (in the baseline): {', '.join(verdict['found'])}"
        elif verdict["verdict"] == "violation" and not report.failed:
            report.outcome = "failed"
            report.longrepr = _failure_text(item, run, t, verdict)
        if verdict["verdict"] == "violation":
            report.sections.append(("mcpfaults explore", _failure_text(item, run, t, verdict)))
    elif call.when == "teardown":
        _teardown(item, report, run, t)
    return report


def _clean_failed(report: pytest.TestReport, t: _Test, verdict: dict[str, Any]) -> None:
    """The clean run failed: its campaign is not explored, unless all it failed is checks made once its
    path was whole: then it is a finding of its own, and the campaign runs with those checks off."""
    from pytest_mcpfaults.explore.checks import check_of, whole_footprint

    if verdict["verdict"] == "violation" and not verdict["note"] and whole_footprint(verdict["found"]):
        off = sorted({check_of(f) for f in verdict["found"]})
        t.checks_off.update(off)
        verdict["kept_off"] = sorted(t.checks_off)
        text = (
            f"explore: the clean run failed {', '.join(verdict['found'])}: a finding of its own; its "
            f"campaign runs with {', '.join(off)} off"
        )
        if not report.failed:
            report.outcome, report.longrepr = "failed", text
        else:
            report.sections.append(("mcpfaults explore", text))
        return
    t.clean_failed = verdict["note"] or ", ".join(verdict["found"]) or "failed"
    if not report.failed:
        report.outcome = "failed"
        report.longrepr = f"explore: the clean run violated {', '.join(verdict['found'])}"


def _failure_text(item: pytest.Item, run: Run, t: _Test, verdict: dict[str, Any]) -> str:
    """What a violating run's failure says: what was found, the span gate's text, the plan to paste."""
    from pytest_mcpfaults.explore.plan import regression_line

    text = f"explore: {', '.join(verdict['found'])}"
    gate = item.stash.get(_GATE_TEXT, "")
    if gate and any(f.startswith("invariant:") for f in verdict["found"]):
        text += f"\n\n{gate}"
    makers = [maker for _, maker in item.stash.get(SERVERS, [])]
    line = regression_line(run, t.transport, makers)
    return f"{text}\n\nminimal plan (paste it above a regression test):\n{line}"


def _known(item: pytest.Item, run: Run, verdict: dict[str, Any]) -> bool:
    """Whether the baseline has this run's finding."""
    from pytest_mcpfaults.explore.findings import finding_key, primary

    if not verdict["found"]:
        return False
    where = str(item.stash.get(_WHERE, {}).get("where", ""))
    key = finding_key(primary(verdict["found"]), where, explored_test(item))
    return any(f["key"] == key for f in baseline(item.config))


#: The oracles read once the test's fixtures are done: a check, its stash key, its title.
_AT_TEARDOWN = (
    ("left_open", LEFT_OPEN, "the harness left connections open"),
    ("sessions", SESSION_PROBLEMS, "the harness broke session hygiene"),
)


def _checked_at_teardown(item: pytest.Item, report: pytest.TestReport, run: Run, t: _Test) -> dict[str, Any]:
    """The run's verdict once the oracles read at teardown (:data:`_AT_TEARDOWN`) have spoken: a check
    that found something makes the run a violation (failing its report), or known by the baseline."""
    verdict = dict(item.stash.get(_VERDICT, {"verdict": "not explored", "found": [], "note": ""}))
    off = _off(item, t)
    seen = {
        name: texts for name, key, _ in _AT_TEARDOWN if name not in off and (texts := item.stash.get(key, []))
    }
    titles = {name: title for name, _, title in _AT_TEARDOWN}
    before = list(verdict["found"])
    found = [*before, *seen]
    if (
        seen
        and run.plan
        and verdict["verdict"] in ("known", "ok", "behaviour")
        and _known(item, run, {"found": found})
    ):
        verdict.update(found=found, verdict="known")
    elif seen and verdict["verdict"] != "not explored":
        verdict.update(found=found, verdict="violation")
        if not report.failed:
            report.outcome = "failed"
            report.longrepr = "\n\n".join(
                f"explore: {titles[name]}:\n" + "\n".join(texts) for name, texts in seen.items()
            )
    elif report.failed and verdict["verdict"] != "not explored":
        verdict.update(found=[*before, "teardown"], verdict="violation")
    if not run.plan and verdict["found"] != before and t.clean_failed is None:
        _clean_failed(report, t, verdict)  # it failed at teardown: a check kept off after it?
    return verdict


def _teardown(item: pytest.Item, report: pytest.TestReport, run: Run, t: _Test) -> None:
    verdict = _checked_at_teardown(item, report, run, t)
    steps, labels, fired = observed(item)
    where: dict[str, Any] = item.stash.get(_WHERE, {})  # where the failure left the harness, if it did
    if run.plan and verdict["verdict"] in ("ok", "behaviour") and not fired:
        verdict.update(
            verdict="unreached", note="the fault never fired (its step was not reached: a stale footprint?)"
        )
    data: dict[str, Any] = {
        "test": explored_test(item),
        "function": function_id(item),
        "transport": t.transport,
        "run": run.to_dict(),
        **verdict,
        "labels": labels,
        "makers": [maker for _, maker in item.stash.get(SERVERS, [])],
        "error": f"{item.stash.get(_ERROR, '').split(':')[0]}@{run.plan[-1][0] if run.plan else ''}",
        **where,
    }
    if run.depth <= 1 and verdict["verdict"] != "not explored":
        data["footprint"] = [s.to_dict() for s in steps]
    if not run.plan:
        data["options"] = dataclasses.asdict(t.options)
    if verdict["verdict"] == "violation":  # what the HTML page shows of it
        data["detail"] = run_detail(item)
    setattr(report, REPORT_ATTR, data)
    if run.plan:  # its violations are gated by finding (explore_findings), not node id
        item.stash[GATED_BY_FINDINGS] = (
            verdict["found"] if verdict["verdict"] in ("violation", "known") else []
        )
    if verdict["verdict"] == "not explored" or _expanded(item, t, run, data):
        return
    if not run.plan:
        t.footprint = tuple(steps)
        if t.clean_failed is None:
            _expand(item, t, planned_runs(t.options, t.footprint, None, t.transport))
    elif run.depth == 1 and t.options.depth >= 2 and t.footprint is not None:
        _expand(item, t, _pairs(t, run, data))


def _expanded(item: pytest.Item, t: _Test, run: Run, data: dict[str, Any]) -> bool:
    """Whether the expansion hook (:data:`EXPANSION`) takes this test (and its runs were inserted); a
    clean run it takes says so in its record ``data``: the test's campaign is the hook's, however many
    runs it made (none: nothing to replay, not explore's campaign left out)."""
    expansion = item.config.stash.get(EXPANSION, None)
    runs = expansion(item, run, run_detail(item)) if expansion and t.clean_failed is None else None
    if runs is not None:
        _insert(item, t, runs)
        if not run.plan:
            data["campaign"] = "from-trace"
    return runs is not None


def explore_options(item: pytest.Item) -> Options | None:
    """The explore options of ``item``'s explored test, ``None`` when it is not explored here."""
    t = _test(item)
    return t.options if t is not None else None


def _pairs(t: _Test, run: Run, data: dict[str, Any]) -> list[Run]:
    """The pairs after ``run``; none when its outcome matched an earlier first run's (listed in
    ``data["pruned_pairs"]``)."""
    from pytest_mcpfaults.explore.plan import Step, plan_pairs, same_outcome

    assert t.footprint is not None
    after = tuple(Step.from_dict(s) for s in data.get("footprint", ()))
    pairs = plan_pairs(run, t.footprint, after, t.options, t.transport)
    same = next((rid for rid, seen in t.first_outcomes if same_outcome(data, seen)), None)
    if t.options.reduce and same is not None:
        why = f"after {run.id}, whose outcome (exception and journal) was that of {same}"
        data["pruned_pairs"] = [{"run": p.id, "why": why} for p in pairs]
        return []
    t.first_outcomes.append((run.id, data))
    return pairs


def _expand(item: pytest.Item, t: _Test, runs: list[Run]) -> None:
    new = [r for r in runs if r.id not in t.collected]
    left = t.options.max_runs - (len(t.collected) - 1)
    _insert(item, t, new[: max(0, left)])


def _insert(item: pytest.Item, t: _Test, new: list[Run]) -> None:
    """Insert items for ``new`` right after ``item`` (not on an xdist worker)."""
    if not new or hasattr(item.config, "workerinput") or t.clean is None:
        return
    items: list[pytest.Item] = [make_item(t.clean, r) for r in new]
    t.collected.update(r.id for r in new)
    session = item.session
    item.config.hook.pytest_collection_modifyitems(session=session, config=item.config, items=items)
    at = session.items.index(item) + 1 if item in session.items else len(session.items)
    session.items[at:at] = items
    session.testscollected += len(items)


@pytest.fixture
def mcpfaults_explore(request: pytest.FixtureRequest) -> Run | None:
    """This item's explore run (its faults reach the ``mcp_sidecar`` fixture, the factory's sidecars and,
    for a test that asks for this fixture, each ``mock_sidecar`` it opens), ``None`` outside a campaign."""
    return getattr(request, "param", None)


# -- what a run observed, and the items made during a run ----------------------------------------------


def run_detail(item: pytest.Item) -> dict[str, Any]:
    """What a run observed as the HTML page draws it."""
    from pytest_mcpfaults.from_trace.capture import clean_run_detail

    spans, servers = item.stash.get(_SPANS, []), [s for s, _ in item.stash.get(SERVERS, [])]
    return clean_run_detail(spans, servers)


def observed(item: pytest.Item) -> tuple[list[Step], list[str], int]:
    """The footprint of the item's servers, their journals' labels, and how often faults fired."""
    from pytest_mcpfaults.explore.plan import MAKER_TRANSPORTS, footprint

    steps: list[Step] = []
    labels: list[str] = []
    fired = 0
    servers = item.stash.get(SERVERS, [])
    for number, (server, maker) in enumerate(servers, 1):
        journal = getattr(server, "journal", None)
        if journal is None:
            continue
        steps += footprint(
            journal.requests,
            mcp_path=getattr(server, "mcp_path", "/mcp"),
            health_path=getattr(server, "health_path", None),
            server=number if len(servers) > 1 else 0,
            transport=MAKER_TRANSPORTS.get(maker, "http"),
        )
        labels += [r.label for r in journal.requests]
        fired += sum(getattr(server, "fired", {}).values())
    return steps, labels, fired


def make_item(clean: pytest.Function, run: Run) -> pytest.Function:
    """A campaign item made from its test's clean item during the run, as collection made that one:
    pytest has no public way to add an item then (docs/architecture.md says which internals, and why)."""
    from pytest_mcpfaults.explore.plan import CLEAN

    callspec = clean.callspec
    params = {**callspec.params, EXPLORE_PARAM: run}
    idlist = [run.id if i == CLEAN.id else i for i in callspec._idlist]
    spec = dataclasses.replace(callspec, params=params, _idlist=idlist)
    cls = type(clean)  # an async plugin's own item class (pytest-asyncio's), as collected
    item = cls.from_parent(
        clean.parent,
        name=f"{clean.originalname}[{'-'.join(idlist)}]",
        callspec=spec,
        fixtureinfo=clean._fixtureinfo,
        originalname=clean.originalname,
    )
    clean.config.hook.pytest_itemcollected(item=item)
    # markers plugins added to the collected item (pytest-asyncio's auto mode adds 'asyncio'; a
    # conftest's pytest_itemcollected may add an mcp_sidecar marker)
    item.own_markers.extend([m for m in clean.own_markers if m not in item.own_markers])
    return item
