"""The child phase: what a child fault has the stdio child write on its pipes before it answers, as
the control messages the stdio server sends the child. Pure: no I/O."""

from __future__ import annotations

from functools import singledispatch
from typing import Any

from pytest_mcpfaults import faults as F


@singledispatch
def pipe_writes(fault: F.Fault | None) -> tuple[dict[str, Any], ...]:
    """The control messages (``t='out'``: write ``d`` on stdout; ``t='err'``: ``n`` bytes of log
    lines on stderr) the child gets before the answer to the request ``fault`` fired on: one function
    per child kind, registered with ``@pipe_writes.register``."""
    return ()


@pipe_writes.register
def _stdout_noise(fault: F.StdoutNoise) -> tuple[dict[str, Any], ...]:
    return ({"t": "out", "d": "".join(fault.text + "\n" for _ in range(fault.lines))},)


@pipe_writes.register
def _stderr_flood(fault: F.StderrFlood) -> tuple[dict[str, Any], ...]:
    return ({"t": "err", "n": fault.bytes},)
