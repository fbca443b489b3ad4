"""A state machine over a harness: lifecycle steps interleaved with kill/freeze/revive/inject/release."""

import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).parent))
from fuzzing_harness import SteppedRunner

# --8<-- [start:machine]
from pytest_mcpfaults.invariants import SpanInvariantError
from pytest_mcpfaults.stateful import SessionLifecycleMachine

client = httpx.Client(timeout=2.0)  # shared by every run: making a client costs milliseconds


class RunnerMachine(SessionLifecycleMachine):
    hardened = True
    fault_patience = 0.02  # a held request ends after 20 ms: runs stay fast

    def create_session(self):  # self.sidecar: a fresh sidecar per run, stopped in teardown
        self.run = SteppedRunner(client, self.sidecar.mcp_url, self.tracer, hardened=self.hardened)
        self.run.open()

    def call_tool(self):
        self.run.tool()

    def evaluate(self):
        self.run.evaluate()

    def delete_session(self):
        self.run.close()


RunnerMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=10, derandomize=True, database=None, deadline=None
)
TestHardenedRunner = RunnerMachine.TestCase  # passes: cleanup never flips the session


class UnhardenedRunnerMachine(RunnerMachine):
    hardened = False


def test_the_machine_finds_the_flip_in_the_unhardened_runner():
    with pytest.raises(SpanInvariantError, match="nothing but cleanup failed beneath it"):
        run_state_machine_as_test(
            UnhardenedRunnerMachine,
            settings=settings(
                max_examples=100, stateful_step_count=10, derandomize=True, database=None, deadline=None
            ),
        )


# --8<-- [end:machine]
