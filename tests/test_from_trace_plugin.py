"""``--mcpfaults-from-trace`` and ``@pytest.mark.mcp_from_trace`` through pytest, end to end on the
bundled example harness: traces the OTel SDK exports (``tests/trace_export.py``) from the unhardened
runner under each catalogue fault that flips its cleanup replay against the clean example test
(``test_example_faults.py::test_clean_run``), with no fault written by hand, in one child pytest per
runner: each trace's replay fails on the unhardened runner with exactly the invariants the trace broke
and is behaviour under fault on the hardened one, whose run passes with no violation. Bad input is
refused at once, in process.

The traces are made here, at test time, by the real SDK on the real runner under the real fault (what
a committed copy would be checked against anyway, for the same cost), but for the page's example
(``docs/examples/from_trace/unhardened.json``, ``backend_gone``), whose quoted output names its trace id:
that one is committed, replayed as the ``backend_gone`` trace, and compared here with a fresh export's
shape (the same spans, the same ones ERROR)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_quotes import assert_quoted_lines_occur, quoted_block
from trace_export import otlp_json, unhardened_exports
from trace_shapes import TRACE as OTHER
from trace_shapes import incident_bytes

from pytest_mcpfaults.from_trace.read import decode_trace
from pytest_mcpfaults.from_trace.shape import shape_differences
from pytest_mcpfaults.from_trace.trace import Trace, pick_trace
from pytest_mcpfaults.invariants import check_all
from pytest_mcpfaults.spans.queries import DEFAULT_SESSION

ROOT = Path(__file__).resolve().parent.parent
TRACE_FILE = ROOT / "docs/examples/from_trace/unhardened.json"
PAGE = ROOT / "docs/from-trace.md"
TRACE = pick_trace(decode_trace(TRACE_FILE.read_bytes(), "t").spans, "t", DEFAULT_SESSION)
PROBE = "6781e74a4c4a8121f4657f0b5cded3bb"  # the file's other trace: the runner's readiness probe
GONE = "backend_gone@tool:delete_session[times=1]"
DIE = "die@tool:delete_session[times=1]"
EXPIRED = "session_expired@tool:delete_session[times=1]"
#: Each catalogue fault that flips the unhardened runner's cleanup, at its delete: the kind of the first
#: fault the plan inferred from its trace starts with.
KINDS = {
    GONE: "error_payload",
    "error_payload(reason='backend timed out')@tool:delete_session[times=1]": "error_payload",
    "jsonrpc_error(code=-32001,message='backend busy')@tool:delete_session[times=1]": "jsonrpc_error",
    "tool_error(text='delete failed')@tool:delete_session[times=1]": "error_payload",
    DIE: "reset",
    "reset@tool:delete_session[times=1]": "reset",
    EXPIRED: "session_expired",
    "status(code=500)@tool:delete_session[times=1]": "status",
    "hang@tool:delete_session[times=1]": "hang",
    "stall@tool:delete_session[times=1]": "hang",
    # what the trace shows, not the kind that made it: a frozen sidecar's cut connection, a cut body
    "freeze@tool:delete_session[times=1]": "reset",
    "truncate@tool:delete_session[times=1]": "reset",
    # an MCP error's text the client reported (a terminating server's 503, a body it could not parse)
    "terminating@tool:delete_session[times=1]": "jsonrpc_error",
    "malformed_json@tool:delete_session[times=1]": "jsonrpc_error",
}
#: The example runner's longest own bound is its call timeout (15 s): a held request is held for the
#: patience budget, so the budget must outlast the runner's own waits (as tests/test_explore_example.py).
OPTIONS = "patience=20"


#: The marker's form, on a test of the unhardened copy (its path relative to the test's file).
MARKED = """
import pytest


@pytest.mark.mcp_from_trace("unhardened.json")
@pytest.mark.mcp_sidecar(era="session", patience=5.0)
async def test_incident(mcp_sidecar, mcp_spans, make_runner):
    await make_runner(mcp_sidecar).run(["task-1"])
    mcp_spans.assert_invariants()
