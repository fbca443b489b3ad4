"""pytest glue for sidecars: the ``mcp_sidecar`` marker and fixtures, the patience verdict.

Sidecars used by a test (through either fixture) are attached to the test item. After the test's
call phase, patience violations that the test did not expect fail it with the verdict; at teardown
every sidecar is stopped (bounded), errors raised in the sidecar thread are re-raised, and what was
observed goes into the test's record for the CI report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
import traceback
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest import cassettes, settings
from pytest_mcpfaults._pytest.records import (
    HARNESSES,
    LEFT_OPEN,
    SERVERS,
    SESSION_PROBLEMS,
    explore_run,
    faults_for_next,
    forget,
    record_for,
    server_made,
)

if TYPE_CHECKING:
    from pytest_mcpfaults._pytest.interrupt import Finding, Watch
    from pytest_mcpfaults.stdio.server import StdioServer
    from pytest_mcpfaults.transports.factory import SidecarFactory
    from pytest_mcpfaults.transports.server import Sidecar

_SIDECARS = pytest.StashKey[list["Sidecar"]]()
_REPORTED = pytest.StashKey[set[int]]()  # ids of violations already given a verdict
_CALL = pytest.StashKey["_Call"]()  # the call phase of a test that may be interrupted
_GRACE = pytest.StashKey["float | None"]()  # mcpfaults_interrupt: seconds, or None when off
_SAY = pytest.StashKey[int]()  # a copy of stderr taken before capturing: where the watcher says it gave up
_INTERRUPTED = pytest.StashKey[bool]()  # the watcher interrupted the test's body
_CURRENT: list[pytest.Item] = []  # the item whose setup/call/teardown is running
_NO_INTERRUPT = "mcp_no_interrupt"


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.addini(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "mcp_sidecar(**kwargs): configure the mcp_sidecar fixture; the keyword arguments are exactly "
        "those of pytest_mcpfaults.Sidecar (faults=, era=, reply=, patience=, expect_hang=, ...).",
        f"{settings.STDIO_MARKER}(**kwargs): configure the mcp_stdio_server fixture; the keyword arguments "
        "are exactly those of pytest_mcpfaults.StdioServer (faults=, era=, patience=, expect_hang=, ...).",
        "mcp_expect_hang: this test expects clients to wait out held requests; patience violations "
        "of every sidecar it uses are reported but do not fail it.",
        f"{_NO_INTERRUPT}: never interrupt this test when it is still blocked after a patience verdict "
        "(the verdict is given when the body returns).",
        f"{settings.ALLOW_IDLE}: this test waits on purpose after its MCP requests (a sleep, a wait on "
        "something outside MCP) longer than the patience budget: no idle-hang verdict.",
        f"{settings.KEEP_SESSIONS}: this test keeps the MCP sessions it opens on purpose: session hygiene "
        "does not ask for their DELETE (a call on a lost session is still checked).",
    ):
        config.addinivalue_line("markers", line)
    settings.check_ini(config)  # validate early: a bad ini value is a usage error before collection
    config.stash[_GRACE] = settings.ini_seconds(
        config,
        settings.INTERRUPT_INI,
        off="off",
        what=" (the grace after a patience verdict before a still-blocked test is interrupted)",
    )
    if config.stash[_GRACE] is not None:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no real stderr: nothing is said
            config.stash[_SAY] = os.dup(sys.__stderr__.fileno())  # type: ignore[union-attr]


def pytest_unconfigure(config: pytest.Config) -> None:
    interrupt = sys.modules.get("pytest_mcpfaults._pytest.interrupt")  # imported only once a test was watched
    if interrupt is not None:
        interrupt.uninstall()
    fd = config.stash.get(_SAY, None)
    if fd is not None:
        del config.stash[_SAY]
        os.close(fd)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A bad marker fails its module's collection, naming the argument: an error raised while
    collecting reaches the xdist controller like any collection error (a usage error raised on a
    worker would crash it)."""
    for name, fixture in (("mcp_sidecar", "mcp_sidecar"), (settings.STDIO_MARKER, "mcp_stdio_server")):
        settings.check_marker(metafunc.definition, name)
        own = any(m.name == name for m in metafunc.definition.own_markers)  # a class's or module's: shared
        if own and fixture not in metafunc.fixturenames:  # its options would configure nothing
            raise pytest.Collector.CollectError(
                f"{metafunc.definition.nodeid}: @pytest.mark.{name} configures the {fixture} fixture, which "
                f"this test does not use: add {fixture} to its arguments"
                + (" (mcp_sidecar_factory(...) takes the options itself)" if fixture == "mcp_sidecar" else "")
            )
    for bare in ("mcp_expect_hang", _NO_INTERRUPT, settings.KEEP_SESSIONS, settings.ALLOW_IDLE):
        marker = metafunc.definition.get_closest_marker(bare)
        if marker is not None and (marker.args or marker.kwargs):
            raise pytest.Collector.CollectError(
                f"{metafunc.definition.nodeid}: @pytest.mark.{bare} takes no arguments, got "
                f"{marker.args!r} {marker.kwargs!r}"
            )


