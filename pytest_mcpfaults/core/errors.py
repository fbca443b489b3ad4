"""What a sidecar reports of itself: its lifecycle state, and the errors raised inside it."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from typing import Literal

SidecarState = Literal["new", "running", "frozen", "dead", "stopped"]
"""A sidecar's lifecycle state (``sidecar.state``); only the socket sidecar is ever ``'frozen'``."""


class Dropped(Exception):
    """The request's connection was closed on purpose (a ``die``, a hold not released, a cut body) or
    by the client: nothing more is written for it."""


class SidecarError(Exception):
    """Exceptions raised inside the sidecar (e.g. by a tool handler), re-raised in the test: ``errors``,
    in order; the first is also the ``__cause__``."""

    def __init__(self, errors: Sequence[tuple[str, BaseException]]) -> None:
        self.errors = [e for _, e in errors]
        lines = [f"{len(errors)} error(s) raised inside the MCP sidecar:"]
        for where, exc in errors:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
            lines.append(f"--- in {where} ---\n{tb}")
        super().__init__("\n".join(lines))


class ErrorLog:
    """The errors raised inside one sidecar, recorded from any thread; ``check`` re-raises them."""

    def __init__(self) -> None:
        self._errors: list[tuple[str, BaseException]] = []
        self._lock = threading.Lock()

    def record(self, where: str, exc: BaseException) -> None:
        with self._lock:
            self._errors.append((where, exc))

    @property
    def all(self) -> list[BaseException]:
        with self._lock:
            return [e for _, e in self._errors]

    def check(self) -> None:
        with self._lock:
            errors = list(self._errors)
        if errors:
            raise SidecarError(errors) from errors[0][1]