"""


def _start(where: Path, variant: str, args: list[str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:randomly"]
    cmd += ["test_example_faults.py::test_clean_run", f"--runner-variant={variant}", "-rA"]
    if variant == "unhardened":
        (where / "test_incident.py").write_text(MARKED, encoding="utf-8")
        cmd.append("test_incident.py")
    cmd += args
    cmd += ["-o", f"mcpfaults_explore={OPTIONS}", "-p", "pytest_asyncio.plugin"]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env |= {"COLUMNS": "200", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.Popen(
        cmd, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _trace(data: bytes) -> Trace:
    return pick_trace(decode_trace(data, "t").spans, "t", DEFAULT_SESSION)


@pytest.fixture(scope="module")
def exports() -> dict[str, bytes]:
    """Each fault's trace as the SDK's OTLP exporter encodes it, from the unhardened runner under it."""
    return dict(zip(KINDS, unhardened_exports(list(KINDS)), strict=True))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, exports: dict[str, bytes]) -> dict[str, tuple[int, str]]:
    """Each runner's child pytest, replaying every fault's trace (the page's committed export for
    ``backend_gone``): its exit status and output."""
    tmp = tmp_path_factory.mktemp("from_trace")
    procs = {}
    for variant in ("unhardened", "hardened"):
        where = tmp / variant
        shutil.copytree(
            ROOT / "examples", where, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
        )
        shutil.copy(TRACE_FILE, where / "unhardened.json")
        fresh = {f: data for f, data in exports.items() if f != GONE}
        args = ["--mcpfaults-from-trace=unhardened.json"]
        if variant == "unhardened":  # each trace a file of its own, as the SDK's OTLP exporter encodes it
            for i, data in enumerate(fresh.values()):
                (where / f"{i}.pb").write_bytes(data)
                args.append(f"--mcpfaults-from-trace={i}.pb")
        else:  # all in one file, one OTLP/JSON export a line (as a collector writes), each named by its id
            lines = [json.dumps(json.loads(otlp_json(data))) for data in fresh.values()]
            (where / "traces.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            args.append("--mcpfaults-from-trace=traces.jsonl")
            args += [f"--mcpfaults-from-trace-id={_trace(data).trace_id_hex}" for data in fresh.values()]
        (where / "pytest.ini").write_text(
            "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
        )
        procs[variant] = _start(where, variant, args)
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


def _replayed(exports: dict[str, bytes]) -> dict[str, Trace]:
    """Each fault's trace as the children replay it (the page's committed one for ``backend_gone``)."""
    return {f: TRACE if f == GONE else _trace(data) for f, data in exports.items()}


def _summary(out: str, trace: Trace) -> str:
    """The terminal summary's lines for ``trace`` (from its ``trace <id>`` line to the next trace's)."""
    found = re.search(rf"^  trace {trace.trace_id_hex} .*?(?=^  trace |^=|\Z)", out, re.M | re.S)
    assert found is not None, out
    return found[0]


def test_the_pages_export_is_what_trace_export_writes(exports: dict[str, bytes]) -> None:
    """The committed export has a fresh one's shape: the same spans, the same ones ERROR."""
    fresh = _trace(exports[GONE])
    assert [s.name for s in fresh.spans] == [s.name for s in TRACE.spans]
    assert shape_differences(TRACE, list(fresh.spans), DEFAULT_SESSION) == []
    assert [s.failed for s in fresh.spans] == [s.failed for s in TRACE.spans]


