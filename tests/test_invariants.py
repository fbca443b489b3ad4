"""Span invariants against a tiny harness traced with the real OpenTelemetry SDK.

The harness comes in the shapes the incident reports describe: the buggy one lets the cleanup
exception escape ``MCP.DeleteSession`` into the session handler, which marks the session ERROR and
deletes again; the fixed one catches the cleanup failure inside the ``MCP.DeleteSession`` span.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import gate_shapes
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from pytest_mcpfaults.invariants import (
    ALL_INVARIANTS,
    SpanInvariantError,
    Violation,
    all_spans_ended,
    check_all,
    cleanup_at_most,
    cleanup_never_flips,
    format_violations,
)
from pytest_mcpfaults.spans import SpanRecorder

GONE = (
    "Session deletion failed: {'error': 'Error closing session 5788bd81: "
    "Service at http://127.0.0.1:59685 is no longer alive'}"
)


class SidecarClient:
    """Stands in for the MCP client: deleting a session fails while the sidecar is gone."""

    def __init__(self, alive: bool) -> None:
        self.alive = alive
        self.deletes = 0

    def delete_session(self) -> None:
        self.deletes += 1
        if not self.alive:
            raise RuntimeError(GONE)


def agent_ok() -> None:
    pass


def agent_times_out() -> None:
    raise TimeoutError("agent did not finish within 30s")


def run_buggy(tracer: Tracer, client: SidecarClient, agent: Callable[[], None] = agent_ok) -> None:
    """The incident's harness: cleanup errors escape into the session handler, which retries."""
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("Agent.Run"):
                agent()
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except Exception as exc:
            session.set_status(Status(StatusCode.ERROR, str(exc)))
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.alive = True  # the retry "silently succeeds"
                client.delete_session()


def run_fixed(tracer: Tracer, client: SidecarClient, agent: Callable[[], None] = agent_ok) -> None:
    """Cleanup failures are caught inside MCP.DeleteSession; the session keeps the agent's outcome."""
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("Agent.Run"):
                agent()
        except TimeoutError as exc:
            session.set_status(Status(StatusCode.ERROR, f"agent timed out: {exc}"))
        finally:
            with tracer.start_as_current_span("MCP.DeleteSession") as delete:
                try:
                    client.delete_session()
                except RuntimeError as exc:
                    delete.add_event("mcp.session.already_gone", {"error": str(exc)})


def run_timeout(tracer: Tracer, client: SidecarClient, *, cleanup_wins: bool) -> None:
    """The agent times out, then cleanup fails (the sidecar was reaped) and the failure is recorded on
    MCP.DeleteSession. With ``cleanup_wins`` the handler overwrites the timeout with the cleanup message."""
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("Agent.Run"):
                agent_times_out()
        except TimeoutError as exc:
            session.set_status(Status(StatusCode.ERROR, f"agent timed out: {exc}"))
        finally:
            try:
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    client.delete_session()
            except RuntimeError as exc:
                if cleanup_wins:
                    session.set_status(Status(StatusCode.ERROR, f"cleanup failed: {exc}"))


# --- the buggy and the fixed harness -----------------------------------------------------------------


