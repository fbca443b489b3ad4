"""Shared helpers for the plugin's own tests.

The project's addopts carry ``-p no:mcpfaults``: fixtures and hooks are tested only through
``pytester`` with ``-p mcpfaults``, the way users load the plugin. Library code (``Sidecar``,
faults, spans) is used directly.
"""

from __future__ import annotations

import gc
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis.internal.observability  # noqa: F401  (imported once: in-process pytester runs reuse it)
import opentelemetry.sdk.trace  # noqa: F401  (once, as opentelemetry.trace is: the global provider an explore run sets stays an SDK one for later in-process runs)
import pytest
from areas import area_of, is_slow, module_walls
from contribution import Contribution, shared_contribution
from mcp1_client import Mcp1Client
from no_ca import without_ca_bundle
from shared_pycache import shared_pycache, warm_for_workers

from pytest_mcpfaults import Sidecar

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from pytest_mcpfaults.spans import SpanRecorder

#: The pytest-xdist workers the whole suite runs on (the README's test command, ``pytest`` with no
#: arguments): the machine it is timed on has two cores, and most tests wait on sockets, subprocesses or
#: fault budgets, so more workers than cores fill the waits (measured on a quiet machine, fresh clone: two
#: workers 5 min 4 s with 1.75 cores busy, three 4 min 43 s with 1.88; on 2026-12-06, 1949 tests,
#: three 369 s with 1.50 cores busy and a failure, four 341 s with 1.71; later that day, 2066 tests,
#: four 256 s with 1.53 cores busy, five 236 s with 1.72: benchmarks/suite_time.py; on 2026-12-06 on a
#: slower machine, where that same tree took 270 s with five, 2087 tests: five 278 s with 1.72 cores
#: busy, six 254 s with 1.85).
SUITE_WORKERS = 6


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own (tryfirst too; a conftest registers later)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite runs on :data:`SUITE_WORKERS` xdist workers with ``--dist loadscope``: a module's
    tests (a class's, for tests in a class) run on one worker, so a module fixture (the example
    suite's four example runs, above all) is made once. (``--dist loadgroup`` would be finer, but with
    pytest 9.2 pytest-xdist 3.8 cannot rename a test to its group: ``xdist_group`` is silently ignored.)

    Only when pytest runs the ``testpaths`` (no file or test named): a file or test named on the
    command line runs in one process as before, ``-n``/``--dist``/``--pdb`` choose for themselves, and
    the README's main job (``pytest -p mcpfaults examples/``, which reads the same ``addopts``) is not
    distributed, so its output stays what docs/catching-the-flip.md pastes. (Not in ``addopts`` for
    that reason.)
    """
    if (
        config.args_source is not pytest.Config.ArgsSource.TESTPATHS
        or hasattr(config, "workerinput")  # an xdist worker: it runs what the controller sends it
        or not config.pluginmanager.hasplugin("xdist")
        or config.option.numprocesses is not None
        or config.option.dist != "no"
        or config.getoption("usepdb", False)
    ):
        return
    config.option.numprocesses = SUITE_WORKERS
    config.option.dist = "loadscope"
    # In collection order, not largest module first (xdist's default): the example suite (12 tests,
    # its module fixture the longest single wait of the suite) would otherwise start last, alone. The
    # workers order their collection longest modules first (_longest_modules_first).
    config.option.loadscopereorder = False
    # The workers share a bytecode cache, filled before they start (tests/shared_pycache.py).
    warm_for_workers(config.rootpath)


def _mcp_is_1x() -> bool:
    import mcp.client.streamable_http as streamable_http

    return hasattr(streamable_http, "streamablehttp_client")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``tests/test_*_mcp1.py`` need the mcp 1.x client: where the installed mcp is 2.x they are not
    collected (rather than skipped), because ``test_mcp1_env`` runs each of them with mcp 1.x from the
    overlay (it checks that tox's ``mcp1`` list names every one). A file named on the command line is
    collected all the same (and then skips itself, saying why)."""
    if collection_path.parent == Path(__file__).parent and re.fullmatch(
        r"test_\w+_mcp1\.py", collection_path.name
    ):
        return None if _mcp_is_1x() else True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test of this directory gets its module's area marker and, if slow, ``slow`` (tests/areas.py
    maps modules to areas; CONTRIBUTING.md shows ``-m``). A module with no area is a usage error."""
    here = Path(__file__).parent
    for item in items:
        path = Path(item.path)
        if path.parent != here:
            continue  # a pytester run's own files
        area = area_of(path.stem)
        if area is None:
            raise pytest.UsageError(f"{path.name} has no area: add it to AREAS in tests/areas.py")
        item.add_marker(area)
        if is_slow(path.stem, getattr(item, "originalname", item.name)):
            item.add_marker("slow")
    if hasattr(config, "workerinput"):  # an xdist worker (its ``dist`` option reads "no")
        _longest_modules_first(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the process holds once the suite is collected (every module the tests import, the plugins,
    the items: about a million objects in a worker) lives to its end, so it is moved out of the garbage
    collector's sight (``gc.freeze``): each full collection then walks only what the tests made since.
    Measured on five files in one process: 2.55 s of collecting, 2.09 s of it in the 24 full
    collections, against 1.27 s frozen. Objects a test makes are collected as before."""
    gc.freeze()