def test_the_unhardened_runner_fails_each_replay_with_the_invariants_its_trace_broke(
    runs: dict[str, tuple[int, str]], exports: dict[str, bytes]
) -> None:
    code, out = runs["unhardened"]
    assert code == 1, out
    replayed = _replayed(exports)
    assert "PASSED test_example_faults.py::test_clean_run[explore:clean]" in out
    failed = re.findall(r"^FAILED \S+?\.py::(\S+)", out, re.M)
    items = [f"test_clean_run[from-trace:{t.trace_id_hex}]" for t in replayed.values()]
    assert failed == [*items, f"test_incident[from-trace:{TRACE.trace_id_hex}]"], out
    for fault, trace in replayed.items():
        broke = sorted({v.invariant for v in check_all(list(trace.spans))})
        assert "cleanup_never_flips" in broke, fault  # the incident's shape: the failed delete flipped it
        item = f"test_clean_run[from-trace:{trace.trace_id_hex}]"
        found = re.search(rf"{re.escape(item)}: explore (\S+)(?:: also (.*))?$", out, re.M)
        assert found is not None, (fault, out)
        invariants = sorted([found[1], *(found[2].split(", ") if found[2] else [])])
        assert invariants == [f"invariant:{name}" for name in broke], (fault, out)
        # what was inferred (no fault written by hand), and its replay reproduced the trace's shape
        summary = _summary(out, trace)
        plan = re.search(r"^  plan: @pytest\.mark\.mcp_sidecar\(faults=\[['\"](\w+)", summary, re.M)
        assert plan is not None and plan[1] == KINDS[fault], (fault, summary)
        assert "MCP.DeleteSession (span " in summary and "→ tool:delete_session#1 → " in summary
        assert f"from-trace:{trace.trace_id_hex}: the replay has the trace's shape" in summary, summary
    assert "→ error_payload at tool:delete_session#1, " in out  # why, in the failure's own section
    # a refused delete after a cut one: the first delete's connection cut, the retry's refused
    died = _summary(out, _trace(exports[DIE]))
    assert "faults=['reset@tool:delete_session[nth=1]', 'die@tool:delete_session[nth=2]']" in died, died


