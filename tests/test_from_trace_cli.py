"""``python -m pytest_mcpfaults from-trace``: what it prints, its errors, and the regression test it
writes, run on the example harness (failing on the unhardened runner, passing on the hardened one)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trace_shapes import GONE_TEMPLATE, TRACE, clean_detail, export, incident, incident_bytes, span

ROOT = Path(__file__).resolve().parent.parent


def from_trace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest_mcpfaults", "from-trace", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "incident.json").write_bytes(incident_bytes())
    (tmp_path / "clean.json").write_text(json.dumps(clean_detail()))
    return tmp_path


def test_it_prints_span_request_and_fault_and_the_plan(files: Path) -> None:
    done = from_trace("incident.json", "--clean", "clean.json", cwd=files)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"trace {TRACE} (incident.json: OTLP/JSON, 5 spans)"
    assert lines[1].startswith("symptom: Agent.Session (span a1a1a1a1a1a1a1a1) ERROR: RuntimeError: ")
    fault = f'error_payload(message="{GONE_TEMPLATE}")@tool:delete_session[nth=1]'
    assert lines[2] == f"1. MCP.DeleteSession (span {'e1' * 8}) → tool:delete_session#1 → {fault}"
    assert lines[-1] == f"plan: @pytest.mark.mcp_sidecar(faults=[{fault!r}])"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere.json", "--clean", "clean.json"], "from-trace: cannot read nowhere.json: No such file"),
        (["clean.json", "--clean", "incident.json"], "from-trace: incident.json: a clean run is an object"),
        (["incident.json", "--clean", "clean.json", "--trace-id", "ab" * 16], "no trace with trace_id="),
        (
            ["incident.json", "--clean", "clean.json", "--write", "t.py"],
            "argument --write: needs --test NODEID",
        ),
        (
            ["incident.json", "--clean", "clean.json", "--test", "x"],
            "argument --test: expected path/to/test_x.py",
        ),
        (
            ["incident.json", "--clean", "clean.json", "--patience", "0"],
            "argument --patience: must be a number",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_file_or_argument(files: Path, args: list[str], message: str) -> None:
    done = from_trace(*args, cwd=files)
    assert done.returncode == 2
    assert message in done.stderr


def test_the_written_regression_test_fails_on_the_unhardened_runner_and_passes_on_the_hardened(
    tmp_path: Path,
) -> None:
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    (tmp_path / "incident.json").write_bytes(incident_bytes())
    (tmp_path / "clean.json").write_text(json.dumps(clean_detail()))
    done = from_trace(
        "incident.json", "--clean", "clean.json", "--write", "examples/test_regression.py",
        "--test", "examples/test_example_faults.py::test_clean_run", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"wrote examples/test_regression.py: test_regression_{TRACE[:8]}, test_clean_run under 1 fault(s)"
    )

    def run(variant: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pytest", "-p", "mcpfaults", "-p", "no:cacheprovider", "-q"]
        cmd += ["examples/test_regression.py", f"--runner-variant={variant}"]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    unhardened = run("unhardened")
    assert unhardened.returncode == 1, unhardened.stdout
    assert "SpanInvariantError" in unhardened.stdout and "cleanup_never_flips" in unhardened.stdout
    assert f"test_regression_{TRACE[:8]}" in unhardened.stdout
    hardened = run("hardened")
    assert hardened.returncode == 0, hardened.stdout
    assert "1 passed" in hardened.stdout


def test_a_trace_file_over_the_bound_is_refused_reading_one_byte_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_mcpfaults.from_trace import driver, read
    from pytest_mcpfaults.from_trace.read import TraceError

    monkeypatch.setattr(read, "MAX_TRACE_BYTES", 100)
    (tmp_path / "big.json").write_bytes(b" " * 10_000)
    reads: list[int] = []
    real_open = open

    def counting_open(path: str, mode: str = "r") -> object:
        f = real_open(path, mode)
        real_read = f.read
        f.read = lambda n=-1: (reads.append(n), real_read(n))[1]  # type: ignore[method-assign]
        return f

    monkeypatch.setattr("builtins.open", counting_open)
    with pytest.raises(TraceError, match=r"big\.json: over 100 bytes, the largest trace file read"):
        driver.read_file(str(tmp_path / "big.json"))
    assert reads == [101]


def test_the_pages_example_files_and_quoted_output_are_real() -> None:
    here = ROOT / "docs" / "examples" / "from_trace"
    assert json.loads((here / "incident.json").read_text()) == json.loads(incident_bytes())
    assert json.loads((here / "clean.json").read_text()) == clean_detail()
    done = from_trace(
        "docs/examples/from_trace/incident.json", "--clean", "docs/examples/from_trace/clean.json", cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (here / "output.txt").read_text()
    assert '--8<-- "docs/examples/from_trace/output.txt"' in (ROOT / "docs" / "from-trace.md").read_text()


def _in_process(*argv: str) -> tuple[int, str, str]:
    """The command run in this process (its exit status, stdout, stderr)."""
    import io

    from pytest_mcpfaults.cli import build_parser
    from pytest_mcpfaults.from_trace.driver import main

    out, err = io.StringIO(), io.StringIO()
    status = main(build_parser().parse_args(["from-trace", *argv]), out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("journal", "message"),
    [
        (["POST initialize"], "clean.json: journal[0]: a request is an object with a label"),
        ([{"server": 0, "start": 1.0}], "clean.json: journal[0]: a request is an object with a label"),
        ([{"label": "POST initialize", "server": "a"}], "clean.json: journal[0]: a request is an object"),
        ([{"label": "POST initialize", "start": "soon"}], "clean.json: journal[0]: a request is an object"),
    ],
)
def test_a_clean_run_with_a_bad_journal_record_exits_2_naming_it(
    files: Path, journal: list[object], message: str
) -> None:
    detail = clean_detail()
    (files / "clean.json").write_text(json.dumps({**detail, "journal": journal}))
    status, _, err = _in_process(str(files / "incident.json"), "--clean", str(files / "clean.json"))
    assert status == 2
    assert message in err


@pytest.mark.parametrize(
    ("clean", "message"),
    [
        ("missing.json", "from-trace: cannot read {files}/missing.json: No such file"),
        ("deep.json", "from-trace: {files}/deep.json: not JSON (maximum recursion depth"),
    ],
)
def test_an_unreadable_or_deep_clean_run_exits_2_saying_so(files: Path, clean: str, message: str) -> None:
    (files / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    status, _, err = _in_process(str(files / "incident.json"), "--clean", str(files / clean))
    assert status == 2
    assert message.format(files=files) in err


def test_a_regression_test_that_cannot_be_written_exits_2_naming_it(files: Path) -> None:
    incident, clean = str(files / "incident.json"), str(files / "clean.json")
    target, test = files / "test_r.py", files / "test_x.py"
    target.mkdir()
    test.write_text("def test_clean_run():\n    pass\n")
    status, _, err = _in_process(
        incident, "--clean", clean, "--write", str(target), "--test", f"{test}::test_clean_run"
    )
    assert status == 2
    assert f"from-trace: cannot write {target}: Is a directory" in err


def test_write_outside_the_clean_tests_folder_is_refused_naming_where_it_goes(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A regression module elsewhere could not import the clean test's module, nor see its conftest.py."""
    incident, clean, test = str(files / "incident.json"), str(files / "clean.json"), files / "test_x.py"
    test.write_text("def test_clean_run():\n    pass\n")
    (files / "other").mkdir()
    target = files / "other" / "test_r.py"
    with pytest.raises(SystemExit) as exited:
        _in_process(incident, "--clean", clean, "--write", str(target), "--test", f"{test}::test_clean_run")
    assert exited.value.code == 2
    assert (
        f"argument --write: {target} is not in the folder of {test}, where a regression module imports "
        f"test_x and sees its conftest.py: name a file there, e.g. {files / 'test_regression.py'}"
    ) in capsys.readouterr().err
    assert not target.exists()


