"""pytest glue for span capture: the ``mcp_spans`` fixture, the ini keys and the automatic span gate.

Top-level imports stay light (pytest and the per-test records). OpenTelemetry and
:mod:`pytest_mcpfaults.spans.recorder` are imported inside the hooks and the fixture, and only when spans
are asked for: a run that neither enables the gate nor uses ``mcp_spans`` never touches the global tracer
provider.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Generator, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest.records import explore_on, explore_run, forget, record_for, violation_key

if TYPE_CHECKING:
    from pytest_mcpfaults.spans.recorder import SpanRecorder
    from pytest_mcpfaults.spans.records import RecordedSpan

SESSION_INI = "mcpfaults_session_spans"
CLEANUP_INI = "mcpfaults_cleanup_spans"
FLIP_CLEANUP_INI = "mcpfaults_flip_cleanup_spans"
COUNT_CLEANUP_INI = "mcpfaults_count_cleanup_spans"
MAX_CLEANUPS_INI = "mcpfaults_max_cleanups"
CHECK_INI = "mcpfaults_check_spans"
CHECK_OPTION = "--mcpfaults-check-spans"
SPANS_MARKER = "mcpfaults_spans"


@dataclass(frozen=True)
class SpanSettings:
    """The validated span settings of a run, or of one test (its ``mcpfaults_spans`` marker applied).

    ``flip_cleanup`` and ``count_cleanup`` are the cleanup span names of ``cleanup_never_flips`` and
    ``cleanup_at_most``; ``None``: ``cleanup``'s."""

    check: bool
    session: tuple[str, ...]
    cleanup: tuple[str, ...]
    flip_cleanup: tuple[str, ...] | None = None
    count_cleanup: tuple[str, ...] | None = None
    max_cleanups: int = 1


#: The ``mcpfaults_spans`` marker's keywords: every setting but the gate switch.
MARKER_KWARGS: tuple[str, ...] = tuple(f.name for f in fields(SpanSettings) if f.name != "check")

_SETTINGS_KEY = pytest.StashKey[SpanSettings]()
_WATCH_KEY = pytest.StashKey[ExitStack]()
_STARTED_KEY = pytest.StashKey[bool]()
_KEPT_KEY = pytest.StashKey["list[RecordedSpan]"]()
_BUILT_KEY = pytest.StashKey["_BuiltAtCollection"]()
_SDK_TRACE = "opentelemetry.sdk.trace"


class _BuiltAtCollection:
    """The SDK ``TracerProvider``\\ s built while the test modules are imported, for explore turned on by
    its markers alone: it is known only once they are collected, and by then a provider a module built and
    never made global is reachable from nowhere (its tracer keeps only its span processor). Standard
    library only until the harness itself imports the SDK: a run that never does loads none of it."""

    def __init__(self) -> None:
        self.providers: list[Any] = []
        self._patched: tuple[Any, Any, Any] | None = None  # (class, its __init__, ours)
        if _SDK_TRACE in sys.modules:
            self._patch(sys.modules[_SDK_TRACE].TracerProvider)
        else:
            sys.meta_path.insert(0, self)

    def find_spec(self, name: str, path: Sequence[str] | None, target: object = None) -> Any:
        if name != _SDK_TRACE or self not in sys.meta_path:
            return None
        later = sys.meta_path[sys.meta_path.index(self) + 1 :]  # the finders it would have reached
        finds = (find(name, path, target) for f in later if (find := getattr(f, "find_spec", None)))
        spec = next(filter(None, finds), None)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                self._patch(module.TracerProvider)

            spec.loader.exec_module = exec_module
        return spec

    def _patch(self, cls: Any) -> None:
        original = cls.__init__

        @functools.wraps(original)  # its signature stays the SDK's
        def __init__(provider: Any, *args: Any, **kwargs: Any) -> None:
            original(provider, *args, **kwargs)
            if self._patched is not None and self._patched[2] is __init__:  # not once stop() ran: a
                self.providers.append(provider)  # wrapper put over ours keeps it in the chain for good

        cls.__init__ = __init__
        self._patched = (cls, original, __init__)

    def stop(self) -> list[Any]:
        """Stop remembering (the patch is undone if nothing patched over it since, else it only passes
        through); what was built."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if self._patched is not None:
            cls, original, ours = self._patched
            if cls.__init__ is ours:
                cls.__init__ = original
            self._patched = None
        built, self.providers = self.providers, []
        return built


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpfaults")
    group.addoption(
        CHECK_OPTION,
        action="store_true",
        default=None,
        dest="mcpfaults_check_spans",
        help="Check the span invariants after every test that recorded spans, and fail the test on a "
        f"violation (ini: {CHECK_INI}).",
    )
    parser.addini(
        CHECK_INI, type="bool", default=False, help=f"Turn the span gate on, as {CHECK_OPTION} does."
    )
    for key, default, text in (
        (SESSION_INI, "Agent.Session", "Span-name globs of session spans, one per line"),
        (CLEANUP_INI, "MCP.DeleteSession", "Span-name globs of cleanup spans, one per line"),
        (FLIP_CLEANUP_INI, None, "Cleanup span-name globs for cleanup_never_flips only"),
        (COUNT_CLEANUP_INI, None, "Cleanup span-name globs for cleanup_at_most only"),
    ):
        shown = default or f"{CLEANUP_INI}'s"
        parser.addini(
            key, f"{text} (default: {shown}).", type="linelist", default=[default] if default else []
        )
    parser.addini(
        MAX_CLEANUPS_INI,
        default="1",
        help="How many cleanup runs (teardowns) each session span may have: cleanup_at_most's n (default 1).",
    )


def _check_patterns(where: str, value: Any) -> tuple[str, ...]:
    """``value`` as span-name globs; a ``ValueError`` naming ``where`` otherwise."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"{where}: needs at least one span-name glob, got {value!r}")
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"{where}: blank span-name glob {item!r} in {value!r}")
    return tuple(item.strip() for item in items)