def test_the_hardened_runner_passes_each_replay(
    runs: dict[str, tuple[int, str]], exports: dict[str, bytes]
) -> None:
    code, out = runs["hardened"]
    assert code == 0, out
    assert not re.search(r"^(FAILED|ERROR) ", out, re.M), out
    # explore's section counts the replays as from-trace's, not as a campaign of steps × kinds
    assert re.search(r"^  from-trace: [1-9]\d* replayed: 0 violations, ", out, re.M), out
    assert " steps × " not in out, out
    for fault, trace in _replayed(exports).items():
        # the fault fired, and the own assertions that failed under it are behaviour under fault
        item = re.escape(f"test_clean_run[from-trace:{trace.trace_id_hex}]")
        assert re.search(rf"^XFAIL test_example_faults\.py::{item} - behaviour under fault", out, re.M), fault
    # the hardened runner takes an unknown session for one already deleted: its delete is not ERROR, not
    # the trace's shape, so the next plans are tried, each passing or behaviour under fault; a wrapped
    # answer fits the tool call only, so backend_gone's one plan is all there is
    expired = _trace(exports[EXPIRED]).trace_id_hex
    assert f"[from-trace:{expired}:plan2]" in out
    assert f"[from-trace:{TRACE.trace_id_hex}:plan2]" not in out


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
        (  # xdist's workers named one by one (no -n): distributed all the same
            ["--mcpfaults-from-trace=trace.json", "--tx", "popen", "--dist", "load"],
            "--mcpfaults-from-trace=trace.json: its replays are made during the run; run it without -n",
        ),
        (
            ["--mcpfaults-from-trace-id=00ff"],
            "--mcpfaults-from-trace-id=00ff: needs --mcpfaults-from-trace=PATH",
        ),
        # several files: an id none holds, the same trace twice, an id that is not one
        (
            [f"--mcpfaults-from-trace={f}" for f in ("trace.json", "other.json")]
            + ["--mcpfaults-from-trace-id=00ff"],
            "--mcpfaults-from-trace-id=00ff: "
            f"no trace with trace_id=00ff in any file: trace.json has {PROBE}, {TRACE.trace_id_hex}; "
            f"other.json has {OTHER}",
        ),
        (
            ["--mcpfaults-from-trace=trace.json", "--mcpfaults-from-trace=copy.json"],
            "--mcpfaults-from-trace=trace.json --mcpfaults-from-trace=copy.json: "
            f"trace {TRACE.trace_id_hex} is in both; each trace is replayed once",
        ),
        (
            [f"--mcpfaults-from-trace={f}" for f in ("trace.json", "other.json")]
            + ["--mcpfaults-from-trace-id=zz"],
            "--mcpfaults-from-trace=trace.json --mcpfaults-from-trace-id=zz: trace_id='zz': a trace id is "
            "32 hex digits; trace.json has: ",
        ),
        # one trace named twice, spelt two ways (case, a 0x prefix): replayed once, or it is two items
        (
            [
                "--mcpfaults-from-trace=trace.json",
                f"--mcpfaults-from-trace-id={TRACE.trace_id_hex}",
                f"--mcpfaults-from-trace-id=0x{TRACE.trace_id_hex.upper()}",
            ],
            f"--mcpfaults-from-trace-id={TRACE.trace_id_hex} "
            f"--mcpfaults-from-trace-id=0x{TRACE.trace_id_hex.upper()}: both name trace "
            f"{TRACE.trace_id_hex}; each trace is replayed once",
        ),
        # a file of several session traces, none named: which one is ambiguous
        (
            ["--mcpfaults-from-trace=both.jsonl"],
            "--mcpfaults-from-trace=both.jsonl: both.jsonl: 3 traces in the file, 2 with a session span; "
            "name one with trace_id=: "
            f"{OTHER}, {TRACE.trace_id_hex}",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makefile(".txt", notes="not a trace")
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    shutil.copy(TRACE_FILE, pytester.path / "copy.json")
    (pytester.path / "other.json").write_bytes(incident_bytes())
    lines = [json.dumps(json.loads(TRACE_FILE.read_bytes())), incident_bytes().decode()]
    (pytester.path / "both.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
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
        ("mcp_from_trace('trace.json', path='trace.json')", "expected mcp_from_trace(path, trace_id=None)"),
        (
            "mcp_from_trace('trace.json')\n@pytest.mark.mcp_from_trace('trace.json')",
            "@pytest.mark.mcp_from_trace: one trace per test (mcp_from_trace(path, trace_id=None): path a "
            "trace file, trace_id 32 hex digits or None); the test has it 2 times",
        ),
        (  # its clean run would run under them, and the trace's faults be inferred against a faulty run
            "mcp_from_trace('trace.json')\n@pytest.mark.mcp_sidecar(faults=['die@tool:echo[nth=1]'])",
            "test_x: @pytest.mark.mcp_from_trace: the test's @pytest.mark.mcp_sidecar has faults= "
            "(['die@tool:echo[nth=1]']): its clean run, the trace's replay is inferred against, would "
            "run under them; drop faults= (a replay runs the trace's faults)",
        ),
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


def test_the_option_on_an_explored_test_with_faults_of_its_own_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    """``@pytest.mark.mcp_explore`` explores a test with its own ``faults=``: the option would replay the
    trace against a clean run under those faults."""
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.mcp_explore\n@pytest.mark.mcp_stdio(faults=['die@tool:echo[nth=1]'])\n"
        "def test_x(mcp_stdio_server):\n    pass\n"
    )
    result = _run(pytester, "--mcpfaults-from-trace=trace.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (
        "test_x: --mcpfaults-from-trace: the test's @pytest.mark.mcp_stdio has faults= "
        "(['die@tool:echo[nth=1]']): its clean run, the trace's replay is inferred against, would run "
        "under them; drop faults= (a replay runs the trace's faults)"
    ) in result.stdout.str()


def test_the_option_with_no_clean_test_to_replay_against_says_so(pytester: pytest.Pytester) -> None:
    """The trace was read, but no test is one explore selects: the summary says nothing was replayed."""
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = _run(pytester, "--mcpfaults-from-trace=trace.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= mcpfaults from-trace =*",
            f"trace {TRACE.trace_id_hex} (trace.json): not replayed: no test explore selects ran clean and "
            "passed (a test using a sidecar fixture with no faults= of its own, see docs/explore.md)",
        ]
    )


