"""The worked example (``examples/``) run the way the README's main command runs it, against both runners.

The hardened runner passes the whole fault suite; the unhardened one (the incident's) fails exactly the
tests whose cleanup fails, each with a message that names the flipped ``Agent.Session`` and
``MCP.DeleteSession`` as the cause. Both hold with the span gate on (``--mcpfaults-check-spans``),
Hypothesis property included, and the gate counts no violation twice. ``docs/catching-the-flip.md``
is checked against the example files (every code block verbatim) and against a real run (every line of
its pasted output).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from docs_quotes import assert_quoted_lines_occur

from pytest_mcpfaults.matrix import catalogue

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOC = ROOT / "docs" / "catching-the-flip.md"

#: The module fixture's four example runs are bounded at 300 s each (they run together): the first test
#: that uses them may wait that long, beyond the suite's default 120 s per test.
pytestmark = pytest.mark.timeout(600)

SUITE = [
    "test_clean_run",
    "test_sidecar_dies_after_session_creation",
    "test_backend_gone_at_delete",
    "test_agent_timeout_with_reaped_backend",
    "test_health_hangs",
    "test_slow_start",
    "test_health_body_stalls",
    "test_stalled_tool_body",
]
FLIPPED = {
    "test_sidecar_dies_after_session_creation",
    "test_backend_gone_at_delete",
    "test_agent_timeout_with_reaped_backend",
}
#: The teardown matrix (examples/test_example_matrix.py): every catalogue fault but the two /health ones,
#: by its test id.
MATRIX = [str(f) for f in catalogue(exclude=["flap", "absent"])]
#: Faults that slow cleanup down without breaking it: the unhardened runner survives only these.
HARMLESS = {
    "delay(seconds=0.2)@tool:delete_session",
    "drip(chunk_bytes=16)@tool:delete_session",
    "endless_sse@tool:delete_session",
}
#: What the runs end with: every test passes on the hardened runner; on the unhardened one the flipped
#: scenarios and the matrix entries that are not harmless fail. Every planned kind fires.
PASSED_ALL = len(SUITE) + len(MATRIX) + 1  # and the Hypothesis property
FAILED_UNHARDENED = len(FLIPPED) + len(set(MATRIX) - HARMLESS)
PASSED_UNHARDENED = PASSED_ALL - FAILED_UNHARDENED
COVERAGE = r"^mcpfaults: (\d+) kinds, \1 fired, 0 violations$"


def _start(*args: str) -> subprocess.Popen[str]:
    """Start ``pytest -p mcpfaults examples/ ARGS`` in a subprocess from the repository root, as the
    README runs it (no cache written)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "mcpfaults", "-p", "no:cacheprovider", "examples/", *args]
    # The width the page's pasted output was captured at; without CI/BUILD_NUMBER, which make pytest
    # print short-summary lines untruncated (as CI itself runs this test).
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")} | {"COLUMNS": "80"}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Wait for a run started by :func:`_start` (bounded at 300 s)."""
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the example run did not end within 300 s:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """``pytest -p mcpfaults examples/ ARGS``, bounded."""
    return _finish(_start(*args))


GATE = "--mcpfaults-check-spans"
#: The Hypothesis property (examples/test_example_property.py): latency faults at any step.
PROPERTY = "examples/test_example_property.py::test_latency_never_changes_a_session"


#: The runs the tests below read: each runner variant, with and without the span gate.
RUNS: tuple[tuple[str, ...], ...] = (("hardened",), ("unhardened",), ("hardened", GATE), ("unhardened", GATE))