def _check_count(where: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: expected a whole number >= 0 (cleanup runs per session), got {value!r}")
    return value


#: Each setting but the gate switch: its ini key, its check, and the recorder attribute it sets.
_SETTINGS: dict[str, tuple[str, Callable[[str, Any], Any], str]] = {
    "max_cleanups": (MAX_CLEANUPS_INI, _check_count, "max_cleanups"),
    "session": (SESSION_INI, _check_patterns, "session_patterns"),
    "cleanup": (CLEANUP_INI, _check_patterns, "cleanup_patterns"),
    "flip_cleanup": (FLIP_CLEANUP_INI, _check_patterns, "flip_cleanup_patterns"),
    "count_cleanup": (COUNT_CLEANUP_INI, _check_patterns, "count_cleanup_patterns"),
}
_CLEANUP_OWN = ("flip_cleanup", "count_cleanup")  # not set (empty): cleanup's


def _read_settings(config: pytest.Config) -> SpanSettings:
    try:
        check = bool(config.getoption("mcpfaults_check_spans", default=None) or config.getini(CHECK_INI))
    except (ValueError, TypeError, pytest.UsageError) as exc:
        raise pytest.UsageError(f"{CHECK_INI}: expected a boolean (true/false), {exc}") from None
    ini = config.getini
    try:
        given = {
            name: validate(key, ini(key))
            for name, (key, validate, _) in _SETTINGS.items()
            if ini(key) or name not in _CLEANUP_OWN
        }
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    return SpanSettings(check=check, **given)


def _marker_overrides(node: pytest.Item) -> dict[str, Any]:
    """The validated keywords of ``node``'s ``mcpfaults_spans`` markers, the closest winning per
    keyword; a ``ValueError`` naming the test and the argument otherwise."""
    merged: dict[str, Any] = {}
    for marker in node.iter_markers(SPANS_MARKER):  # closest first
        where = f"{node.nodeid}: @pytest.mark.{SPANS_MARKER}"
        if marker.args:
            raise ValueError(
                f"{where} takes keyword arguments only ({', '.join(MARKER_KWARGS)}), got {marker.args!r}"
            )
        for key, value in marker.kwargs.items():
            if key not in MARKER_KWARGS:
                raise ValueError(
                    f"{where} got an unknown argument {key!r}; valid arguments: {', '.join(MARKER_KWARGS)}"
                )
            if key not in merged:
                merged[key] = _SETTINGS[key][1](f"{where}({key}=)", value)
    return merged


def item_settings(item: pytest.Item) -> SpanSettings:
    """The span settings of one test: the run's, with its ``mcpfaults_spans`` markers applied."""
    settings = settings_for(item.config)
    overrides = _marker_overrides(item)
    return replace(settings, **overrides) if overrides else settings


def settings_for(config: pytest.Config) -> SpanSettings:
    """The span settings of ``config`` (read and validated at configure time)."""
    settings = config.stash.get(_SETTINGS_KEY, None)
    if settings is None:
        settings = config.stash[_SETTINGS_KEY] = _read_settings(config)
    return settings


class _Early:
    """``config`` as its options stand while pytest loads its initial conftests: the command line's
    from the namespace parsed so far (``config.option`` is filled in only after), the ini's as read."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def getoption(self, name: str, default: Any = None) -> Any:
        return getattr(self._config.known_args_namespace, name, default)

    def getini(self, name: str) -> Any:
        return self._config.getini(name)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Under the gate or explore, start the run's provider watch (``pytest_configure``) before pytest
    imports its initial conftests (the root's, and ``tests/conftest.py`` beside it): a harness's
    provider built there is caught too. A bad setting is ``pytest_configure``'s to report."""
    early: Any = _Early(early_config)
    try:
        on = _read_settings(early).check or explore_on(early)
    except (pytest.UsageError, ValueError):
        return
    if on:
        _watch(early_config)


def _watch(config: pytest.Config) -> None:
    if _WATCH_KEY not in config.stash:
        from pytest_mcpfaults.spans.recorder import global_recorder

        stack = ExitStack()
        stack.enter_context(global_recorder().watch_providers())
        config.stash[_WATCH_KEY] = stack
        config.add_cleanup(functools.partial(_unwatch, config))


def _unwatch(config: pytest.Config) -> None:
    stack = config.stash.get(_WATCH_KEY, None)
    if stack is not None:
        stack.close()
        del config.stash[_WATCH_KEY]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{SPANS_MARKER}(**kwargs): this test's span settings for the gate and mcp_spans "
        f"({', '.join(MARKER_KWARGS)}); the ini keys' values otherwise.",
    )
    settings = settings_for(config)
    if settings.check or explore_on(config):
        # Watch provider creation for the whole run, so a harness that builds its TracerProvider at
        # import or collection time is caught too. The global provider is wired at each test's start.
        # Explore (from-trace's replays too) checks the span invariants of its runs whether or not the
        # gate is on, and from-trace matches the clean run's spans.
        _watch(config)
    else:  # explore's markers may turn it on for their tests: what the modules build is kept till then
        config.stash[_BUILT_KEY] = _BuiltAtCollection()