def test_a_rerun_replay_is_one_replay_and_its_next_plan_is_made_once(pytester: pytest.Pytester) -> None:
    """Under pytest-rerunfailures a failed replay runs again; each attempt inserted the next plan (two
    items of one id) and added its shape's lines again."""
    trace = json.loads(TRACE_FILE.read_bytes())  # the page's trace, its failure a plain text: two plans
    spans = [sp for rs in trace["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    for sp in (sp for sp in spans if sp.get("status", {}).get("message")):
        sp["status"]["message"], sp["events"] = "RuntimeError: boom", []
    (pytester.path / "trace.json").write_text(json.dumps(trace))
    shutil.copy(ROOT / "docs/examples/from_trace_test.py", pytester.path / "hardened_session.py")
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_x="import pytest\nfrom hardened_session import run_session\n\n\n"
        "@pytest.mark.mcp_from_trace('trace.json')\n@pytest.mark.mcp_sidecar(era='session')\n"
        "async def test_x(mcp_sidecar, mcp_spans):\n"
        "    if await run_session(mcp_sidecar.mcp_url) != 'ok':\n"
        "        raise RuntimeError('the harness gave up')  # a violation: the replay fails, and reruns\n"
    )
    result = _run(pytester, "--reruns", "1")
    out = result.stdout.str()
    assert result.parseoutcomes() == {"passed": 1, "failed": 2, "rerun": 2}, out
    plan2 = f"test_x[from-trace:{TRACE.trace_id_hex}:plan2]"
    assert out.count(f"FAILED test_x.py::{plan2}") == 1, out
    for rid in (f"from-trace:{TRACE.trace_id_hex}", f"from-trace:{TRACE.trace_id_hex}:plan2"):
        assert out.count(f"  {rid}: the replay's shape differs from the trace's:") == 1, out


def test_a_marked_test_under_xdist_is_a_collection_error_naming_it(pytester: pytest.Pytester) -> None:
    """A worker adds no item during the run: the replay would silently not run, and the test pass."""
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.mcp_from_trace('trace.json')\ndef test_x(mcp_sidecar):\n    pass\n"
    )
    result = _run(pytester, "-n", "1")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*test_x: @pytest.mark.mcp_from_trace: its replays are made during the run; run it without -n*"]
    )


