"""The sidecar's journal: the loop thread writes, any thread reads frozen snapshots, or waits for a
condition without sleeping."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from pytest_mcpfaults.core import events
from pytest_mcpfaults.core.records import (
    GROUPS,
    CancellationRecord,
    ConnectionRecord,
    FiredRecord,
    RecordLog,
    RequestRecord,
    ServerMessageLog,
    StreamRecord,
)
from pytest_mcpfaults.options.validation import is_count, is_finite_number
from pytest_mcpfaults.verdicts.violation import PatienceViolation


class Journal:
    """Thread-safe store of what a sidecar saw: requests, connections and the logs beside them.

    Unbounded by default (a test's assertions read the whole journal). With a limit (:meth:`set_limit`,
    ``serve --journal-limit``) it is a ring: beyond ``limit`` requests the oldest *finished* ones are
    dropped and counted in :attr:`dropped_requests` (and the oldest *closed* connections in
    :attr:`dropped_connections`); one in flight never is, so the journal may exceed the limit by those.
    A request's id is its arrival number, never reused.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._requests: RecordLog[RequestRecord] = RecordLog(self._cond, lambda r: r.done)
        self._conns: RecordLog[ConnectionRecord] = RecordLog(self._cond, lambda c: not c.open)
        #: What the sidecar sent clients on its own (server requests and notifications).
        self.server_messages = ServerMessageLog(self._cond, self.now)
        #: Every held request that outlived its patience budget (:class:`PatienceViolation`).
        self.violations: RecordLog[PatienceViolation] = RecordLog(self._cond)
        #: Every cancellation the client sent (:class:`CancellationRecord`).
        self.cancellations: RecordLog[CancellationRecord] = RecordLog(self._cond)
        #: Every event stream the sidecar closed gracefully for the client to resume (:class:`StreamRecord`).
        self.streams: RecordLog[StreamRecord] = RecordLog(self._cond)
        self._fired: dict[str, int] = {}
        self._last_fired: FiredRecord | None = None
        self._last_request_at: float | None = None
        self.limit: int | None = None
        self.dropped_requests = 0
        self.dropped_connections = 0
        self.t0 = time.monotonic()
        events.notify("sidecar")

    def set_limit(self, limit: int | None) -> None:
        """Keep at most ``limit`` requests, connections and server messages (``None``: keep everything)."""
        if limit is not None and not is_count(limit, minimum=1):
            raise ValueError(f"Journal: limit must be a positive integer or None, got {limit!r}")
        with self._cond:
            self.limit = self._requests.limit = self._conns.limit = self.server_messages.limit = limit
            self._trim()

    def _trim(self) -> None:
        """Each log's oldest settled records beyond the limit dropped and counted (lock held): at every
        add, of whichever log, as a record may have settled since its own log's last add."""
        self.dropped_requests += self._requests.trim()
        self.dropped_connections += self._conns.trim()
        self.server_messages.dropped += self.server_messages.trim()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def epoch(self) -> float:
        """This journal's zero on the wall clock (seconds since the epoch), the clock spans are on."""
        return time.time() - (time.monotonic() - self.t0)

    # -- writers (loop thread) ---------------------------------------------------------------
    def add_request(self, **fields: Any) -> int:
        """A new request; counted on its connection (``conn_id``) when that is in the journal."""
        with self._cond:
            started = self._last_request_at = self.now()
            conn = self._conns.get(fields.get("conn_id", -1))
            if conn is not None:
                self._conns.update(conn.id, {"requests": conn.requests + 1})
            rid = self._requests.make(lambda rid: RequestRecord(id=rid, started_at=started, **fields))
            self._trim()
            return rid

    def update_request(self, rid: int, **fields: Any) -> RequestRecord:
        """Write fields of request ``rid`` (a group as a whole: ``held=Held(at=t)``)."""
        return self._requests.update(rid, fields)

    def update_group(self, rid: int, group: str, **fields: Any) -> RequestRecord:
        """Write some fields of request ``rid``'s group ``group`` (:data:`~.records.GROUPS`), making it
        if the record has none yet."""
        if group not in GROUPS:
            raise TypeError(f"RequestRecord has no group {group!r}; its groups: {', '.join(GROUPS)}")
        with self._cond:
            old = getattr(self._requests[rid], group)
            new = GROUPS[group](**fields) if old is None else dataclasses.replace(old, **fields)
            return self.update_request(rid, **{group: new})  # the lock is reentrant: one write

    def end_request(self, rid: int, **fields: Any) -> RequestRecord:
        """Record the request's last fields and, unless already recorded (a relayed body's end is, as it
        is sent), that it ended now: one write, one wake-up of the readers."""
        with self._cond:
            if self._requests[rid].ended_at is None:
                fields["ended_at"] = self.now()
            return self.update_request(rid, **fields)

    def request(self, rid: int) -> RequestRecord:
        return self._requests[rid]

    def add_connection(self, peer: str) -> int:
        with self._cond:
            cid = self._conns.make(lambda cid: ConnectionRecord(id=cid, peer=peer, opened_at=self.now()))
            self._trim()
            return cid

    def update_connection(self, cid: int, **fields: Any) -> None:
        self._conns.update(cid, fields)

    def add_fired(
        self, kind: str, request_id: int | None = None, what: str | None = None, expect_hang: bool = False
    ) -> None:
        """Count a fault of ``kind`` that fired (on request ``request_id``, or by the runtime call
        ``what``); the latest is kept (:attr:`last_activity`)."""
        with self._cond:
            self._fired[kind] = self._fired.get(kind, 0) + 1
            fired = FiredRecord(self.now(), kind, request_id, what, self._requests.next, expect_hang)
            self._last_fired = fired
        events.notify("fired", kind)

    # -- readers (any thread) ----------------------------------------------------------------
    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        return self._requests.records

    def requests_since(self, since: int, limit: int | None = None) -> tuple[RequestRecord, ...]:
        """The kept requests with ``id >= since``, oldest first, at most ``limit`` of them."""
        return self._requests.since(since, limit)

    @property
    def total_requests(self) -> int:
        """How many requests the sidecar has seen, dropped ones included (the next request's id)."""
        return self._requests.next

    @property
    def connections(self) -> tuple[ConnectionRecord, ...]:
        return self._conns.records

    @property
    def fired(self) -> dict[str, int]:
        """How often each fault kind fired, by kind name."""
        with self._cond:
            return dict(self._fired)

    @property
    def last_activity(self) -> tuple[FiredRecord | None, float | None]:
        """The latest fault that fired and when the latest request arrived, read together; each ``None``
        before the first."""
        with self._cond:
            return self._last_fired, self._last_request_at

    def sequence(self) -> list[str]:
        """The requests as labels, e.g. ``['POST initialize', 'POST notifications/initialized', ...]``."""
        return [r.label for r in self.requests]

    def open_connections(self) -> tuple[ConnectionRecord, ...]:
        return tuple(c for c in self.connections if c.open)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.requests)

    def __len__(self) -> int:
        return len(self._requests)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Block until ``predicate()`` is true (re-checked on every journal change) or fail after
        ``timeout`` seconds with an ``AssertionError`` that says ``what`` was awaited."""
        if not is_finite_number(timeout):  # NaN never passes a deadline: it would wait for ever
            raise ValueError(
                f"timeout must be a finite number of seconds, got {timeout!r} (waiting for {what})"
            )
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(timed_out(self, timeout, what))
                self._cond.wait(min(left, 0.05))

    def format(self, requests: list[RequestRecord] | None = None) -> str:
        """A readable excerpt: one line per request, with connection, status, fault and hold."""
        lines = []
        for r in requests if requests is not None else list(self.requests):
            bits = [
                f"#{r.id:<3} conn#{r.conn_id:<3} {r.label:<40}",
                f"status={r.status}",
                f"bytes={r.bytes_sent}",
            ]
            if (up := r.upstream) is not None:
                leg = f"upstream={up.status}/{up.bytes}B"
                if up.time is not None:
                    leg += f"/{up.time * 1000:.1f}ms"
                if up.failure:
                    leg += f" upstream_failure={up.failure}"
                bits.append(leg)
            if r.auth is not None:  # error as auth_error: a bare error= would read as the request's
                seen = vars(r.auth).items()
                bits.append(" ".join(f"{'auth_' * (k == 'error')}{k}={v}" for k, v in seen if v))
            if r.fault:
                bits.append(f"fault={r.fault}")
            if (h := r.held) is not None:
                bits.append(
                    f"hold={h.outcome} waited={h.waited:.3f}s" if h.waited is not None else "hold=active"
                )
            if (c := r.cancel) is not None:
                bits.append(f"cancelled at {c.at:.3f}s ({c.outcome or 'too late to stop'})")
            if r.ran_on:
                ran = f"ran on until {r.ran_until:.3f}s" if r.ran_until is not None else "still runs"
                bits.append(f"its sync handler {ran} (its result is not sent)")
            if r.client_closed:
                bits.append(f"client closed at {r.client_closed_at:.3f}s")
            lines.append("  ".join(bits))
        return "\n".join(lines)


#: How many of the latest requests a timed-out :meth:`Journal.wait_for` shows.
WAIT_EXCERPT = 20


def timed_out(journal: Journal, timeout: float, what: str) -> str:
    """The message of a :meth:`Journal.wait_for` that timed out: what was awaited, then, as a patience
    verdict shows it, what the sidecar saw instead (the latest request and how long before the deadline,
    the faults fired, the connections open, the latest requests)."""
    requests = journal.requests
    head = f"timed out after {timeout} s waiting for {what}"
    if not requests:
        return f"{head}: no request reached the sidecar in that time"
    last = requests[-1]
    ago = journal.now() - (last.ended_at if last.ended_at is not None else last.started_at)
    fired = ", ".join(f"`{k}` x{n}" for k, n in journal.fired.items()) or "none"
    conns = ", ".join(f"#{c.id}" for c in journal.open_connections()) or "none"
    shown = list(requests[-WAIT_EXCERPT:])
    return "\n".join(
        [
            f"{head}: the sidecar saw {journal.total_requests} request(s), the latest "
            f"`{last.label}` (#{last.id}) {ago:.3f} s before the deadline",
            f"   faults fired: {fired}",
            f"   open connections: {conns}",
            f"   the journal's latest {len(shown)}:",
            *("      " + line for line in journal.format(shown).splitlines()),
        ]
    )
