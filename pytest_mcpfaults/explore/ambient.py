"""The plan around a test's own servers: a context variable the pytest plugin sets for each explore
run (docs/explore.md), read by :func:`pytest_mcpfaults.inprocess.mock_sidecar` when the test opens one.

A server the test makes itself, with no fixture in between (the in-process ``mock_sidecar``), asks the
:class:`Hand` for the faults aimed at it (:meth:`Hand.faults_for_next`) and tells it of the server once
made (:meth:`Hand.made`), so the run's footprint includes its journal. Outside an explore run there is
no hand and nothing changes. Standard library only; a context variable, so the test's own thread and the
asyncio tasks it starts see it, a thread it starts does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["HAND", "Hand"]


class Hand(Protocol):
    """What a server a test makes itself asks of the run around it."""

    def faults_for_next(self) -> Sequence[Any]:
        """The faults aimed at the next server the test makes (``Fault`` objects; none: ``()``)."""
        ...

    def made(self, server: Any, maker: str) -> None:
        """``server`` was made by ``maker`` (``'mock_sidecar'``): its journal joins the run's footprint."""
        ...


#: The hand of the explore run in progress in this context (``HAND.get()``), ``None`` outside one.
HAND: ContextVar[Hand | None] = ContextVar("pytest_mcpfaults_hand", default=None)
