"""Reading reports in CI: merge the reports of sharded jobs, then gate on them (pure Python)."""

from pytest_mcpfaults.report import (
    Report,
    TestEntry,
    load_report,
    merge,
    missing_required,
    new_violations,
    summary_line,
    write_report,
)


# --8<-- [start:merge]
def merge_shards(paths, out):
    """Merge the --mcpfaults-report files of several CI jobs into one; return the one-line summary."""
    merged = merge(*(load_report(p) for p in paths))
    write_report(merged, out)
    return summary_line(merged)


# --8<-- [end:merge]


def test_merge_shards_and_gate(tmp_path):
    flip = {"name": "cleanup_never_flips", "ok": False, "message": "Agent.Session is ERROR"}
    shard1 = Report([TestEntry("t.py::test_a[die@tool:delete_session]", fired={"die": 1})])
    shard2 = Report([TestEntry("t.py::test_b", plans=[["flap"]], invariants=[flip], outcome="failed")])
    write_report(shard1, tmp_path / "shard1.json")
    write_report(shard2, tmp_path / "shard2.json")

    line = merge_shards([tmp_path / "shard1.json", tmp_path / "shard2.json"], tmp_path / "all.json")

    assert line == "mcpfaults: 2 kinds, 1 fired, 1 violation; missing: flap"
    merged = load_report(tmp_path / "all.json")
    assert missing_required(merged, ["die", "flap"]) == ["flap"]
    assert [v.describe() for v in new_violations(shard1, merged)] == [
        "t.py::test_b: invariant cleanup_never_flips: Agent.Session is ERROR"
    ]
