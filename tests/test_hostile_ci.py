"""Hostile input and load against the CI report, ``serve`` and argument validation (issue 14), each
attack as the adversarial pass wrote it: a worker killed in a test, SIGINT during a held request, a
report path under a file, a 300-request journal against a limit of 100, a non-ASCII control token, a
deeply nested control body, and values that used to be accepted (``inf`` patience, ``"false"`` for a
bool, a bare string for a list of origins, paths with a query, an empty tool set)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_mcpfaults import Sidecar, Tool
from pytest_mcpfaults.cli import DEFAULT_JOURNAL_LIMIT, main
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.report import Report, TestEntry, summary_lines
from pytest_mcpfaults.transports.control import Control

TOKEN = "t" * 32

# -- the CI report: a worker crash, an interrupt ----------------------------------------------------

CRASH_SUITE = textwrap.dedent(
    """
    import os

    import httpx
    import pytest

    @pytest.mark.mcp_sidecar(faults=["flap@health"])
    def test_crashes_worker(mcp_sidecar):
        httpx.get(mcp_sidecar.health_url, timeout=5)
        assert httpx.get(mcp_sidecar.health_url, timeout=5).status_code == 503   # flap fired
        os._exit(3)   # the worker dies: an OOM kill, a segfault, a harness calling os._exit

    @pytest.mark.mcp_sidecar(faults=["absent@health"])
    def test_after(mcp_sidecar):
        assert httpx.get(mcp_sidecar.health_url, timeout=5).status_code == 404
    """
)


def test_a_crashed_xdist_worker_keeps_its_test_and_fired_faults_in_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_crash=CRASH_SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "xdist", "-p", "mcpfaults", "-n", "2", "--mcpfaults-report=rep.json",
        "--mcpfaults-require=flap,absent", "--junitxml=junit.xml",
    )  # fmt: skip
    result.stdout.fnmatch_lines(["*worker 'gw?' crashed while running 'test_crash.py::test_crashes_worker'*"])
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the crash; the gate itself passed
    result.stdout.fnmatch_lines(
        [
            "flap *  1 *  1 *  1 *  1",
            "absent *  1 *  1 *  1 *  0",
            "2 tests used the plugin (2 sidecars, 1 failed, 1 of them crashed)",
            "mcpfaults gate passed: every required fault kind fired (flap, absent)",
        ]
    )

    report = json.loads((pytester.path / "rep.json").read_text())
    tests = {t["nodeid"]: t for t in report["tests"]}
    crashed = tests["test_crash.py::test_crashes_worker"]
    assert crashed["outcome"] == "crashed"
    assert crashed["fired"] == {"flap": 1}
    assert crashed["sidecars"] == [{"url": None, "era": None, "requests": None}]
    assert tests["test_crash.py::test_after"]["outcome"] == "passed"
    assert report["totals"]["outcomes"]["crashed"] == 1
    assert report["totals"]["failed"] == 1
    assert report["totals"]["fired"] == {"absent": 1, "flap": 1}
    assert report["gates"]["missing_required"] == []

    cases = [c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")]
    crashed_cases = [c for c in cases if c.get("name") == "test_crashes_worker"]
    assert len(crashed_cases) == 1  # one test case: the crash's error, closed with our properties
    case = crashed_cases[0]
    assert case.find("error") is not None or case.find("failure") is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props == {"mcpfaults.fired": "flap:1", "mcpfaults.crashed": "true"}


#: The held test waits in short joins: a lock wait (``Thread.join``) sleeps through a SIGINT that lands
#: on its way in, after CPython's last check for signals and before it sleeps (its release of the GIL
#: can wait there for another thread to take it, long on a loaded machine). The C handler has run, so
#: the interrupt is raised only when the wait ends: ``probe.join(120)`` slept 120 s (the probe's own
#: timeout; the hold ends only at teardown) and the run printed nothing after ``test_held.py``. A wait
#: of 0.1 s raises it at most 0.1 s late. The test sends one SIGINT, as a terminal does.
HELD_SUITE = textwrap.dedent(
    """
    import threading
    from pathlib import Path

    import httpx
    import pytest

    @pytest.mark.mcp_sidecar(faults=["hang@health"], patience=None)
    def test_held(mcp_sidecar):
        probe = threading.Thread(
            target=lambda: httpx.get(mcp_sidecar.health_url, timeout=120), daemon=True
        )
        probe.start()
        mcp_sidecar.wait_held(1, timeout=30)
        Path("held.flag").write_text("held")
        while probe.is_alive():   # SIGINT arrives here
            probe.join(0.1)
    """
)
#: In a file of its own: under ``--dist loadfile`` it runs on the other worker (serially, after the held
#: test: never reached).
OTHER_SUITE = "def test_never_reached(mcp_sidecar):\n    pass\n"


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_sigint_during_a_held_request_still_writes_the_report_with_the_interrupted_test(
    pytester: pytest.Pytester, xdist: bool
) -> None:
    """Ctrl-C as a terminal sends it: to the whole process group (the xdist controller and workers)."""
    pytester.makepyfile(test_held=HELD_SUITE, test_other=OTHER_SUITE)
    # Under xdist the other worker runs test_never_reached meanwhile: Ctrl-C comes once the controller
    # has its report too (its own logreport hook says so), not on a race with it.
    # A hung run is stopped with SIGUSR1 first: every process of it writes every thread's stack
    # (faulthandler) to the real stderr, which pytest's capturing does not hold during configure.
    pytester.makeconftest(
        """
        import faulthandler, os, signal
        from pathlib import Path

        def pytest_configure(config):
            global CONTROLLER, STACKS
            CONTROLLER = not hasattr(config, "workerinput")  # not a worker (whatever the environment)
            STACKS = os.fdopen(os.dup(2), "w")
            faulthandler.register(signal.SIGUSR1, file=STACKS, all_threads=True)

        def pytest_runtest_logreport(report):
            if report.when == "teardown" and CONTROLLER:
                Path("reported." + report.nodeid.rsplit("::", 1)[-1]).write_text("")
        """
    )
    flags = ["held.flag", *(["reported.test_never_reached"] if xdist else [])]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # pytest as `python -m pytest`, with Python's own SIGINT handler installed first: a process started
    # from a shell's background job inherits SIGINT ignored, and Python then leaves it ignored.
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'pytest'; runpy.run_module('pytest', run_name='__main__', alter_sys=True)"
    )
    cmd = [sys.executable, "-c", start, *(["-p", "xdist", "-n", "2", "--dist", "loadfile"] if xdist else [])]
    cmd += ["-p", "mcpfaults", "-p", "no:cacheprovider", "--mcpfaults-report=rep.json"]
    proc = subprocess.Popen(
        cmd,
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    processes = 3 if xdist else 1  # at most: the controller and its two workers
    try:
        # start-up, collection and one held request: seconds, tens of them on a loaded machine
        deadline = time.monotonic() + 60
        while not all((pytester.path / flag).exists() for flag in flags):
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            if time.monotonic() >= deadline:
                missing = [f for f in flags if not (pytester.path / f).exists()]
                raise AssertionError(f"{missing} not there after 60 s:\n{_stacks_then_kill(proc, processes)}")
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        try:  # every wait of the interrupted test and of the plugin's teardown is bounded (10 s the longest)
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say what the run was doing, not only that it hung
            written = "written" if (pytester.path / "rep.json").exists() else "not written"
            raise AssertionError(
                f"no exit within 60 s of SIGINT (rep.json {written}):\n{_stacks_then_kill(proc, processes)}"
            ) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    text = out.decode()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt" in text
    report = json.loads((pytester.path / "rep.json").read_text())
    tests = {t["nodeid"]: (t["outcome"], t["fired"]) for t in report["tests"]}
    assert tests.pop("test_held.py::test_held") == ("interrupted", {"hang": 1})
    assert tests == ({"test_other.py::test_never_reached": ("passed", {})} if xdist else {})
    assert report["totals"]["outcomes"]["interrupted"] == 1
    assert report["totals"]["failed"] == 0
    assert report["gates"]["failed"] is False  # gates are not evaluated on an interrupted run
    used = "2 tests used the plugin (2 sidecars" if xdist else "1 test used the plugin (1 sidecar"
    assert f"{used}, 0 failed, 1 interrupted)" in text


def _stacks_then_kill(proc: subprocess.Popen[bytes], processes: int) -> str:
    """What a hung child run printed, then every thread's stack of each of its ``processes`` (SIGUSR1:
    its conftest registers faulthandler), then SIGKILL to its process group."""
    os.killpg(proc.pid, signal.SIGUSR1)
    # each process writes its stacks from the signal handler once it next runs: wait for them all,
    # or 10 s (a process that has not registered the handler yet dies of SIGUSR1 instead)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            proc.communicate(timeout=0.2)
            break  # it exited
        except subprocess.TimeoutExpired as exc:  # its output so far: kept for the next communicate
            if (exc.output or b"").count(b"Current thread 0x") >= processes:
                break
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=10)
    return out.decode(errors="replace")


def test_crashed_and_interrupted_entries_round_trip_and_count() -> None:
    entries = [
        TestEntry("t::a", outcome="crashed", fired={"flap": 1}),
        TestEntry("t::b", outcome="interrupted", fired={"hang": 1}),
        TestEntry("t::c", outcome="passed"),
    ]
    report = Report(entries)
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert [t.outcome for t in again.tests] == ["crashed", "interrupted", "passed"]
    totals = again.totals()
    assert totals["outcomes"]["crashed"] == 1 and totals["outcomes"]["interrupted"] == 1
    assert totals["failed"] == 1  # crashed counts as failed; interrupted does not
    assert [(r.kind, r.failed) for r in again.coverage()] == [("hang", 0), ("flap", 1)]
    assert (
        "3 tests used the plugin (0 sidecars, 1 failed, 1 of them crashed, 1 interrupted)"
        in summary_lines(again)
    )


# -- the report path: checked before any test runs --------------------------------------------------


def _report_path_cases(root: Path) -> Iterator[tuple[str, str]]:
    (root / "afile").write_text("")
    (root / "adir").mkdir()
    yield "afile/r.json", f"{str(root / 'afile')!r} is a file, not a directory"
    yield "afile/deeper/r.json", f"{str(root / 'afile')!r} is a file, not a directory"
    yield "adir", "it is a directory"
    if Path("/proc/self").is_dir():  # a read-only file system: refused even for root
        yield "/proc/mcpfaults/r.json", "cannot create files in '/proc'"


def test_an_unwritable_report_path_is_a_usage_error_before_any_test_runs(
    pytester: pytest.Pytester, run_plugin: Any
) -> None:
    pytester.makepyfile(test_one="from pathlib import Path\ndef test_x():\n    Path('ran').write_text('x')\n")
    for path, why in list(_report_path_cases(pytester.path)):
        result = run_plugin(f"--mcpfaults-report={path}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (path, result.stdout.str(), result.stderr.str())
        err = result.stderr.str()
        assert f"--mcpfaults-report={pytester.path / path if not path.startswith('/') else path}" in err
        assert why in err, err
        assert "INTERNALERROR" not in result.stdout.str() + err
        assert not (pytester.path / "ran").exists(), path
    ok = run_plugin("--mcpfaults-report=new/dirs/r.json")  # missing parents are created, as before
    assert ok.ret == pytest.ExitCode.OK
    assert json.loads((pytester.path / "new/dirs/r.json").read_text())["schema"] == "pytest-mcpfaults/report"
    assert not [p for p in pytester.path.rglob(".mcpfaults-probe-*")]  # the write probe leaves nothing


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
def test_a_page_that_cannot_be_written_at_the_end_is_said_and_fails_the_run(
    pytester: pytest.Pytester, run_plugin: Any
) -> None:
    """The explore page, like the report, can still fail to be written at the end (a full disk): the
    summary says so and the run exits 1; it was a traceback that lost the summary and the cache."""
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    result = run_plugin("--mcpfaults-html=/dev/full")
    out = result.stdout.str() + result.stderr.str()
    assert "mcpfaults explore page NOT written: No space left on device (/dev/full)" in out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert result.ret == pytest.ExitCode.TESTS_FAILED


# -- serve: a bounded journal, paging ---------------------------------------------------------------


@pytest.fixture
def controlled() -> Iterator[Sidecar]:
    sc = Sidecar(faults=["hang@health[nth=1]"], patience=None)
    Control(sc, TOKEN).mount()
    with sc:
        yield sc


def _journal(sc: Sidecar, query: str = "") -> dict[str, Any]:
    r = httpx.get(
        f"{sc.url}/_mcpfaults/journal{query}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    )
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_journal_limit_of_100_keeps_100_of_300_requests_counts_200_dropped_and_pages_by_id(
    controlled: Sidecar,
) -> None:
    sc = controlled
    sc.journal.set_limit(100)
    with httpx.Client(timeout=5) as client:
        for _ in range(300):
            assert client.get(sc.url + "/mcpfaults-nowhere").status_code == 404
    j = _journal(sc)
    assert [r["id"] for r in j["requests"]] == list(range(200, 300))
    assert (j["journal_limit"], j["total_requests"], j["dropped_requests"]) == (100, 300, 200)
    assert len(sc.journal) == 100 and sc.journal.dropped_requests == 200

    page = _journal(sc, "?since=250&limit=20")
    assert [r["id"] for r in page["requests"]] == list(range(250, 270))
    assert (page["next"], page["more"]) == (270, True)
    last = _journal(sc, f"?since={page['next']}&limit=100")
    assert [r["id"] for r in last["requests"]] == list(range(270, 300))
    assert (last["next"], last["more"]) == (300, False)
    early = _journal(sc, "?since=0&limit=3")  # below the oldest kept: starts at the oldest kept
    assert [r["id"] for r in early["requests"]] == [200, 201, 202]
    assert _journal(sc, "?since=300")["requests"] == []
    assert _journal(sc, "?since=300")["next"] == 300

    with httpx.Client(timeout=5) as client:  # ids go on from where they were: no reuse after trimming
        client.get(sc.url + "/mcpfaults-nowhere")
    assert [r["id"] for r in _journal(sc, "?since=300")["requests"]] == [300]

    for bad in ("?since=-1", "?since=x", "?limit=0", "?limit=1.5"):
        r = httpx.get(
            f"{sc.url}/_mcpfaults/journal{bad}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
        )
        assert r.status_code == 400, (bad, r.text)
        assert ("since" if "since" in bad else "limit") in r.json()["error"]


def test_an_unknown_query_parameter_is_refused_naming_the_routes_own_before_anything_is_done(
    controlled: Sidecar,
) -> None:
    """`?limt=20` was answered as if no limit was asked, `DELETE /faults?dry_run=1` cleared the plan."""
    refused = [
        (
            "GET",
            "/journal?limt=20",
            "GET /_mcpfaults/journal: unknown query parameter 'limt'; valid: since, limit",
        ),
        ("DELETE", "/faults?dry_run=1", "unknown query parameter 'dry_run'; valid: none"),
        ("POST", "/freeze?for=5", "POST /_mcpfaults/freeze: unknown query parameter 'for'; valid: none"),
        (
            "GET",
            "/spans?fromat=json",
            "unknown query parameter 'fromat'; valid: format, wait_for, timeout, count",
        ),
        (
            "GET",
            "/check?session=a&wait_fr=b",
            "'wait_fr'; valid: session, cleanup, flip_cleanup, count_cleanup, max_cleanups, wait_for, "
            "timeout, count",
        ),
        (
            "GET",
            "/check?timeout=5",
            "query parameter timeout is wait_for's: give wait_for=<span-name glob> too",
        ),
    ]
    with httpx.Client(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as client:
        for method, sub, message in refused:
            r = client.request(method, f"{controlled.url}/_mcpfaults{sub}")
            assert (r.status_code, message in r.json()["error"]) == (400, True), (sub, r.text)
        assert client.get(f"{controlled.url}/_mcpfaults/faults").json() == {"faults": ["hang@health[nth=1]"]}
    assert controlled.state == "running"
    assert _journal(controlled, "?since=0&limit=1")["more"] is False


def test_a_request_in_flight_is_never_dropped_from_the_ring(controlled: Sidecar) -> None:
    sc = controlled
    sc.journal.set_limit(10)
    import threading

    held = threading.Thread(target=lambda: httpx.get(sc.health_url, timeout=30), daemon=True)
    held.start()
    sc.wait_held(1, timeout=10)
    with httpx.Client(timeout=5) as client:
        for _ in range(50):
            client.get(sc.url + "/mcpfaults-nowhere")
    ids = [r["id"] for r in _journal(sc)["requests"]]
    assert ids == [0, *range(42, 51)]  # the held request stays (and counts): the rest is a ring
    assert sc.journal.dropped_requests == 41
    sc.release()
    held.join(10)
    assert not held.is_alive()


def test_the_in_test_journal_keeps_everything_by_default() -> None:
    assert Sidecar().journal.limit is None
    j = Journal()
    for _ in range(2000):
        j.update_request(j.add_request(conn_id=0, method="GET", path="/"), ended_at=1.0)
    assert len(j) == 2000 and j.dropped_requests == 0
    with pytest.raises(ValueError, match="Journal: limit must be a positive integer or None, got 0"):
        j.set_limit(0)


def test_serve_journal_limit_option_default_and_validation(capsys: pytest.CaptureFixture[str]) -> None:
    assert DEFAULT_JOURNAL_LIMIT == 10_000
    for bad in ("0", "-5", "inf", "nan", "1e3", "x"):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--journal-limit", bad])
        assert exc.value.code == 2
        assert f"argument --journal-limit: must be a positive integer (requests kept), got {bad!r}" in (
            capsys.readouterr().err
        )


def test_serve_applies_journal_limit_end_to_end() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_mcpfaults", "serve", "--json", "--journal-limit", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        with httpx.Client(timeout=5) as client:
            for _ in range(12):
                client.get(info["health_url"])
            j = client.get(
                info["control_url"] + "/journal", headers={"Authorization": f"Bearer {info['control_token']}"}
            ).json()
        assert [r["id"] for r in j["requests"]] == list(range(7, 12))
        assert (j["journal_limit"], j["dropped_requests"]) == (5, 7)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


# -- the control API: hostile headers and bodies ----------------------------------------------------


def test_a_non_ascii_authorization_header_gets_401_not_500(controlled: Sidecar) -> None:
    for raw in (b"Bearer \xff\xfe", "Bearer tététététététététététététététété".encode(), b"\xff\xfe"):
        r = httpx.get(f"{controlled.url}/_mcpfaults/faults", headers={"Authorization": raw}, timeout=5)
        assert r.status_code == 401, (raw, r.status_code, r.text)
        assert "control token" in r.json()["error"]
    assert controlled.errors == []


def _raw(port: int, data: bytes, linger: float = 5.0) -> bytes:
    """Send ``data``, read until the server closes (EOF or reset), at most ``linger`` seconds."""
    with socket.create_connection(("127.0.0.1", port), timeout=linger) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass
        return out


def test_control_body_reads_are_bounded_like_the_sidecars_own(caplog: pytest.LogCaptureFixture) -> None:
    """A control body was read with no bound in time (an announced 10 GB body, 1 KB sent, waited for
    ever, idle_timeout or not) and a hang-up mid-body logged an unhandled ConnectionResetError."""
    sc = Sidecar(idle_timeout=0.5, max_body_bytes=1000)
    Control(sc, TOKEN).mount()
    head = f"POST /_mcpfaults/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
    with sc:
        huge = _raw(sc.port, (head + "Content-Length: 10000000000\r\n\r\n{").encode())
        chunked = _raw(
            sc.port,
            (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"800\r\n" + b"a" * 2048 + b"\r\n",
        )
        t = time.monotonic()
        slow = _raw(sc.port, (head + "Content-Length: 100\r\n\r\n{").encode())
        slow_took = time.monotonic() - t
        with socket.create_connection(("127.0.0.1", sc.port)) as s:  # hangs up mid-body
            s.sendall((head + "Content-Length: 100\r\n\r\n{").encode())
        bomb = _raw(sc.port, (head + "Content-Encoding: br\r\nContent-Length: 2\r\n\r\n{}").encode())
        ok = httpx.post(sc.url + "/_mcpfaults/faults", json={"faults": ["status@health"]},
                        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)  # fmt: skip
        sc.wait_idle()
        assert sc.errors == []
    assert huge.startswith(b"HTTP/1.1 413 ") and b"request body over 1000 bytes" in huge
    assert chunked.startswith(b"HTTP/1.1 413 ")
    assert slow.startswith(b"HTTP/1.1 408 ") and b"not complete within idle_timeout=0.5 s" in slow
    assert 0.4 < slow_took < 3
    assert bomb.startswith(b"HTTP/1.1 415 ") and b"Content-Encoding 'br' is not supported" in bomb
    assert ok.status_code == 200
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


def test_a_deeply_nested_control_body_gets_400_not_409(controlled: Sidecar) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for body in ("[" * 100_000 + "]" * 100_000, '{"faults": ' + "[" * 40 + "]" * 40 + "}"):
        r = httpx.post(f"{controlled.url}/_mcpfaults/faults", content=body, headers=auth, timeout=10)
        assert r.status_code == 400, r.text
        assert "nests deeper than 32 levels" in r.json()["error"]
    ok = httpx.post(
        f"{controlled.url}/_mcpfaults/faults", json={"faults": ["status@health"]}, headers=auth, timeout=5
    )
    assert ok.status_code == 200, ok.text
    assert controlled.errors == []


# -- values that used to be accepted --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"expect_hang": "false"}, "Sidecar: expect_hang must be True or False, got 'false'"),
        ({"expect_hang": 0}, "Sidecar: expect_hang must be True or False, got 0"),
        ({"get_stream": "no"}, "Sidecar: get_stream must be True or False, got 'no'"),
        ({"allow_remote": "yes"}, "Sidecar: allow_remote must be True or False, got 'yes'"),
        (
            {"allowed_origins": "http://a.example"},
            "Sidecar: allowed_origins must be a list of Origin values such as 'http://a.example', got "
            "'http://a.example'; for one, write ['http://a.example']",
        ),
        ({"allowed_origins": ["http://a.example", 5]}, "allowed_origins must be a list of Origin values"),
        ({"patience": math.inf}, "Sidecar: patience must be a positive number of seconds or None, got inf"),
        ({"patience": math.nan}, "Sidecar: patience must be a positive number of seconds or None, got nan"),
        ({"patience": "5"}, "Sidecar: patience must be a positive number of seconds or None, got '5'"),
        ({"patience": 10**400}, "Sidecar: patience must be a positive number of seconds or None, got 1000"),
        (
            {"faults": "hang@health"},
            "Sidecar: faults must be a list of faults (or fault specs), got 'hang@health'",
        ),
        ({"tools": "echo"}, "Sidecar: tools must be a list of pytest_mcpfaults.Tool, got 'echo'"),
        ({"service_url": 5}, "Sidecar: service_url must be a URL string or None, got 5"),
        ({"tool_sets": 5}, "Sidecar: tool_sets must be a list drawn from"),
        ({"mcp_path": "/mcp?x=1"}, "Sidecar: mcp_path must be a plain path: no query ('?'), fragment ('#')"),
        ({"mcp_path": "/mcp#frag"}, "Sidecar: mcp_path must be a plain path"),
        ({"health_path": "/he alth"}, "Sidecar: health_path must be a plain path"),
        ({"health_path": "/h\n"}, "Sidecar: health_path must be a plain path"),
        ({"mcp_path": "mcp"}, "Sidecar: mcp_path must be a path starting with '/', got 'mcp'"),
    ],
)
def test_every_sidecar_argument_is_type_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^Sidecar: ") as exc:
        Sidecar(**kwargs)
    assert message in str(exc.value)


def test_good_values_still_pass() -> None:
    def echo(text: str) -> str:
        return text

    tool = Tool("mine", echo, {"type": "object", "properties": {"text": {"type": "string"}}})
    Sidecar(
        expect_hang=True, get_stream=True, allowed_origins=("http://a.example",), patience=0.5,
        tools=[tool], faults=("hang@health",), service_url="http://b.example", mcp_path="/v1/mcp-x_y.z~",
        health_path="/h%20",
    )  # fmt: skip


MARKER_SUITE = textwrap.dedent(
    """
    import httpx
    import pytest

    @pytest.mark.mcp_sidecar(faults=["hang@health"], patience=0.3, expect_hang="false")
    def test_string_false(mcp_sidecar):
        with pytest.raises(httpx.ReadError):
            httpx.get(mcp_sidecar.health_url, timeout=None)
    """
)
ORIGIN_SUITE = textwrap.dedent(
    """
    import pytest

    @pytest.mark.mcp_sidecar(allowed_origins="http://a.example")
    def test_origin_string(mcp_sidecar):
        raise AssertionError("must not run")
    """
)
FACTORY_SUITE = textwrap.dedent(
    """
    import pytest

    def test_factory(mcp_sidecar_factory):
        with pytest.raises(ValueError, match="expect_hang must be True or False, got 'false'"):
            mcp_sidecar_factory(expect_hang="false")
    """
)


def test_marker_kwargs_are_type_checked_like_the_constructor(
    pytester: pytest.Pytester, run_plugin: Any
) -> None:
    pytester.makepyfile(test_marker=MARKER_SUITE, test_origin=ORIGIN_SUITE, test_factory=FACTORY_SUITE)
    result = run_plugin("--continue-on-collection-errors")
    result.stdout.fnmatch_lines_random(
        [
            "*ERROR collecting test_marker.py*",
            "*test_marker.py::test_string_false: @pytest.mark.mcp_sidecar: Sidecar: expect_hang must be "
            "True or False, got 'false'*",
            "*ERROR collecting test_origin.py*",
            "*test_origin.py::test_origin_string: @pytest.mark.mcp_sidecar: Sidecar: allowed_origins must be "
            "a list of Origin values*",
        ]
    )
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.no_fnmatch_line("*must not run*")


@pytest.mark.parametrize("value", ["inf", "+Infinity", "nan", "-inf"])
def test_ini_patience_non_finite_is_a_usage_error_naming_the_key(
    pytester: pytest.Pytester, run_plugin: Any, value: str
) -> None:
    pytester.makeini(f"[pytest]\nmcpfaults_patience = {value}\n")
    pytester.makepyfile(test_one="def test_x(): pass")
    result = run_plugin()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        f"ini option mcpfaults_patience must be a positive number of seconds or 'none', got {value!r}"
        in result.stderr.str()
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tool-sets", ","], "argument --tool-sets: an empty tool set name in ','"),
        (["--tool-sets", ""], "argument --tool-sets: an empty tool set name in ''"),
        (["--tool-sets", "basic,"], "argument --tool-sets: an empty tool set name in 'basic,'"),
        (["--mcp-path", "/mcp?x=1"], "argument --mcp-path: must be a plain path: no query ('?')"),
        (["--health-path", "/health#x"], "argument --health-path: must be a plain path"),
        (["--health-path", "/a b"], "argument --health-path: must be a plain path"),
        (["--patience", "inf"], "argument --patience: must be a positive number of seconds or 'none'"),
        (["--patience", "nan"], "argument --patience: must be a positive number of seconds or 'none'"),
    ],
)
def test_serve_refuses_what_it_used_to_accept(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_the_progress_tally_survives_an_unwritable_file(tmp_path: Path) -> None:
    """A progress write that fails (a full disk) must not raise into the sidecar's loop thread: the
    tally goes on in memory, and the lines written before the failure are still read back."""
    from pytest_mcpfaults._pytest.progress import Progress, read_unfinished

    path = tmp_path / "gw0.jsonl"
    progress = Progress(path)
    progress.start("t.py::test_a", None)
    progress.event("fired", "flap")
    assert progress._fd is not None
    os.close(progress._fd)  # the file goes bad behind its back
    progress.event("fired", "flap")  # must not raise
    assert isinstance(progress.write_error, OSError)
    assert progress.current is not None and progress.current.fired == {"flap": 2}
    with path.open("ab") as f:
        f.write(b'{"event": "fired", "val')  # the process died inside write(): a torn last line
    unfinished = read_unfinished(path)
    assert list(unfinished) == ["t.py::test_a"] and unfinished["t.py::test_a"].fired == {"flap": 1}
    progress.close()
