"""The stateful base: hooks, a sidecar per run, fault rules, span and bounded-teardown invariants.

Harnesses here talk to the machine's real sidecar with plain httpx; the flip is found both in a
harness that lets a cleanup failure escape and, in tests/test_fuzz_example.py, in the example runner.
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import httpx
import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from opentelemetry.trace import Status, StatusCode

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.invariants import SpanInvariantError
from pytest_mcpfaults.stateful import SessionLifecycleMachine, TeardownNotBounded

FAST = settings(max_examples=25, stateful_step_count=8, derandomize=True, database=None, deadline=None)
#: For runs expected to fail: find it, do not spend the time shrinking it (the shrink is not under test).
NO_SHRINK = settings(FAST, phases=(Phase.explicit, Phase.reuse, Phase.generate))
STATELESS = {"MCP-Protocol-Version": "2026-07-28"}
client = httpx.Client(timeout=2.0)


class CallFailed(Exception):
    pass


def call(sidecar: Sidecar, tool: str, **arguments: Any) -> dict[str, Any]:
    import json

    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    try:
        r = client.post(sidecar.mcp_url, json=message, headers=STATELESS)
        result = r.json()["result"]
        payload = json.loads(result["content"][0]["text"])
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise CallFailed(f"{tool}: {type(exc).__name__}: {exc}") from exc
    if "error" in payload:
        raise CallFailed(f"{tool}: {payload['error']}")
    return payload  # type: ignore[no-any-return]


class HttpHarness(SessionLifecycleMachine):
    """A step-wise harness: ``Agent.Session`` stays open from create to delete."""

    escape_cleanup_failures = False
    runs: ClassVar[list[SessionLifecycleMachine]] = []

    def __init__(self) -> None:
        super().__init__()
        type(self).runs.append(self)

    def create_session(self) -> None:
        self.stack = contextlib.ExitStack()
        self.session = self.stack.enter_context(self.tracer.start_as_current_span("Agent.Session"))
        try:
            with self.tracer.start_as_current_span("MCP.CreateSession"):
                self.sid = call(self.sidecar, "create_session", task_id="task-1")["session_id"]
        except CallFailed as exc:
            self.session.set_status(Status(StatusCode.ERROR, f"create failed: {exc}"))
            self.stack.close()
            raise

    def call_tool(self) -> None:
        with self.tracer.start_as_current_span("Agent.Call"):
            call(self.sidecar, "list_tasks")

    def evaluate(self) -> None:
        with self.tracer.start_as_current_span("Evaluator.Evaluate"):
            call(self.sidecar, "evaluate_session", session_id=self.sid)

    def delete_session(self) -> None:
        try:
            with self.tracer.start_as_current_span("MCP.DeleteSession") as span:
                try:
                    call(self.sidecar, "delete_session", session_id=self.sid)
                except CallFailed as exc:
                    if self.escape_cleanup_failures:
                        raise
                    span.add_event("cleanup_failed", {"error": str(exc)})
        except CallFailed as exc:
            self.session.set_status(Status(StatusCode.ERROR, str(exc)))  # the incident's flip
        finally:
            self.stack.close()


def test_a_harness_that_keeps_cleanup_off_the_session_passes_with_faults_interleaved() -> None:
    HttpHarness.runs.clear()
    run_state_machine_as_test(HttpHarness, settings=FAST)
    runs = HttpHarness.runs
    assert len(runs) >= 20
    assert all(run.sidecar.state == "stopped" for run in runs)  # stopped in teardown, every run
    assert len({run.sidecar for run in runs}) == len(runs)  # a fresh sidecar per run
    injected = {f.kind for run in runs for f in run.sidecar.plan}
    assert len(injected) >= 4  # the inject rule drew a variety of faults
    assert any(run.sidecar.fired for run in runs)  # some of them fired
    assert any(run.sidecar.state != "running" for run in runs) or any(run.errors for run in runs)


class Flipping(HttpHarness):
    escape_cleanup_failures = True


def test_the_machine_finds_a_cleanup_failure_flipping_the_session() -> None:
    with pytest.raises(SpanInvariantError) as failure:
        run_state_machine_as_test(Flipping, settings=settings(NO_SHRINK, max_examples=100))
    # (not shrunk here: docs/examples/fuzzing_stateful_test.py shows a shrunk run)
    assert "comes from a cleanup failure" in str(failure.value)
    assert "Agent.Session [ERROR" in str(failure.value)  # the span tree is shown


class Retrying(HttpHarness):
    def delete_session(self) -> None:
        for _ in range(12):  # a retry loop: bounded in time by luck, not by design
            with contextlib.suppress(CallFailed):
                call(self.sidecar, "list_tasks")
        self.stack.close()


def test_teardown_that_makes_too_many_requests_is_not_bounded() -> None:
    with pytest.raises(
        TeardownNotBounded, match="delete_session made 12 requests to the sidecar, at most 10"
    ):
        run_state_machine_as_test(Retrying, settings=NO_SHRINK)


class LeavesSpanOpen(HttpHarness):
    def delete_session(self) -> None:
        self.tracer.start_span("Agent.Leftover")  # never ended
        self.stack.close()


def test_spans_left_open_after_the_session_closed_are_found() -> None:
    with pytest.raises(SpanInvariantError, match=r"span Agent\.Leftover .* started but never ended"):
        run_state_machine_as_test(LeavesSpanOpen, settings=NO_SHRINK)


class Buggy(HttpHarness):
    expected_errors = (CallFailed,)

    def call_tool(self) -> None:
        raise KeyError("a bug in the harness, not a fault")


def test_errors_outside_expected_errors_fail_the_run() -> None:
    with pytest.raises(KeyError, match="a bug in the harness"):
        run_state_machine_as_test(Buggy, settings=NO_SHRINK)


class NoHooks(SessionLifecycleMachine):
    pass


def test_a_missing_hook_is_named() -> None:
    with pytest.raises(NotImplementedError, match="NoHooks must implement create_session"):
        run_state_machine_as_test(NoHooks, settings=NO_SHRINK)


class TypoInKinds(HttpHarness):
    fault_kinds = ("hnag",)


def test_a_bad_fault_kind_fails_the_first_run_whatever_its_steps_draw() -> None:
    """It failed only in a run whose steps drew ``inject``: one step (``create``) passed without a word."""
    from hypothesis.errors import InvalidArgument

    one_step = settings(NO_SHRINK, max_examples=1, stateful_step_count=1)
    with pytest.raises(InvalidArgument, match="kinds: unknown fault kind 'hnag'; valid kinds: "):
        run_state_machine_as_test(TypoInKinds, settings=one_step)


class Restricted(HttpHarness):
    fault_kinds = ("status", "hang")
    fault_targets = ("tools/call",)
    fault_patience = 0.03


def test_fault_options_restrict_what_the_inject_rule_draws() -> None:
    Restricted.runs.clear()
    run_state_machine_as_test(Restricted, settings=FAST)
    plans = [f for run in Restricted.runs for f in run.sidecar.plan]
    assert plans  # something was injected
    assert {f.kind for f in plans} <= {"status", "hang"}
    assert {f.when.target for f in plans} == {"tools/call"}
    assert all(f.patience in (0.03, 0.06) for f in plans if f.kind == "hang")  # type: ignore[attr-defined]
    assert all(run.sidecar.patience == 0.03 for run in Restricted.runs)
