"""Fuzzing the example runner (examples/harness) with fault plans and with the state machine.

* Hypothesis finds the span flip in the unhardened runner and shrinks it to one fault at the delete
  step: ``BackendGone`` at ``tool:delete_session``; the hardened runner keeps the property.
* A :class:`~pytest_mcpfaults.stateful.SessionLifecycleMachine` over the same runner (paused before
  each of its MCP calls, so faults land between steps) finds the flip in the unhardened runner.

The runner opens one mcp 2.x ``Client`` per operation; like every client of the suite, they load no CA
bundle (tests/no_ca.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest
from example_modules import load
from hypothesis import HealthCheck, Phase, find, given, note, settings
from hypothesis.stateful import run_state_machine_as_test
from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults import BackendGone, Fault, Sidecar, format_plan
from pytest_mcpfaults.invariants import SpanInvariantError, Violation, cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder
from pytest_mcpfaults.stateful import SessionLifecycleMachine
from pytest_mcpfaults.strategies import fault_plans

_harness = load("examples/harness")
Runner, RunnerConfig = _harness.Runner, _harness.RunnerConfig

#: The runner's budgets, small: every wait is bounded by one of them or by a fault's patience.
FAST: dict[str, Any] = {"read_timeout": 1.0, "call_timeout": 3.0, "agent_timeout": 30.0, "mode": "auto"}
#: Blocking faults end by the sidecar's patience (50 ms), quietly: the property is about spans.
PLANS = fault_plans(max_faults=2, patience=0.05, expect_hang=True)
SETTINGS = settings(
    derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

recorder = SpanRecorder()
tracer = recorder.attach(TracerProvider()).get_tracer("examples.harness")


def flips(plan: list[Fault], *, hardened: bool) -> list[Violation]:
    """Run one session of the example runner against a fresh sidecar; the flips it left."""
    recorder.clear()
    with Sidecar(faults=plan, expect_hang=True) as sidecar:
        runner = Runner(RunnerConfig(mcp_url=sidecar.mcp_url, **FAST), hardened=hardened, tracer=tracer)
        with contextlib.suppress(Exception):  # the unhardened runner lets a second delete's failure escape
            asyncio.run(runner.run_session("task-1"))
    return cleanup_never_flips(recorder.spans())


@pytest.mark.timeout(600)
def test_fuzzing_the_unhardened_runner_finds_the_flip_and_shrinks_it_to_backend_gone_at_delete() -> None:
    minimal = find(
        PLANS, lambda plan: bool(flips(plan, hardened=False)), settings=settings(SETTINGS, max_examples=200)
    )
    assert minimal == [BackendGone()]  # one fault, at the delete step
    assert format_plan(minimal) == "backend_gone"
    assert minimal[0].when.target == "tool:delete_session"
    # and the flip it shows is the incident's: the session span took the cleanup's message
    (violation,) = flips(minimal, hardened=False)
    assert violation.span is not None
    assert violation.span.name == "Agent.Session"
    assert "is no longer alive" in (violation.span.status_description or "")


@pytest.mark.timeout(600)
@settings(SETTINGS, max_examples=100)  # derandomized: the same 100 plans each run (200 took 14 s)
@given(plan=PLANS)
def test_the_hardened_runner_never_flips_under_fuzzed_plans(plan: list[Fault]) -> None:
    note(f"plan: {format_plan(plan) or '(no fault)'}")
    found = flips(plan, hardened=True)
    assert not found, recorder.tree()


def test_the_minimal_plan_flips_unhardened_and_not_hardened() -> None:
    assert flips([BackendGone()], hardened=False)
    assert not flips([BackendGone()], hardened=True)
    assert not flips([], hardened=False)


# -- the state machine over the example runner ----------------------------------------------------


class Gate:
    """Pauses the runner (in its own thread) before each MCP tool call until the machine lets it go."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.permits = 0
        self.waiting_at: str | None = None
        self.finished = False

    def enter(self, step: str) -> None:  # runner thread
        with self.cond:
            self.waiting_at = step
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.permits > 0, timeout=30):
                raise TimeoutError(f"the machine never let {step} go")
            self.permits -= 1
            self.waiting_at = None

    def finish(self) -> None:  # runner thread
        with self.cond:
            self.finished = True
            self.cond.notify_all()

    def settle(self) -> None:
        """Wait until the runner waits at a gate or has finished (machine thread)."""
        with self.cond:
            ok = self.cond.wait_for(
                lambda: self.permits == 0 and (self.waiting_at is not None or self.finished), timeout=30
            )
            assert ok, "the runner neither reached its next MCP call nor finished within 30 s"

    def step(self) -> None:
        """Let the runner make its next MCP call, and wait until it is done with it."""
        with self.cond:
            self.permits += 1
            self.cond.notify_all()
        self.settle()


