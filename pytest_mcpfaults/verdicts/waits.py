"""The journal waits every backend has (:class:`JournalWaits`: the socket ``Sidecar``, the stdio server,
the in-process backend) and the socket sidecar's ``assert_client_*`` checks (:class:`SidecarWaits`, a
base of ``Sidecar``); the checks and their verdicts live in the modules of this folder."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable

from pytest_mcpfaults.auth.server import AuthFollowUp, auth_follow_ups, reauthorization_problems
from pytest_mcpfaults.core.records import CancellationRecord, RequestRecord, StreamRecord
from pytest_mcpfaults.options.validation import check_count, check_timeout
from pytest_mcpfaults.transports.views import SidecarViews
from pytest_mcpfaults.verdicts.cancel_checks import check_client_cancelled
from pytest_mcpfaults.verdicts.patience import (
    PatienceError,
    check_client_closed,
    patience_verdict,
    target_matcher,
)
from pytest_mcpfaults.verdicts.resume_checks import check_client_resumed
from pytest_mcpfaults.verdicts.violation import PatienceViolation


class JournalWaits(SidecarViews):
    """The bounded waits on the journal, and its cancellations, that every backend has (a backend that
    cannot hold a request refuses :meth:`wait_held`, saying why)."""

    def wait_held(self, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until at least ``count`` requests are being held by a blocking fault."""
        check_count("wait_held", "count", count, minimum=1)
        check_timeout("wait_held", timeout)
        self.journal.wait_for(
            lambda: sum(1 for r in self.journal.requests if r.held and r.hold is None) >= count,
            timeout,
            f"{count} held request(s)",
        )

    def wait_for(self, predicate: Callable[[tuple[RequestRecord, ...]], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate(requests)`` is true; on timeout the ``AssertionError`` names the
        predicate (its source line for a lambda) and shows what the journal saw instead."""
        check_timeout("wait_for", timeout)
        self.journal.wait_for(lambda: predicate(self.journal.requests), timeout, _described(predicate))

    @property
    def cancellations(self) -> tuple[CancellationRecord, ...]:
        """Every cancellation the client sent, linked to the request it names (see
        :class:`~pytest_mcpfaults.core.records.CancellationRecord`)."""
        return self.journal.cancellations.records


class SidecarWaits(JournalWaits):
    """The socket ``Sidecar``'s own waits and patience assertions."""

    patience: float | None

    # -- journal shortcuts and waits ---------------------------------------------------------------
    @property
    def patience_violations(self) -> tuple[PatienceViolation, ...]:
        return self.journal.violations.records

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Wait until no client connection is open (every client released its connections) and every
        request's handling has ended, so the journal records are final."""
        check_timeout("wait_idle", timeout)

        def idle() -> bool:
            return not self.journal.open_connections() and all(r.done for r in self.journal.requests)

        self.journal.wait_for(idle, timeout, f"every client connection to {self.url} to close")

    # -- patience assertions -----------------------------------------------------------------------
    def held_requests(self, target: str | None = None) -> list[RequestRecord]:
        """Every request a blocking fault held so far (matching ``target``, e.g. ``'DELETE /mcp'``),
        whatever its outcome; a bad ``target`` raises ``ValueError`` naming it."""
        matches = target_matcher(self, target)
        return [r for r in self.journal.requests if r.held and matches(r)]

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

    # -- authorization (auth=) ---------------------------------------------------------------------
    @property
    def auth_follow_ups(self) -> tuple[AuthFollowUp, ...]:
        """Every request the sidecar refused for its token (``auth=``) and what the client did next
        (:class:`~pytest_mcpfaults.auth.server.AuthFollowUp`: refreshed, retried with the same
        token, went to DELETE, gave up), from the journal so far."""
        return auth_follow_ups(self.journal.requests, self.mcp_path)

    def assert_client_reauthorized(self, within: float = 5.0) -> None:
        """Every auth failure so far (a 401 or a 403 ``insufficient_scope`` from the MCP endpoint) was
        followed by a request carrying a new token. Waits at most ``within`` seconds for the client's
        next request after each failure, then judges; the failure names each refused request and what
        the client did instead (and fails when the journal has no auth failure at all: nothing was
        tested)."""
        if not isinstance(within, (int, float)) or isinstance(within, bool) or not within >= 0:
            raise ValueError(f"assert_client_reauthorized: within must be seconds >= 0, got {within!r}")

        def answered() -> bool:
            return all(f.next is not None for f in self.auth_follow_ups)

        with contextlib.suppress(AssertionError):  # judged below: the text says which was not followed
            self.journal.wait_for(answered, within, "the client's request after each auth failure")
        follow_ups = self.auth_follow_ups
        if not follow_ups:
            raise AssertionError(
                "assert_client_reauthorized: the sidecar refused no token (no 401 / 403 insufficient_scope "
                f"from {self.mcp_path}): nothing to reauthorize after; journal:\n{self.journal.format()}"
            )
        problems = reauthorization_problems(follow_ups)
        if problems:
            raise AssertionError(
                f"the client did not come back with a new token after {len(problems)} of {len(follow_ups)} "
                "auth failure(s):\n- " + "\n- ".join(problems) + f"\njournal:\n{self.journal.format()}"
            )

    def assert_client_cancelled(self, target: str | None = None, *, within: float) -> None:
        """Every MCP request matching ``target`` (e.g. ``'tool:sleep'``, ``'tools/call'``; every request
        with a JSON-RPC id when ``None``) still in flight ``within`` seconds after it was sent had been
        cancelled by the client by then: a ``notifications/cancelled`` naming it in its session, before
        the session's ``DELETE`` (in the 2026-07-28 era: its response stream closed). A request answered
        before that needs no cancel; if none was left in flight, it fails too (nothing was cancelled).
        Returns as soon as every matching request is cancelled or answered, else waits until ``within``
        past the latest one's arrival (no longer). The failure says what was in flight and what the
        client did instead, e.g. ``the client sent DELETE /mcp at 2.10 s (2.00 s after the call)
        without cancelling tools/call sleep (id 3), still in flight``."""
        check_client_cancelled(self, target, within)

    @property
    def closed_streams(self) -> tuple[StreamRecord, ...]:
        """Every event stream the sidecar closed gracefully for the client to resume, and whether and
        when it did (see :class:`~pytest_mcpfaults.core.records.StreamRecord`)."""
        return self.journal.streams.records

    def assert_client_resumed(self, target: str | None = None, *, within: float) -> None:
        """Every event stream the sidecar closed gracefully (``close_stream``) for a request matching
        ``target`` (all when ``None``) was resumed by the client: a ``GET`` of the MCP endpoint whose
        ``Last-Event-ID`` names an event of that stream, no sooner than the stream's ``retry`` and at
        most ``within`` seconds after the close. Fails also when no stream was closed. Returns once
        every stream is resumed, else waits until ``within`` past the latest close (no longer). The
        failure says what the client did instead, e.g. that it came back without ``Last-Event-ID``."""
        check_client_resumed(self, target, within)

    def assert_no_patience_violations(self) -> None:
        """No held request outlived its patience budget so far (expected or not); raises
        :class:`~pytest_mcpfaults.verdicts.patience.PatienceError` with the verdict otherwise."""
        v = self.journal.violations.records
        if v:
            raise PatienceError(patience_verdict(self, v))


def _described(predicate: Callable[..., object]) -> str:
    """``repr`` when a lambda's source cannot be read (one typed at a prompt)."""
    name = getattr(predicate, "__name__", "")
    if name and name != "<lambda>":
        return f"`{name}`"
    try:
        return "`" + inspect.getsource(predicate).strip()[:200] + "`"
    except (OSError, TypeError):
        return repr(predicate)
