"""The report model (pure): entries, violations, totals, coverage, merge, baseline comparison, text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpfaults.report import (
    SCHEMA,
    VERSION,
    Report,
    ReportError,
    TestEntry,
    Violation,
    load_report,
    merge,
    missing_required,
    new_violations,
    plan_kind,
    summary_line,
    summary_lines,
    write_report,
)

FLIP = "Agent.Session is ERROR with description 'Session deletion failed'\nSpan tree:\n..."


def _entry(nodeid: str, **kw: Any) -> TestEntry:
    return TestEntry.from_dict({"nodeid": nodeid, **kw})


def _run() -> Report:
    return Report(
        [
            _entry(
                "t.py::test_b[die@tool:delete_session]",
                matrix="die@tool:delete_session",
                plans=[["die@tool:delete_session"]],
                fired={"die": 1},
                sidecars=[{"url": "http://127.0.0.1:1", "era": "auto", "requests": 3}],
                invariants=[{"name": "cleanup_never_flips", "ok": False, "message": FLIP}],
                outcome="failed",
            ),
            _entry(
                "t.py::test_a",
                plans=[["hang@health", "flap"]],
                fired={"hang": 2},
                sidecars=[{"url": "http://127.0.0.1:2", "era": "session", "requests": 2}],
                invariants=[{"name": "all_spans_ended", "ok": True, "message": ""}],
                patience_violations=[
                    {"fault": "hang@health", "message": "waited 5.0 s", "expected": False},
                    {"fault": "hang@health", "message": "waited 5.0 s", "expected": True},
                ],
            ),
        ],
        plugin_version="0.1.0",
    )


def test_violations_are_failed_invariants_and_unexpected_patience() -> None:
    report = _run()
    assert report.violations() == [
        Violation("t.py::test_a", "patience", "hang@health", "waited 5.0 s"),
        Violation("t.py::test_b[die@tool:delete_session]", "invariant", "cleanup_never_flips", FLIP),
    ]
    assert report.tests[0].expected_patience() == 1
    assert Violation("t", "invariant", "x", FLIP).describe() == (
        "t: invariant x: Agent.Session is ERROR with description 'Session deletion failed'"
    )


def test_coverage_totals_and_missing() -> None:
    report = _run()
    assert report.kinds() == ["die", "hang", "flap"]  # catalogue order
    assert report.fired() == {"die": 1, "hang": 2}
    assert report.missing() == ["flap"]
    rows = {r.kind: (r.tests, r.fired_in, r.times, r.failed) for r in report.coverage()}
    assert rows == {"die": (1, 1, 1, 1), "hang": (1, 1, 2, 0), "flap": (1, 0, 0, 0)}
    totals = report.totals()
    assert totals["tests"] == 2
    assert totals["outcomes"]["failed"] == 1
    assert totals["outcomes"]["passed"] == 1
    assert totals["sidecars"] == 2
    assert totals["invariants_checked"] == 2
    assert totals["invariant_violations"] == 1
    assert totals["patience_violations"] == 1
    assert totals["patience_violations_expected"] == 1
    assert totals["violations"] == 2


def test_json_round_trip_and_schema(tmp_path: Path) -> None:
    report = _run()
    path = tmp_path / "sub" / "r.json"
    write_report(report, path, {"required": ["die"], "failed": False})
    data = json.loads(path.read_text())
    assert (data["schema"], data["version"]) == (SCHEMA, VERSION) == ("pytest-mcpfaults/report", 2)
    assert [t["nodeid"] for t in data["tests"]] == ["t.py::test_a", "t.py::test_b[die@tool:delete_session]"]
    assert data["tests"][1]["violations"] == [
        {"kind": "invariant", "name": "cleanup_never_flips", "message": FLIP}
    ]
    assert data["gates"] == {"required": ["die"], "failed": False}
    again = load_report(path)
    assert again.to_dict() == report.to_dict()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not JSON"),
        (
            '{"schema": "other"}',
            "not a pytest-mcpfaults report (schema 'other', expected 'pytest-mcpfaults/report')",
        ),
        ('{"schema": "pytest-mcpfaults/report", "version": 9, "tests": []}', "version 9 is not supported"),
        (  # before explore's findings; no release wrote it
            '{"schema": "pytest-mcpfaults/report", "version": 1, "tests": []}',
            "report schema version 1 is not supported (this pytest-mcpfaults reads version 2)",
        ),
        ('{"schema": "pytest-mcpfaults/report", "version": 2, "tests": {}}', "'tests' must be a list"),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [{"x": 1}]}',
            "test entry without a nodeid",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "outcome": "meh"}]}',
            "a: unknown outcome 'meh'",
        ),
        ("[" * 100_000 + "]" * 100_000, "is not JSON: nested too deeply"),
        # a test entry's fields, as its annotations type them
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [{"nodeid": "a", "explore": "x"}]}',
            'a: explore must be a list of strings or null, got "x"',
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "duration": "NaN"}]}',
            'a: duration must be a finite number, got "NaN"',
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "duration": NaN}]}',
            "a: duration must be a finite number, got NaN",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "fired": {"die": "1"}}]}',
            'a: fired must be an object of integers, got {"die": "1"}',
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "plans": [["x", 1]]}]}',
            'a: plans must be a list of lists of strings, got [["x", 1]]',
        ),
        # the items of its lists of objects, as the violations read them (a missing name crashed)
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "invariants": [{}]}]}',
            "a: invariants[0] has no 'name' (a string)",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "invariants": [{"name": "x", "ok": false, "violations": 5}]}]}',
            "a: invariants[0].violations must be a list of strings, got 5",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "invariants": [{"name": "x"}, "x"]}]}',
            'a: invariants[1] must be an object, got "x"',
        ),
        (  # "no" is true: the unexpected violation was read as expected
            '{"schema": "pytest-mcpfaults/report", "version": 2, '
            '"tests": [{"nodeid": "a", "patience_violations": [{"fault": null, "expected": "no"}]}]}',
            'a: patience_violations[0].expected must be true or false, got "no"',
        ),
        # explore's sections, as merge-reports and the findings baseline read them
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], "findings": "x"}',
            "findings must be a list",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], "findings": [{"title": "t"}]}',
            "findings[0] has no 'key'",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], "explore": {"nodeid": "t"}}',
            "explore must be a list, got dict",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], "explore": [{"runs": []}]}',
            "explore[0] has no 'nodeid'",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], '
            '"explore": [{"nodeid": "t", "runs": [{"id": "explore:x"}]}]}',
            "explore[0].runs[0] has no 'verdict'",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], '
            '"explore": [{"nodeid": "t", "violations": [{"found": []}]}]}',
            "explore[0].violations[0] has no 'id'",
        ),
        (
            '{"schema": "pytest-mcpfaults/report", "version": 2, "tests": [], "gates": []}',
            "gates must be an object",
        ),
    ],
)
def test_bad_report_files_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ReportError, match=r"bad\.json") as info:
        load_report(path)
    assert message in str(info.value)


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"schema": "caf\xe9"}')
    with pytest.raises(ReportError, match=r"report '.*latin1\.json' is not UTF-8"):
        load_report(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"cannot read report '.*nope.json'"):
        load_report(tmp_path / "nope.json")


def test_merge_keeps_every_worker_test_sorted_and_the_last_rerun() -> None:
    w1 = Report([_entry("b", fired={"die": 1})])
    w2 = Report([_entry("a", fired={"stall": 1}), _entry("b", fired={"die": 2}, outcome="failed")])
    merged = merge(w1, w2)
    assert [t.nodeid for t in merged.tests] == ["a", "b"]
    assert merged.fired() == {"die": 2, "stall": 1}
    assert merged.tests[1].outcome == "failed"


def test_baseline_comparison_reports_only_new_violations() -> None:
    current = _run()
    assert new_violations(current, current) == []
    clean = Report([])
    assert [v.key for v in new_violations(clean, current)] == [
        ("t.py::test_a", "patience", "hang@health"),
        ("t.py::test_b[die@tool:delete_session]", "invariant", "cleanup_never_flips"),
    ]
    # a known violation with a different message is still known; a fixed one is not "new"
    known = Report(
        [_entry("t.py::test_a", patience_violations=[{"fault": "hang@health", "message": "other"}])]
    )
    assert [v.name for v in new_violations(known, current)] == ["cleanup_never_flips"]
    assert new_violations(current, clean) == []


def test_missing_required() -> None:
    assert missing_required(_run(), ["flap", "die", "stall"]) == ["flap", "stall"]


def test_plan_kind() -> None:
    assert plan_kind("stall(after_bytes=3)@tools/call[nth=2]") == "stall"
    assert plan_kind("backend_gone") == "backend_gone"


def test_summary_text() -> None:
    report = _run()
    assert (
        summary_line(report) == "mcpfaults: 3 kinds, 2 fired, 2 violations (1 expected hang); missing: flap"
    )
    lines = summary_lines(report)
    assert lines[:5] == [
        "fault kind  tests  fired in  times  failed",
        "------------------------------------------",
        "die             1         1      1       1",
        "hang            1         1      2       0",
        "flap            1         0      0       0  never fired",
    ]
    assert "2 tests used the plugin (2 sidecars, 2 invariant checks, 1 failed)" in lines
    assert (
        "  t.py::test_b[die@tool:delete_session]: invariant cleanup_never_flips: Agent.Session is ERROR with "
        "description 'Session deletion failed'" in lines
    )
    assert lines[-1] == summary_line(report)


def test_summary_lists_identical_violations_once_with_their_count() -> None:
    held = {
        "fault": "hang@health",
        "message": "the client waited 1.0 s on a hung `GET /health`",
        "expected": False,
    }
    other = {**held, "message": "the client waited 1.0 s on a hung `DELETE /mcp`"}
    report = Report([_entry("t.py::test_a", fired={"hang": 201}, patience_violations=[held] * 200 + [other])])
    lines = summary_lines(report)
    start = lines.index("violations (201):")
    assert lines[start + 1 : -1] == [
        "  t.py::test_a: patience hang@health: the client waited 1.0 s on a hung `GET /health` (200 times)",
        "  t.py::test_a: patience hang@health: the client waited 1.0 s on a hung `DELETE /mcp`",
    ]
    assert summary_line(report).endswith("201 violations")


def test_summary_is_empty_when_the_plugin_was_not_used() -> None:
    assert summary_lines(Report([])) == []
    assert summary_line(Report([_entry("a", fired={"die": 1})])) == "mcpfaults: 1 kind, 1 fired, 0 violations"


def test_a_stdio_server_is_counted_as_one_not_as_a_sidecar() -> None:
    """Issue 36: the summary counted a stdio server as "1 sidecar"."""
    stdio = {"url": "stdio:python server.py", "era": "session", "requests": 2}
    http = {"url": "http://127.0.0.1:1", "era": "auto", "requests": 3}
    only_stdio = Report([_entry("t.py::test_s", sidecars=[stdio])], plugin_version="0.1.0")
    assert "1 test used the plugin (1 stdio server, 0 failed)" in summary_lines(only_stdio)
    both = Report([_entry("t.py::test_s", sidecars=[stdio, stdio, http])], plugin_version="0.1.0")
    assert "1 test used the plugin (1 sidecar, 2 stdio servers, 0 failed)" in summary_lines(both)
