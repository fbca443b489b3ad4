"""Explore's findings: the grouping (explore_findings, pure) on run records, and end to end on a harness
with four known bugs, each exactly one finding, the same ones on a second run, across shards merged
(``--mcpfaults-shard``, ``merge-reports``) and on the page."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpfaults.explore.findings import compare, finding_key, findings, primary
from pytest_mcpfaults.explore.merge import merge_explore
from pytest_mcpfaults.explore.shard import parse_shard, shard_of


def _run(kind: str, step: str, found: list[str], where: str = "", at: int = 0, **more: Any) -> dict[str, Any]:
    return {
        "id": f"explore:{kind}@{step}",
        "verdict": more.pop("verdict", "violation"),
        "found": found,
        "plan": [{"step": step, "fault": f"{kind}@x"}],
        "where": where,
        "at": at,
        "plan_line": f'@pytest.mark.mcp_sidecar(faults=["{kind}@{step}"])',
        **more,
    }


def _entry(test: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeid": test,
        "runs": runs,
        "violations": [
            {"id": r["id"], "found": r["found"], "plan": r["plan_line"]}
            for r in runs
            if r["verdict"] == "violation"
        ],
    }


RUNNER = "runner/session.py:88 in process_task"
CUT = ["die", "status", "truncate", "reset", "malformed_json"]


def test_runs_with_one_root_cause_are_one_finding_the_incident_first() -> None:
    runs = [
        *(_run(k, f"tool:create#{i}", ["patience"], RUNNER, at=i) for i in (2, 1) for k in CUT),
        _run(
            "hang", "initialize#1", ["exception:CancelledError", "left_open"], "runner/session.py:40 in start"
        ),
        _run("die", "initialize#1", ["left_open"]),
        _run(
            "status",
            "tool:list#1",
            ["exception:RuntimeError"],
            "runner/client.py:12 in call",
            own_exception=True,
        ),
        *(
            _run(k, "tool:delete#1", ["invariant:cleanup_never_flips"])
            for k in ("jsonrpc_error", "tool_error")
        ),
    ]
    found = [f.to_dict() for f in findings([_entry("t.py::test_x", runs)])]
    assert [f["class"] for f in found] == [
        "span flip",
        "hang",
        "leak",
        "escaped exception",
        "escaped exception",
    ]
    flip, hang, leak, cancelled, runtime = found
    assert flip["title"] == "a failed cleanup flips a completed session's span to ERROR: 2 runs"
    assert flip["key"] == "invariant:cleanup_never_flips in t.py::test_x"  # no frame: the test stands in
    assert hang["title"] == "the MCP client never times out a call whose answer is cut: 10 runs"
    assert (hang["kinds"], hang["steps"]) == (CUT, ["tool:create#2", "tool:create#1"])
    assert hang["plan"] == '@pytest.mark.mcp_sidecar(faults=["die@tool:create#1"])'  # the earliest step
    assert hang["where"] == RUNNER and "read timeout" in hang["hint"]
    assert hang["key"] == "patience at runner/session.py in process_task"  # the line is not compared
    # a leak that comes with an escaped exception is that exception's; a leak alone is its own finding
    assert leak["runs"] == ["t.py::test_x::explore:die@initialize#1"]
    assert cancelled["found"] == "exception:CancelledError" and cancelled["hint"] == ""
    assert runtime["hint"].startswith("RuntimeError is defined in the harness's own code")
    assert 'raises=["RuntimeError"]' in runtime["hint"]


def test_the_frame_groups_and_separates() -> None:
    runs = [
        _run("die", "tool:a#1", ["exception:ReadError"], "h.py:10 in call"),
        _run("reset", "tool:a#1", ["exception:ReadError"], "h.py:11 in call"),  # the same function
        _run("die", "tool:b#1", ["exception:ReadError"], "h.py:30 in other"),
        _run("status", "tool:b#1", ["exception:HTTPStatusError"], "h.py:30 in other"),
    ]
    found = findings([_entry("t.py::t", runs)])
    assert [len(f.runs) for f in found] == [2, 1, 1]
    # the same frame in another test is the same bug; without a frame, each test has its own
    other = findings([_entry("t.py::t", runs[:1]), _entry("t.py::u", runs[1:2])])
    assert len(other) == 1 and other[0].tests == ["t.py::t", "t.py::u"]
    leaks = findings(
        [
            _entry("t.py::t", [_run("die", "x#1", ["left_open"])]),
            _entry("t.py::u", [_run("die", "x#1", ["left_open"])]),
        ]
    )
    assert len(leaks) == 2


def test_a_pair_its_first_fault_explains_is_not_counted_again_and_known_runs_count() -> None:
    first = _run("die", "tool:a#1", ["exception:ReadError"], "h.py:1 in f")
    pair = {
        **_run("die", "tool:a#1", ["exception:ReadError"], "h.py:1 in f"),
        "id": "explore:die@tool:a#1+hang@x#1",
    }
    pair["plan"] = [*first["plan"], {"step": "x#1", "fault": "hang@x"}]
    entry = _entry("t.py::t", [first, pair])
    entry["violations"] = entry["violations"][:1]  # the report leaves the pair out (see explore_report)
    known = _run("status", "tool:a#1", ["exception:ReadError"], "h.py:1 in f", verdict="known")
    entry["runs"].append(known)
    (f,) = findings([entry])
    assert len(f.runs) == 2 and not f.known and f.to_dict()["plan"] == first["plan_line"]


def test_primary_files_a_run_under_what_it_found_while_it_ran() -> None:
    assert primary(["exception:ReadError", "left_open"]) == "exception:ReadError"
    assert primary(["left_open"]) == "left_open"
    # session hygiene is read afterwards too: an escape's doing, and a client left open explains it
    assert primary(["sessions", "exception:ReadError"]) == "exception:ReadError"
    assert primary(["sessions", "left_open"]) == "left_open" and primary(["sessions"]) == "sessions"
    assert primary(["exception:X", "patience", "invariant:cleanup_at_most"]) == "invariant:cleanup_at_most"
    assert finding_key("patience", "a/b.py:3 in f", "t") == "patience at a/b.py in f"


def test_the_gate_compares_findings() -> None:
    base = [{"key": "a", "tests": ["t"]}, {"key": "b", "tests": ["t"]}, {"key": "c", "tests": ["other"]}]
    now = [{"key": "a", "runs": ["1", "2", "3"]}, {"key": "n"}, {"key": "u", "unstable": True}]
    gate = compare(base, now, ran=["t"])
    assert gate.to_dict() == {"new": ["n"], "unstable": ["u"], "known": ["a"], "fixed": ["b"], "failed": True}
    assert not compare(base, now[:1] + now[2:], ran=["t"]).failed  # an unstable finding alone never fails


def test_shards_merge_into_the_findings_of_one_machine() -> None:
    runs = [
        _run(k, f"tool:{s}#1", ["exception:E"], f"h.py:1 in {s}", at=i)
        for i, s in enumerate("ab")
        for k in CUT
    ]
    whole = [f.to_dict() for f in findings([_entry("t.py::t", runs)])]
    shards = [[_entry("t.py::t", [r for r in runs if shard_of(r["id"], 3) == k])] for k in (3, 1, 2)]
    assert [f.to_dict() for f in findings(merge_explore(shards))] == whole


def test_merged_shards_that_miss_a_campaigns_runs_report_no_finding_fixed(tmp_path: Path) -> None:
    """A shard's report missing (its job failed): the findings of runs no report has were not looked for."""
    from pytest_mcpfaults.explore.merge import merge_files

    head = {"schema": "pytest-mcpfaults/report", "version": 2, "tests": []}
    gone = {"key": "exception:E at h.py in b", "title": "E escapes the harness from b(): 1 run"}
    gone |= {"tests": ["t.py::t"], "runs": ["t.py::t::explore:die@tool:b#1"]}
    (tmp_path / "base.json").write_text(json.dumps({**head, "findings": [gone]}))
    ok = _run("die", "tool:a#1", [], verdict="ok")
    for planned, fixed in [(2, []), (1, [gone["key"]])]:  # 2: tool:b's run is in the missing shard
        entry = {**_entry("t.py::t", [ok]), "planned": planned, "pruned": [], "over_budget": 0, "ran": 1}
        (tmp_path / "shard1.json").write_text(json.dumps({**head, "explore": [entry]}))
        out = tmp_path / "merged.json"
        assert (
            merge_files(str(out), [str(tmp_path / "shard1.json")], str(tmp_path / "base.json"), io.StringIO())
            == 0
        )
        assert json.loads(out.read_text())["findings_gate"]["fixed"] == fixed, planned


