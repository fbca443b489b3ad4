"""The socket sidecar's journal waits and patience assertions: :class:`SidecarWaits`, a base of ``Sidecar``.

The verdict text of a failed patience assertion comes from :mod:`pytest_mcpfaults.sidecar.patience`.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.journal import PatienceViolation, RequestRecord
from pytest_mcpfaults.sidecar.patience import PatienceError, check_client_closed, patience_verdict
from pytest_mcpfaults.sidecar.routing import record_matches
from pytest_mcpfaults.sidecar.views import SidecarViews

__all__ = ["SidecarWaits"]


class SidecarWaits(SidecarViews):
    """Bounded waits on the journal and the patience assertions of the socket ``Sidecar``.

    Uses what :class:`~pytest_mcpfaults.sidecar.views.SidecarViews` declares (``journal``,
    ``mcp_path``, ``health_path``, :attr:`url`, :attr:`state`).
    """

    # -- journal shortcuts and waits ---------------------------------------------------------------
    @property
    def patience_violations(self) -> tuple[PatienceViolation, ...]:
        return self.journal.violations

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Wait until no client connection is open (every client released its connections) and every
        request's handling has ended, so the journal records are final."""

        def idle() -> bool:
            return not self.journal.open_connections() and all(r.done for r in self.journal.requests)

        self.journal.wait_for(idle, timeout, f"every client connection to {self.url} to close")

    def wait_held(self, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until at least ``count`` requests are being held by a blocking fault."""
        self.journal.wait_for(
            lambda: sum(1 for r in self.journal.requests if r.held and r.hold is None) >= count,
            timeout,
            f"{count} held request(s)",
        )

    def wait_for(self, predicate: Callable[[tuple[RequestRecord, ...]], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate(requests)`` is true."""
        self.journal.wait_for(lambda: predicate(self.journal.requests), timeout, f"{predicate!r}")

    # -- patience assertions -----------------------------------------------------------------------
    def held_requests(self, target: str | None = None) -> list[RequestRecord]:
        """Every request a blocking fault held so far (matching ``target``, e.g. ``'DELETE /mcp'``),
        whatever its outcome; a bad ``target`` raises ``ValueError`` naming it."""
        out = [r for r in self.journal.requests if r.held]
        if target is not None:
            F.check_target(target)
            out = [
                r
                for r in out
                if record_matches(
                    r,
                    target,
                    mcp_path=self.mcp_path,
                    health_path=self.health_path,
                    legacy_paths=self.legacy_paths,
                )
            ]
        return out

    def assert_client_gave_up(self, within: float, target: str | None = None) -> None:
        """Every held request (matching ``target``, e.g. ``'DELETE /mcp'``) ended because the client
        closed it, at most ``within`` seconds after the hold began. Returns as soon as every outcome is
        known, else waits until ``within`` past the latest hold's start (no longer), then judges; the
        failure names each request, its connection and how it ended."""
        check_client_closed(self, within, target, "assert_client_gave_up")

    def assert_client_released(self, within: float, target: str | None = None) -> None:
        """Every stalled/held response (matching ``target``, e.g. ``'health'``) had its connection
        closed by the client at most ``within`` seconds after the hold began (a probe that reads the
        status and aborts the body passes; one that keeps the response open fails, naming the
        connection). Waits like :meth:`assert_client_gave_up`: at most until ``within`` past the latest
        hold's start."""
        check_client_closed(self, within, target, "assert_client_released")

    def assert_no_patience_violations(self) -> None:
        """No held request outlived its patience budget so far (expected or not); raises
        :class:`~pytest_mcpfaults.sidecar.patience.PatienceError` with the verdict otherwise."""
        v = self.journal.violations
        if v:
            raise PatienceError(patience_verdict(self, v))
