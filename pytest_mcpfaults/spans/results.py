"""Where every invariant check's result goes while a test runs, whoever made the check (the gate,
``mcp_spans``, a recorder built by hand): the pytest glue points :func:`set_running_sink` at the
running test's record. Nothing here imports anything, so the glue sets it without loading span code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_mcpfaults.invariants import Violation

ViolationSink = Callable[[Sequence[str], Sequence["Violation"]], None]
"""``sink(invariant_names, violations)``: the invariants one check ran and the violations it found."""

_SINK: list[ViolationSink] = []  # the running test's sink (one at most), process-wide: any thread


def set_running_sink(sink: ViolationSink | None) -> None:
    """Send every invariant check's result to ``sink`` from now on (``None``: nowhere)."""
    _SINK[:] = [] if sink is None else [sink]


def running_sink() -> ViolationSink | None:
    """The sink :func:`set_running_sink` set, if any."""
    return _SINK[0] if _SINK else None