def test_a_missing_shard_is_seen_at_depth_two_whatever_pairs_the_other_shards_ran() -> None:
    """Each shard plans the pairs of its own first runs: the merged campaign counts them all, so the pairs
    of the shards present do not stand in for the first runs of the one missing."""
    from pytest_mcpfaults.explore.merge import left_out

    base = [{"key": "k", "runs": ["t.py::t::explore:die@tool:b#1"]}]
    a, b, c = (_run("die", f"tool:{s}#1", [], verdict="ok") for s in "abc")

    def shard(first: dict[str, Any], pairs: int) -> list[dict[str, Any]]:
        runs = [first, *({**first, "id": f"{first['id']}+die@tool:z#{n}"} for n in range(pairs))]
        return [{**_entry("t.py::t", runs), "steps": 3, "planned": 3 + pairs, "pruned": [], "over_budget": 0}]

    present = [shard(a, 1), shard(c, 2)]  # the shard that ran b (and its pairs) is missing
    assert merge_explore(present)[0]["planned"] == 6
    assert left_out(base, merge_explore(present)) == base[0]["runs"]
    assert left_out(base, merge_explore([*present, shard(b, 0)])) == []


@pytest.mark.parametrize("bad", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2", ""])
def test_a_bad_shard_names_the_option_and_its_form(bad: str) -> None:
    with pytest.raises(ValueError, match=r"--mcpfaults-shard=.*: must be K/N with whole numbers 1 <= K <= N"):
        parse_shard(bad)
    assert parse_shard("2/4") == (2, 4)


ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "explore_findings"  # the four-bug harness docs/explore.md quotes
EXPECTED = [
    (
        "patience at bug_harness.py in post",
        "the harness waits without a timeout on a request the server holds: 1 run",
    ),
    (
        "left_open in test_bugs.py::test_flow",
        "the harness leaves its connection to the server open after a failure: 1 run",
    ),
    (
        "exception:HarnessError at bug_harness.py in list_items",
        "HarnessError escapes the harness from list_items(): 2 runs",
    ),
    (
        "exception:KeyError at bug_harness.py in list_items",
        "KeyError escapes the harness from list_items(): 1 run",
    ),
]


def _explore(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "mcpfaults",
        "-p",
        "no:randomly",
        "-q",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        *args,
    )


def _findings(path: Path) -> list[tuple[str, str]]:
    return [(f["key"], f["title"]) for f in json.loads(path.read_text())["findings"]]


@pytest.mark.timeout(300)
def test_each_known_bug_is_one_finding_stable_across_runs_shards_and_the_page(
    pytester: pytest.Pytester,
) -> None:
    for name in ("bug_harness.py", "test_bugs.py"):
        (pytester.path / name).write_text((EXAMPLE / name).read_text())
    first = _explore(pytester, "--mcpfaults-report", "first.json", "--mcpfaults-html", "page.html")
    out = first.stdout.str()
    assert _findings(pytester.path / "first.json") == EXPECTED
    # the docs' explore page quotes this run's findings
    quoted = (ROOT / "docs" / "explore.md").read_text().split("9 runs, 5 of them violations, 4 findings")[1]
    quoted = quoted.split("```text\n", 1)[1].split("```", 1)[0]
    assert quoted.strip() and quoted in "\n".join(first.stdout.lines) + "\n"
    # the summary leads with them, the where and fix hint included; the grid stays below
    assert out.index("4 findings in 5 violating runs:") < out.index("3 steps × 3 kinds → 9 runs")
    assert "   where: bug_harness.py:" in out and 'raises=["HarnessError"]' in out
    # the coverage section counts the same violating runs as explore
    assert "violations (5):" in out and "mcpfaults: 3 kinds, 3 fired, 5 violations" in out
    data = json.loads((pytester.path / "first.json").read_text())
    assert data["version"] == 2 and list(data)[list(data).index("gates") + 1] == "findings"
    assert {"title", "oracle", "runs", "plan", "where", "hint", "key"} <= set(data["findings"][0])
    page = (pytester.path / "page.html").read_text()
    assert page.index("Findings (4)") < page.index('<table class="grid">')
    assert all(title in page for _, title in EXPECTED)

    # a second run collects the campaign from the cache: the same findings
    second = _explore(pytester, "--mcpfaults-report", "second.json")
    assert _findings(pytester.path / "second.json") == EXPECTED, second.stdout.str()[-3000:]

    # three shards, merged: the same findings, and a baseline the whole run gates on
    for k in (1, 2, 3):
        _explore(pytester, f"--mcpfaults-shard={k}/3", "--mcpfaults-report", f"shard{k}.json")
    from pytest_mcpfaults.cli import main

    said = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(said):
        status = main(
            [
                "merge-reports",
                str(pytester.path / "merged.json"),
                *(str(pytester.path / f"shard{k}.json") for k in (1, 2, 3)),
            ]
        )
    assert status == 0 and "4 findings in 5 violating runs:" in said.getvalue()
    assert _findings(pytester.path / "merged.json") == EXPECTED
    gated = _explore(pytester, "--mcpfaults-baseline", "merged.json")
    assert gated.ret == pytest.ExitCode.OK, gated.stdout.str()[-3000:]
    assert "no new finding (4 known, 0 fixed, 0 unstable)" in gated.stdout.str()


def test_a_run_that_flips_on_its_rerun_is_unstable_and_never_fails_the_gate(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        bug_harness=(EXAMPLE / "bug_harness.py").read_text(),
        test_flaky="""
        import itertools
        import pytest
        from bug_harness import post, start

        SEEN = itertools.count()

        @pytest.mark.mcp_explore(kinds=["status"])
        @pytest.mark.mcp_sidecar(era="stateless")
        def test_flaky(mcp_sidecar):
            client = start()
            reply = post(client, mcp_sidecar, "echo", 2.0)
            client.close()
            if reply.status_code != 200 and next(SEEN) % 2 == 0:  # the first time only: timing
                raise ConnectionError("the first attempt lost a race")
        """,
    )
    (pytester.path / "base.json").write_text(
        json.dumps({"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], "findings": []})
    )
    result = _explore(pytester, "-rx", "--mcpfaults-baseline", "base.json", "--mcpfaults-report", "r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    out = result.stdout.str()
    assert (
        "XFAIL test_flaky.py::test_flaky[explore:status-at-tool:echo[1]] - unstable: found "
        "exception:ConnectionError" in out
    )
    assert "no new finding (0 known, 0 fixed, 1 unstable)" in out
    (finding,) = json.loads((pytester.path / "r.json").read_text())["findings"]
    assert finding["unstable"] is True
    # without a baseline there is no gate to protect: the run fails as found
    plain = _explore(pytester)
    assert plain.ret == pytest.ExitCode.TESTS_FAILED


def test_a_bad_shard_is_refused_before_collection_and_a_bad_input_by_merge_reports(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = _explore(pytester, "--mcpfaults-shard=3/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--mcpfaults-shard=3/2: must be K/N with whole numbers 1 <= K <= N" in result.stderr.str()
    from pytest_mcpfaults.cli import main

    (pytester.path / "other.json").write_text('{"schema": "something-else"}')
    assert main(["merge-reports", str(pytester.path / "out.json"), str(pytester.path / "other.json")]) == 2
    assert "other.json': not a pytest-mcpfaults report" in capsys.readouterr().err
    assert not (pytester.path / "out.json").exists()
    # a report edited by hand, or cut short by a full disk, is named with what is wrong in it
    head = '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], '
    (pytester.path / "edited.json").write_text(head + '"explore": [{"nodeid": "t", "runs": [{"id": "x"}]}]}')
    (pytester.path / "ok.json").write_text(head + '"explore": []}')
    (pytester.path / "entry.json").write_text(
        head.replace("[]", '[{"nodeid": "t", "explore": "x"}]') + '"plugin_version": ""}'
    )
    (pytester.path / "base.json").write_text(head + '"findings": ["patience at h.py in f"]}')
    (pytester.path / "inv.json").write_text(
        head.replace("[]", '[{"nodeid": "t", "invariants": [{}]}]') + '"plugin_version": ""}'
    )
    (pytester.path / "v1.json").write_text(head.replace('"version": 2', '"version": 1') + '"explore": []}')
    (pytester.path / "latin1.json").write_bytes(head.encode() + b'"plugin_version": "caf\xe9"}')
    for args, message in [
        (["edited.json"], "edited.json': explore[0].runs[0] has no 'verdict'"),
        (["latin1.json"], "latin1.json' is not UTF-8"),
        (["entry.json"], 'entry.json\': t: explore must be a list of strings or null, got "x"'),
        (["ok.json", "--baseline", "base.json"], "base.json': findings[0] must be an object, got str"),
        (["inv.json"], "inv.json': t: invariants[0] has no 'name' (a string)"),  # was a KeyError
        (["ok.json", "--baseline", "v1.json"], "v1.json': report schema version 1 is not supported"),
    ]:
        argv = [str(pytester.path / a) if a.endswith(".json") else a for a in args]
        assert main(["merge-reports", str(pytester.path / "out.json"), *argv]) == 2, args
        assert message in capsys.readouterr().err
    assert not (pytester.path / "out.json").exists()


def test_merge_reports_into_a_pipe_its_reader_closed_writes_the_file_and_exits_quietly(
    tmp_path: Path,
) -> None:
    """``merge-reports ... | head -1``: the reader's closed pipe is not a failed write of the merged file."""
    (tmp_path / "in.json").write_text('{"schema": "pytest-mcpfaults/report", "version": 2, "tests": []}')
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is printed: the first write meets EPIPE
    with os.fdopen(write, "wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_mcpfaults", "merge-reports", "out.json", "in.json"],
            cwd=tmp_path,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads((tmp_path / "out.json").read_text())["tests"] == []


def test_a_kinds_named_cells_are_grid_columns_of_their_own() -> None:
    """error_payload's four texts at one step are four columns: a violation under one is not hidden by
    an ok under the next (they once shared the kind's column, the last verdict shown)."""
    from pytest_mcpfaults.explore.html import render
    from pytest_mcpfaults.explore.summary import matrix_lines

    def run(cell: str, verdict: str) -> dict[str, Any]:
        kind = cell.split(".")[0]
        fault = f"{kind}(message='x')@tool:delete_session[nth=1]"
        plan = [{"step": "tool:delete_session#1", "fault": fault}]
        return {
            "id": f"explore:{cell}-at-tool:delete_session[1]",
            "verdict": verdict,
            "found": [],
            "plan": plan,
        }

    runs = [
        run("die", "violation"),
        run("error_payload.gone", "violation"),
        run("error_payload.failed", "ok"),
    ]
    lines = matrix_lines(runs)
    assert lines[1].split()[1:] == ["V", "V", "."], lines
    assert lines[2] == "kinds: 1=die, 2=error_payload.gone, 3=error_payload.failed"
    entry = {"nodeid": "t.py::test_x", "runs": runs, "violations": [], "clean": "ok", "kinds": []}
    page = render([entry], {}, [])
    assert "<th>error_payload.gone</th>" in page and "<th>error_payload.failed</th>" in page


HYGIENE = """
import httpx
import pytest

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
RUNNER = {"name": "r", "version": "1"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": RUNNER}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}}


def open_session(http, url):
    sid = http.post(url, json=INIT, headers=HEADERS).headers["Mcp-Session-Id"]
    return {**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}


@pytest.mark.mcp_explore(kinds=["status"], steps=["tool:echo#1"])
@pytest.mark.mcp_sidecar(era="session")
def test_retry_leaks(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        session = open_session(http, mcp_sidecar.mcp_url)
        if http.post(mcp_sidecar.mcp_url, json=CALL, headers=session).status_code == 200:
            http.delete(mcp_sidecar.mcp_url, headers=session)
            return
        retry = open_session(http, mcp_sidecar.mcp_url)  # a new session after the failure...
        http.post(mcp_sidecar.mcp_url, json=CALL, headers=retry)  # ...never ended


@pytest.mark.mcp_explore(kinds=["status"], depth=2)
@pytest.mark.mcp_sidecar(era="stateless")
def test_escape(mcp_sidecar):
    with httpx.Client(timeout=5) as http:
        headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                   "Mcp-Name": "echo"}
        if http.post(mcp_sidecar.mcp_url, json=CALL, headers=headers).status_code != 200:
            http.post(mcp_sidecar.mcp_url, json=CALL, headers=headers)  # the retry, a step of its own
            raise KeyError("result")  # after any failure, the retry's outcome aside
"""


def test_a_sessions_finding_has_its_title_and_both_summaries_count_the_same_violating_runs(
    pytester: pytest.Pytester,
) -> None:
    """A session-hygiene finding is titled and hinted as such (not as the test's own assertion), and the
    terminal summary and merge-reports count the same violating runs as the coverage section: every
    explore run that found something, a pair its first fault explains included (docs/explore.md)."""
    pytester.makepyfile(test_hygiene=HYGIENE)
    result = _explore(pytester, "-p", "no:cacheprovider", "--mcpfaults-report", "r.json")
    out = result.stdout.str()
    # test_escape: status@echo#1 escapes KeyError, and so does its pair at the retry (echo#2), which
    # that first fault explains: one finding of 1 run, 2 violating runs; test_retry_leaks: 1 of each
    assert "FAILED test_hygiene.py::test_escape[explore:status-at-tool:echo[1]+status-at-tool:echo[2]]" in out
    assert "2 findings in 3 violating runs:" in out and "mcpfaults: 1 kind, 1 fired, 3 violations" in out
    found = json.loads((pytester.path / "r.json").read_text())["findings"]
    sessions = next(f for f in found if f["oracle"] == "sessions")
    assert sessions["title"] == SESSIONS_TITLE
    assert "open a new session" in sessions["hint"] and "DELETE" in sessions["hint"]
    from pytest_mcpfaults.cli import main

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert main(["merge-reports", str(pytester.path / "m.json"), str(pytester.path / "r.json")]) == 0
    assert "2 findings in 3 violating runs:" in said.getvalue()


SESSIONS_TITLE = (
    "the harness breaks session hygiene after a failure (a session never ended, a lost session called "
    "again, or calls failed in the client): 1 run"
)
