"""Per-test record shared by the fixtures, the span gate and the CI report: every part of the plugin
that learns something about a test writes it into the test's :class:`TestRecord` (in the item's stash),
and the report reads it without knowing who wrote it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_mcpfaults.invariants import Violation


#: The fixture carrying a fault-matrix cell's fault (its parameter).
MATRIX_FIXTURE = "mcpfaults_fault"
#: The parameter carrying an explore run (:class:`pytest_mcpfaults.explore.plan.Run`) of a campaign item.
EXPLORE_PARAM = "mcpfaults_explore"
#: Explore's switch: its flag's dest (``--mcpfaults-explore``) and its ini key.
EXPLORE_SWITCH = "mcpfaults_explore"
#: The dest of from-trace's option (``--mcpfaults-from-trace``), which turns explore on too: its campaign
#: is the trace's replay.
FROM_TRACE_DEST = "mcpfaults_from_trace"
#: Extra sections of the JSON report (name -> a function giving its content, ``None``: left out),
#: kept in the config's stash by the parts of the plugin that have one (explore).
REPORT_SECTIONS = pytest.StashKey[dict[str, Any]]()
#: What an explore run (an item's stash) found, empty when nothing: its violations are explore's findings,
#: gated by root cause, not by node id (the report's baseline gate leaves them out), and the report
#: counts each run as one violation, as explore does.
GATED_BY_FINDINGS = pytest.StashKey[list[str]]()
#: Every server (sidecar, stdio server) a test used, in order, with the fixture that made it
#: (``mcp_sidecar``, ``mcp_sidecar_factory``, ``mcp_stdio_server``); kept after teardown stops them.
SERVERS = pytest.StashKey[list[tuple[Any, str]]]()
#: The connections an explore run's sidecars still had open when the test's fixtures were done
#: (one description each).
LEFT_OPEN = pytest.StashKey[list[str]]()
#: The session hygiene verdicts of a test's sidecars (``verdicts/hygiene.py``), one text per sidecar,
#: found when the test's fixtures were done.
SESSION_PROBLEMS = pytest.StashKey[list[str]]()
#: The harness processes the test started (``mcp_harness_process``): one the plugin killed owed no
#: ``DELETE`` for the sessions it had open.
HARNESSES = pytest.StashKey[list[Any]]()


@dataclass
class InvariantResult:
    """One invariant checked for a test: its name, whether it held, the message when it did not, and
    ``violations``, one message per distinct violation (per span at fault)."""

    name: str
    ok: bool
    message: str = ""
    violations: list[str] = field(default_factory=list)


def violation_key(violation: Violation) -> Hashable:
    """What makes two violations the same one: the invariant and the span at fault (its identity: the
    recorder's ``uid``, or its ids for a snapshot built by hand; ``None`` when no span is at fault)."""
    span = violation.span
    return (violation.invariant, None if span is None else (span.uid, span.trace_id, span.span_id))


@dataclass
class TestRecord:
    """What the plugin observed during one test. Mutable while the test runs; read by the report."""

    __test__ = False  # not a test class, despite the name

    nodeid: str
    sidecars: list[dict[str, Any]] = field(default_factory=list)
    plans: list[list[str]] = field(default_factory=list)
    fired: dict[str, int] = field(default_factory=dict)
    invariants: list[InvariantResult] = field(default_factory=list)
    patience_violations: list[dict[str, Any]] = field(default_factory=list)
    expected_hang: bool = False

    def __post_init__(self) -> None:
        self._seen: set[Hashable] = set()  # violation_key of every violation recorded (not serialized)

    def add_invariants(self, names: Sequence[str], violations: Sequence[Violation]) -> None:
        """Record that the invariants ``names`` were checked and what they found.

        One result per invariant per test, however often it is checked (by the test's ``assert_*``
        calls and by the span gate): each violation counts once per test, invariant and span, and an
        invariant that failed once stays failed."""
        for name in names:
            result = next((r for r in self.invariants if r.name == name), None)
            if result is None:
                result = InvariantResult(name, True)
                self.invariants.append(result)
            for v in violations:
                key = violation_key(v)
                if v.invariant != name or key in self._seen:
                    continue
                self._seen.add(key)
                result.violations.append(v.message)
            result.ok = not result.violations
            result.message = "\n".join(dict.fromkeys(result.violations))

    def forget(self) -> None:
        """Forget what an earlier attempt of the test observed (see :func:`pytest_runtest_setup`)."""
        self.__dict__.update(TestRecord(self.nodeid).__dict__)

    @property
    def used(self) -> bool:
        """Whether the plugin took part in this test at all (report and summary skip tests it did not)."""
        return bool(self.sidecars or self.invariants or self.fired or self.patience_violations)


_RECORD_KEY = pytest.StashKey[TestRecord]()


def record_for(item: pytest.Item) -> TestRecord:
    """The record of ``item``, created on first use."""
    return item.stash.setdefault(_RECORD_KEY, TestRecord(nodeid=item.nodeid))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each attempt of a test starts from nothing: pytest-rerunfailures runs a failed test's protocol
    again within one ``pytest_runtest_protocol`` call, and the report keeps the last attempt's outcome,
    so the record keeps only what that attempt observed (in place: the span glue's sink holds it)."""
    if _RECORD_KEY in item.stash:
        item.stash[_RECORD_KEY].forget()
    forget(item, SERVERS, LEFT_OPEN, SESSION_PROBLEMS, HARNESSES)


def forget(item: pytest.Item, *keys: pytest.StashKey[Any]) -> None:
    """Drop ``keys`` from ``item``'s stash: what one attempt of the test kept, at the next one's setup."""
    for key in keys:
        if key in item.stash:
            del item.stash[key]


def matrix_fault(item: pytest.Item) -> str | None:
    """The text form of ``item``'s fault-matrix fault, ``None`` outside a matrix."""
    callspec = getattr(item, "callspec", None)
    fault = callspec.params.get(MATRIX_FIXTURE) if callspec is not None else None
    return str(fault) if fault is not None else None


def explore_run(item: pytest.Item) -> Any:
    """``item``'s explore run (a :class:`pytest_mcpfaults.explore.plan.Run`), ``None`` outside a campaign."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(EXPLORE_PARAM) if callspec is not None else None


def explore_on(config: pytest.Config) -> bool:
    """Whether explore is on for every test it selects: its flag, its ini key (set), or from-trace's
    option; ``False`` when explore's glue is not registered (a plugin of its own left it out). Its
    markers turn it on for their tests only, at collection."""
    try:
        ini = str(config.getini(EXPLORE_SWITCH)).strip()
    except ValueError:  # the explore glue is not registered
        return False
    return bool(
        ini
        or config.getoption(EXPLORE_SWITCH, default=False)
        or config.getoption(FROM_TRACE_DEST, default=None)
    )


def faults_for_next(item: pytest.Item, run: Any) -> tuple[Any, ...]:
    """``run``'s faults aimed at the next server ``item``'s test makes (the nth, as its step was on)."""
    return run.faults_on(len(item.stash.get(SERVERS, [])) + 1)  # type: ignore[no-any-return]


def server_made(item: pytest.Item, server: Any, maker: str) -> None:
    """``server`` joins ``item``'s :data:`SERVERS`, made by the fixture ``maker``."""
    item.stash.setdefault(SERVERS, []).append((server, maker))
