"""The patience verdicts of a stdio server's children: when a client waited on one past its budget
(:class:`StdioVerdicts`), and the text a test fails with (:func:`verdict_text`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Protocol

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.stdio.procfs import stdin_state
from pytest_mcpfaults.stdio.records import ChildRecord, StdioViolation, ViolationKind

__all__ = ["StdioVerdicts", "Watched", "describe_child", "verdict_text"]

_FROZEN_POLL = 0.05


class Watched(Protocol):
    """What a verdict reads of a child and does to it (a
    :class:`~pytest_mcpfaults.stdio.child_link.ChildLink`)."""

    pid: int
    record: ChildRecord
    close_timer: asyncio.TimerHandle | None

    def kill(self, how: str) -> None: ...


class StdioVerdicts:
    """The patience violations of one stdio server's children (loop thread; read under ``cond``)."""

    def __init__(
        self, journal: Journal, cond: threading.Condition, patience: float | None, expect_hang: bool
    ) -> None:
        self.journal, self.cond, self.patience, self.expect_hang = journal, cond, patience, expect_hang
        self.violations: list[StdioViolation] = []

    def violate(
        self,
        kind: ViolationKind,
        child: Watched,
        fault: str,
        budget: float,
        since: float,
        *,
        rid: int | None = None,
        own: bool = False,
        expected: bool = False,
        pending: int = 0,
    ) -> None:
        later = tuple(
            r
            for r in self.journal.requests
            if r.conn_id == child.record.id
            and r.id != rid
            and r.started_at >= since
            and r.mcp_method != "notifications/cancelled"
        )
        v = StdioViolation(
            kind,
            child.record,
            fault,
            budget,
            bool(self.expect_hang or expected),
            since,
            request=self.journal.request(rid) if rid is not None else None,
            budget_from="fault" if own else "sidecar",
            pending_bytes=pending,
            later=later if kind == "hold" else (),
        )
        with self.cond:
            self.violations.append(v)
            self.cond.notify_all()

    def arm_close(self, child: Watched, fault: F.Fault, since: float) -> None:
        """A fault keeps the child alive past a request to end it: the client may wait ``patience``."""
        if self.patience is None or child.close_timer is not None:
            return
        loop = asyncio.get_running_loop()
        child.close_timer = loop.call_later(self.patience, self.close_expired, child, fault, since)

    def close_expired(self, child: Watched, fault: F.Fault, since: float) -> None:
        if not child.record.alive:
            return
        assert self.patience is not None
        self.violate("close", child, str(fault), self.patience, since)
        child.kill("patience")

    async def watch_frozen(self, child: Watched, budget: float) -> None:
        """While ``child`` is stopped by ``freeze()``: once the client has input waiting in its stdin
        (or has closed it) for ``budget`` seconds, record a violation and kill the child."""
        since: float | None = None
        while child.record.alive and child.record.stopped:
            pending, closed = stdin_state(child.pid)
            now = self.journal.now()
            if pending or closed:
                since = now if since is None else since
                if now - since >= budget:
                    self.violate(
                        "frozen", child, "freeze()", budget, since, pending=pending if pending else -1
                    )
                    child.kill("patience")
                    return
            else:
                since = None
            await asyncio.sleep(_FROZEN_POLL)


def verdict_text(url: str, journal: Journal, violations: Sequence[StdioViolation]) -> str:
    """Per violation: the headline (:meth:`StdioViolation.describe`), what the test process did, the
    child's record and journal; then how to bound the client or declare the wait expected."""
    n = len(violations)
    lines = [f"{n} wait{'s' if n != 1 else ''} on a stdio child outlived the patience budget ({url}):"]
    for i, v in enumerate(violations, 1):
        expected = " (expected by the test)" if v.expected else ""
        lines += ["", f"{i}. {v.describe()}", f"   {v.details()}{expected}"]
        lines.append(f"   child: {describe_child(v.child)}")
        lines.append(f"   journal of the child (pid {v.child.pid}):")
        related = [r for r in journal.requests if r.conn_id == v.child.id][-12:]
        lines.extend("     " + line for line in journal.format(related).splitlines())
    if all(v.moved_on for v in violations):
        fix = (
            "The client gave up on the request but kept using the child, which still held it: after a "
            "timed-out call on a stdio server, end the child (close stdin, then SIGTERM, then SIGKILL, each "
            "after a short wait) and start a new one"
        )
    else:
        fix = (
            "Bound the client: end the child yourself when it does not exit (close stdin, then SIGTERM, "
            "then SIGKILL, each after a short wait), put a timeout on the request"
        )
    lines += [
        "",
        f"{fix}; or, if the test expects the wait, say so: @pytest.mark.mcp_expect_hang, "
        "@pytest.mark.mcp_stdio(expect_hang=True) or StdioServer(expect_hang=True).",
    ]
    return "\n".join(lines)


def describe_child(c: ChildRecord) -> str:
    """One line: pid, when stdin closed, the signals, how and when it exited."""
    bits = [f"pid {c.pid}, started at {c.started_at:.3f} s"]
    if c.stdin_closed_at is not None:
        bits.append(f"stdin closed at {c.stdin_closed_at:.3f} s" + (" (ignored)" if c.ignored_eof else ""))
    for s in c.signals:
        bits.append(f"{s.name} {'sent by the test' if s.action == 'sent' else s.action} at {s.at:.3f} s")
    if c.exited_at is not None:
        code = f", status {c.exit_code}" if c.exit_code is not None else ""
        bits.append(f"exited at {c.exited_at:.3f} s ({c.exit_how}{code})")
    else:
        bits.append("still running")
    return "; ".join(bits)
