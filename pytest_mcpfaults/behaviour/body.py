"""The body phase: how a body fault shapes the bytes of a reply, sans-IO.

Each body kind's :class:`Shape` is said once (:func:`shape_of`); a :class:`BodyShaper` turns it into
steps for a body fed chunk by chunk, and every adapter runs the steps with its own I/O, so a body
fault behaves the same wherever it acts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import singledispatch
from typing import AnyStr, Literal

from pytest_mcpfaults import faults as F


@dataclass(frozen=True)
class Write:
    """Write ``data`` to the client (``b""``: send the status line and headers now)."""

    data: bytes


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` before the next step."""

    seconds: float


@dataclass(frozen=True)
class Hold:
    """Hold the request until it is released (the rest of the body follows then)."""


@dataclass(frozen=True)
class Cut:
    """End the connection here: ``'fin'`` closes it cleanly, ``'rst'`` resets it. No step follows."""

    how: Literal["fin", "rst"]


Step = Write | Sleep | Hold | Cut


@dataclass(frozen=True)
class Shape:
    """What a body fault does to a body (the default: nothing).

    ``ending`` acts once ``cut`` bytes are sent (``cut=None``: at the end of the body); ``drip`` is
    ``(chunk_bytes, interval)``; ``halves``: the body is cut in half (its length announced right);
    ``open_stream``: the answer is an event stream that stays open at its end; ``resumable``:
    ``(after_events, retry_ms)``, the answer is an event stream with event ids that ends gracefully after
    ``after_events`` events and a ``retry`` field, the rest kept for a ``GET`` with ``Last-Event-ID``
    (:mod:`pytest_mcpfaults.core.resumption`).
    """

    cut: int | None = None
    ending: Hold | Cut | None = None
    drip: tuple[int, float] | None = None
    halves: bool = False
    open_stream: bool = False
    resumable: tuple[int, int] | None = None

    @property
    def streams(self) -> bool:
        """Whether the body is written piece by piece (a cut, an end that acts, or a drip)."""
        return self.ending is not None or self.drip is not None

    @property
    def resets_at_once(self) -> bool:
        """Whether the connection is reset before the status line (``reset`` after 0 bytes)."""
        return self.cut == 0 and self.ending == _RST


#: The shape of a reply no body fault shapes.
PLAIN = Shape()
_HOLD, _FIN, _RST = Hold(), Cut("fin"), Cut("rst")


@singledispatch
def shape_of(fault: F.Fault | None) -> Shape:
    """What ``fault`` does to the body of the reply it answers (:data:`PLAIN` for no fault, or one of
    another phase): one function per body kind, registered with ``@shape_of.register``."""
    return PLAIN


@shape_of.register
def _stall(fault: F.Stall) -> Shape:
    return Shape(cut=fault.after_bytes, ending=_HOLD)


@shape_of.register
def _truncate(fault: F.Truncate) -> Shape:
    return Shape(cut=fault.after_bytes, ending=_FIN)


@shape_of.register
def _reset(fault: F.Reset) -> Shape:
    return Shape(cut=fault.after_bytes, ending=_RST)


@shape_of.register
def _drip(fault: F.Drip) -> Shape:
    return Shape(drip=(fault.chunk_bytes, fault.interval))


@shape_of.register
def _malformed(fault: F.MalformedJson) -> Shape:
    return Shape(halves=True)


@shape_of.register
def _endless(fault: F.EndlessSse) -> Shape:
    return Shape(ending=_HOLD, open_stream=True)


@shape_of.register
def _close_stream(fault: F.CloseStream) -> Shape:
    return Shape(resumable=(fault.after_events, fault.retry_ms))


def halve(body: AnyStr) -> AnyStr:
    """A body (or a stdio line) cut in half, at least one byte kept: JSON that does not parse."""
    return body[: max(1, len(body) // 2)]


def halve_event(event: bytes) -> bytes:
    """A message event whose JSON is cut in half (the SSE framing kept, so the client reads an event
    whose data is not JSON)."""
    head, sep, data = event.partition(b"data: ")
    data = data.rstrip(b"\n")
    return head + sep + halve(data) + b"\n\n"


class BodyShaper:
    """The steps that write one body shaped by ``shape``: call :meth:`start` once the headers are
    ready, :meth:`feed` with each chunk of the body as it comes, and :meth:`end` once it is complete.
    Run every step in order; stop after a :class:`Cut`. ``sent``: the body bytes written so far."""

    __slots__ = ("_done", "_flushed", "sent", "shape")

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.sent = 0
        self._done = shape.ending is None  # the ending has acted (or there is none)
        self._flushed = False

    def start(self) -> list[Step]:
        """Steps before the first chunk: a stall after 0 bytes holds as soon as the headers are out,
        before the body has even begun to come."""
        if self.shape.cut == 0 and self.shape.ending == _HOLD:
            self._done = self._flushed = True
            return [Write(b""), _HOLD]
        return []

    def feed(self, chunk: bytes) -> list[Step]:
        """Steps that write ``chunk``, the next piece of the body."""
        shape = self.shape
        steps: list[Step] = []
        if shape.drip is not None:
            size, interval = shape.drip
            for i in range(0, len(chunk), size):
                if self.sent:
                    steps.append(Sleep(interval))
                self._write(steps, chunk[i : i + size])
            return steps
        cut = shape.cut
        if not self._done and cut is not None and self.sent + len(chunk) >= cut:
            head, chunk = chunk[: cut - self.sent], chunk[cut - self.sent :]
            self._write(steps, head, flush=True)
            self._done = True
            assert shape.ending is not None
            steps.append(shape.ending)
            if isinstance(shape.ending, Cut):
                return steps
        if chunk:
            self._write(steps, chunk)
        return steps

    def end(self) -> list[Step]:
        """Steps once the whole body was fed: an ending not reached yet acts at the end of the body
        (a stall or cut past its length, an event stream kept open)."""
        if self._done:
            return []
        self._done = True
        assert self.shape.ending is not None
        steps: list[Step] = []
        if not self._flushed:
            steps.append(Write(b""))  # the headers go out before the connection is held or cut
            self._flushed = True
        steps.append(self.shape.ending)
        return steps

    def _write(self, steps: list[Step], data: bytes, *, flush: bool = False) -> None:
        if data or flush:
            steps.append(Write(data))
            self.sent += len(data)
            self._flushed = True