@pytest.fixture(scope="module")
def example_run() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``example_run(variant, *extra)``: the example suite's run against that runner, with the extra
    options (``GATE``: the span gate on). The four runs of :data:`RUNS` are made on first use, two at
    a time (they mostly wait on the sidecar's faults, so two overlap well; the example runner's own
    budgets, 0.5-3 s, are the user's and stay as they are, so more at once, beside the other xdist
    worker on two cores, starve them), and each runs once."""
    runs: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}

    def get(variant: str, *extra: str) -> subprocess.CompletedProcess[str]:
        key = (variant, *extra)
        if not runs:
            for pair in (RUNS[:2], RUNS[2:]):
                started = {k: _start(f"--runner-variant={k[0]}", "-rA", *k[1:]) for k in pair}
                try:
                    runs.update({k: _finish(p) for k, p in started.items()})
                finally:  # interrupted (a timeout, Ctrl-C) or one of them failed: leave none running
                    for proc in started.values():
                        if proc.poll() is None:
                            proc.kill()
                            proc.communicate()
        if key not in runs:
            runs[key] = _run(f"--runner-variant={variant}", "-rA", *extra)
        return runs[key]

    return get


def _outcomes(stdout: str) -> dict[str, str]:
    """Test name → PASSED/FAILED from the ``-rA`` short summary."""
    found = re.findall(r"^(PASSED|FAILED) examples/test_example_faults\.py::(\w+)", stdout, re.M)
    return {name: outcome for outcome, name in found}


def _matrix_outcomes(stdout: str) -> dict[str, str]:
    """Matrix entry (the fault's test id) → PASSED/FAILED from the ``-rA`` short summary."""
    pattern = r"^(PASSED|FAILED) examples/test_example_matrix\.py::test_cleanup_under_every_fault\[([^\]]+)\]"
    return {fault: outcome for outcome, fault in re.findall(pattern, stdout, re.M)}


def _section(stdout: str, test: str) -> str:
    """The failure report of one test (from its ``___ name ___`` header to the next header)."""
    match = re.search(rf"^_+ {test} _+$(.*?)(?=^_+ \w+ _+$|^=+ )", stdout, re.M | re.S)
    assert match, f"no failure section for {test} in:\n{stdout}"
    return match.group(1)


def test_the_main_command_passes_on_the_hardened_runner(
    example_run: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    run = example_run("hardened")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "example harness: the hardened runner" in run.stdout
    assert _outcomes(run.stdout) == dict.fromkeys(SUITE, "PASSED")
    assert _matrix_outcomes(run.stdout) == dict.fromkeys(MATRIX, "PASSED")
    assert f"PASSED {PROPERTY}" in run.stdout
    assert re.search(rf"^=+ {PASSED_ALL} passed in [\d.]+s", run.stdout, re.M), run.stdout
    assert re.search(COVERAGE, run.stdout, re.M), run.stdout  # the readable closing summary


def test_the_unhardened_runner_fails_exactly_the_cleanup_tests(
    example_run: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    run = example_run("unhardened")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "example harness: the unhardened runner" in run.stdout
    assert _outcomes(run.stdout) == {name: "FAILED" if name in FLIPPED else "PASSED" for name in SUITE}
    assert _matrix_outcomes(run.stdout) == {f: "PASSED" if f in HARMLESS else "FAILED" for f in MATRIX}
    assert f"PASSED {PROPERTY}" in run.stdout  # latency alone does not flip even this runner
    failed, passed = FAILED_UNHARDENED, PASSED_UNHARDENED
    assert re.search(rf"^=+ {failed} failed, {passed} passed in [\d.]+s", run.stdout, re.M), run.stdout
    for fault in set(MATRIX) - HARMLESS:  # each matrix failure is the flip, as the coverage summary says
        entry = f"examples/test_example_matrix.py::test_cleanup_under_every_fault[{fault}]"
        assert f"{entry}: invariant cleanup_never_flips: Agent.Session is ERROR" in run.stdout, run.stdout
    for test in FLIPPED:
        text = _section(run.stdout, test)
        # The failure is the span invariant, raised by the test's first check, not some later assert.
        assert ">       mcp_spans.assert_invariants()" in text, text
        assert "SpanInvariantError" in text, text
        assert "- [cleanup_never_flips] Agent.Session is ERROR with description" in text, text
        assert (
            "which comes from a cleanup failure (cause: MCP.DeleteSession [ERROR: SessionDeletionError"
            in (text)
        )
        assert "E       Agent.Session [ERROR: SessionDeletionError: Session deletion failed" in text, text
        assert "E       └── MCP.DeleteSession [" in text, text


def test_the_span_gate_finds_no_false_alarm_in_the_suite_and_its_property(
    example_run: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """With --mcpfaults-check-spans every test is checked again after it ran, the Hypothesis property
    included (its examples' span ids repeat): the hardened runner still passes everything."""
    run = example_run("hardened", GATE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mcpfaults span gate: on (session spans: Agent.Session; cleanup spans: MCP.DeleteSession)" in (
        run.stdout
    )
    assert _outcomes(run.stdout) == dict.fromkeys(SUITE, "PASSED")
    assert _matrix_outcomes(run.stdout) == dict.fromkeys(MATRIX, "PASSED")
    assert f"PASSED {PROPERTY}" in run.stdout
    assert re.search(rf"^=+ {PASSED_ALL} passed in [\d.]+s", run.stdout, re.M), run.stdout
    assert re.search(COVERAGE, run.stdout, re.M), run.stdout


def test_the_span_gate_counts_the_unhardened_runners_violations_once(
    example_run: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """The same failures with the gate on, and the same number of violations as without it: a
    violation the test's own assert_invariants() raised is not counted again by the gate."""
    plain, gated = example_run("unhardened"), example_run("unhardened", GATE)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert _outcomes(gated.stdout) == _outcomes(plain.stdout)
    assert _matrix_outcomes(gated.stdout) == _matrix_outcomes(plain.stdout)
    failed, passed = FAILED_UNHARDENED, PASSED_UNHARDENED
    assert re.search(rf"^=+ {failed} failed, {passed} passed in [\d.]+s", gated.stdout, re.M), gated.stdout

    def violations(stdout: str) -> list[str]:
        return re.findall(r"^mcpfaults: (?:\d+) kinds, (?:\d+) fired, (\d+) violations$", stdout, re.M)

    assert violations(gated.stdout) == violations(plain.stdout) != []
    assert "mcpfaults span gate (--mcpfaults-check-spans)" not in gated.stdout  # nothing new to add


def test_each_flip_is_explained_by_its_own_cause(
    example_run: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    run = example_run("unhardened")
    dies = _section(run.stdout, "test_sidecar_dies_after_session_creation")
    assert "(ConnectionRefusedError: Connection refused)" in dies  # the case-sensitive marker missed it
    assert "it must keep the primary failure, Agent.Call [ERROR: McpCallError: echo: " in dies
    assert "cleanup_at_most" not in dies  # the first delete was the handler's: one cleanup only

    gone = _section(run.stdout, "test_backend_gone_at_delete")
    assert "is no longer alive'}" in gone
    assert "nothing but cleanup failed beneath it, so it must not be ERROR at all" in gone
    assert "- [cleanup_at_most] Agent.Session ran cleanup 2 times, at most 1 allowed" in gone
    assert "E       └── MCP.DeleteSession [UNSET]" in gone  # the retry "silently succeeds"

    timeout = _section(run.stdout, "test_agent_timeout_with_reaped_backend")
    primary = "it must keep the primary failure, Agent.Call [ERROR: AgentTimeout: agent did not finish"
    assert f"{primary} within 0.5 s]" in timeout
    assert "- [cleanup_at_most] Agent.Session ran cleanup 2 times" in timeout


# -- the walk-through page ---------------------------------------------------------------------------------


def _blocks(lang: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def _windows(path: Path, size: int) -> set[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {textwrap.dedent("\n".join(lines[i : i + size])) for i in range(len(lines) - size + 1)}


def test_every_python_block_of_the_walk_through_is_taken_from_the_examples() -> None:
    blocks = _blocks("python")
    assert len(blocks) >= 4, "the walk-through lost its code blocks"
    files = sorted(EXAMPLES.rglob("*.py"))
    for block in blocks:
        snippet = textwrap.dedent(block.rstrip("\n"))
        size = snippet.count("\n") + 1
        assert any(snippet in _windows(f, size) for f in files), (
            f"this code block of {DOC.name} is not verbatim in any file under examples/:\n{snippet}"
        )


def test_the_pasted_output_is_real(example_run: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    """Each line of the page's ``text`` output blocks occurs in a real unhardened run (ids, ports and
    durations aside), so the page cannot drift from what the suite prints."""
    blocks = _blocks("text")
    assert blocks, "the walk-through has no pasted output"
    real = example_run("unhardened").stdout.splitlines()
    for block in blocks:
        assert_quoted_lines_occur(block, real, f"docs/{DOC.name}")


# -- the runner's own input checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mcp_url": "127.0.0.1:8000/mcp"}, "mcp_url must be an http(s) URL, got '127.0.0.1:8000/mcp'"),
        ({"health_probes": 0}, "health_probes must be a positive integer, got 0"),
        ({"health_timeout": -1}, "health_timeout must be a positive number, got -1"),
        ({"agent_timeout": True}, "agent_timeout must be a positive number, got True"),
        ({"mode": "stateless"}, "mode must be 'legacy' or 'auto', got 'stateless'"),
    ],
)
def test_runner_config_names_the_bad_argument(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, object], message: str
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from harness import RunnerConfig

    with pytest.raises(ValueError, match=re.escape(message)):
        RunnerConfig(**{"mcp_url": "http://127.0.0.1:1/mcp", **kwargs})  # type: ignore[arg-type]
