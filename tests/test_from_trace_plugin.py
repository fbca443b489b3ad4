"""``--mcpfaults-from-trace`` and ``@pytest.mark.mcp_from_trace`` through pytest: a trace the OTel SDK
exported from the example's unhardened runner under a real fault (``docs/examples/from_trace/
unhardened.json``, written by ``tests/trace_export.py``) replays against the clean example test with no
fault written by hand, one child pytest per runner; and bad input refused at once, in process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_quotes import assert_quoted_lines_occur, quoted_block

from pytest_mcpfaults.from_trace.read import decode_trace
from pytest_mcpfaults.from_trace.trace import pick_trace
from pytest_mcpfaults.invariants import check_all
from pytest_mcpfaults.spans.queries import DEFAULT_SESSION

ROOT = Path(__file__).resolve().parent.parent
TRACE_FILE = ROOT / "docs/examples/from_trace/unhardened.json"
PAGE = ROOT / "docs/from-trace.md"
TRACE = pick_trace(decode_trace(TRACE_FILE.read_bytes(), "t").spans, "t", DEFAULT_SESSION)
PROBE = "6781e74a4c4a8121f4657f0b5cded3bb"  # the file's other trace: the runner's readiness probe
ITEM = f"test_clean_run[from-trace:{TRACE.trace_id_hex}]"


#: The marker's form, on a test of the unhardened copy (its path relative to the test's file).
MARKED = """
import pytest


@pytest.mark.mcp_from_trace("unhardened.json")
@pytest.mark.mcp_sidecar(era="session", patience=5.0)
async def test_incident(mcp_sidecar, mcp_spans, make_runner):
    await make_runner(mcp_sidecar).run(["task-1"])
    mcp_spans.assert_invariants()
"""


def _start(where: Path, variant: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:randomly"]
    cmd += ["test_example_faults.py::test_clean_run", f"--runner-variant={variant}", "-rA"]
    if variant == "unhardened":
        (where / "test_incident.py").write_text(MARKED, encoding="utf-8")
        cmd.append("test_incident.py")
    cmd += ["--mcpfaults-from-trace=unhardened.json", "-p", "pytest_asyncio.plugin"]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env |= {"COLUMNS": "200", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.Popen(
        cmd, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Each runner's child pytest: its exit status and output."""
    tmp = tmp_path_factory.mktemp("from_trace")
    procs = {}
    for variant in ("unhardened", "hardened"):
        where = tmp / variant
        shutil.copytree(
            ROOT / "examples", where, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
        )
        shutil.copy(TRACE_FILE, where / "unhardened.json")
        (where / "pytest.ini").write_text(
            "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
        )
        procs[variant] = _start(where, variant)
    out: dict[str, tuple[int, str]] = {}
    try:
        for variant, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            out[variant] = (proc.returncode, stdout + stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return out


def test_the_unhardened_runner_fails_the_replay_with_the_invariants_the_trace_broke(
    runs: dict[str, tuple[int, str]],
) -> None:
    code, out = runs["unhardened"]
    assert code == 1, out
    broke = sorted({v.invariant for v in check_all(list(TRACE.spans))})
    assert "cleanup_never_flips" in broke  # the incident's shape
    assert "PASSED test_example_faults.py::test_clean_run[explore:clean]" in out
    failed = re.findall(r"^FAILED \S+?\.py::(\S+)", out, re.M)
    assert failed == [ITEM, f"test_incident[from-trace:{TRACE.trace_id_hex}]"], out
    found = re.search(rf"{re.escape(ITEM)}: explore (\S+)(?:: also (.*))?$", out, re.M)
    assert found is not None, out
    invariants = sorted([found[1], *(found[2].split(", ") if found[2] else [])])
    assert invariants == [f"invariant:{name}" for name in broke], out
    # the failure says what was inferred and why, and the replay reproduced the trace's shape
    assert "mcpfaults from-trace" in out
    assert "→ error_payload at tool:delete_session#1, " in out
    assert f"from-trace:{TRACE.trace_id_hex}: the replay has the trace's shape (the same spans ERROR)" in out


def test_the_hardened_runner_passes_the_replay(runs: dict[str, tuple[int, str]]) -> None:
    code, out = runs["hardened"]
    assert code == 0, out
    assert not re.search(r"^(FAILED|ERROR) ", out, re.M), out
    # the fault fired and the own assertions that failed under it are behaviour under fault
    assert re.search(rf"^XFAIL test_example_faults\.py::{re.escape(ITEM)} - behaviour under fault", out, re.M)
    assert "0 violations" in out


def test_the_page_quotes_what_the_unhardened_run_prints(runs: dict[str, tuple[int, str]]) -> None:
    quote = quoted_block(PAGE.read_text(), "FAILED test_example_faults.py", "  from-trace:")
    assert quote, "the page lost its quoted output"
    assert_quoted_lines_occur(quote, runs["unhardened"][1].splitlines(), "docs/from-trace.md")


# -- bad input, in process -----------------------------------------------------------------------------


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "mcpfaults", "-p", "no:cacheprovider", *args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--mcpfaults-from-trace=missing.json"],
            "--mcpfaults-from-trace=missing.json: cannot read ",
        ),
        (["--mcpfaults-from-trace=notes.txt"], "--mcpfaults-from-trace=notes.txt: notes.txt"),
        (
            ["--mcpfaults-from-trace=trace.json", "--mcpfaults-from-trace-id=00ff"],
            f"trace.json: no trace with trace_id=00ff; it has: {PROBE}, {TRACE.trace_id_hex}",
        ),
        (
            ["--mcpfaults-from-trace=trace.json", "-n", "2"],
            "--mcpfaults-from-trace=trace.json: its replays are made during the run; run it without -n",
        ),
        (
            ["--mcpfaults-from-trace-id=00ff"],
            "--mcpfaults-from-trace-id=00ff: needs --mcpfaults-from-trace=PATH",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makefile(".txt", notes="not a trace")
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = _run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("mcp_from_trace()", "expected mcp_from_trace(path, trace_id=None)"),
        ("mcp_from_trace('trace.json', id='x')", "expected mcp_from_trace(path, trace_id=None)"),
        ("mcp_from_trace('nope.json')", "@pytest.mark.mcp_from_trace: cannot read"),
        ("mcp_from_trace('trace.json', trace_id=7)", "got trace_id=7"),
    ],
)
def test_a_bad_marker_is_a_collection_error_naming_it(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(f"import pytest\n\n@pytest.mark.{marker}\ndef test_x(mcp_sidecar):\n    pass\n")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert message in result.stdout.str()


def test_a_marked_test_without_a_sidecar_is_refused(pytester: pytest.Pytester) -> None:
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.mcp_from_trace('trace.json')\ndef test_x():\n    pass\n"
    )
    result = _run(pytester)
    assert "the test uses no sidecar fixture" in result.stdout.str()


def test_a_marked_test_whose_clean_run_has_no_session_span_fails_its_teardown_saying_why(
    pytester: pytest.Pytester,
) -> None:
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(
        test_x="import pytest\n\n@pytest.mark.mcp_from_trace('trace.json')\n"
        "@pytest.mark.mcp_sidecar(era='stateless')\ndef test_x(mcp_sidecar, mcp_spans):\n    pass\n"
    )
    result = _run(pytester, "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=1, errors=1)
    out = result.stdout.str()
    assert "from-trace (mcp_from_trace): nothing replayed: test_x.py::test_x (its clean run): " in out
    assert "the clean run has no session span (session span names: Agent.Session)" in out
    assert "test_x[from-trace:" not in out