class GatedTools:
    """The runner's ``McpTools``, each call held at the gate first."""

    def __init__(self, tools: Any, gate: Gate) -> None:
        self._tools, self._gate = tools, gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tools, name)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:  # the agent's tool calls
        self._gate.enter("call")
        return await self._tools.call(tool, arguments)

    async def create_session(self, task_id: str) -> Any:
        self._gate.enter("create_session")
        return await self._tools.create_session(task_id)

    async def evaluate_session(self, session_id: str) -> Any:
        self._gate.enter("evaluate_session")
        return await self._tools.evaluate_session(session_id)

    async def delete_session(self, session_id: str) -> Any:
        self._gate.enter("delete_session")
        return await self._tools.delete_session(session_id)


class SessionEnded(Exception):
    """The runner ended its session by itself (e.g. creating it failed)."""


class ExampleRunnerMachine(SessionLifecycleMachine):
    """The example runner's ``run_session``, advanced one MCP call per lifecycle rule."""

    hardened = True
    fault_patience = 0.05

    def create_session(self) -> None:
        self.gate = gate = Gate()
        runner = Runner(
            RunnerConfig(mcp_url=self.sidecar.mcp_url, **FAST), hardened=self.hardened, tracer=self.tracer
        )
        runner.tools = GatedTools(runner.tools, gate)  # type: ignore[assignment]
        self.outcome: list[object] = []

        def run() -> None:
            try:
                self.outcome.append(asyncio.run(runner.run_session("task-1")))
            except Exception as exc:
                self.outcome.append(exc)
            finally:
                gate.finish()

        self.thread = threading.Thread(target=run, name="example-runner", daemon=True)
        self.thread.start()
        gate.settle()
        gate.step()  # create_session
        if gate.finished:
            raise SessionEnded(f"the runner ended the session at create: {self.outcome}")

    def call_tool(self) -> None:
        if self.gate.waiting_at == "call":
            self.gate.step()

    def evaluate(self) -> None:
        while self.gate.waiting_at in ("call", "evaluate_session"):
            was = self.gate.waiting_at
            self.gate.step()
            if was == "evaluate_session":
                break

    def delete_session(self) -> None:
        while not self.gate.finished:
            self.gate.step()
        self.thread.join(10)
        assert not self.thread.is_alive()
        if isinstance(self.outcome[0], Exception):
            raise self.outcome[0]

    def close(self) -> None:
        gate = getattr(self, "gate", None)
        if gate is not None and not gate.finished:
            with gate.cond:
                gate.permits += 100  # let a runner left mid-session finish
                gate.cond.notify_all()
            self.thread.join(10)


class UnhardenedExampleRunnerMachine(ExampleRunnerMachine):
    hardened = False


@pytest.mark.timeout(600)
def test_the_state_machine_finds_the_flip_in_the_unhardened_example_runner() -> None:
    with pytest.raises(SpanInvariantError) as failure:
        run_state_machine_as_test(
            UnhardenedExampleRunnerMachine,
            # Found, not shrunk: the shrink is not what this asserts (and costs most of the run);
            # docs/examples/fuzzing_stateful_test.py runs a failing machine with the shrink on.
            settings=settings(
                SETTINGS,
                max_examples=100,
                stateful_step_count=10,
                phases=(Phase.explicit, Phase.reuse, Phase.generate),
            ),
        )
    assert "Agent.Session is ERROR" in str(failure.value)
    assert "comes from a cleanup failure" in str(failure.value)


def test_the_state_machine_passes_the_hardened_example_runner() -> None:
    run_state_machine_as_test(
        ExampleRunnerMachine, settings=settings(SETTINGS, max_examples=15, stateful_step_count=10)
    )


def test_the_docs_quote_the_shrink_output_that_the_docs_example_asserts() -> None:
    # docs/examples/fuzzing_test.py asserts these lines against a real run (tests/test_docs.py runs it)
    page = (Path(__file__).resolve().parent.parent / "docs" / "fuzzing.md").read_text()
    example = (Path(__file__).resolve().parent.parent / "docs" / "examples" / "fuzzing_test.py").read_text()
    for line in ("plan=[BackendGone(when=Trigger('tool:delete_session'))]", "plan: backend_gone"):
        assert line in page
        assert line in example
    assert "Failing test case: unhardened_runner_never_flips(" in page