def _attach(item: pytest.Item | None, sidecar: Sidecar, maker: str) -> None:
    if item is not None:
        item.stash.setdefault(_SIDECARS, []).append(sidecar)
        server_made(item, sidecar, maker)
        call = item.stash.get(_CALL, None)
        if call is not None:  # a sidecar made during the call phase (the factory)
            call.watch_for(item)


@dataclasses.dataclass
class _Call:
    """The call phase (or the teardown) of a test that may be interrupted, the phase its watcher reads:
    the watcher (see ``interrupt``) is made only once the test uses a sidecar, so a test that uses none
    never imports it."""

    grace: float
    say: int | None
    in_body: bool = False
    in_teardown: bool = False
    watch: Watch | None = None

    def watch_for(self, item: pytest.Item) -> None:
        if self.watch is not None:
            return
        from pytest_mcpfaults._pytest.interrupt import Finding, Watch, install

        if not install():  # main thread only, and only if SIGUSR2 is free
            return

        from pytest_mcpfaults._pytest.blocked import Stillness
        from pytest_mcpfaults.verdicts.stalls import find_idle, find_stall

        # The idle hang (unless the ini or the test's marker turns it off): the test's thread is sampled
        # at every poll, and an idle hang of its HTTP sidecars is a finding once the thread has also been
        # still for the budget.
        on = settings.ini_switch(item.config, settings.IDLE_INI) and not item.get_closest_marker(
            settings.ALLOW_IDLE
        )
        still = Stillness(threading.main_thread().ident) if on else None

        def check() -> Finding | None:
            """A finding not given as a verdict yet: at teardown, the body's verdict (a patience
            violation, or a stall after the same fault) is not found again."""
            sidecars: list[Sidecar] = item.stash.get(_SIDECARS, [])[:]
            reported = item.stash.get(_REPORTED, set())  # made by the main thread
            if any(
                not v.expected and id(v) not in reported for sc in sidecars for v in sc.patience_violations
            ):
                return Finding(None, None)
            for sc in sidecars:
                stall = None if sc.expect_hang else find_stall(sc, sidecars)
                if stall is not None and id(stall.fired) not in reported:
                    return Finding(sc, stall)
            if still is None:
                return None
            stood = still.sample(time.monotonic())
            if any(sc.expect_hang or sc.options.backend == "stdio" for sc in sidecars):
                return None  # a test that expects hangs; a stdio server (not covered yet)
            idle = find_idle(sidecars)
            if idle is None or id(idle.request) in reported or stood < idle.budget:
                return None
            return Finding(idle.server, None, idle)

        self.watch = Watch(self, check)
        self.watch.start()

    def stop(self) -> Watch | None:
        """Stop watching; the watch if it interrupted the test."""
        if self.watch is None:
            return None
        self.watch.stop()
        return self.watch if self.watch.fired else None


def _make_call(item: pytest.Item) -> _Call | None:
    grace = item.config.stash.get(_GRACE, None)
    if grace is None or _expects_hang(item) or item.get_closest_marker(_NO_INTERRUPT) is not None:
        return None
    call = item.stash[_CALL] = _Call(grace, item.config.stash.get(_SAY, None))
    return call


def _expects_hang(item: pytest.Item) -> bool:
    return item.get_closest_marker("mcp_expect_hang") is not None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _CURRENT.append(item)
    try:
        return (yield)
    finally:
        _CURRENT.remove(item)


