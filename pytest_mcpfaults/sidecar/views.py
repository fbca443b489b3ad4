"""What both sidecar backends expose the same way: addresses, the plan, journal shortcuts, errors.

The socket :class:`~pytest_mcpfaults.Sidecar` and the in-process backend
(:mod:`pytest_mcpfaults.inprocess`) both inherit :class:`SidecarViews`, so these cannot drift apart
(they did once: a runtime ``kill()`` counted as a fired ``die`` on one backend only).
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from types import TracebackType
from typing import Literal, TypeVar

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.journal import Journal, RequestRecord
from pytest_mcpfaults.sidecar.mcp import McpEndpoint

__all__ = ["SidecarError", "SidecarState", "SidecarViews"]

SidecarState = Literal["new", "running", "frozen", "dead", "stopped"]
"""A sidecar's lifecycle state (:attr:`SidecarViews.state`); only the socket sidecar is ever ``'frozen'``."""

_S = TypeVar("_S", bound="SidecarViews")


class SidecarError(Exception):
    """An exception raised inside the sidecar thread (e.g. by a tool handler), re-raised in the test.

    ``errors`` holds every one of them, in order; the first is also the ``__cause__``.
    """

    def __init__(self, errors: Sequence[tuple[str, BaseException]]) -> None:
        self.errors = [e for _, e in errors]
        lines = [f"{len(errors)} error(s) raised inside the MCP sidecar:"]
        for where, exc in errors:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
            lines.append(f"--- in {where} ---\n{tb}")
        super().__init__("\n".join(lines))


class SidecarViews:
    """Read-only views, error reporting and the context-manager protocol shared by both backends.

    A backend sets ``mcp_path``, ``health_path``, ``journal``, ``_plan``, ``_mcp``, ``_service_url``,
    ``_errors``, ``_errors_lock`` and ``_state``, and defines :attr:`url`, ``start()`` and ``stop()``.
    """

    mcp_path: str
    health_path: str | None
    journal: Journal
    _plan: list[tuple[F.Fault, F.TriggerState]]
    _mcp: McpEndpoint
    _service_url: str | None
    _errors: list[tuple[str, BaseException]]
    _errors_lock: threading.Lock
    _state: SidecarState

    @property
    def url(self) -> str:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def start(self: _S) -> _S:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start() if self._state == "new" else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop; then, unless the block raised, re-raise what was raised inside the sidecar."""
        self.stop()
        if exc_type is None:
            self.check_errors()

    @property
    def state(self) -> SidecarState:
        """``'new'``, ``'running'``, ``'dead'`` or ``'stopped'`` (the socket sidecar also ``'frozen'``)."""
        return self._state

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint: :attr:`url` + ``mcp_path``."""
        return self.url + self.mcp_path

    @property
    def health_url(self) -> str:
        """The health endpoint: :attr:`url` + ``health_path`` (an error when ``health_path=None``)."""
        if self.health_path is None:
            raise RuntimeError(
                f"{type(self).__name__}.health_url: this sidecar has no health endpoint (health_path=None)"
            )
        return self.url + self.health_path

    @property
    def service_url(self) -> str:
        """The backend URL named by :class:`~pytest_mcpfaults.faults.BackendGone` payloads."""
        return self._service_url or self.url

    @property
    def plan(self) -> tuple[F.Fault, ...]:
        """Every fault planned so far (constructor and ``inject()``), in order."""
        return tuple(f for f, _ in self._plan)

    @property
    def sessions(self) -> tuple[str, ...]:
        """Live transport session ids (session era)."""
        return tuple(self._mcp.sessions)

    @property
    def ended_sessions(self) -> tuple[str, ...]:
        """Transport session ids that were deleted, expired or lost with the process."""
        return tuple(self._mcp.ended)

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """Snapshot of every request so far."""
        return self.journal.requests

    @property
    def fired(self) -> dict[str, int]:
        """How often each fault kind fired (runtime ``kill()`` / ``freeze()`` included)."""
        return self.journal.fired

    # -- errors ----------------------------------------------------------------------------------
    def _record_error(self, where: str, exc: BaseException) -> None:
        with self._errors_lock:
            self._errors.append((where, exc))

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the sidecar so far (tool handlers, internal errors)."""
        with self._errors_lock:
            return [e for _, e in self._errors]

    def check_errors(self) -> None:
        """Raise :class:`SidecarError` if anything raised inside the sidecar."""
        with self._errors_lock:
            errors = list(self._errors)
        if errors:
            raise SidecarError(errors) from errors[0][1]
