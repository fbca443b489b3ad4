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
import json
from collections.abc import Iterator

import pytest
from mcp.client import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode, Tracer

from pytest_mcpfaults import Die, Sidecar
from pytest_mcpfaults.invariants import cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder


@pytest.fixture
def recorder() -> SpanRecorder:
    return SpanRecorder()


@pytest.fixture
def tracer(recorder: SpanRecorder) -> Iterator[Tracer]:
    provider = recorder.attach(TracerProvider(shutdown_on_exit=False))
    yield provider.get_tracer("runner")
    provider.shutdown()


async def one_session(tracer: Tracer, url: str, *, copy_cleanup_error: bool) -> list[str]:
    """One benchmark session over one mcp 2.x connection; returns what escaped, by type name."""
    escaped: list[str] = []
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            async with Client(url, mode="legacy", read_timeout_seconds=5) as client:
                created = await client.call_tool("create_session", {"task_id": "task-1"})
                sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
                with tracer.start_as_current_span("Agent.Call"):
                    await client.call_tool("echo", {"text": "answer"})
                try:
                    with tracer.start_as_current_span("MCP.DeleteSession") as delete:
                        try:
                            await client.call_tool("delete_session", {"session_id": sid})
                        except BaseException as exc:
                            if not copy_cleanup_error:  # hardened: the failure stays on the cleanup span
                                delete.record_exception(exc)
                                delete.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                            raise
                except BaseException as exc:
                    escaped.append(type(exc).__name__)
                    if copy_cleanup_error:  # the unhardened runner's handler
                        session.record_exception(exc)
                        session.set_status(Status(StatusCode.ERROR, f"Session failed: {exc}"))
                    raise
        except BaseException as exc:  # leaving the client after the sidecar died: an ExceptionGroup
            escaped.append(type(exc).__name__)
    return escaped


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