def _verdict(item: pytest.Item, sidecars: list[Sidecar], again: bool = False) -> str | None:
    """The verdict for unexpected patience violations not reported yet (each is reported once; with
    ``again``, those already reported too)."""
    if not sidecars or _expects_hang(item):
        return None  # a test that used no sidecar never imports the sidecar package
    reported = item.stash.setdefault(_REPORTED, set())
    texts = []
    for sc in sidecars:
        new = [v for v in sc.patience_violations if not v.expected and (again or id(v) not in reported)]
        reported.update(id(v) for v in new)
        if new:
            texts.append(sc.patience_verdict(new))
    return "\n\n".join(texts) or None


def _raise_verdict(text: str | None, cause: BaseException | None) -> None:
    """Raise the verdict; a failure the abort caused (or any other) is kept as its ``__cause__``, a
    ``BaseException`` too (a ``CancelledError`` an SDK's cancel scope let out of the test, a
    ``SystemExit``): the verdict is what the user reads. A skip and a real Ctrl-C pass through
    untouched."""
    if text is None or isinstance(cause, (KeyboardInterrupt, pytest.skip.Exception)):
        return
    from pytest_mcpfaults.verdicts.patience import PatienceError

    raise PatienceError(text) from cause


def _blocked_at(item: pytest.Item, exc: BaseException | None) -> str:
    """Where in the test's own file (or a ``conftest.py``) the interrupted test was."""
    from pytest_mcpfaults._pytest.interrupt import INTERRUPTS, leaves

    path = str(getattr(item, "path", ""))
    exc = next((e for e in leaves(exc) if isinstance(e, INTERRUPTS)), exc)
    tb, where = exc.__traceback__ if exc is not None else None, ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name == path or os.path.basename(name) == "conftest.py":
            where = f" at {os.path.basename(name)}:{tb.tb_lineno} in {tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return where


def _interrupted(
    item: pytest.Item,
    watch: Watch,
    exc: BaseException | None,
    sidecars: list[Sidecar] | None = None,
    when: str = "call",
) -> None:
    """The watcher interrupted the test's body or its fixtures' teardown (``when``): raise the verdict
    with where the test was blocked and what the plugin did, any failure but the interrupt its cause."""
    from pytest_mcpfaults.verdicts.patience import PatienceError

    if sidecars is None:
        sidecars = item.stash.get(_SIDECARS, [])
    what = "test" if when == "call" else "fixture teardown"
    gave_up = f"; then mcpfaults gave up, and the {what} ended by itself" if watch.gave_up else ""
    did = f"mcpfaults {watch.how}{gave_up}"
    off = f"ini {settings.INTERRUPT_INI} = off or @pytest.mark.{_NO_INTERRUPT} turns this off"
    found = watch.finding
    if found is not None and found.idle is not None:
        from pytest_mcpfaults.verdicts.stalls import idle_record, idle_verdict

        switch = (
            f"mark it @pytest.mark.{settings.ALLOW_IDLE} (or ini {settings.IDLE_INI} = off, or a larger "
            "patience)."
        )
        text = idle_verdict(found.idle, watch.blocked, switch)
        record_for(item).patience_violations.append(idle_record(found.idle, text))
        item.stash.setdefault(_REPORTED, set()).add(id(found.idle.request))  # found once, in one phase
        note = f"\n\nThe {what} was interrupted: {did}; {off}."
    elif found is not None and found.stall is not None:
        from pytest_mcpfaults.verdicts.stalls import stall_record, stall_verdict

        sc = found.server
        text = stall_verdict(sc, found.stall, watch.blocked, stdio=sc.options.backend == "stdio")
        record_for(item).patience_violations.append(stall_record(found.stall, text, sc.url))
        item.stash.setdefault(_REPORTED, set()).add(id(found.stall.fired))  # found once, in one phase
        note = (
            f"\n\nThe {what} was interrupted: {did}. If the test expects this wait, say so "
            f"(@pytest.mark.mcp_expect_hang, or a larger patience); {off}."
        )
    else:
        verdict = _verdict(item, sidecars) or _verdict(item, sidecars, again=True)
        text = verdict or "a patience violation was recorded"
        text += f"\n\n{watch.blocked}" if watch.blocked else ""
        blocked = f"still blocked {watch.phase.grace:g} s after the verdict{_blocked_at(item, exc)}"
        note = f"\n\nThe {what} was {blocked}: {did} ({off})."
    raise PatienceError(text + note) from (None if _ours(exc) else exc)


