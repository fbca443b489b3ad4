"""What a transport holds open: the requests a fault holds, and the streams kept open until teardown.
One :class:`Holds` serves the socket listener (all its connections) and each stdio child."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import BudgetSource, Held, HoldOutcome, RequestRecord


def patience_of(
    fault: object, server: float | None, expect_hang: bool = False
) -> tuple[float | None, BudgetSource, bool]:
    """The patience of a hold, on the socket and on stdio alike: the budget (the fault's own
    ``patience=``, else the server's; ``None``: unbounded), where it came from, and whether the test
    expects the hang (the fault's or the server's ``expect_hang``)."""
    own = getattr(fault, "patience", None)
    expected = bool(expect_hang or getattr(fault, "expect_hang", False))
    return own or server, "fault" if own is not None else "sidecar", expected


class Holds:
    """The held requests and open streams of one transport. Loop thread only."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.held: set[asyncio.Future[HoldOutcome]] = set()
        self.streams: set[asyncio.Future[None]] = set()

    async def hold(
        self,
        rid: int,
        budget: float | None,
        ends: Mapping[asyncio.Future[Any], HoldOutcome],
        *,
        records_close: bool = False,
    ) -> tuple[HoldOutcome, RequestRecord, float]:
        """Hold request ``rid`` until :meth:`end`, the first of ``ends`` (the outcome it names), or
        ``budget`` seconds (``'patience'``; ``None``: unbounded), journaled; ``records_close``: a
        transport without connections of its own records the client's close here. Returns the outcome,
        the record and the journal time the hold started."""
        release: asyncio.Future[HoldOutcome] = asyncio.get_running_loop().create_future()
        self.held.add(release)
        started = self.journal.now()
        self.journal.update_request(rid, held=Held(started))
        try:
            await asyncio.wait((release, *ends), timeout=budget, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.held.discard(release)
        ended = (outcome for end, outcome in ends.items() if end.done())
        outcome: HoldOutcome = release.result() if release.done() else next(ended, "patience")
        rec, now = self.journal.request(rid), self.journal.now()
        if outcome == "client_closed" and rec.hold == "client_closed":  # the connection's close wrote it
            return outcome, rec, started
        fields: dict[str, Any] = {"held": Held(started, outcome, now - started)}
        if outcome == "client_closed" and records_close:
            fields["client_closed"], fields["client_closed_at"] = True, now
        return outcome, self.journal.update_request(rid, **fields), started

    def end(self, outcome: HoldOutcome) -> None:
        """End every hold with ``outcome`` (``'released'``, or ``'teardown'``: see :meth:`teardown`)."""
        for release in list(self.held):
            if not release.done():
                release.set_result(outcome)

    @contextlib.contextmanager
    def stream(self) -> Iterator[asyncio.Future[None]]:
        """While open: a future done at :meth:`teardown`, for a long-lived stream to end on."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.streams.add(done)
        try:
            yield done
        finally:
            self.streams.discard(done)

    def teardown(self) -> None:
        """End every hold (``'teardown'``) and every open stream."""
        self.end("teardown")
        for done in self.streams:
            if not done.done():
                done.set_result(None)
