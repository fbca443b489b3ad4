"""Cancellation (the cancel phase): a client's cancellation linked to the request it names, and what it
does to it. Loop thread only; no I/O.

A ``notifications/cancelled`` names the latest request with its JSON-RPC id in the same transport
session and era. In the 2026-07-28 era closing a request's response stream cancels it too; in the
session era a closed connection does not (the spec says so).

What an accepted cancellation does is the fired fault's :attr:`~pytest_mcpfaults.faults.Fault.on_cancel`:
``'stop'`` (no fault, and every kind but two: the answer is abandoned, its handler cancelled, and, as
the spec says, no JSON-RPC response is sent: an event stream ending without an event; the mcp SDK's
server answers ``-32800`` in the session era instead, the sidecar does not, so that a late answer is
the fault's alone), ``'ignore'`` (``ignore_cancel``: answered in full) or ``'answer'``
(``answer_after_cancel``: its hold ends, answered in full). A request held by any other blocking fault
stays held: a stuck server does not read its cancellations.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import (
    CancellationRecord,
    CancelOutcome,
    CancelSeen,
    RequestRecord,
)
from pytest_mcpfaults.faults.kinds import CancelEffect
from pytest_mcpfaults.mcp.jsonrpc import EVENT_STREAM, McpRequest, Reply

_OUTCOME: dict[CancelEffect, CancelOutcome] = {"stop": "stopped", "ignore": "ignored", "answer": "answered"}


def unanswered() -> Reply:
    """The answer of a request stopped by its cancellation: an event stream that ends at once."""
    return Reply(200, None, {**EVENT_STREAM}, sse=True)


@dataclass(eq=False)
class _Flight:
    """A request whose answer is being made (or which is held): the future a cancellation sets, and
    the task making the answer (``stopping``: the task's cancel was ours)."""

    fault: F.Fault | None
    task: asyncio.Task[Any] | None = None
    stopping: bool = False
    cancelled: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Cancellations:
    """The requests a cancellation can still change, and the journal records of every cancellation."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._flights: dict[int, _Flight] = {}

    # -- what the client did ---------------------------------------------------------------------
    def link(self, rid: int, note: McpRequest) -> CancellationRecord:
        """Journal the ``notifications/cancelled`` of request ``rid``, linked to the request it names."""
        params = note.message.get("params") or {}
        names, reason = params.get("requestId"), params.get("reason")
        names = names if isinstance(names, (str, int, float)) else None
        reason = reason if isinstance(reason, str) else None
        at = self.journal.now()
        c = CancellationRecord(at, "notification", names, note.session_id, note.era, rid, reason)
        return self._record(c, self._named(rid, names, note.session_id, note.era))

    def stream_closed(self, rid: int) -> None:
        """The client closed the response stream of request ``rid`` before its answer was sent: in the
        2026-07-28 era that is how it cancels (a session-era request's close is not)."""
        rec = self.journal.request(rid)
        if rec.era != "stateless" or rec.rpc_id is None or rec.done:
            return
        self._record(
            CancellationRecord(self.journal.now(), "closed", rec.rpc_id, rec.session_id, rec.era), rec
        )
        self.heard(rid, named=rid)

    def _named(self, rid: int, names: object, session_id: str | None, era: str) -> RequestRecord | None:
        if names is None:
            return None
        for r in reversed(self.journal.requests):
            same_session = r.session_id == session_id and r.era == era
            same_id = r.rpc_id == names and type(r.rpc_id) is type(names)  # "1" is not 1
            if r.id != rid and same_session and same_id:
                return r
        return None

    def _record(self, c: CancellationRecord, named: RequestRecord | None) -> CancellationRecord:
        if named is not None:  # the request it names, and whether it was still in flight
            c = dataclasses.replace(
                c, cancels=named.id, since_sent=c.at - named.started_at, in_flight=not named.done
            )
        self.journal.cancellations.add(c)
        if named is not None and c.in_flight and named.cancel is None:
            self.journal.update_request(named.id, cancel=CancelSeen(c.at))
        return c

    # -- what the sidecar does -------------------------------------------------------------------
    def heard(self, rid: int, *, named: int | None = None) -> None:
        """The sidecar accepted the cancellation of request ``rid`` (a notification answered 202, or a
        closed stream: ``named`` is the request itself): the request it names, if in flight, gets its
        effect."""
        if named is None:
            cancels = [c for c in self.journal.cancellations if c.notification == rid]
            named = cancels[-1].cancels if cancels else None
        if named is None:
            return
        flight = self._flights.get(named)
        if flight is not None and not flight.cancelled.done():
            effect = "stop" if flight.fault is None else flight.fault.on_cancel
            self.journal.update_group(named, "cancel", outcome=_OUTCOME[effect])
            flight.cancelled.set_result(None)
            if flight.task is not None and effect == "stop":  # the answer is being made: stop it
                flight.stopping = True
                flight.task.cancel()

    def stopped_before(self, rid: int, fault: F.Fault | None) -> bool:
        """Whether request ``rid``, whose answer is made only now (a legacy message's reply, after its
        202), was already cancelled and is stopped; its outcome is recorded then."""
        rec = self.journal.request(rid)
        if rec.cancel is None or rec.cancel.outcome is not None:
            return False
        effect = "stop" if fault is None else fault.on_cancel
        self.journal.update_group(rid, "cancel", outcome=_OUTCOME[effect])
        return effect == "stop"

    def ran_on(self, rid: int, ended: bool) -> None:
        """Request ``rid`` was stopped while its sync tool handler ran on (``ran_on``), or that handler
        has now ended (``ran_until``)."""
        fields = {"ran_until": self.journal.now()} if ended else {"ran_on": True}
        self.journal.update_request(rid, **fields)

    def held_until_cancelled(self, rid: int, fault: F.Fault) -> asyncio.Future[None] | None:
        """The future a hold of request ``rid`` by ``fault`` also ends on (``None``: a cancellation
        does not end it). Call :meth:`landed` once the hold ended."""
        if fault.on_cancel != "answer":
            return None
        flight = self._flights[rid] = _Flight(fault)
        cancel = self.journal.request(rid).cancel
        if cancel is not None and cancel.outcome is not None:  # cancelled while its answer was made
            flight.cancelled.set_result(None)
        return flight.cancelled

    def landed(self, rid: int) -> None:
        """Request ``rid``'s hold ended: a cancellation no longer changes it (until :meth:`run`)."""
        self._flights.pop(rid, None)

    async def run(
        self, rid: int, info: McpRequest, fault: F.Fault | None, work: Coroutine[Any, Any, Reply | None]
    ) -> Reply | None:
        """Make the answer of request ``rid`` (``work``), unless the client cancels it first: then it
        is stopped (:func:`unanswered`), or made all the same (``ignore_cancel``, ``answer_after_cancel``)."""
        if info.is_notification or info.method is None or _inline():  # a notification, a response
            return await work
        task = asyncio.current_task()
        flight = self._flights[rid] = _Flight(fault, task)
        try:  # awaited in this task, not another: an answer made without suspending is made at once
            return await work
        except asyncio.CancelledError:
            if not flight.stopping:  # teardown, not the client's cancel
                raise
            if task is not None and hasattr(task, "uncancel"):  # 3.11+: the cancel was ours, handled
                task.uncancel()
            return unanswered()
        finally:
            self._flights.pop(rid, None)


def _inline() -> bool:
    """Whether no event loop runs this answer (the in-process backend's ``decide`` runs inline: no
    cancellation can arrive meanwhile)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False
