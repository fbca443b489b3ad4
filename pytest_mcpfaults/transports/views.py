"""What every sidecar backend exposes the same way: addresses, the plan, journal shortcuts, errors.

The socket :class:`~pytest_mcpfaults.Sidecar`, the stdio server and the in-process backend
(:mod:`pytest_mcpfaults.inprocess`) inherit :class:`SidecarViews`, which reads everything from
the backend's :class:`~pytest_mcpfaults.core.core.SidecarCore` (``self.core``), so they cannot
drift apart (they did once: a runtime ``kill()`` counted as a fired ``die`` on one backend only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.core import SidecarCore
from pytest_mcpfaults.core.errors import Dropped, SidecarState
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.core.resumption import Resumed
from pytest_mcpfaults.mcp.surface import Surface
from pytest_mcpfaults.mcp.tools import BenchmarkSessions

_S = TypeVar("_S", bound="SidecarViews")


class RuntimeControl:
    """The plan at runtime, the same on every backend (which defines ``_checked``)."""

    core: SidecarCore

    @property
    def plan(self) -> tuple[F.Fault, ...]:
        """Every fault planned so far (constructor and ``inject()``), in order."""
        return self.core.plan.faults

    def inject(self, *faults: F.Fault | str) -> None:
        """Append faults to the plan, effective for the next request."""
        self.core.plan.add(self._checked(list(faults), "inject()"))

    def clear_faults(self) -> None:
        """Forget every planned fault (held requests stay held: see ``release()``)."""
        self.core.plan.clear()

    def _checked(self, faults: Sequence[F.Fault | str], where: str) -> Sequence[F.Fault]:
        """``faults`` as a plan this backend can serve (``where``: the argument, for the error)."""
        raise NotImplementedError  # pragma: no cover - every backend defines it


class SidecarViews(RuntimeControl):
    """Read-only views, error reporting and the context-manager protocol shared by every backend.

    A backend sets ``core`` (its :class:`~pytest_mcpfaults.core.core.SidecarCore`) and defines
    :attr:`url`, ``start()``, ``stop()`` and ``_checked``.
    """

    @property
    def running(self) -> bool:
        """Started and not stopped (a dead or frozen sidecar is still 'running' until stopped)."""
        return self.core.state in ("running", "frozen", "dead")

    @property
    def url(self) -> str:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def start(self: _S) -> _S:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - every backend defines it
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start() if self.core.state == "new" else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop; then, unless the block raised, re-raise what was raised inside the sidecar."""
        self.stop()
        if exc_type is None:
            self.check_errors()

    @property
    def journal(self) -> Journal:
        """Every request and connection the sidecar saw (see :class:`~pytest_mcpfaults.Journal`)."""
        return self.core.journal

    @property
    def benchmark(self) -> BenchmarkSessions:
        """The benchmark sessions the ``benchmark`` tool set holds."""
        return self.core.benchmark

    @property
    def surface(self) -> Surface:
        """The resources, resource templates and prompts served, and what each client session set:
        ``surface.log_levels`` (``logging/setLevel``) and ``surface.subscriptions``
        (``resources/subscribe``), keyed by the transport session id (``None``: stateless era)."""
        return self.core.mcp.surface

    @property
    def mcp_path(self) -> str:
        return self.core.options.mcp_path

    @property
    def health_path(self) -> str | None:
        return self.core.options.health_path

    @property
    def legacy_paths(self) -> tuple[str, ...]:
        """The legacy HTTP+SSE transport's stream and message paths, when it is served (else empty)."""
        served = self.core.path_transport
        return served.paths if served is not None else ()

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """``Origin`` values accepted besides loopback ones."""
        return tuple(self.core.options.allowed_origins)

    @property
    def state(self) -> SidecarState:
        """``'new'``, ``'running'``, ``'dead'`` or ``'stopped'`` (the socket sidecar also ``'frozen'``)."""
        return self.core.state

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
        return self.core.service_url()

    @property
    def sessions(self) -> tuple[str, ...]:
        """Live transport session ids (session era)."""
        return tuple(self.core.mcp.sessions)

    @property
    def ended_sessions(self) -> tuple[str, ...]:
        """Transport session ids that were deleted, expired or lost with the process."""
        return tuple(self.core.mcp.sessions.ended)

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """Snapshot of every request so far."""
        return self.journal.requests

    @property
    def fired(self) -> dict[str, int]:
        """How often each fault kind fired (runtime ``kill()`` / ``freeze()`` included)."""
        return self.journal.fired

    # -- errors ----------------------------------------------------------------------------------
    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the sidecar so far (tool handlers, internal errors)."""
        return self.core.errors.all

    def check_errors(self) -> None:
        """Raise :class:`SidecarError` if anything raised inside the sidecar."""
        self.core.errors.check()


class NoAnswerStream:
    """The in-process and stdio transports' part of a request's
    :class:`~pytest_mcpfaults.core.core.Transport`: no GET stream, and no answer stream for a tool's
    own messages, which they refuse with ``error``, naming why."""

    error: ClassVar[type[Exception]]
    no_messages: ClassVar[str]  # follows "a tool's own 'method' (ctx) "
    no_rounds: ClassVar[str]

    async def event_stream(
        self, resumed: Resumed | None = None, fault: F.Fault | None = None
    ) -> None:  # pragma: no cover - get_stream is off on both
        raise Dropped

    async def send_message(self, message: Mapping[str, Any] | bytes, headers: Mapping[str, str]) -> None:
        method = message.get("method") if isinstance(message, Mapping) else "message"
        raise self.error(f"a tool's own {method!r} (ctx) {self.no_messages}")

    async def await_answer(
        self, answer: asyncio.Future[dict[str, Any]], what: str, dropped: object = None
    ) -> None:  # pragma: no cover - send_message refused the request first
        raise Dropped

    def watch_round(self, answer: asyncio.Future[dict[str, Any]], what: str) -> None:
        raise self.error(self.no_rounds)
