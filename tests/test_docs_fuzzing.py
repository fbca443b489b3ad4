"""docs/fuzzing.md's "A runner that owns its provider", measured: what goes wrong without the recipe.

* ``mcp_spans`` (function-scoped) in a ``@given`` test fails Hypothesis' ``function_scoped_fixture``
  health check;
* a recorder kept across examples but not emptied per example makes every example after the first flip
  fail on the stale span, so Hypothesis reports a plan that does not flip at all (the recipe, in
  docs/examples/fuzzing_own_provider_test.py, finds the incident's ``BackendGone`` at the delete)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"

PRELUDE = f"""
import sys

import pytest
from hypothesis import given, settings

sys.path.insert(0, {str(EXAMPLES)!r})
from fuzzing_harness import HarnessError
from fuzzing_own_provider_test import BenchmarkRunner, plans

from pytest_mcpfaults.spans import install_recorder


def run(mcp_sidecar_factory, plan):
    with mcp_sidecar_factory(faults=plan) as sidecar:
        runner = BenchmarkRunner(sidecar.mcp_url, hardened=False)
        runner.initialize()
        try:
            runner.run()
        except HarnessError:
            pass
        finally:
            runner.close()
"""

WITH_MCP_SPANS = (
    PRELUDE
    + """
@settings(max_examples=5, database=None, deadline=None)
@given(plan=plans)
def test_uses_mcp_spans(mcp_sidecar_factory, mcp_spans, plan):
    run(mcp_sidecar_factory, plan)
"""
)

NOT_CLEARED = (
    PRELUDE
    + """
@pytest.fixture(scope="module")
def runner_spans():
    recorder = install_recorder()
    with recorder.watch_providers():
        yield recorder


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(plan=plans)
def test_never_flips_but_never_cleared(mcp_sidecar_factory, runner_spans, plan):
    run(mcp_sidecar_factory, plan)  # no runner_spans.clear(): spans pile up across examples
    runner_spans.assert_cleanup_never_flips()
"""
)

# pytester's runs load only the plugins named (autoload is off): Hypothesis' own pytest plugin, which
# does the health check, must be named
PLUGINS = ("-p", "mcpfaults", "-p", "_hypothesis_pytestplugin", "-p", "no:cacheprovider")
ARGS = (*PLUGINS, "-o", "asyncio_default_fixture_loop_scope=function")


def test_mcp_spans_in_a_given_test_fails_the_function_scoped_fixture_health_check(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_fuzz=WITH_MCP_SPANS)
    result = pytester.runpytest_subprocess(*ARGS, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FailedHealthCheck: *uses a function-scoped fixture 'mcp_spans'*"])


@pytest.mark.timeout(300)
def test_a_recorder_not_cleared_per_example_reports_a_plan_that_does_not_flip(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_fuzz=NOT_CLEARED)
    result = pytester.runpytest_subprocess(*ARGS, timeout=240)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "SpanInvariantError" in out and "[cleanup_never_flips]" in out
    # the failing example's tree holds the sessions of many examples, and the plan Hypothesis reports is
    # not the one that flips (the recipe's is: BackendGone at the delete)
    tree = out.split("Span tree:", 1)[1]
    roots = [line for line in tree.splitlines() if line.startswith("E       Agent.Session [")]
    assert len(roots) > 2, tree[:2000]
    [reported] = re.findall(r"^E\s+plan=(.*),$", out, re.M)  # Hypothesis' failing test case
    assert reported != "[BackendGone(when=Trigger('tool:delete_session'))]", reported
