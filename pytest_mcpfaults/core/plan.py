"""A sidecar's plan, the same on every backend (each checks faults its own way, then adds them here);
lock-protected: ``inject()`` and ``clear_faults()`` act from the test's thread while another answers."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.routing import PlanEntry, RequestInfo, pick


class Plan:
    """``entries``: the faults aimed at requests; ``events``: those aimed at a stdio child's events
    (``ignore_eof``, ``ignore_sigterm``)."""

    def __init__(self, faults: Sequence[F.Fault], journal: Journal) -> None:
        self.entries: list[PlanEntry] = []
        self.events: list[PlanEntry] = []
        self._faults: list[F.Fault] = []
        self._journal = journal
        self._lock = threading.Lock()
        self.add(faults)

    @property
    def faults(self) -> tuple[F.Fault, ...]:
        """Every fault planned so far (constructor and ``inject()``), in order."""
        return tuple(self._faults)

    def add(self, faults: Sequence[F.Fault]) -> None:
        with self._lock:
            self._faults.extend(faults)
            self.entries.extend((f, F.TriggerState(f.trigger)) for f in faults if not f.event)
            self.events.extend((f, F.TriggerState(f.trigger)) for f in faults if f.event)

    def clear(self) -> None:
        """Forget every planned fault (held requests stay held)."""
        with self._lock:
            self._faults.clear()
            self.entries.clear()
            self.events.clear()

    def choose(self, info: RequestInfo, rid: int) -> tuple[F.Fault | None, F.TriggerState | None]:
        """The fault that fires on request ``rid`` (journaled and counted), or none."""
        if not self.entries:  # no plan (most requests of most tests): nothing to match
            return None, None
        with self._lock:
            fault, state = pick(self.entries, info)
        if fault is not None:
            text = str(fault)
            self._journal.update_request(rid, fault=text, fault_kind=fault.kind)
            self._journal.add_fired(fault.kind, rid, text, getattr(fault, "expect_hang", False))
        return fault, state
