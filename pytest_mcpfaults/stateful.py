"""A Hypothesis state machine for a harness's session lifecycle, interleaved with sidecar faults.

Subclass :class:`SessionLifecycleMachine`, plug your harness into its four hooks and run
``MyMachine.TestCase``. The rules (the lifecycle, and ``kill``, ``freeze``, ``revive``, ``inject``,
``release``), the invariants checked after every step (the span invariants; ``delete_session`` within
``max_teardown_requests`` and ``teardown_budget``), the per-run sidecar, which hook exceptions are the
harness failing under faults, and a worked example: docs/fuzzing.md.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.invariants import (
    SpanInvariantError,
    Violation,
    all_spans_ended,
    cleanup_at_most,
    cleanup_never_flips,
)
from pytest_mcpfaults.spans.queries import DEFAULT_CLEANUP, DEFAULT_SESSION, Patterns, find_spans
from pytest_mcpfaults.spans.recorder import SpanRecorder
from pytest_mcpfaults.strategies import faults
from pytest_mcpfaults.transports.server import Sidecar

__all__ = ["SessionLifecycleMachine", "TeardownNotBounded"]


@functools.cache
def _fault_strategy(cls: type[SessionLifecycleMachine]) -> st.SearchStrategy[F.Fault]:
    return faults(cls.fault_kinds, cls.fault_targets, patience=cls.fault_patience, expect_hang=True)


class TeardownNotBounded(AssertionError):
    """``delete_session`` made too many requests or took longer than the machine's budget."""


