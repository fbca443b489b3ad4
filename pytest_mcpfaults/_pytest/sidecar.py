"""pytest glue for sidecars: the ``mcp_sidecar`` marker and fixtures, the patience verdict.

Sidecars used by a test (through either fixture) are attached to the test item. After the test's
call phase, patience violations that the test did not expect fail it with the verdict; at teardown
every sidecar is stopped (bounded), errors raised in the sidecar thread are re-raised, and what was
observed goes into the test's record for the CI report.
"""

from __future__ import annotations

import traceback
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest import settings
from pytest_mcpfaults._pytest.records import record_for

if TYPE_CHECKING:
    from pytest_mcpfaults.sidecar import Sidecar
    from pytest_mcpfaults.sidecar.factory import SidecarFactory

_SIDECARS = pytest.StashKey[list["Sidecar"]]()
_REPORTED = pytest.StashKey[set[int]]()  # ids of violations already given a verdict
_CURRENT: list[pytest.Item] = []  # the item whose setup/call/teardown is running


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.addini(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcp_sidecar(**kwargs): configure the mcp_sidecar fixture; the keyword arguments are exactly "
        "those of pytest_mcpfaults.Sidecar (faults=, era=, reply=, patience=, expect_hang=, ...).",
    )
    config.addinivalue_line(
        "markers",
        "mcp_expect_hang: this test expects clients to wait out held requests; patience violations "
        "of every sidecar it uses are reported but do not fail it.",
    )
    settings.check_ini(config)  # validate early: a bad ini value is a usage error before collection


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A bad marker fails its module's collection, naming the argument: an error raised while
    collecting reaches the xdist controller like any collection error (a usage error raised on a
    worker would crash it)."""
    if metafunc.definition.get_closest_marker("mcp_sidecar") is not None:
        problem = settings.marker_problem(metafunc.definition)
        if problem is not None:
            raise pytest.Collector.CollectError(problem)


def _attach(item: pytest.Item | None, sidecar: Sidecar) -> None:
    if item is not None:
        item.stash.setdefault(_SIDECARS, []).append(sidecar)


def _expects_hang(item: pytest.Item) -> bool:
    return item.get_closest_marker("mcp_expect_hang") is not None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _CURRENT.append(item)
    try:
        return (yield)
    finally:
        _CURRENT.remove(item)


def _verdict(item: pytest.Item, sidecars: list[Sidecar]) -> str | None:
    """The verdict for unexpected patience violations not reported yet (each is reported once)."""
    if not sidecars or _expects_hang(item):
        return None  # a test that used no sidecar never imports the sidecar package
    from pytest_mcpfaults.sidecar.patience import patience_verdict

    reported = item.stash.setdefault(_REPORTED, set())
    texts = []
    for sc in sidecars:
        new = [v for v in sc.patience_violations if not v.expected and id(v) not in reported]
        reported.update(id(v) for v in new)
        if new:
            texts.append(patience_verdict(sc, new))
    return "\n\n".join(texts) or None


def _raise_verdict(text: str | None, cause: BaseException | None) -> None:
    """Raise the verdict; a failure the abort caused (or any other) is kept as its ``__cause__``.
    Skips, xfails and interrupts pass through untouched."""
    if text is None:
        return
    if cause is not None and not isinstance(cause, (Exception, pytest.fail.Exception)):
        return
    from pytest_mcpfaults.sidecar.patience import PatienceError

    raise PatienceError(text) from cause


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        result = yield
    except BaseException as exc:
        _raise_verdict(_verdict(item, item.stash.get(_SIDECARS, [])), exc)
        raise
    _raise_verdict(_verdict(item, item.stash.get(_SIDECARS, [])), None)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A verdict is raised by plugin code, not the test: show its text (and the test's own failure
    it caused, if any), not a traceback through the plugin's hooks."""
    report = yield
    excinfo = call.excinfo
    if report.failed and excinfo is not None and type(excinfo.value).__name__ == "PatienceError":
        text = f"PatienceError: {excinfo.value}"
        cause = excinfo.value.__cause__
        if cause is not None:
            own = "".join(traceback.format_exception_only(type(cause), cause)).rstrip()
            text += f"\n\nThe {call.when} phase also failed (often the client reacting to the abort):\n{own}"
        report.longrepr = text
    return report


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Around fixture teardown (a client closed in a fixture may wait out a hold there): then stop
    every sidecar, record what it saw, re-raise its errors, and give the verdict for violations
    that appeared after the call phase."""
    failure: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        failure = exc
    sidecars = item.stash.get(_SIDECARS, [])
    item.stash[_SIDECARS] = []
    if sidecars:
        _record(item, sidecars)
        verdict = _verdict(item, sidecars)
        for sc in sidecars:
            try:
                sc.check_errors()
            except Exception as exc:
                if failure is None:
                    failure = exc
        _raise_verdict(verdict, failure)
    if failure is not None:
        raise failure


def _record(item: pytest.Item, sidecars: list[Sidecar]) -> None:
    from pytest_mcpfaults.sidecar.patience import patience_verdict, violation_record

    rec = record_for(item)
    rec.expected_hang = _expects_hang(item)
    expected_text = []
    for sc in sidecars:
        sc.stop()
        url = sc.url if sc.state != "new" else None
        rec.sidecars.append({"url": url, "era": sc.era, "requests": len(sc.journal)})
        rec.plans.append([str(f) for f in sc.plan])
        for kind, n in sc.fired.items():
            rec.add_fired(kind, n)
        violations = sc.patience_violations
        for v in violations:
            rec.patience_violations.append(
                violation_record(v, expected=v.expected or rec.expected_hang, sidecar_url=url)
            )
        expected = [v for v in violations if v.expected or rec.expected_hang]
        if expected:
            expected_text.append(patience_verdict(sc, expected))
    if expected_text:  # reported, not failing: shown with -rP and in the report
        item.add_report_section("teardown", "mcpfaults patience (expected)", "\n\n".join(expected_text))


def _defaults(config: pytest.Config, item: pytest.Item) -> dict[str, Any]:
    return {**settings.ini_defaults(config), "expect_hang": _expects_hang(item)}


@pytest.fixture
def mcp_sidecar(request: pytest.FixtureRequest, mcpfaults_fault: Any) -> Iterator[Sidecar]:
    """A started fake MCP sidecar on 127.0.0.1 (a ``pytest_mcpfaults.Sidecar``), stopped after the test.

    Configure it with ``@pytest.mark.mcp_sidecar(**kwargs)``; the keyword arguments are exactly those
    of ``Sidecar`` (``faults=[...]``, ``era='session'``, ``reply='sse'``, ``patience=2.0`` …). Its
    URLs: ``mcp_sidecar.mcp_url``, ``.health_url``; its journal: ``mcp_sidecar.journal``. A request
    held past its patience budget fails the test with a verdict unless the test expects the hang.
    """
    from pytest_mcpfaults.sidecar import Sidecar

    item = request.node
    kwargs = {**_defaults(request.config, item), **settings.marker_kwargs(item)}
    if mcpfaults_fault is not None:  # this test's cell of @pytest.mark.mcpfaults_matrix: first in the plan
        kwargs["faults"] = [mcpfaults_fault, *kwargs.get("faults", ())]
    sidecar = Sidecar(**kwargs)
    sidecar.start()
    _attach(item, sidecar)
    yield sidecar
    sidecar.stop()  # the teardown hook records it and re-raises its errors


@pytest.fixture(scope="session")
def mcp_sidecar_factory(pytestconfig: pytest.Config) -> Iterator[SidecarFactory]:
    """A factory of started sidecars: ``mcp_sidecar_factory(**Sidecar kwargs)`` returns a started
    ``Sidecar``, also usable as a context manager. Every sidecar is stopped when the test that made
    it ends. Session-scoped on purpose, so it is safe inside a Hypothesis ``@given`` body::

        @given(plan=fault_plans())
        def test_teardown(mcp_sidecar_factory, plan):
            with mcp_sidecar_factory(faults=plan) as sidecar:
                ...
    """
    from pytest_mcpfaults.sidecar.factory import SidecarFactory

    def on_start(sidecar: Sidecar) -> None:
        _attach(_CURRENT[-1] if _CURRENT else None, sidecar)

    class _Factory(SidecarFactory):
        def __call__(self, **kwargs: Any) -> Sidecar:
            item = _CURRENT[-1] if _CURRENT else None
            defaults = _defaults(pytestconfig, item) if item is not None else {}
            return super().__call__(**{**defaults, **kwargs})

    factory = _Factory(on_start=on_start)
    yield factory
    factory.stop_all()
