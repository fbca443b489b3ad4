"""What the test process observed of its stdio children: one :class:`ChildRecord` per spawned child, and
the :class:`StdioViolation` a patience budget records when a client waited on a child too long.

Times are seconds since the server started (the journal's clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_mcpfaults.core.records import BudgetSource, RequestRecord
from pytest_mcpfaults.verdicts.violation import hang_record

ViolationKind = Literal["close", "hold", "frozen"]
"""What the client waited on: a child kept alive past its stdin closing or a signal (``'close'``), a
request held by a fault (``'hold'``), a child stopped by ``freeze()`` with input waiting (``'frozen'``)."""


@dataclass(frozen=True)
class SignalRecord:
    """A signal that reached the child, or that the test sent it.

    ``action``: ``'ignored'`` (an ``ignore_sigterm`` fault), ``'died'`` (the child died of it),
    ``'sent'`` (the test sent it: ``freeze()``/``revive()``/``kill()``, or the patience kill)."""

    name: str
    at: float
    action: Literal["ignored", "died", "sent"]


@dataclass(frozen=True)
class CancelRecord:
    """A ``notifications/cancelled`` the client sent the child: the journal id of the request it named
    (``request``), when it arrived, and its ``reason`` (``None`` when it gave none)."""

    request: int
    at: float
    reason: str | None = None


@dataclass(frozen=True)
class ChildRecord:
    """One stdio child, from its first contact to its exit.

    ``stdin_closed_at``: when the child read end of file on stdin (``None``: it never did);
    ``ignored_eof``: an ``ignore_eof`` fault kept it running then. ``exit_how`` says how it ended:
    ``'stdin closed'`` (a clean exit on EOF), ``'signal SIGTERM'`` (it died of a signal it received),
    ``'die fault'`` (a ``die`` fault made it exit with ``exit_code``), ``'killed'`` (it vanished
    without a word: SIGKILL from the client, or any end it could not report), ``'patience'`` (the
    test process killed it when a budget ran out), ``'kill()'`` (the test's ``kill()``), ``'teardown'``
    (still running when the test ended: the test process killed it), or ``'stdout closed by the
    client'``. ``exit_code`` follows ``subprocess`` (negative: the signal that ended it), when known.
    ``cancels``: the requests the client cancelled (``notifications/cancelled``), in order.
    """

    id: int
    pid: int
    started_at: float
    stdin_closed_at: float | None = None
    ignored_eof: bool = False
    signals: tuple[SignalRecord, ...] = ()
    stopped: bool = False
    exited_at: float | None = None
    exit_how: str | None = None
    exit_code: int | None = None
    session_id: str | None = field(default=None, repr=False)
    cancels: tuple[CancelRecord, ...] = ()

    @property
    def alive(self) -> bool:
        return self.exited_at is None

    def received(self, name: str) -> tuple[SignalRecord, ...]:
        """The signals named ``name`` the child received (not those the test sent)."""
        return tuple(s for s in self.signals if s.name == name and s.action != "sent")

    def describe(self) -> str:
        """One line: pid, when stdin closed, the signals, how and when it exited."""
        bits = [f"pid {self.pid}, started at {self.started_at:.3f} s"]
        if self.stdin_closed_at is not None:
            bits.append(
                f"stdin closed at {self.stdin_closed_at:.3f} s" + (" (ignored)" if self.ignored_eof else "")
            )
        for s in self.signals:
            bits.append(f"{s.name} {'sent by the test' if s.action == 'sent' else s.action} at {s.at:.3f} s")
        if self.exited_at is not None:
            code = f", status {self.exit_code}" if self.exit_code is not None else ""
            bits.append(f"exited at {self.exited_at:.3f} s ({self.exit_how}{code})")
        else:
            bits.append("still running")
        return "; ".join(bits)

    def waits(self, since: float) -> str:
        """What the client did to end the child after ``since``: the signals it sent and when."""
        got = [s for s in self.signals if s.action != "sent" and s.at >= since - 1e-9]
        if not got:
            return "it never sent SIGTERM"
        parts = []
        for s in got:
            how = ", which the child ignores" if s.action == "ignored" else ""
            parts.append(f"sent {s.name} after {s.at - since:.2f} s{how}")
        tail = "" if any(s.action == "died" for s in got) else " and never SIGKILL"
        return "it " + ", then ".join(parts) + tail


@dataclass(frozen=True)
class StdioViolation:
    """A client waited on a stdio child past its patience budget; the test process then killed the
    child (SIGKILL: the client sees its stdout close at once, as if the server had crashed).

    ``kind`` says what the client waited on (:data:`ViolationKind`); ``child`` is the child as it was
    when the budget ran out, ``request`` the held request (``kind='hold'``), ``fault`` the text form of
    the fault responsible, ``waited_from`` when the wait began; ``expected`` as for HTTP. ``later``:
    the requests the client sent the child after the wait began (the journal's records when the budget
    ran out; cancellations are in ``child.cancels``)."""

    kind: ViolationKind
    child: ChildRecord
    fault: str
    budget: float
    expected: bool
    waited_from: float
    request: RequestRecord | None = None
    budget_from: BudgetSource = "sidecar"
    pending_bytes: int = 0
    later: tuple[RequestRecord, ...] = ()

    @property
    def waited(self) -> float:
        return self.budget

    def describe(self) -> str:
        """The headline: what the client waited on, for how long, and what it did meanwhile."""
        b = f"{self.budget:g} s"
        c = self.child
        if self.kind == "close":
            if (
                c.stdin_closed_at is not None
                and c.ignored_eof
                and c.stdin_closed_at <= self.waited_from + 1e-9
            ):
                start, what = "closed stdin", "a child that ignores EOF"
            else:
                first = next((s.name for s in c.signals if s.action == "ignored"), "a signal")
                start, what = f"sent {first}", "a child that ignores it (ignore_sigterm)"
            return (
                f"the client {start} and waited {b} (the whole budget) for {what}; "
                f"{c.waits(self.waited_from)}"
            )
        if self.kind == "frozen":
            closed = " and closed stdin" if c.stdin_closed_at is not None or self.pending_bytes < 0 else ""
            sent = f"sent {self.pending_bytes} bytes to" if self.pending_bytes > 0 else "waited on"
            return (
                f"the client {sent} a frozen child (SIGSTOP, never revived){closed} and waited {b} "
                f"(the whole budget); {c.waits(self.waited_from)}"
            )
        r = self.request
        assert r is not None
        req = f"`{r.mcp_method or '?'}{' ' + r.tool if r.tool else ''}`"
        cancel = self.cancel
        if cancel is None and not self.later:
            # Nothing on record but the wait: the client sent this child nothing more.
            if r.fault_kind == "freeze":
                held = f"{req}, held by a child that stopped itself (SIGSTOP) on it"
            elif r.bytes_sent:
                held = f"the reply to {req}, which stopped after {r.bytes_sent} bytes of its line"
            else:
                held = f"a hung {req} (no byte of its reply was written)"
            return (
                f"the client waited {b} (the whole budget) on {held}, and neither closed stdin nor ended "
                f"the child; {c.waits(self.waited_from)}"
            )
        if r.fault_kind == "freeze":
            held = f"{req} was held {b} (the whole budget) by a child that stopped itself (SIGSTOP) on it"
        elif r.bytes_sent:
            written = f"with {r.bytes_sent} bytes of its line written"
            held = f"the reply to {req} was held {b} (the whole budget) {written}"
        else:
            held = f"{req} was held {b} (the whole budget) before any byte of its reply"
        return (
            f"{held}; meanwhile the client {' and '.join(self._meanwhile(cancel))}, but neither closed "
            f"stdin nor ended the child; {c.waits(self.waited_from)}"
        )

    def _meanwhile(self, cancel: CancelRecord | None) -> list[str]:
        """What the client did while the request was held: cancelled it, sent more requests."""
        did: list[str] = []
        if cancel is not None:
            why = f": {cancel.reason!r}" if cancel.reason else ""
            did.append(
                f"cancelled it after {cancel.at - self.waited_from:.2f} s (notifications/cancelled{why})"
            )
        if self.later:
            n = len(self.later)
            listed = ", ".join(
                f"`{x.mcp_method or x.method}{' ' + x.tool if x.tool else ''}` after "
                f"{x.started_at - self.waited_from:.2f} s"
                for x in self.later[:3]
            )
            more = f", and {n - 3} more" if n > 3 else ""
            did.append(f"sent {n} more request{'s' if n != 1 else ''} on this child ({listed}{more})")
        return did

    @property
    def cancel(self) -> CancelRecord | None:
        """The client's cancellation of the held request, if it sent one before the budget ran out."""
        r = self.request
        if r is None:
            return None
        return next((x for x in self.child.cancels if x.request == r.id), None)

    @property
    def moved_on(self) -> bool:
        """Whether the client, by the record, gave up on the held request or went on using the child
        (it cancelled the request, or sent the child more requests) rather than wait for it."""
        return self.cancel is not None or bool(self.later)

    def details(self) -> str:
        source = "its fault's patience=" if self.budget_from == "fault" else "the server's patience"
        return (
            f"`{self.fault}` kept the child (pid {self.child.pid}) alive; when the {self.budget:g} s budget "
            f"({source}) ran out the test process killed it (SIGKILL)"
        )

    def record(self, *, expected: bool, where: str) -> dict[str, Any]:
        """A JSON-ready dict for the per-test record and the CI report."""
        r = self.request
        record = hang_record(
            self.describe(), self.details(), self.fault, self.budget, self.waited, r, r, where
        )
        return record | {
            "budget_from": self.budget_from,
            "request": r.label if r is not None else f"stdio child {self.kind}",
            "answered": "partial" if r is not None and r.bytes_sent else "none",
            "connection": self.child.id,
            "client_closed": False,
            "expected": expected,
            "transport": "stdio",
        }
