"""The README's set-up commands stay true: exactly two, and .ci/run runs those very lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _setup_commands() -> list[str]:
    return [line for line in README.splitlines() if line.startswith("python3 -m venv .venv && ")]


def test_exactly_two_setup_commands() -> None:
    main, tests = _setup_commands()
    assert main.endswith(".venv/bin/pytest -p mcpfaults examples/")
    assert tests.endswith(".venv/bin/pytest")
    assert main.split(" && ")[:2] == tests.split(" && ")[:2]  # the same installation for both


def test_ci_runs_the_readme_commands() -> None:
    main, tests = _setup_commands()
    main_pattern = re.search(r'main_cmd=\$\(grep -m1 -- "([^"]+)" README.md\)', CI)
    test_pattern = re.search(r'test_cmd=\$\(grep -m1 -E "([^"]+)" README.md\)', CI)
    assert main_pattern and main_pattern[1] in main
    assert test_pattern and re.search(test_pattern[1].replace("\\.", r"\."), tests)
    assert 'run "$main_cmd"' in CI and 'run "$test_cmd"' in CI
    assert '"$rc" -eq 5' in CI  # pytest's "no tests" exit code fails CI


def test_readme_quick_start_is_a_file_that_runs() -> None:
    block = README.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == (ROOT / "docs" / "examples" / "readme_test.py").read_text()


def test_ci_runs_lint_and_mypy_after_the_tests() -> None:
    """The source checks moved out of the unit suite; CI must still run them, after the README's commands."""
    after = CI.split('run "$test_cmd"', 1)[1]
    assert '.venv/bin/ruff check $lint"' in after
    assert '.venv/bin/ruff format --check $lint"' in after
    assert 'run ".venv/bin/mypy"' in after
    assert 'lint="pytest_mcpfaults tests examples docs/examples benchmarks"' in CI
