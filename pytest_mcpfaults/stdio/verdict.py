"""The text a test fails with when a client waited on a stdio child past its budget (:func:`verdict_text`)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.stdio.records import ChildRecord, StdioViolation
from pytest_mcpfaults.verdicts.violation import numbered_verdict

__all__ = ["describe_child", "verdict_text"]


def verdict_text(url: str, journal: Journal, violations: Sequence[StdioViolation]) -> str:
    """Per violation: the headline (:meth:`StdioViolation.describe`), what the test process did, the
    child's record and journal; then how to bound the client or declare the wait expected."""
    n = len(violations)
    head = f"{n} wait{'s' if n != 1 else ''} on a stdio child outlived the patience budget ({url})"
    entries = []
    for v in violations:
        expected = " (expected by the test)" if v.expected else ""
        related = [r for r in journal.requests if r.conn_id == v.child.id][-12:]
        entry = [v.describe(), v.details() + expected, f"child: {describe_child(v.child)}"]
        entry.append(f"journal of the child (pid {v.child.pid}):")
        entries.append(entry + ["  " + line for line in journal.format(related).splitlines()])
    if all(v.moved_on for v in violations):
        fix = (
            "The client gave up on the request but kept using the child, which still held it: after a "
            "timed-out call on a stdio server, end the child (close stdin, then SIGTERM, then SIGKILL, each "
            "after a short wait) and start a new one"
        )
    else:
        fix = (
            "Bound the client: end the child yourself when it does not exit (close stdin, then SIGTERM, "
            "then SIGKILL, each after a short wait), put a timeout on the request"
        )
    return numbered_verdict(
        head,
        entries,
        f"{fix}; or, if the test expects the wait, say so: @pytest.mark.mcp_expect_hang, "
        "@pytest.mark.mcp_stdio(expect_hang=True) or StdioServer(expect_hang=True).",
    )


def describe_child(c: ChildRecord) -> str:
    """One line: pid, when stdin closed, the signals, how and when it exited."""
    bits = [f"pid {c.pid}, started at {c.started_at:.3f} s"]
    if c.stdin_closed_at is not None:
        bits.append(f"stdin closed at {c.stdin_closed_at:.3f} s" + (" (ignored)" if c.ignored_eof else ""))
    for s in c.signals:
        bits.append(f"{s.name} {'sent by the test' if s.action == 'sent' else s.action} at {s.at:.3f} s")
    if c.exited_at is not None:
        code = f", status {c.exit_code}" if c.exit_code is not None else ""
        bits.append(f"exited at {c.exited_at:.3f} s ({c.exit_how}{code})")
    else:
        bits.append("still running")
    return "; ".join(bits)