class SessionLifecycleMachine(RuleBasedStateMachine):
    """Base state machine: a harness's session lifecycle interleaved with sidecar faults.

    Override the four hooks (:meth:`create_session`, :meth:`call_tool`, :meth:`evaluate`,
    :meth:`delete_session`) and optionally :meth:`make_sidecar` and :meth:`close`. Tune with the
    class attributes below. Run it with ``TestX = MyMachine.TestCase`` or
    ``hypothesis.stateful.run_state_machine_as_test(MyMachine)``.
    """

    #: Fault kinds the ``inject`` rule draws (``None``: every kind).
    fault_kinds: ClassVar[Sequence[str] | None] = None
    #: Trigger targets the ``inject`` rule draws (``None``: the lifecycle's steps).
    fault_targets: ClassVar[Sequence[str] | None] = None
    #: Patience of blocking faults and of the sidecar, in seconds: how long a held request may wait.
    fault_patience: ClassVar[float] = 0.1
    #: ``delete_session`` must return within this many seconds (a backstop; the sidecar's patience
    #: bounds every held request, so only retry loops and sleeps in the harness exceed it).
    teardown_budget: ClassVar[float] = 10.0
    #: ``delete_session`` may make at most this many requests to the sidecar (counts, not clocks).
    max_teardown_requests: ClassVar[int] = 10
    #: Span-name globs of session spans and of cleanup spans.
    session_spans: ClassVar[Patterns] = DEFAULT_SESSION
    cleanup_spans: ClassVar[Patterns] = DEFAULT_CLEANUP
    #: Cleanup may run at most this many times beneath each session span.
    max_cleanups: ClassVar[int] = 1
    #: Keyword arguments for the per-run :class:`~pytest_mcpfaults.Sidecar`.
    sidecar_options: ClassVar[Mapping[str, Any]] = {}
    #: Exception types a hook may raise when the harness fails under faults.
    expected_errors: ClassVar[tuple[type[BaseException], ...]] = (Exception,)

    def __init__(self) -> None:
        super().__init__()
        from opentelemetry.sdk.trace import TracerProvider

        # a bad fault_kinds / fault_targets fails every run, not only one whose steps draw ``inject``
        self.fault_strategy().validate()

        self.recorder = SpanRecorder(session=self.session_spans, cleanup=self.cleanup_spans)
        self.provider = self.recorder.attach(TracerProvider(shutdown_on_exit=False))
        self.tracer = self.provider.get_tracer("pytest_mcpfaults.stateful")
        self.errors: list[tuple[str, BaseException]] = []
        self.session_open = False
        self._teardown: tuple[int, float] | None = None  # (requests, seconds) of the last delete
        self.sidecar = self.make_sidecar()

    # -- hooks for subclasses --------------------------------------------------------------------
    def make_sidecar(self) -> Sidecar:
        """The sidecar of this run, started. Default: ``Sidecar(patience=fault_patience,
        expect_hang=True, **sidecar_options)`` (held requests end by patience, quietly)."""
        options = {"patience": self.fault_patience, "expect_hang": True, **self.sidecar_options}
        return Sidecar(**options).start()

    def create_session(self) -> None:
        """Open a session with the harness (e.g. start ``Agent.Session``, create the benchmark session)."""
        raise NotImplementedError(f"{type(self).__name__} must implement create_session()")

    def call_tool(self) -> None:
        """Make the harness call a tool inside the open session."""
        raise NotImplementedError(f"{type(self).__name__} must implement call_tool()")

    def evaluate(self) -> None:
        """Make the harness evaluate the open session."""
        raise NotImplementedError(f"{type(self).__name__} must implement evaluate()")

    def delete_session(self) -> None:
        """Make the harness delete the open session and end its session span (its teardown path)."""
        raise NotImplementedError(f"{type(self).__name__} must implement delete_session()")

    def close(self) -> None:
        """Release whatever the hooks opened (clients …); called once at the end of every run."""

    # -- rules: the lifecycle --------------------------------------------------------------------
    def _step(self, name: str, hook: Callable[[], None]) -> bool:
        try:
            hook()
        except (AssertionError, NotImplementedError):
            raise  # a failed check or a missing hook is never the harness failing under faults
        except self.expected_errors as exc:
            self.errors.append((name, exc))
            return False
        return True

    @precondition(lambda self: not self.session_open)
    @rule()
    def create(self) -> None:
        self.session_open = self._step("create_session", self.create_session)

    @precondition(lambda self: self.session_open)
    @rule()
    def call(self) -> None:
        self._step("call_tool", self.call_tool)

    @precondition(lambda self: self.session_open)
    @rule()
    def evaluate_session(self) -> None:
        self._step("evaluate", self.evaluate)

    @precondition(lambda self: self.session_open)
    @rule()
    def delete(self) -> None:
        before = len(self.sidecar.journal)
        started = time.monotonic()
        try:
            self._step("delete_session", self.delete_session)
        finally:
            self.session_open = False
            self._teardown = (len(self.sidecar.journal) - before, time.monotonic() - started)

    # -- rules: the faults -----------------------------------------------------------------------
    @precondition(lambda self: self.sidecar.state == "running")
    @rule()
    def kill(self) -> None:
        self.sidecar.kill()

    @precondition(lambda self: self.sidecar.state == "running")
    @rule()
    def freeze(self) -> None:
        self.sidecar.freeze()

    @precondition(lambda self: self.sidecar.state in ("dead", "frozen"))
    @rule()
    def revive(self) -> None:
        self.sidecar.revive()

    @rule(data=st.data())
    def inject(self, data: st.DataObject) -> None:
        self.sidecar.inject(data.draw(self.fault_strategy(), label="fault"))

    @rule()
    def release(self) -> None:
        self.sidecar.release()

    def fault_strategy(self) -> st.SearchStrategy[F.Fault]:
        """Faults the ``inject`` rule draws: ``faults(fault_kinds, fault_targets)`` with blocking
        faults on ``fault_patience`` (held requests end quietly when it runs out)."""
        return _fault_strategy(type(self))

    # -- invariants ------------------------------------------------------------------------------
    def span_violations(self) -> list[Violation]:
        """What the span invariants find now (sessions still open are not checked for ending)."""
        spans = self.recorder.spans()
        if not find_spans(spans, self.session_spans):
            return []  # no session span yet: nothing to judge
        found = [
            *cleanup_never_flips(spans, self.session_spans, self.cleanup_spans),
            *cleanup_at_most(spans, self.max_cleanups, self.session_spans, self.cleanup_spans),
        ]
        if not self.session_open:
            found += all_spans_ended(spans)
        return found

    @invariant()
    def spans_keep_their_invariants(self) -> None:
        found = self.span_violations()
        if found:
            raise SpanInvariantError(found, self.recorder.spans())

    @invariant()
    def teardown_is_bounded(self) -> None:
        if self._teardown is None:
            return
        requests, seconds = self._teardown
        if requests > self.max_teardown_requests:
            raise TeardownNotBounded(
                f"delete_session made {requests} requests to the sidecar, at most "
                f"{self.max_teardown_requests} allowed (a retry loop?):\n{self.sidecar.journal.format()}"
            )
        if seconds > self.teardown_budget:
            raise TeardownNotBounded(
                f"delete_session took {seconds:.2f} s, more than teardown_budget={self.teardown_budget} s"
            )

    # -- end of a run ------------------------------------------------------------------------------
    def teardown(self) -> None:
        """Delete a session left open (the harness's own teardown path), check the invariants one
        last time, then stop the sidecar and call :meth:`close` whatever happened."""
        try:
            if self.session_open:
                self.delete()
                self.spans_keep_their_invariants()
                self.teardown_is_bounded()
        finally:
            try:
                self.close()
            finally:
                self.sidecar.stop()
                self.provider.shutdown()
