"""Docs are part of the feature: their code runs, and what they quote is what runs.

* every example under docs/examples/ passes when run the way users run the plugin (`-p mcpfaults`);
* every Python code block in docs/*.md and README.md is either a snippet include of such a file or
  appears verbatim in one (so no doc shows code that was never run);
* every snippet include names a file (and section) that exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = sorted((DOCS / "examples").glob("*.py"))
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_SNIPPET = re.compile(r'^--8<-- "([^"]+?)(?::([A-Za-z0-9_-]+))?"\s*$')
# The framework recipes (docs/examples/frameworks/) run in their own tox envs, not here; docs quote them.
_SOURCES = [
    *EXAMPLES,
    *sorted((DOCS / "examples" / "frameworks").glob("*.py")),
    *sorted((ROOT / "examples").rglob("*.py")),
]


def _pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]


def _flat(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines())


def _blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text())


def test_there_are_examples_and_pages() -> None:
    assert len(EXAMPLES) >= 3
    assert (DOCS / "index.md").exists() and (DOCS / "quickstart.md").exists()


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_python_blocks_come_from_files_that_run(page: Path) -> None:
    flat_sources = _flat("\n".join(p.read_text() for p in _SOURCES))
    for block in _blocks(page):
        lines = block.strip().splitlines()
        if len(lines) == 1 and (m := _SNIPPET.match(lines[0])):
            target = ROOT / m[1]
            assert target.exists(), f"{page.name}: snippet names a missing file {m[1]}"
            if m[2]:
                assert f"[start:{m[2]}]" in target.read_text(), f"{page.name}: no section {m[2]!r} in {m[1]}"
            continue
        # Compared line by line without indentation, so a method quoted dedented still matches.
        assert _flat(block) in flat_sources, (
            f"{page.name}: this code block is not taken from a file that runs:\n{block}"
        )


@pytest.mark.timeout(600)
def test_doc_examples_pass(pytester: pytest.Pytester) -> None:
    # One process, not `-n 2`: the suite's own workers fill its waits, and two inner workers cost 10 s
    # more CPU (each starts, imports and collects every example) for 12 s less wall of this test alone.
    result = pytester.runpytest_subprocess(
        "-p",
        "mcpfaults",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        *map(str, EXAMPLES),
        timeout=300,
    )
    outcomes = result.parseoutcomes()
    failed = [line for line in result.outlines if line.startswith(("FAILED ", "ERROR "))]
    assert result.ret == 0, "\n".join([*failed, "", result.stdout.str()[-4000:]])  # which ones, first
    assert outcomes.get("passed", 0) >= 10
    # The only skip allowed is the mcp 1.x recipe, which runs in the tox env `mcp1`.
    assert outcomes.get("skipped", 0) <= 1


@pytest.mark.timeout(300)
@pytest.mark.skipif(sys.version_info < (3, 11), reason="the docs toolchain is installed on Python 3.11+ only")
def test_docs_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # No -q: mkdocs 1.6 counts for --strict only the warnings it logs, and -q logs none of them (with -q
    # this test passed while the build aborted on two griffe warnings).
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    assert (site / "faults" / "index.html").exists()
    assert "Catching the cleanup flip" in (site / "catching-the-flip" / "index.html").read_text()
    # the API page as the build expands it: every public name and fixture has its anchor
    import pytest_mcpfaults
    from pytest_mcpfaults import faults

    sys.path.insert(0, str(DOCS))
    import hooks

    anchors = set(re.findall(r' id="([^"]+)"', (site / "api" / "index.html").read_text()))
    assert {f"pytest_mcpfaults.{n}" for n in pytest_mcpfaults.__all__} <= anchors
    assert {
        f"pytest_mcpfaults.faults.{n}" for n in faults.__all__ if n not in pytest_mcpfaults.__all__
    } <= anchors
    assert {name for name, *_ in hooks.fixtures()} <= anchors


def test_ci_builds_the_docs_site_strictly_after_the_lint_lines() -> None:
    """`.ci/run` builds the site with ``--strict`` (so a griffe warning cannot break it unseen), after
    ruff and mypy, into a temporary directory (no ``site/`` left in the tree)."""
    ci = (ROOT / ".ci" / "run").read_text()
    after_lint = ci.split('run ".venv/bin/mypy"', 1)[1]
    build = re.search(r'^run "(?:\w+=\S+ )*\.venv/bin/mkdocs build --strict (.*)"$', after_lint, re.M)
    assert build is not None, "CI does not run `.venv/bin/mkdocs build --strict` after mypy"
    target = re.search(r"-d (\S+)", build[1])
    assert target is not None and target[1] == "$site_dir", build[0]
    quiet = re.search(r"(^| )(-q|--quiet)( |$)", build[1])
    assert not quiet, f"-q hides the warnings --strict counts: {build[0]}"
    assert re.search(r"^site_dir=\$\(mktemp -d\)$", ci, re.M), "the site is not built in a temporary dir"