def _ours(exc: BaseException | None) -> bool:
    """Whether ``exc`` is only the interrupt: the cancellation of the loop's tasks,
    :class:`PatienceInterrupt`, or a group of them (anyio, ``asyncio.TaskGroup``)."""
    import asyncio

    from pytest_mcpfaults._pytest.interrupt import INTERRUPTS, leaves

    return all(e is None or isinstance(e, (*INTERRUPTS, asyncio.CancelledError)) for e in leaves(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    call = _make_call(item)
    if call is not None and item.stash.get(_SIDECARS, []):
        call.watch_for(item)
    try:
        result = yield
    except BaseException as exc:
        _after_call(item, call, exc)
        raise
    finally:
        forget(item, _CALL)
    _after_call(item, call, None)
    return result


def _after_call(item: pytest.Item, call: _Call | None, exc: BaseException | None) -> None:
    fired = call.stop() if call is not None else None
    if fired is not None and type(exc) is not KeyboardInterrupt:  # a real Ctrl-C stays one
        item.stash[_INTERRUPTED] = True
        _interrupted(item, fired, exc)
    _raise_verdict(_verdict(item, item.stash.get(_SIDECARS, [])), exc)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Marks the test function's own run: only then may the watcher interrupt it."""
    call = pyfuncitem.stash.get(_CALL, None)
    if call is None:
        return (yield)
    call.in_body = True
    try:
        return (yield)
    finally:
        call.in_body = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each attempt of a test starts from nothing (pytest-rerunfailures; ``records.pytest_runtest_setup``):
    not interrupted (which would excuse its sessions), and no verdict given yet (the ids kept are of the
    last attempt's objects, which the reset there lets go: a new one may reuse an id)."""
    forget(item, _INTERRUPTED, _REPORTED)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """A verdict is raised by plugin code, not the test: its report shows the verdict's text (and the
    test's own failure it caused, if any), not a traceback through the plugin's hooks.

    The report is built here, without pytest's traceback rendering, which parses the source of every
    frame with ``ast``: on CPython 3.11 a garbage collection during that parse whose finalizers parse
    again (3.11's ``traceback`` module calls ``ast.parse`` for its carets, e.g. when an unclosed
    client's task logs its exception) corrupts the parser's shared recursion-depth state and pytest
    stops with ``INTERNALERROR SystemError: AST constructor recursion depth mismatch``
    (https://github.com/python/cpython/issues/106905 and the state reset of gh-95185). A verdict test
    typically leaves such clients behind (their connections were cut), so they are also collected
    here, at a point where no parse is running, rather than inside a later test's rendering."""
    excinfo = call.excinfo
    name = type(excinfo.value).__name__ if excinfo is not None else ""
    if excinfo is None or name not in ("PatienceError", "SessionHygieneError"):
        return None
    import gc

    gc.collect()
    text = f"{name}: {excinfo.value}"
    cause = excinfo.value.__cause__
    if cause is not None:
        own = "".join(traceback.format_exception_only(type(cause), cause)).rstrip()
        text += f"\n\nThe {call.when} phase also failed (often the client reacting to the abort):\n{own}"
    # the sections pytest's own TestReport.from_item_and_call attaches (captured output and logs)
    sections = [(f"Captured {key} {rwhen}", content) for rwhen, key, content in item._report_sections]
    return pytest.TestReport(
        item.nodeid,
        item.location,
        dict.fromkeys(item.keywords, 1),
        "failed",
        text,
        call.when,  # type: ignore[arg-type]  # never "collect" for a test item
        sections,
        call.duration,
        call.start,
        call.stop,
        user_properties=item.user_properties,
    )


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Around fixture teardown (a client closed in a fixture may wait out a hold there): then stop
    every sidecar, record what it saw, re-raise its errors, and give the verdict for violations
    that appeared after the call phase. While the fixtures torn down before the sidecar's own run
    (the harness's, which depend on it), the watcher may interrupt them (see ``interrupt``); its
    verdict is then the teardown error."""
    call = _make_call(item) if item.stash.get(_SIDECARS, []) else None
    if call is not None:
        call.in_teardown = True
        call.watch_for(item)
    failure: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        failure = exc
    fired = None
    if call is not None:
        forget(item, _CALL)
        fired = call.stop()
    sidecars = item.stash.get(_SIDECARS, [])
    item.stash[_SIDECARS] = []
    made = [sc for sc, maker in item.stash.get(SERVERS, []) if maker == "mcp_sidecar_factory"]
    if sidecars and explore_run(item) is not None:  # an explore oracle, for the factory's sidecars too
        # what the harness left open on those still running (one the test stopped itself closed them)
        for sc in [sc for sc in made if sc.running]:
            item.stash.setdefault(LEFT_OPEN, []).extend(_left_open(sc))
    for sc in made:
        if sc in sidecars:
            _check_sessions(item, sc)  # the ones the test did not stop itself
    if sidecars:
        _record(item, sidecars)
        for sc in sidecars:
            try:
                sc.check_errors()
            except Exception as exc:
                if failure is None:
                    failure = exc
    if fired is not None and type(failure) is not KeyboardInterrupt:  # a real Ctrl-C stays one
        _interrupted(item, fired, failure, sidecars, when="teardown")
    if sidecars:
        _raise_verdict(_verdict(item, sidecars), failure)
    hygiene = item.stash.get(SESSION_PROBLEMS, [])
    if hygiene and failure is None and explore_run(item) is None:  # explore reads it as an oracle
        from pytest_mcpfaults.verdicts.hygiene import SessionHygieneError

        raise SessionHygieneError("\n\n".join(hygiene))
    if failure is not None:
        raise failure


def _own_finalizer(item: pytest.Item | None) -> None:
    """A server fixture's own finalizer has begun: the harness's fixtures that depend on it are done,
    so the watcher stops interrupting (the server's stop is bounded and must not be interrupted)."""
    call = item.stash.get(_CALL, None) if item is not None else None
    if call is not None:
        call.in_teardown = False


#: Seconds a sidecar waits, once the test's fixtures are done, for the ``DELETE`` of a session still
#: open (a client closing in a thread of its own) before it calls the session never ended.
HYGIENE_GRACE = 0.5


def _check_sessions(item: pytest.Item, sidecar: Sidecar) -> None:
    """Session hygiene (``verdicts/hygiene.py``) of a running sidecar, once the test's fixtures are
    done: its verdict is kept for the teardown hook (an explore run's oracle reads it instead)."""
    if not settings.ini_switch(item.config, settings.HYGIENE_INI) or sidecar.state != "running":
        return  # a dead or stopped sidecar lost its sessions: none is owed
    from pytest_mcpfaults.verdicts.hygiene import hygiene_verdict, session_problems

    # no DELETE is owed by a test the watcher interrupted, nor by a harness process the plugin killed
    # (its verdict): either may have cut the client's close
    call = item.stash.get(_CALL, None)
    cut = (
        item.stash.get(_INTERRUPTED, False)
        or (call is not None and call.watch is not None and call.watch.fired)
        or any(p.killed for p in item.stash.get(HARNESSES, []))
    )
    owed = item.get_closest_marker(settings.KEEP_SESSIONS) is None and not cut
    journal = sidecar.journal

    def found() -> list[Any]:
        conns = journal.connections
        return session_problems(journal.requests, sidecar.sessions, owed=owed, connections=conns)

    problems = found()
    if any(p.kind == "never_ended" for p in problems):  # a DELETE may be on its way
        with contextlib.suppress(AssertionError):
            journal.wait_for(lambda: not any(p.kind == "never_ended" for p in found()), HYGIENE_GRACE, "")
        problems = found()
    if not cut:
        problems += _unreached(item, sidecar)
    if problems:
        item.stash.setdefault(SESSION_PROBLEMS, []).append(hygiene_verdict(sidecar.url, problems))


#: The uids of the call spans a hygiene verdict already named (a test of several sidecars names each once).
_UNREACHED = pytest.StashKey[set[int | None]]()


def _unreached(item: pytest.Item, sidecar: Sidecar) -> list[Any]:
    """Calls the client's spans show it made after a call failed at ``sidecar``, which failed in the
    client without reaching any server of the test (``verdicts/hygiene.py``); none when the test
    records no spans."""
    from pytest_mcpfaults._pytest.spans import spans_of_test

    spans = spans_of_test(item)
    if not spans:
        return []
    from pytest_mcpfaults.verdicts.hygiene import client_calls, unreached_calls

    calls = client_calls(spans)
    if not calls:
        return []

    received = [
        (r, server.journal.epoch() + r.started_at)
        for server, _ in item.stash.get(SERVERS, [])
        if hasattr(getattr(server, "journal", None), "t0")
        for r in server.journal.requests
    ]
    named = item.stash.setdefault(_UNREACHED, set())
    problems = unreached_calls(sidecar.journal.requests, received, calls, sidecar.journal.epoch())
    out = []
    for problem in problems:
        fresh = tuple(c for c in problem.calls if c.uid not in named)
        named.update(c.uid for c in fresh)
        if fresh:
            out.append(dataclasses.replace(problem, calls=fresh))
    return out


def _record(item: pytest.Item, sidecars: list[Sidecar]) -> None:
    from pytest_mcpfaults.verdicts.patience import violation_record

    rec = record_for(item)
    rec.expected_hang = _expects_hang(item)
    expected_text = []
    for sc in sidecars:
        sc.stop()
        url = sc.url if sc.state != "new" else None
        rec.sidecars.append({"url": url, "era": sc.era, "requests": len(sc.journal)})
        rec.plans.append([str(f) for f in sc.plan])
        for kind, n in sc.fired.items():
            rec.fired[kind] = rec.fired.get(kind, 0) + n
        violations = sc.patience_violations
        for v in violations:
            expect = v.expected or rec.expected_hang
            own = getattr(v, "record", None)  # a stdio violation words its own record
            rec.patience_violations.append(
                own(expected=expect, where=url)
                if own is not None
                else violation_record(v, expected=expect, sidecar_url=url)
            )
        expected = [v for v in violations if v.expected or rec.expected_hang]
        if expected:
            expected_text.append(sc.patience_verdict(expected))
    if expected_text:  # reported, not failing: shown with -rP and in the report
        item.add_report_section("teardown", "mcpfaults patience (expected)", "\n\n".join(expected_text))


def _defaults(config: pytest.Config, item: pytest.Item) -> dict[str, Any]:
    out = {**settings.ini_defaults(config), "expect_hang": _expects_hang(item)}
    from pytest_mcpfaults._pytest.spans import recorder_for_test

    recorder = recorder_for_test(item)
    if recorder is not None:  # spans other processes export to the sidecar join the test's own
        out["span_recorder"] = recorder
    return out


@pytest.fixture
def mcp_sidecar(request: pytest.FixtureRequest, mcpfaults_fault: Any) -> Iterator[Sidecar]:
    """A started fake MCP sidecar on 127.0.0.1 (a ``pytest_mcpfaults.Sidecar``), stopped after the test.

    Configure it with ``@pytest.mark.mcp_sidecar(**kwargs)``; the keyword arguments are exactly those
    of ``Sidecar`` (``faults=[...]``, ``era='session'``, ``reply='sse'``, ``patience=2.0`` …). Its
    URLs: ``mcp_sidecar.mcp_url``, ``.health_url``; its journal: ``mcp_sidecar.journal``. A request
    held past its patience budget fails the test with a verdict unless the test expects the hang.
    """
    from pytest_mcpfaults.transports.server import Sidecar

    item = request.node
    kwargs = {**_defaults(request.config, item), **settings.marker_kwargs(item)}
    kwargs = cassettes.resolve(kwargs, cassettes.record_mode(request.config))
    if mcpfaults_fault is not None:  # this test's cell of @pytest.mark.mcpfaults_matrix: first in the plan
        kwargs["faults"] = [mcpfaults_fault, *kwargs.get("faults", ())]
    run = _explore_faults(item, kwargs)
    sidecar = Sidecar(**kwargs)
    sidecar.start()
    _attach(item, sidecar, "mcp_sidecar")
    yield sidecar
    _own_finalizer(item)
    if run is not None:  # what the harness left open once its fixtures were done (an explore oracle)
        item.stash.setdefault(LEFT_OPEN, []).extend(_left_open(sidecar))
    _check_sessions(item, sidecar)
    sidecar.stop()  # the teardown hook records it and re-raises its errors


def _explore_faults(item: pytest.Item, kwargs: dict[str, Any]) -> Any:
    """``item``'s explore run (``None`` outside a campaign); its faults aimed at the next server the
    test makes (the nth, as its step was on) go first in ``kwargs``' plan."""
    run = explore_run(item)
    if run is not None:
        kwargs["faults"] = [*faults_for_next(item, run), *kwargs.get("faults", ())]
    return run


#: Seconds an explore run's sidecar waits, after the test's fixtures are done, for the harness's
#: connections to close before it calls the ones still open left behind.
LEFT_OPEN_GRACE = 1.0


def _left_open(sidecar: Sidecar) -> list[str]:
    journal = sidecar.journal
    with contextlib.suppress(AssertionError):  # the ones still open are the finding
        journal.wait_for(lambda: not journal.open_connections(), LEFT_OPEN_GRACE, "connections to close")
    out = []
    for conn in journal.open_connections():
        labels = [r.label for r in journal.requests if r.conn_id == conn.id]
        out.append(f"connection {conn.id} from {conn.peer} ({', '.join(labels) or 'no request'})")
    return out


@pytest.fixture
def mcp_stdio_server(request: pytest.FixtureRequest) -> Iterator[StdioServer]:
    """A started stdio MCP server (a ``pytest_mcpfaults.StdioServer``) for the harness to spawn:
    give it ``mcp_stdio_server.command``, ``.args`` and ``.env``. Its plan, journal and runtime control
    (``kill()``, ``freeze()``, ``revive()``, ``inject()``, ``release()``) stay in the test process.

    Configure it with ``@pytest.mark.mcp_stdio(**kwargs)``, exactly the keyword arguments of
    ``StdioServer`` (``faults=[...]``, ``era=``, ``patience=``, ``expect_hang=`` …); the ini keys
    ``mcpfaults_patience`` and ``mcpfaults_tool_sets`` set its defaults. At teardown every child still
    alive is killed (SIGKILL), whatever the harness did; a client that waited on a child past the
    patience budget fails the test with a verdict naming what it waited on.
    """
    from pytest_mcpfaults.stdio.server import StdioServer

    item = request.node
    defaults = _defaults(request.config, item)
    kwargs = {k: v for k, v in defaults.items() if k in ("patience", "tool_sets", "expect_hang")}
    kwargs.update(settings.marker_kwargs(item, settings.STDIO_MARKER))
    run = _explore_faults(item, kwargs)
    server = StdioServer(**kwargs)
    server.start()
    _attach(item, server, "mcp_stdio_server")  # type: ignore[arg-type]  # read through a Sidecar's views
    yield server
    _own_finalizer(item)
    if run is not None:  # children the harness left running once its fixtures were done
        item.stash.setdefault(LEFT_OPEN, []).extend(_children_left(server))
    server.stop()


def _children_left(server: StdioServer) -> list[str]:
    deadline = time.monotonic() + LEFT_OPEN_GRACE
    while any(c.alive for c in server.children) and time.monotonic() < deadline:
        time.sleep(0.02)  # bounded: polls the server's own records of its children
    return [f"stdio child pid {c.pid} still running" for c in server.children if c.alive]


@pytest.fixture(scope="session")
def mcp_sidecar_factory(pytestconfig: pytest.Config) -> Iterator[SidecarFactory]:
    """A factory of started sidecars: ``mcp_sidecar_factory(**Sidecar kwargs)`` returns a started
    ``Sidecar``, also usable as a context manager. Every sidecar is stopped when the test that made
    it ends. Session-scoped on purpose, so it is safe inside a Hypothesis ``@given`` body::

        @given(plan=fault_plans())
        def test_teardown(mcp_sidecar_factory, plan):
            with mcp_sidecar_factory(faults=plan) as sidecar:
                ...

    Under explore (docs/explore.md), a run's fault goes to the sidecar its step was on: the nth the
    test makes (its own ``faults=`` stay after explore's).
    """
    from pytest_mcpfaults.transports.factory import SidecarFactory

    def on_start(sidecar: Sidecar) -> None:
        _attach(_CURRENT[-1] if _CURRENT else None, sidecar, "mcp_sidecar_factory")

    class _Factory(SidecarFactory):
        def __call__(self, **kwargs: Any) -> Sidecar:
            item = _CURRENT[-1] if _CURRENT else None
            defaults = _defaults(pytestconfig, item) if item is not None else {}
            if item is not None:
                _explore_faults(item, kwargs)
            mode = cassettes.record_mode(pytestconfig)
            return super().__call__(**cassettes.resolve({**defaults, **kwargs}, mode))

    factory = _Factory(on_start=on_start)
    yield factory
    item = _CURRENT[-1] if _CURRENT else None
    _own_finalizer(item)
    if item is not None:  # the last test of the run: its sidecars stop here, not in the teardown hook
        for sc in factory.sidecars:
            _check_sessions(item, sc)  # those still running (it skips the others)
    factory.stop_all()
