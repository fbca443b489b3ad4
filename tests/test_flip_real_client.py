"""The incident's flip with today's client: the official mcp 2.x ``Client`` against a sidecar that dies
under ``delete_session``.

When the sidecar dies mid-call, mcp 2.x's ``call_tool`` raises ``asyncio.CancelledError`` (its anyio
cancel scope), a ``BaseException``. OpenTelemetry's ``start_as_current_span`` records and sets ERROR only
for ``Exception`` subclasses, so ``MCP.DeleteSession`` ends UNSET while the error escapes it. A runner
that copies whatever escaped its cleanup onto ``Agent.Session`` flips the session, and
``cleanup_never_flips`` must say so, naming ``MCP.DeleteSession`` as the cause.
"""

from __future__ import annotations

import asyncio

import pytest
from flip_session import one_session
from opentelemetry.trace import Tracer

from pytest_mcpfaults import Die, Sidecar
from pytest_mcpfaults.invariants import cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder


def run_against_dying_sidecar(tracer: Tracer, *, copy_cleanup_error: bool) -> tuple[list[str], Sidecar]:
    with Sidecar(era="session", faults=[Die(when="tool:delete_session")]) as sidecar:
        escaped = asyncio.run(
            asyncio.wait_for(one_session(tracer, sidecar.mcp_url, copy_cleanup_error=copy_cleanup_error), 30)
        )
    return escaped, sidecar


def test_a_cancelled_cleanup_copied_onto_the_session_fails_cleanup_never_flips(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    escaped, sidecar = run_against_dying_sidecar(tracer, copy_cleanup_error=True)

    assert escaped[0] == "CancelledError"  # what the client raised out of call_tool
    assert sidecar.fired == {"die": 1}
    assert sidecar.journal.sequence()[-1] == "POST tools/call delete_session"  # it died under the delete
    delete = recorder.one("MCP.DeleteSession")
    assert (delete.status_code, delete.events) == ("UNSET", ())  # the failure left no trace on it
    session = recorder.one("Agent.Session")
    assert session.failed
    assert session.exceptions[0][0] == "asyncio.exceptions.CancelledError"

    [violation] = cleanup_never_flips(recorder.spans())
    assert violation.span == session
    assert "Agent.Session is ERROR although nothing but cleanup failed beneath it" in violation.message
    assert "(cause: MCP.DeleteSession [UNSET], which did not record the failure; " in violation.message
    assert "the session recorded CancelledError: Cancelled via cancel scope " in violation.message
    with pytest.raises(AssertionError, match=r"cause: MCP\.DeleteSession \[UNSET\]"):
        recorder.assert_cleanup_never_flips()


def test_the_same_death_kept_on_the_cleanup_span_is_not_a_flip(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    escaped, sidecar = run_against_dying_sidecar(tracer, copy_cleanup_error=False)

    assert escaped == ["CancelledError", "ExceptionGroup"]
    assert sidecar.fired == {"die": 1}
    delete = recorder.one("MCP.DeleteSession")
    assert delete.status_code == "ERROR"
    assert delete.exceptions[0][0] == "asyncio.exceptions.CancelledError"
    assert recorder.one("Agent.Session").status_code == "UNSET"
    assert cleanup_never_flips(recorder.spans()) == []
    recorder.assert_invariants()
