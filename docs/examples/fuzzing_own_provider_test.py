"""Fuzzing a runner that builds its own TracerProvider in ``initialize()``: the spans of each example.

Quoted in docs/fuzzing.md. Run with ``pytest -p mcpfaults``."""

import contextlib
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, note, settings
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).parent))
from fuzzing_harness import HarnessError, Runner

from pytest_mcpfaults import format_plan
from pytest_mcpfaults.spans import install_recorder
from pytest_mcpfaults.strategies import fault_plans


# --8<-- [start:runner]
class BenchmarkRunner:
    """A runner as real ones are written: it owns its tracing, built in initialize(), never global."""

    def __init__(self, mcp_url, *, hardened):
        self.mcp_url, self.hardened = mcp_url, hardened

    def initialize(self):
        self.provider = TracerProvider()  # the runner's own provider
        self.client = httpx.Client(timeout=2.0)

    def run(self):
        tracer = self.provider.get_tracer("runner")
        Runner(self.client, self.mcp_url, tracer, hardened=self.hardened).run()

    def close(self):
        self.client.close()
        self.provider.shutdown()


# --8<-- [end:runner]


# --8<-- [start:example_spans]
@contextlib.contextmanager
def example_spans():
    """The spans of one Hypothesis example: the process-wide recorder, emptied, and attached to every
    TracerProvider built inside the block (the runner's, in initialize())."""
    recorder = install_recorder()
    recorder.clear()  # this example's spans only
    with recorder.watch_providers():
        yield recorder


plans = fault_plans(max_faults=2, patience=0.02, expect_hang=True)


def one_session(mcp_sidecar_factory, plan, *, hardened):
    with mcp_sidecar_factory(faults=plan) as sidecar, example_spans() as spans:
        runner = BenchmarkRunner(sidecar.mcp_url, hardened=hardened)
        runner.initialize()
        try:
            runner.run()
        except HarnessError:
            pass  # the session may fail under faults; it must not flip
        finally:
            runner.close()
        note(f"plan: {format_plan(plan) or '(no fault)'}")
        assert spans.one("Agent.Session").ended  # the runner's spans were recorded
        spans.assert_cleanup_never_flips()


@settings(max_examples=50, derandomize=True, database=None, deadline=None)
@given(plan=plans)
def test_a_runner_with_its_own_provider_never_flips(mcp_sidecar_factory, plan):
    one_session(mcp_sidecar_factory, plan, hardened=True)


# --8<-- [end:example_spans]


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(plan=plans)
def unhardened_runner_never_flips(mcp_sidecar_factory, plan):
    one_session(mcp_sidecar_factory, plan, hardened=False)


def test_the_unhardened_runner_shrinks_to_the_incident(mcp_sidecar_factory):
    with pytest.raises(AssertionError) as failure:
        unhardened_runner_never_flips(mcp_sidecar_factory)
    notes = "\n".join(failure.value.__notes__)
    assert "plan=[BackendGone(when=Trigger('tool:delete_session'))]" in notes  # one fault, at the delete


# --8<-- [start:fixture]
@pytest.fixture(scope="module")
def runner_spans():
    """The process-wide recorder, watching every TracerProvider built while this module's tests run.
    Module-scoped, so Hypothesis accepts it (its function_scoped_fixture health check refuses
    function-scoped fixtures such as mcp_spans in a @given test)."""
    recorder = install_recorder()
    with recorder.watch_providers():
        yield recorder
    recorder.clear()


@settings(max_examples=50, derandomize=True, database=None, deadline=None)
@given(plan=plans)
def test_the_same_with_a_module_scoped_recorder(mcp_sidecar_factory, runner_spans, plan):
    runner_spans.clear()  # the fixture runs once for every example: empty it per example
    with mcp_sidecar_factory(faults=plan) as sidecar:
        runner = BenchmarkRunner(sidecar.mcp_url, hardened=True)
        runner.initialize()
        try:
            runner.run()
        except HarnessError:
            pass
        finally:
            runner.close()
    runner_spans.assert_cleanup_never_flips()
    assert runner_spans.one("Agent.Session").ended  # this example's session, recorded once


# --8<-- [end:fixture]
