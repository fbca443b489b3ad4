"""Where every invariant check's result goes while a test runs, whoever made the check.

The pytest glue points :func:`set_running_sink` at the running test's record for the whole of its run
(setup, call, teardown); every :class:`~pytest_mcpfaults.spans.recorder.SpanRecorder`'s ``assert_*`` methods
call :func:`running_sink` (besides the recorder's own sinks), so a check through ``install_recorder()``,
a recorder built by hand or the ``mcp_spans`` fixture lands in the test's record alike, with the span
gate on or off. Nothing here imports anything: the glue sets the sink for every test without loading
the span code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_mcpfaults.invariants import Violation

__all__ = ["ViolationSink", "running_sink", "set_running_sink"]

ViolationSink = Callable[[Sequence[str], Sequence["Violation"]], None]
"""``sink(invariant_names, violations)``: the invariants one check ran and the violations it found."""

_SINK: list[ViolationSink] = []  # the running test's sink (one at most), process-wide: any thread


def set_running_sink(sink: ViolationSink | None) -> None:
    """Send every invariant check's result to ``sink`` from now on (``None``: nowhere)."""
    _SINK[:] = [] if sink is None else [sink]


def running_sink() -> ViolationSink | None:
    """The sink :func:`set_running_sink` set, if any."""
    return _SINK[0] if _SINK else None
