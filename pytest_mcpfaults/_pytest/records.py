"""Per-test record shared by the fixtures, the span gate and the CI report.

Every part of the plugin that learns something about a test (a sidecar it used, a fault that fired,
an invariant checked or violated, a patience violation) writes it into the test's :class:`TestRecord`,
kept in the item's stash. The report module reads these records; nothing else needs to know who wrote
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["MATRIX_FIXTURE", "InvariantResult", "TestRecord", "matrix_fault", "record_for"]

#: The fixture carrying a fault-matrix cell's fault (its parameter).
MATRIX_FIXTURE = "mcpfaults_fault"


@dataclass
class InvariantResult:
    """One invariant checked for a test: its name, whether it held, and the message when it did not."""

    name: str
    ok: bool
    message: str = ""


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

    def add_fired(self, kind: str, count: int = 1) -> None:
        self.fired[kind] = self.fired.get(kind, 0) + count

    @property
    def used(self) -> bool:
        """Whether the plugin took part in this test at all (report and summary skip tests it did not)."""
        return bool(self.sidecars or self.invariants or self.fired or self.patience_violations)


_RECORD_KEY = pytest.StashKey[TestRecord]()


def record_for(item: pytest.Item) -> TestRecord:
    """The record of ``item``, created on first use."""
    rec = item.stash.get(_RECORD_KEY, None)
    if rec is None:
        rec = TestRecord(nodeid=item.nodeid)
        item.stash[_RECORD_KEY] = rec
    return rec


def matrix_fault(item: pytest.Item) -> str | None:
    """The text form of ``item``'s fault-matrix fault, ``None`` outside a matrix."""
    callspec = getattr(item, "callspec", None)
    fault = callspec.params.get(MATRIX_FIXTURE) if callspec is not None else None
    return str(fault) if fault is not None else None
