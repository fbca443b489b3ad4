"""The connection phase: what a connection fault does to a request before its answer, as data
(:data:`Effect`) that the core and the stdio server run with their own transport. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from functools import singledispatch

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.routing import jitter


@dataclass(frozen=True)
class Dying:
    """The process dies on this request; ``restart``: it comes back at once on the same port."""

    restart: bool


@dataclass(frozen=True)
class Holding:
    """The request is held until release, teardown or patience; ``freezes``: every later one too;
    ``after``: once its answer is made, before it is sent (``answer_after_cancel``); ``silent``: its
    connection goes silent meanwhile, nothing more read from it or written to it (``blackhole``)."""

    freezes: bool = False
    after: bool = False
    silent: bool = False


@dataclass(frozen=True)
class Pausing:
    """The answer comes ``seconds`` late: before the request is handled, or ``after`` it was made."""

    seconds: float
    after: bool = False


@dataclass(frozen=True)
class Notifying:
    """Before the answer, ``count`` notifications on the request's answer stream (progress when the
    request carries a token, else log messages), ``interval`` seconds apart; then, if ``holds``, the
    request is held (until release, teardown or patience)."""

    count: int
    interval: float = 0.0
    holds: bool = False


Effect = Dying | Holding | Pausing | Notifying


@singledispatch
def effect_of(fault: F.Fault, fired: int = 0) -> Effect | None:
    """What ``fault``, on its ``fired``-th firing, does before the request is answered (``None``: a
    fault of another phase). One function per connection kind, registered with
    ``@effect_of.register`` and taking ``(fault, fired=0)``."""
    return None


@effect_of.register
def _die(fault: F.Die, fired: int = 0) -> Effect | None:
    return Dying(fault.restart)


@effect_of.register
def _freeze(fault: F.Freeze, fired: int = 0) -> Effect | None:
    return Holding(freezes=True)


@effect_of.register
def _hang(fault: F.Hang, fired: int = 0) -> Effect | None:
    return Holding()


@effect_of.register
def _blackhole(fault: F.Blackhole, fired: int = 0) -> Effect | None:
    return Holding(silent=True)


@effect_of.register
def _delay(fault: F.Delay, fired: int = 0) -> Effect | None:
    return Pausing(fault.seconds + jitter(fault, fired), fault.after)  # the nth firing, the nth jitter


@effect_of.register
def _progress_then_stall(fault: F.ProgressThenStall, fired: int = 0) -> Effect | None:
    return Notifying(fault.count, fault.interval, holds=True)


@effect_of.register
def _flood(fault: F.NotificationFlood, fired: int = 0) -> Effect | None:
    return Notifying(fault.count)


@effect_of.register
def _answer_after_cancel(fault: F.AnswerAfterCancel, fired: int = 0) -> Effect | None:
    return Holding(after=True)  # the answer made, held until the client cancels (core/cancellation.py)