def test_buggy_harness_flips_the_session_and_is_reported(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_buggy(tracer, SidecarClient(alive=False))
    spans = recorder.spans()
    [violation] = cleanup_never_flips(spans)
    assert violation.invariant == "cleanup_never_flips"
    assert violation.span == recorder.one("Agent.Session")
    assert (
        "comes from a cleanup failure (cause: MCP.DeleteSession [ERROR: RuntimeError: Session deletion"
        in (violation.message)
    )
    assert "nothing but cleanup failed beneath it, so it must not be ERROR at all" in violation.message

    with pytest.raises(SpanInvariantError) as info:
        recorder.assert_cleanup_never_flips()
    text = str(info.value)
    assert text.startswith("1 span invariant violation:\n- [cleanup_never_flips] Agent.Session is ERROR")
    assert "Span tree:\nAgent.Session [ERROR: Session deletion failed:" in text
    assert "├── MCP.DeleteSession [ERROR: RuntimeError: Session deletion failed" in text
    assert "! exception RuntimeError: Session deletion failed" in text
    assert "└── MCP.DeleteSession [UNSET]" in text
    assert info.value.violations == (violation,)


def test_buggy_harness_deletes_twice(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_buggy(tracer, SidecarClient(alive=False))
    [violation] = cleanup_at_most(recorder.spans(), 1)
    assert violation.message.startswith(
        "Agent.Session ran cleanup 2 times, at most 1 allowed: MCP.DeleteSession"
    )
    assert cleanup_at_most(recorder.spans(), 2) == []
    with pytest.raises(SpanInvariantError, match="ran cleanup 2 times"):
        recorder.assert_cleanup_at_most(1)


def test_buggy_harness_with_a_live_sidecar_is_clean(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_buggy(tracer, SidecarClient(alive=True))
    assert check_all(recorder.spans()) == []


def test_fixed_harness_passes_when_cleanup_fails(recorder: SpanRecorder, tracer: Tracer) -> None:
    client = SidecarClient(alive=False)
    run_fixed(tracer, client)
    assert client.deletes == 1
    assert recorder.one("Agent.Session").status_code == "UNSET"
    assert recorder.one("MCP.DeleteSession").status_code == "UNSET"
    assert check_all(recorder.spans()) == []
    recorder.assert_invariants()


# --- timeouts ------------------------------------------------------------------------------------------


def test_timeout_keeps_its_description_while_cleanup_fails(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_timeout(tracer, SidecarClient(alive=False), cleanup_wins=False)
    session = recorder.one("Agent.Session")
    assert session.status_code == "ERROR"
    assert session.status_description == "agent timed out: agent did not finish within 30s"
    assert recorder.one("MCP.DeleteSession").status_code == "ERROR"
    assert check_all(recorder.spans()) == []


def test_timeout_overwritten_by_the_cleanup_message_fails(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_timeout(tracer, SidecarClient(alive=False), cleanup_wins=True)
    [violation] = cleanup_never_flips(recorder.spans())
    assert "(cause: MCP.DeleteSession [ERROR: RuntimeError: Session deletion failed" in violation.message
    assert "it must keep the primary failure, Agent.Run [ERROR: TimeoutError: agent did not finish" in (
        violation.message
    )


def test_fixed_harness_on_timeout_passes(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_fixed(tracer, SidecarClient(alive=False), agent=agent_times_out)
    assert recorder.one("Agent.Session").status_description == (
        "agent timed out: agent did not finish within 30s"
    )
    recorder.assert_invariants()


def test_cleanup_exception_escaping_the_session_span_fails(recorder: SpanRecorder, tracer: Tracer) -> None:
    client = SidecarClient(alive=False)

    def unguarded() -> None:
        with tracer.start_as_current_span("Agent.Session"):
            try:
                with tracer.start_as_current_span("Agent.Run"):
                    agent_times_out()
            finally:  # the cleanup exception replaces the timeout on its way out
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    client.delete_session()

    with pytest.raises(RuntimeError):
        unguarded()
    assert recorder.one("Agent.Session").status_description == f"RuntimeError: {GONE}"
    [violation] = cleanup_never_flips(recorder.spans())
    assert "cause: MCP.DeleteSession" in violation.message


def test_timeout_recorded_on_the_session_itself_passes(recorder: SpanRecorder, tracer: Tracer) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as session:
        session.set_status(Status(StatusCode.ERROR, "agent timed out"))
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError:
            pass
    assert cleanup_never_flips(recorder.spans()) == []


def test_error_without_description_and_only_cleanup_failing_fails(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError:
            session.set_status(StatusCode.ERROR)
    [violation] = cleanup_never_flips(recorder.spans())
    assert violation.message.startswith(
        "Agent.Session is ERROR although nothing but cleanup failed beneath it: it was not ERROR when "
        "MCP.DeleteSession started and nothing failed before that (cause: MCP.DeleteSession [ERROR: "
        "RuntimeError: Session deletion failed"
    )
    assert violation.message.endswith("a cleanup failure must not flip the session")


def test_own_exception_on_the_session_counts_as_the_primary_failure(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as session:
        session.record_exception(TimeoutError())
        session.set_status(StatusCode.ERROR)
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError:
            pass
    assert cleanup_never_flips(recorder.spans()) == []


def test_failure_deep_inside_cleanup_is_named(recorder: SpanRecorder, tracer: Tracer) -> None:
    with (
        tracer.start_as_current_span("Agent.Session") as session,
        tracer.start_as_current_span("MCP.DeleteSession"),
    ):
        try:
            with tracer.start_as_current_span("HTTP DELETE"):
                raise ConnectionRefusedError("connection refused")
        except ConnectionRefusedError as exc:
            session.set_status(Status(StatusCode.ERROR, f"teardown: {exc}"))
    [violation] = cleanup_never_flips(recorder.spans())
    assert (
        "cause: HTTP DELETE [ERROR: ConnectionRefusedError: connection refused] inside MCP.DeleteSession"
        in (violation.message)
    )
    assert cleanup_at_most(recorder.spans(), 1) == []


def test_nested_cleanup_spans_count_as_one_run(recorder: SpanRecorder, tracer: Tracer) -> None:
    with (
        tracer.start_as_current_span("Agent.Session"),
        tracer.start_as_current_span("MCP.DeleteSession"),
        tracer.start_as_current_span("MCP.DeleteSession.http"),
    ):
        pass
    spans = recorder.spans()
    assert cleanup_at_most(spans, 1, cleanup="MCP.Delete*") == []
    assert cleanup_at_most(spans, 0, cleanup="MCP.Delete*") != []


def test_ok_and_unset_sessions_pass_even_when_cleanup_fails(recorder: SpanRecorder, tracer: Tracer) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as ok_session:
        ok_session.set_status(StatusCode.OK)
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError as exc:
            ok_session.set_status(Status(StatusCode.ERROR, str(exc)))  # ignored: OK is final
    with tracer.start_as_current_span("Agent.Session"):
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError:
            pass
    assert [s.status_code for s in recorder.find("Agent.Session")] == ["OK", "UNSET"]
    assert [s.status_code for s in recorder.find("MCP.DeleteSession")] == ["ERROR", "ERROR"]
    assert cleanup_never_flips(recorder.spans()) == []


def test_an_unrelated_description_set_after_cleanup_is_a_flip(recorder: SpanRecorder, tracer: Tracer) -> None:
    """Formerly a documented blind spot (the rule compared texts only): an ERROR description that shares
    no text with the cleanup failure. The session turned ERROR only once cleanup had started, with
    nothing failed before, so it is a flip whatever its description says."""
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError:
            session.set_status(Status(StatusCode.ERROR, "session failed"))
    [violation] = cleanup_never_flips(recorder.spans())
    assert "it was not ERROR when MCP.DeleteSession started and nothing failed before that" in (
        violation.message
    )
    assert "(cause: MCP.DeleteSession [ERROR: RuntimeError: Session deletion failed" in violation.message


def test_every_session_is_checked(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_fixed(tracer, SidecarClient(alive=False))
    run_buggy(tracer, SidecarClient(alive=False))
    flips = cleanup_never_flips(recorder.spans())
    assert [v.span for v in flips] == [recorder.find("Agent.Session")[1]]


def test_session_and_cleanup_accept_globs_and_sequences(recorder: SpanRecorder, tracer: Tracer) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Harness.Episode") as session:
        try:
            with tracer.start_as_current_span("mcp.close"):
                client.delete_session()
        except RuntimeError as exc:
            session.set_status(Status(StatusCode.ERROR, str(exc)))
    spans = recorder.spans()
    assert cleanup_never_flips(spans, session=["Agent.Session", "Harness.*"], cleanup="mcp.clo?e") != []
    assert cleanup_never_flips(spans, session="Harness.*", cleanup="other") == []


# --- bad input and open spans ----------------------------------------------------------------------------


def test_no_session_span_is_a_failure_listing_seen_names(recorder: SpanRecorder, tracer: Tracer) -> None:
    run_fixed(tracer, SidecarClient(alive=True))
    spans = recorder.spans()
    for check in (cleanup_never_flips, cleanup_at_most):
        [violation] = check(spans, session="Agent.Sesion")
        assert violation.span is None
        assert violation.message == (
            "no session span was recorded (no span name matches 'Agent.Sesion'); "
            "span names seen: 'Agent.Session', 'Agent.Run', 'MCP.DeleteSession'"
        )
    with pytest.raises(SpanInvariantError) as info:
        recorder.assert_invariants(session="Agent.Sesion")
    text = str(info.value)
    assert text.count("no session span was recorded") == 1  # same message shown once
    assert "[cleanup_never_flips, cleanup_at_most] no session span was recorded" in text


def test_no_spans_at_all_is_a_failure() -> None:
    [violation] = cleanup_never_flips([])
    assert violation.message.endswith("span names seen: none")


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="non-blank"):
        cleanup_never_flips([], session="")
    with pytest.raises(ValueError, match="at least one"):
        cleanup_at_most([], 1, cleanup=[])
    with pytest.raises(ValueError, match="n >= 0"):
        cleanup_at_most([], -1)


def test_open_span_is_reported(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session"):
        leaked = tracer.start_span("MCP.CallTool")
    [violation] = all_spans_ended(recorder.spans())
    assert violation.span is not None
    assert violation.span.name == "MCP.CallTool"
    assert (
        violation.message
        == f"span MCP.CallTool (span id {violation.span.span_id_hex}) started but never ended"
    )
    with pytest.raises(SpanInvariantError, match="⟨NOT ENDED⟩"):
        recorder.assert_all_spans_ended()
    assert check_all(recorder.spans(), must_end=[]) == []
    leaked.end()
    recorder.assert_all_spans_ended()


def test_assert_methods_report_results(recorder: SpanRecorder, tracer: Tracer) -> None:
    got: list[tuple[str, bool, str]] = []
    recorder.report_to(lambda name, ok, message: got.append((name, ok, message)))
    run_buggy(tracer, SidecarClient(alive=False))
    with pytest.raises(SpanInvariantError):
        recorder.assert_invariants()
    assert [(name, ok) for name, ok, _ in got] == [
        ("cleanup_never_flips", False),
        ("cleanup_at_most", False),
        ("all_spans_ended", True),
    ]
    assert [name for name, _, _ in got] == list(ALL_INVARIANTS)
    got.clear()
    recorder.assert_all_spans_ended()
    assert got == [("all_spans_ended", True, "")]


def test_recorder_defaults_come_from_its_patterns(tracer: Tracer) -> None:
    rec = SpanRecorder(session="Harness.*", cleanup=["mcp.close"])
    provider = rec.attach(TracerProvider(shutdown_on_exit=False))
    t = provider.get_tracer("t")
    with t.start_as_current_span("Harness.Episode"), t.start_as_current_span("mcp.close"):
        pass
    with t.start_as_current_span("Harness.Episode"), t.start_as_current_span("mcp.close"):
        pass
    rec.assert_invariants()
    assert rec.check(session="Agent.Session")[0].message.startswith("no session span was recorded")


def test_format_violations_without_violations_still_shows_the_tree() -> None:
    v = Violation("x", None, "msg")
    assert (
        format_violations([v], [])
        == "1 span invariant violation:\n- [x] msg\n\nSpan tree:\n(no spans recorded)"
    )


def test_error_without_description_is_fine_when_a_primary_failure_exists(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("Agent.Run"):
                agent_times_out()
        except TimeoutError:
            session.set_status(StatusCode.ERROR)
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError:
            pass
    assert cleanup_never_flips(recorder.spans()) == []


def test_recording_the_cleanup_exception_on_the_session_is_not_a_primary_failure(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    client = SidecarClient(alive=False)
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                client.delete_session()
        except RuntimeError as exc:
            session.record_exception(exc)
            session.set_status(StatusCode.ERROR)
    [violation] = cleanup_never_flips(recorder.spans())
    assert "nothing but cleanup failed beneath it" in violation.message


# --- failures the cleanup span did not record: the timing rule ------------------------------------------

FLIP = (
    "is ERROR although nothing but cleanup failed beneath it: it was not ERROR when MCP.DeleteSession started"
)


def _copy_onto(session: Span, exc: BaseException, description: str | None = None) -> None:
    """What a runner's handler does with whatever escaped its cleanup."""
    session.record_exception(exc)
    session.set_status(Status(StatusCode.ERROR, str(exc) if description is None else description))


def test_cancelled_error_escaping_the_cleanup_span_is_a_flip(recorder: SpanRecorder, tracer: Tracer) -> None:
    """mcp 2.x's call_tool raises CancelledError when the sidecar dies; start_as_current_span records
    only Exception subclasses, so MCP.DeleteSession ends UNSET while the error flips the session."""
    session = tracer.start_span("Agent.Session")
    try:
        with tracer.start_as_current_span("MCP.DeleteSession", context=trace.set_span_in_context(session)):
            raise asyncio.CancelledError("Cancelled via cancel scope 7f00")
    except BaseException as exc:
        _copy_onto(session, exc)
    session.end()
    assert recorder.one("MCP.DeleteSession").status_code == "UNSET"
    assert recorder.one("MCP.DeleteSession").events == ()
    [violation] = cleanup_never_flips(recorder.spans())
    assert violation.message == (
        "Agent.Session is ERROR although nothing but cleanup failed beneath it: it was not ERROR when "
        "MCP.DeleteSession started and nothing failed before that (cause: MCP.DeleteSession [UNSET], which "
        "did not record the failure; the session recorded CancelledError: Cancelled via cancel scope 7f00); "
        "a cleanup failure must not flip the session"
    )
    assert violation.span == recorder.one("Agent.Session")


def test_plain_exception_not_recorded_on_the_cleanup_span_is_a_flip(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            with tracer.start_as_current_span(
                "MCP.DeleteSession", record_exception=False, set_status_on_exception=False
            ):
                raise RuntimeError("backend timed out")
        except RuntimeError as exc:
            _copy_onto(session, exc, "session failed")  # a generic description: no shared text
    assert recorder.one("MCP.DeleteSession").status_code == "UNSET"
    [violation] = cleanup_never_flips(recorder.spans())
    assert FLIP in violation.message
    assert "the session recorded RuntimeError: backend timed out" in violation.message


def test_an_anyio_cancel_scope_cancelling_the_cleanup_is_a_flip(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    async def run() -> None:
        with tracer.start_as_current_span("Agent.Session") as session:
            with tracer.start_as_current_span("Agent.Call"):
                await anyio.sleep(0)
            with anyio.CancelScope() as scope:
                try:
                    with tracer.start_as_current_span("MCP.DeleteSession"):
                        scope.cancel()
                        await anyio.sleep(5)  # cancelled at once: CancelledError escapes the span
                except anyio.get_cancelled_exc_class() as exc:
                    _copy_onto(session, exc, "Session failed")
                    raise
            assert scope.cancelled_caught

    anyio.run(run, backend="asyncio")
    assert recorder.one("Agent.Session").status_description == "Session failed"
    [violation] = cleanup_never_flips(recorder.spans())
    assert FLIP in violation.message
    assert "(cause: MCP.DeleteSession [UNSET], which did not record the failure; the session recorded " in (
        violation.message
    )
    assert "CancelledError" in violation.message


def test_the_cleanup_run_in_progress_is_named_as_the_cause(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("MCP.DeleteSession", attributes={"attempt": 1}):
            pass
        try:
            with tracer.start_as_current_span("MCP.DeleteSession", attributes={"attempt": 2}):
                raise asyncio.CancelledError()
        except asyncio.CancelledError as exc:
            _copy_onto(session, exc, "cancelled")
    [flip] = cleanup_never_flips(recorder.spans())
    assert "(cause: MCP.DeleteSession [UNSET], which did not record the failure; the session recorded " in (
        flip.message
    )
    assert flip.message.count("CancelledError") == 1
    [twice] = cleanup_at_most(recorder.spans(), 1)
    assert "ran cleanup 2 times" in twice.message


def test_a_primary_failure_recorded_only_on_the_session_before_cleanup_passes(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    """The agent's failure is recorded on the session (an exception event) before cleanup; the status is
    set once cleanup is done. That exception predates cleanup: not a flip."""
    with tracer.start_as_current_span("Agent.Session") as session:
        session.record_exception(TimeoutError("agent did not finish"))
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                raise asyncio.CancelledError()
        except asyncio.CancelledError:
            pass
        session.set_status(Status(StatusCode.ERROR, "Session failed"))
    assert cleanup_never_flips(recorder.spans()) == []


def test_a_session_already_error_when_cleanup_started_passes(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as session:
        session.set_status(StatusCode.ERROR)  # failed on its own, no description, no child
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                raise asyncio.CancelledError()
        except asyncio.CancelledError as exc:
            _copy_onto(session, exc, "")
    assert cleanup_never_flips(recorder.spans()) == []


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_a_users_interrupt_during_cleanup_is_not_a_flip(
    recorder: SpanRecorder, tracer: Tracer, interrupt: type[BaseException]
) -> None:
    def interrupted_session() -> None:
        with tracer.start_as_current_span("Agent.Session") as session:
            try:
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    raise interrupt()
            except BaseException as exc:
                _copy_onto(session, exc, "interrupted")
                raise

    with pytest.raises(interrupt):
        interrupted_session()
    assert recorder.one("Agent.Session").failed
    assert cleanup_never_flips(recorder.spans()) == []


def test_an_error_after_cleanup_with_no_cleanup_span_beneath_passes(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("Agent.Call"):
            pass
        session.set_status(Status(StatusCode.ERROR, "no answer"))
    assert cleanup_never_flips(recorder.spans()) == []


# --- issue 24: decided by structure and time ---------------------------------------------------------


@pytest.mark.parametrize("agent_call", [True, False], ids=["with-a-failed-call", "session-only"])
def test_a_hardened_session_keeping_the_same_text_as_its_cleanup_is_no_flip(
    recorder: SpanRecorder, tracer: Tracer, agent_call: bool
) -> None:
    """The SDK's generic text ("Request 'tools/call' timed out") on both the agent's failure and the
    cleanup's: the session had its description before cleanup started, so it is its own."""
    gate_shapes.same_text(tracer, agent_call=agent_call)
    session = recorder.one("Agent.Session")
    assert gate_shapes.TIMED_OUT in (session.status_description or "")
    assert recorder.one("MCP.DeleteSession").failed
    assert check_all(recorder.spans()) == []


def test_the_same_text_copied_after_cleanup_is_still_a_flip(recorder: SpanRecorder, tracer: Tracer) -> None:
    """Time cannot clear a description set after cleanup started: then text decides, and a cleanup
    message no earlier failure carries is a copy."""
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("Agent.Call"):
            pass
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                raise RuntimeError(gate_shapes.TIMED_OUT)
        except RuntimeError as exc:
            session.set_status(Status(StatusCode.ERROR, f"agent failed: {exc}"))
    [violation] = cleanup_never_flips(recorder.spans())
    assert "which comes from a cleanup failure (cause: MCP.DeleteSession [ERROR: RuntimeError: Request" in (
        violation.message
    )


def test_text_a_failure_from_before_cleanup_also_carries_decides_nothing(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    """The session is given its status after cleanup (it was UNSET when cleanup started), with the text
    both its failed call and the failed delete carry: the text tells the primary story either way."""
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("Agent.Call") as call:
            call.set_status(Status(StatusCode.ERROR, f"MCPError: {gate_shapes.TIMED_OUT}"))
        with tracer.start_as_current_span("MCP.DeleteSession") as delete:
            delete.set_status(Status(StatusCode.ERROR, f"MCPError: {gate_shapes.TIMED_OUT}"))
        session.set_status(Status(StatusCode.ERROR, f"MCPError: {gate_shapes.TIMED_OUT}"))
    assert check_all(recorder.spans()) == []


def test_an_error_span_after_cleanup_outside_it_does_not_excuse_the_flip(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    gate_shapes.masked_by_close(tracer)
    assert recorder.one("MCP.Close").failed
    [violation] = cleanup_never_flips(recorder.spans())
    assert violation.message == (
        "Agent.Session is ERROR although nothing but cleanup failed beneath it: it was not ERROR when "
        "MCP.DeleteSession started and nothing failed before that (cause: MCP.DeleteSession [UNSET], which "
        "did not record the failure; the session recorded CancelledError: Cancelled via cancel scope "
        "7f00deadbeef); a cleanup failure must not flip the session"
    )


def test_a_failed_close_after_cleanup_copied_onto_the_session_is_a_flip(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    """A span after cleanup is part of the teardown: its failure copied onto the session is one too."""
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("MCP.DeleteSession"):
            pass
        with tracer.start_as_current_span("MCP.Close") as close:
            close.set_status(Status(StatusCode.ERROR, "ReadError: connection reset"))
        session.set_status(Status(StatusCode.ERROR, "ReadError: connection reset"))
    [violation] = cleanup_never_flips(recorder.spans())
    assert "(cause: MCP.Close [ERROR: ReadError: connection reset])" in violation.message


def test_an_error_span_before_cleanup_still_excuses_an_error_session(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("Agent.Call") as call:
            call.set_status(Status(StatusCode.ERROR, "agent failed"))
        with tracer.start_as_current_span("MCP.DeleteSession"):
            pass
        session.set_status(Status(StatusCode.ERROR))
    assert cleanup_never_flips(recorder.spans()) == []


BOTH = ["MCP.DeleteSession", "MCP.Close"]


def test_a_close_following_or_nested_in_a_delete_is_one_teardown(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    gate_shapes.delete_then_close(tracer)
    with (
        tracer.start_as_current_span("Agent.Session"),
        tracer.start_as_current_span("MCP.DeleteSession"),
        tracer.start_as_current_span("MCP.Close"),  # nested in the delete
    ):
        pass
    assert cleanup_at_most(recorder.spans(), 1, cleanup=BOTH) == []
    assert check_all(recorder.spans(), cleanup=BOTH) == []


def test_a_repeated_name_starts_the_next_teardown(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session"):
        for name in ["MCP.DeleteSession", "MCP.Close", "MCP.DeleteSession", "MCP.Close"]:
            with tracer.start_as_current_span(name):
                pass
    [violation] = cleanup_at_most(recorder.spans(), 1, cleanup=BOTH)
    assert violation.message == (
        "Agent.Session ran cleanup 2 times, at most 1 allowed: MCP.DeleteSession [UNSET] then MCP.Close "
        "[UNSET]; MCP.DeleteSession [UNSET] then MCP.Close [UNSET]"
    )
    assert cleanup_at_most(recorder.spans(), 2, cleanup=BOTH) == []
    [twice] = cleanup_at_most(recorder.spans(), 1)  # the deletes alone: two runs as well
    assert "ran cleanup 2 times" in twice.message


def test_each_invariant_takes_its_own_cleanup_names(recorder: SpanRecorder, tracer: Tracer) -> None:
    """The close counts as cleanup for flips (its failure copied is one) but not for the count."""
    with tracer.start_as_current_span("Agent.Session") as session:
        with tracer.start_as_current_span("MCP.DeleteSession"):
            pass
        with tracer.start_as_current_span("Agent.Retry"):
            pass
        with tracer.start_as_current_span("MCP.Close") as close:
            close.set_status(Status(StatusCode.ERROR, "closed twice"))
        with tracer.start_as_current_span("MCP.Close"):
            pass
        session.set_status(Status(StatusCode.ERROR, "closed twice"))
    spans = recorder.spans()
    found = check_all(spans, flip_cleanup=BOTH, count_cleanup="MCP.DeleteSession")
    assert [v.invariant for v in found] == ["cleanup_never_flips"]
    assert [v.invariant for v in check_all(spans, cleanup=BOTH)] == ["cleanup_never_flips", "cleanup_at_most"]
    assert check_all(spans, cleanup=BOTH, max_cleanups=2)[1:] == []