def pytest_collection_finish(session: pytest.Session) -> None:
    built = session.config.stash.get(_BUILT_KEY, None)
    providers = built.stop() if built is not None else []
    if providers and any(explore_run(item) is not None for item in session.items):
        from pytest_mcpfaults.spans.recorder import global_recorder

        for provider in providers:
            global_recorder().attach(provider)


def pytest_unconfigure(config: pytest.Config) -> None:
    built = config.stash.get(_BUILT_KEY, None)
    if built is not None:  # a collection that never finished
        built.stop()
    _unwatch(config)


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = config.stash.get(_SETTINGS_KEY, None)
    if settings is None or not settings.check:
        return None
    return (
        f"mcpfaults span gate: on (session spans: {', '.join(settings.session)}; "
        f"cleanup spans: {', '.join(settings.cleanup)})"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A bad ``mcpfaults_spans`` marker fails its module's collection, naming the argument."""
    try:
        _marker_overrides(metafunc.definition)
    except ValueError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None


def recorder_for_test(item: pytest.Item) -> SpanRecorder | None:
    """The recorder of ``item``'s spans when the test records spans (the gate is on, or it requests
    ``mcp_spans``), else ``None``: what a sidecar made for the test sends received spans to."""
    if (
        not settings_for(item.config).check
        and "mcp_spans" not in getattr(item, "fixturenames", ())
        and explore_run(item) is None
    ):
        return None
    from pytest_mcpfaults.spans.recorder import global_recorder

    return global_recorder()


def _start_test(item: pytest.Item, settings: SpanSettings) -> SpanRecorder:
    """Wire and configure the recorder; clear it the first time per test."""
    from pytest_mcpfaults.spans.recorder import install_recorder

    recorder = install_recorder()
    for name, (_, _, attr) in _SETTINGS.items():
        setattr(recorder, attr, getattr(settings, name))
    if not item.stash.get(_STARTED_KEY, False):
        recorder.clear()
        item.stash[_STARTED_KEY] = True
    return recorder


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    from pytest_mcpfaults.spans import (
        results as span_results,  # imports nothing: the span code stays unloaded
    )

    # Every invariant check made while this test runs (gate, mcp_spans, install_recorder().assert_*,
    # a recorder of its own) goes into its record.
    outer = span_results.running_sink()  # a pytester run inside a test: give the outer one back
    span_results.set_running_sink(record_for(item).add_invariants)
    # an explore run records its spans without the gate: providers made during it are watched too
    recorder = None
    if not settings_for(item.config).check and explore_run(item) is not None:
        from pytest_mcpfaults.spans.recorder import global_recorder

        recorder = global_recorder()
    try:
        with recorder.watch_providers() if recorder is not None else nullcontext():
            return (yield)
    finally:
        span_results.set_running_sink(outer)
        if recorder is not None:  # as mcp_spans does without the gate: nothing reads spans between tests
            recorder.recording = False
            recorder.clear()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    # each attempt starts empty (a rerun runs setup again, within the same protocol call), and reads
    # no spans an earlier attempt kept
    item.stash[_STARTED_KEY] = False
    forget(item, _KEPT_KEY)
    settings = settings_for(item.config)
    if settings.check or explore_run(item) is not None:
        _start_test(item, item_settings(item))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    if not settings_for(item.config).check:
        return (yield)
    mark = _start_test(item, item_settings(item)).mark()
    try:
        result = yield
    except Exception as exc:
        # The test failed on its own: keep its error, record the invariants, add them as a note.
        text = record_invariants(item, mark, gate=True, raised=exc)
        if text is not None:  # PEP 678 notes; set by hand before Python 3.11 (pytest shows them)
            notes: list[str] = getattr(exc, "__notes__", [])
            setattr(exc, "__notes__", [*notes, _GATE + text])  # noqa: B010  (typeshed has it only from 3.11)
        raise
    text = record_invariants(item, mark, gate=True)
    if text is not None:
        pytest.fail(_GATE + text, pytrace=False)
    return result


@pytest.fixture
def mcp_spans(request: pytest.FixtureRequest) -> Generator[SpanRecorder, None, None]:
    """Record the OpenTelemetry spans of this test; yields a ``pytest_mcpfaults.SpanRecorder``.

    Wires the recorder into the global tracer provider (installing an SDK provider if none is set),
    starts the test with an empty recording, and, until the test ends, adds the recorder to every SDK
    ``TracerProvider`` constructed and to every provider passed to ``trace.set_tracer_provider``.
    Providers built before this fixture started are caught only if global or ``attach``-ed.

    Query with ``mcp_spans.find("MCP.*")``, ``mcp_spans.one("Agent.Session")``, ``mcp_spans.tree()``;
    assert with ``mcp_spans.assert_cleanup_never_flips()``, ``assert_cleanup_at_most(1)``,
    ``assert_all_spans_ended()`` or ``assert_invariants()``. Span names default to the
    ``mcpfaults_session_spans`` / ``mcpfaults_cleanup_spans`` ini keys.
    """
    item = request.node
    settings = item_settings(item)
    recorder = _start_test(item, settings)
    try:
        with recorder.watch_providers():
            yield recorder
    finally:
        if not settings.check:
            # Without the gate nothing reads spans between tests: stop keeping them, but for session
            # hygiene, which reads the test's spans once its sidecars' fixtures are done.
            item.stash[_KEPT_KEY] = recorder.spans()
            recorder.recording = False
            recorder.clear()


def spans_of_test(item: pytest.Item) -> list[RecordedSpan] | None:
    """The spans ``item`` recorded so far (those ``mcp_spans`` kept when it was torn down), or
    ``None`` when it records none."""
    kept = item.stash.get(_KEPT_KEY, None)
    if kept is not None:
        return kept
    recorder = recorder_for_test(item)
    return None if recorder is None else recorder.spans()


def span_mark(item: pytest.Item) -> int | None:
    """Where ``item``'s call phase starts in its span recording, ``None`` when it records no spans."""
    recorder = recorder_for_test(item)
    return None if recorder is None else recorder.mark()


_GATE = f"mcpfaults span gate ({CHECK_OPTION}): "


def record_invariants(
    item: pytest.Item, mark: int, gate: bool = False, raised: BaseException | None = None
) -> str | None:
    """Check the span gate's invariants over ``item``'s spans (its ``mcpfaults_spans`` markers apply)
    and record the results in its record, without failing it; the violations as the gate prints them
    (each invariant's message, then the span tree), ``None`` when none. Explore's span oracle calls it
    whether or not the gate is on (the gate, when on, has recorded them already); for the ``gate``, a
    violation the test's own ``assert_*`` call already raised (``raised``) is recorded once and not
    repeated in the text."""
    from pytest_mcpfaults import invariants
    from pytest_mcpfaults.spans.recorder import global_recorder

    settings = item_settings(item)
    recorder = global_recorder()
    spans = recorder.spans()
    # Spans started by fixtures during setup may legitimately stay open until teardown: only spans
    # started during the call phase must have ended by its end.
    must_end = recorder.spans(since=mark) if spans else []
    names, found = invariants.gate_violations(
        spans,
        settings.session,
        settings.cleanup,
        must_end,
        flip_cleanup=settings.flip_cleanup,
        count_cleanup=settings.count_cleanup,
        max_cleanups=settings.max_cleanups,
    )
    if names and (gate or not settings.check):
        record_for(item).add_invariants(names, found)
    if isinstance(raised, invariants.SpanInvariantError):
        shown = {violation_key(v) for v in raised.violations}
        found = [v for v in found if violation_key(v) not in shown]
    return invariants.format_violations(found, spans) if found else None