def test_the_marker_takes_a_path_object_and_path_by_keyword(pytester: pytest.Pytester) -> None:
    """``Path(__file__).parent / "trace.json"`` is a path to a trace file (a str only was taken), and
    ``path=`` names the argument the signature names."""
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(
        "from pathlib import Path\nimport pytest\n\n"
        "@pytest.mark.mcp_from_trace(Path(__file__).parent / 'trace.json')\n"
        "def test_x(mcp_sidecar):\n    pass\n\n\n"
        "@pytest.mark.mcp_from_trace(path='trace.json', trace_id=None)  # as the signature reads\n"
        "def test_y(mcp_sidecar):\n    pass\n"
    )
    result = _run(pytester, "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


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


#: A harness that owns its tracer provider: built at import of the test's module, never made global
#: (docs/spans.md's "A harness that owns its provider"); the example runner, handed its tracer.
OWN_PROVIDER = """
import pytest
from harness import Runner, RunnerConfig
from opentelemetry.sdk.trace import TracerProvider

TRACER = TracerProvider().get_tracer("harness")


@pytest.mark.mcp_sidecar(era="session", patience=5.0)
async def test_clean_run(mcp_sidecar):
    config = RunnerConfig(mcp_sidecar.mcp_url, health_url=mcp_sidecar.health_url, health_interval=0.05)
    [result] = await Runner(config, tracer=TRACER).run(["task-1"])
    assert result.cleanup == "deleted"
"""


def _run_example_module(pytester: pytest.Pytester, module: str) -> pytest.RunResult:
    """``module`` as the test file beside a copy of the example harness, under the option alone (no gate,
    no explore flag) with the committed trace."""
    shutil.copytree(
        ROOT / "examples/harness", pytester.path / "harness", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(test_x=module)
    return _run(
        pytester,
        "--mcpfaults-from-trace=trace.json",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )


def test_the_option_sees_the_spans_of_a_provider_the_harness_built_at_import(
    pytester: pytest.Pytester,
) -> None:
    """The option alone (no gate, no explore flag) watches provider creation from configure on, as
    explore does: the clean run's spans are those of the harness's own provider, and the trace maps."""
    result = _run_example_module(pytester, OWN_PROVIDER)
    out = result.stdout.str()
    assert "nothing replayed" not in out, out
    mapped = "1. MCP.DeleteSession (span 205e76f52b9e261b) → tool:delete_session#1 → error_payload("
    assert mapped in out, out
    # the replay's spans are the harness's too: its fixed runner keeps the failed delete's ERROR off
    assert "(session #1) / MCP.DeleteSession #1: ERROR in the trace, not ERROR in the replay" in out, out
    result.assert_outcomes(passed=1, xfailed=1)  # the replay: behaviour under fault on this fixed runner


def test_the_marker_alone_sees_the_spans_of_a_provider_the_harness_built_at_import(
    pytester: pytest.Pytester,
) -> None:
    """The marker alone (no option, no gate, no explore flag) turns explore on only at collection, after
    the module built its provider: the providers built before are found then, and the trace maps."""
    marked = OWN_PROVIDER.replace(
        "@pytest.mark.mcp_sidecar(", '@pytest.mark.mcp_from_trace("trace.json")\n@pytest.mark.mcp_sidecar('
    )
    shutil.copytree(
        ROOT / "examples/harness", pytester.path / "harness", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(TRACE_FILE, pytester.path / "trace.json")
    pytester.makepyfile(test_x=marked)
    # a process of its own: the SDK is first imported by the test module, through the import hook
    args = ("-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function")
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-p", "no:cacheprovider", *args)
    out = result.stdout.str()
    assert "nothing replayed" not in out, out
    assert "1. MCP.DeleteSession (span 205e76f52b9e261b) → tool:delete_session#1 → error_payload(" in out, out
    result.assert_outcomes(passed=1, xfailed=1)


#: The example runner with a tracer no recorder sees (the OTel API's no-op one): its requests reach the
#: sidecar, its spans are nowhere, so the clean run has no session span and nothing is replayed.
UNSEEN = OWN_PROVIDER.replace(
    "from opentelemetry.sdk.trace import TracerProvider", "from opentelemetry.trace import NoOpTracer"
).replace('TracerProvider().get_tracer("harness")', "NoOpTracer()")


def test_a_replay_of_nothing_prints_why_and_no_explore_campaign(pytester: pytest.Pytester) -> None:
    """A from-trace test that replayed nothing had no explore campaign to run: the summary says why
    nothing was replayed, and no campaign line (steps × kinds, "the campaign did not run") for it."""
    result = _run_example_module(pytester, UNSEEN)
    out = result.stdout.str()
    explore = "test_x.py::test_clean_run\n  from-trace: nothing replayed (why: see mcpfaults from-trace)\n"
    assert explore in out, out
    why = f"  trace {TRACE.trace_id_hex} (trace.json): nothing replayed: test_x.py::test_clean_run (its clean"
    assert why in out, out
    assert "the clean run has no session span (session span names: Agent.Session)" in out, out
    assert "the campaign did not run in this session" not in out, out
    assert " steps × " not in out, out
    result.assert_outcomes(passed=1)