def test_a_clean_run_span_whose_time_overflows_exits_2_naming_it(files: Path) -> None:
    detail = clean_detail()
    detail["spans"][0]["start"] = 1e300  # seconds: no integer nanoseconds hold it
    (files / "clean.json").write_text(json.dumps(detail))
    status, _, err = _in_process(str(files / "incident.json"), "--clean", str(files / "clean.json"))
    assert status == 2
    assert "clean.json: spans[0]: span 'Agent.Session': bad ids or times" in err


def test_a_blank_span_name_glob_is_an_error_naming_the_argument(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _in_process(str(files / "incident.json"), "--clean", str(files / "clean.json"), "--session= ")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --session: span name patterns must be non-blank strings, got ' '" in err


def test_there_is_no_cleanup_span_option_since_nothing_would_read_it(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--cleanup GLOB`` was accepted and read by nothing (a failed cleanup span is a cause like any
    other; only the session spans play a part): refused as unknown rather than silently ignored."""
    with pytest.raises(SystemExit) as exited:
        _in_process(str(files / "incident.json"), "--clean", str(files / "clean.json"), "--cleanup=x")
    assert exited.value.code == 2
    assert "unrecognized arguments: --cleanup=x" in capsys.readouterr().err


def test_write_does_not_overwrite_a_file_it_did_not_write(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--write`` given the clean test's own module (a slip of the keyboard) must not destroy it; a module
    from-trace wrote is rewritten."""
    incident, clean = str(files / "incident.json"), str(files / "clean.json")
    mine = files / "test_mine.py"
    mine.write_text("def test_clean_run():\n    pass\n")
    test = f"{mine}::test_clean_run"
    with pytest.raises(SystemExit) as exited:
        _in_process(incident, "--clean", clean, "--write", str(mine), "--test", test)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --write: {mine} exists and is not a regression test from-trace wrote" in err
    assert mine.read_text() == "def test_clean_run():\n    pass\n"
    written = files / "test_regression.py"
    for _ in range(2):  # written, then rewritten
        status, _, err = _in_process(incident, "--clean", clean, "--write", str(written), "--test", test)
        assert status == 0, err


def test_spans_with_a_repeated_span_id_are_counted_in_the_first_line(files: Path) -> None:
    """An exporter's retry writes a batch twice; two spans may share an id: the first is kept, and said."""
    spans = incident()
    (files / "incident.json").write_text(json.dumps(export(*spans, *spans[3:])))  # both deletes again
    status, out, err = _in_process(str(files / "incident.json"), "--clean", str(files / "clean.json"))
    assert status == 0, err
    assert out.splitlines()[0] == (
        f"trace {TRACE} ({files / 'incident.json'}: OTLP/JSON, 5 spans, "
        "2 spans with a span id seen before left out (the first kept))"
    )


def test_a_test_nodeid_whose_file_is_missing_is_refused_before_anything_is_written(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    incident, clean, target = str(files / "incident.json"), str(files / "clean.json"), files / "test_r.py"
    test = f"{files}/test_nowhere.py::test_clean_run"
    with pytest.raises(SystemExit) as exited:
        _in_process(incident, "--clean", clean, "--write", str(target), "--test", test)
    assert exited.value.code == 2
    assert f"argument --test: no file {files}/test_nowhere.py" in capsys.readouterr().err
    assert not target.exists()


def test_the_symptoms_and_the_spans_not_mapped_are_listed_bounded(files: Path) -> None:
    """A trace of many failed sessions and spans the clean run lacks printed a line for each of them."""
    sessions = [span(f"{0xA0 + i:02x}", "Agent.Session", None, 1000 + i, 9000, error="x") for i in range(12)]
    lost = [span(f"{0x10 + i:02x}", "Vendor.Thing", "a0", 2000 + i, 3000, error="boom") for i in range(15)]
    (files / "incident.json").write_text(json.dumps(export(*sessions, *lost)))
    status, out, err = _in_process(str(files / "incident.json"), "--clean", str(files / "clean.json"))
    assert status == 0, err
    lines = out.splitlines()
    assert sum(line.startswith("symptom: Agent.Session ") for line in lines) == 10
    assert "… and 2 more symptoms" in lines
    assert sum(line.startswith("- [unmatched] Vendor.Thing ") for line in lines) == 10
    assert lines[-1] == "… and 5 more spans not mapped"


def test_write_with_nothing_to_replay_writes_no_regression_test(files: Path) -> None:
    """A regression test of no fault runs the clean test clean: it would pass whatever the harness does."""
    spans = [dict(s, status={}) for s in incident()]  # no span failed
    (files / "incident.json").write_text(json.dumps(export(*spans)))
    (files / "test_x.py").write_text("def test_clean_run():\n    pass\n")
    target = files / "test_r.py"
    status, out, err = _in_process(
        str(files / "incident.json"), "--clean", str(files / "clean.json"),
        "--write", str(target), "--test", f"{files}/test_x.py::test_clean_run",
    )  # fmt: skip
    assert status == 2
    assert "no span of the trace failed but the session spans: nothing to replay" in out
    assert f"from-trace: {target} not written: the plan has no fault, so it would replay nothing" in err
    assert not target.exists()
