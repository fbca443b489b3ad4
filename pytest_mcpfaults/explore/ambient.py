"""The plan around a test's own servers: a context variable the explore glue sets for each run, which
a server the test makes itself (the in-process ``mock_sidecar``) asks for its faults and tells of its
journal. Standard library only; a context variable, so the test's thread and its asyncio tasks see it,
a thread it starts does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hand:
    """What a server a test makes itself asks of the run around it: ``faults_for_next()``, the faults
    aimed at the next server the test makes (none: ``()``), and ``made(server, maker)``, that ``maker``
    (``'mock_sidecar'``) made ``server``, whose journal joins the run's footprint."""

    faults_for_next: Callable[[], Sequence[Any]]
    made: Callable[[Any, str], None]


#: The hand of the explore run in progress in this context (``HAND.get()``), ``None`` outside one.
HAND: ContextVar[Hand | None] = ContextVar("pytest_mcpfaults_hand", default=None)