def _longest_modules_first(items: list[pytest.Item]) -> None:
    """Under xdist (the whole suite: ``--dist loadscope``) the modules are sent longest first, by their
    measured wall (tests/areas.py's ``DURATIONS``), each keeping its tests' order: xdist deals modules
    to the workers in this order (``loadscopereorder`` off, :func:`pytest_cmdline_main`), so the long
    ones (the example runs, Node, the patience waits) start at once and the short ones fill the
    workers' ends. In collection order, a 15 s module dealt last held one worker 10 s after the others
    were done. A module not measured yet goes first if it holds a slow test, else last. Every xdist
    worker orders its collection alike (the controller checks that)."""
    walls = module_walls()
    slow = {Path(item.path).stem for item in items if item.get_closest_marker("slow") is not None}

    def wall(item: pytest.Item) -> float:
        stem = Path(item.path).stem
        return walls.get(stem, math.inf if stem in slow else 0.0)

    items.sort(key=lambda item: -wall(item))  # stable: a module's tests keep their order


@pytest.fixture(scope="session", autouse=True)
def _clients_load_no_ca_bundle() -> Iterator[None]:
    """Loopback HTTP only: no client here loads a CA bundle (tests/no_ca.py says why and what not)."""
    yield from without_ca_bundle()


@pytest.fixture(scope="session", autouse=True)
def _children_share_a_bytecode_cache(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Under PYTHONDONTWRITEBYTECODE, child Pythons share one pyc cache (tests/shared_pycache.py)."""
    yield from shared_pycache(pytestconfig, tmp_path_factory)


@pytest.fixture
def sidecar() -> Iterator[Sidecar]:
    """A default sidecar, used as a library (not through the plugin's fixture)."""
    with Sidecar() as sc:
        yield sc


@pytest.fixture
def recorder() -> SpanRecorder:
    """A fresh span recorder (not the process-wide one)."""
    from pytest_mcpfaults.spans import SpanRecorder

    return SpanRecorder()


@pytest.fixture
def tracer(recorder: SpanRecorder) -> Iterator[Tracer]:
    """A tracer whose spans go to ``recorder`` (its provider shut down after the test)."""
    from opentelemetry.sdk.trace import TracerProvider

    provider = recorder.attach(TracerProvider(shutdown_on_exit=False))
    yield provider.get_tracer("tests")
    provider.shutdown()


@pytest.fixture
def run_plugin(pytester: pytest.Pytester):  # type: ignore[no-untyped-def]
    """Run pytest in-process on the pytester dir with the plugin loaded as users load it."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest(
            "-p",
            "mcpfaults",
            "-p",
            "no:cacheprovider",
            *args,
        )

    return run


@pytest.fixture(autouse=True)
def _pytester_runs_as_off_ci(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs print the same wherever the suite runs: with ``CI`` or ``BUILD_NUMBER`` set
    pytest stops truncating its short summary, which repeats each failure's message once more. And
    every inner run, in-process or not, sets pytest-asyncio's loop scope as the project's ini does
    (a run on a pytester folder of its own would warn that it is unset), and ignores the warning that a
    plugin module cannot be assertion-rewritten: in-process runs share ``sys.modules``, so a module a
    test imported directly (say ``_pytest.records``) was imported already, which only this harness
    causes (whether it warns depends on what ran before on the worker)."""
    if "pytester" in request.fixturenames:
        for var in ("CI", "BUILD_NUMBER"):
            monkeypatch.delenv(var, raising=False)
        request.getfixturevalue("pytester")  # first: it clears PYTEST_ADDOPTS when made
        addopts = os.environ.get("PYTEST_ADDOPTS", "")
        inner = "-o asyncio_default_fixture_loop_scope=function -W ignore::pytest.PytestAssertRewriteWarning"
        monkeypatch.setenv("PYTEST_ADDOPTS", f"{inner} {addopts}".strip())


#: What a pytester subprocess run loads besides what it names with ``-p``: the plugins the project's
#: test settings rely on. Everything else installed (Hypothesis' plugin above all, which imports
#: Hypothesis: seconds per run on a loaded machine) stays out unless the run asks for it (``-p xdist``,
#: ``-p anyio``, ``-p respx``, ``-p hypothesispytest``).
PYTESTER_PLUGINS = "-p asyncio -p timeout"


@pytest.fixture(autouse=True)
def _pytester_subprocesses_load_only_the_plugins_they_need(request: pytest.FixtureRequest) -> None:
    """``pytester.runpytest_subprocess`` runs start with plugin autoload off (as
    ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` does), loading :data:`PYTESTER_PLUGINS`; ``-p NAME`` loads an
    installed plugin by its entry-point name then (pytest >= 8.4; older pytest keeps autoload).
    In-process runs keep their plugins (they are imported already)."""
    if "pytester" not in request.fixturenames or tuple(map(int, pytest.__version__.split(".")[:2])) < (8, 4):
        return
    pytester: pytest.Pytester = request.getfixturevalue("pytester")
    popen = pytester.popen

    def popen_with_few_plugins(*args: Any, **kwargs: Any) -> Any:
        saved = {k: os.environ.get(k) for k in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS")}
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        os.environ["PYTEST_ADDOPTS"] = f"{PYTESTER_PLUGINS} {saved['PYTEST_ADDOPTS'] or ''}".strip()
        try:
            return popen(*args, **kwargs)  # it copies os.environ for the child
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    pytester.popen = popen_with_few_plugins  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def mcp1_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory holding the mcp 1.x client for a child Python's ``PYTHONPATH`` (``mcp1_overlay``),
    installed once for all xdist workers."""
    from mcp1_overlay import shared_mcp1

    return str(shared_mcp1(tmp_path_factory))


@pytest.fixture(scope="session")
def contribution(tmp_path_factory: pytest.TempPathFactory) -> Contribution:
    """A copy of the repository with a made-up option and a made-up fault kind added as a contributor
    would, each counted apart, and its docs site built (tests/contribution.py): made once for all
    xdist workers, read by tests/test_options.py and tests/test_add_kind.py."""
    return shared_contribution(tmp_path_factory)


@pytest.fixture
def mcp1_client(mcp1_path: str) -> Mcp1Client:
    """Calls made with the mcp 1.x client, in a child Python (``mcp1_client.Mcp1Client``): a kind's own
    test measures docs/faults.md's mcp 1.x column with it (``tests/test_faults_doc.py`` accepts it)."""
    return Mcp1Client(mcp1_path)
