"""The plan around a test's own servers: a context variable the explore glue sets for each run, which
a server the test makes itself (the in-process ``mock_sidecar``) asks for its faults and tells of its
journal. Standard library only; a context variable, so the test's thread and its asyncio tasks see it,
a thread it starts does not.
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
