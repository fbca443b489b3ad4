"""Span shapes the span gate once judged wrong (issue 24), emitted by a given tracer: used in-process by
``test_invariants.py`` and exported over OTLP from a child process by ``test_otlp_gate.py``
(``python gate_shapes.py SHAPE``, the exporter's endpoint from the environment)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

TIMED_OUT = "Request 'tools/call' timed out"


def cancelled_flip(tracer: Tracer) -> None:
    """mcp 2.x when the sidecar dies under the delete: CancelledError escapes the cleanup span unrecorded
    (a BaseException) and the session's handler records it: a flip."""
    session = tracer.start_span("Agent.Session")
    ctx = trace.set_span_in_context(session)
    with tracer.start_as_current_span("Agent.Call", context=ctx):
        pass
    try:
        with tracer.start_as_current_span("MCP.DeleteSession", context=ctx):
            raise asyncio.CancelledError("Cancelled via cancel scope 7f00deadbeef")
    except BaseException as exc:
        session.record_exception(exc)
        session.set_status(Status(StatusCode.ERROR, str(exc)))
    session.end()


def same_text(tracer: Tracer, *, agent_call: bool = True) -> None:
    """A hardened session: the agent's call timed out (kept as the session's status, set before cleanup
    starts); the delete then timed out with the SDK's same generic text. ``agent_call=False``: the
    session keeps the failure without a failed span of its own beneath it."""
    session = tracer.start_span("Agent.Session")
    ctx = trace.set_span_in_context(session)
    if agent_call:
        with tracer.start_as_current_span("Agent.Call", context=ctx) as call:
            call.set_status(Status(StatusCode.ERROR, f"MCPError: {TIMED_OUT}"))
    session.set_status(Status(StatusCode.ERROR, f"agent failed: {TIMED_OUT}"))
    with tracer.start_as_current_span("MCP.DeleteSession", context=ctx) as delete:
        delete.record_exception(RuntimeError(TIMED_OUT))
        delete.set_status(Status(StatusCode.ERROR, f"MCPError: {TIMED_OUT}"))
    session.end()


def masked_by_close(tracer: Tracer) -> None:
    """cancelled_flip, then the client's close fails in a span outside cleanup, after it."""
    session = tracer.start_span("Agent.Session")
    ctx = trace.set_span_in_context(session)
    failure: BaseException | None = None
    try:
        with tracer.start_as_current_span("MCP.DeleteSession", context=ctx):
            raise asyncio.CancelledError("Cancelled via cancel scope 7f00deadbeef")
    except BaseException as exc:
        failure = exc
    with tracer.start_as_current_span("MCP.Close", context=ctx) as close:
        close.set_status(Status(StatusCode.ERROR, "ExceptionGroup([ReadError('')])"))
    assert failure is not None
    session.record_exception(failure)
    session.set_status(Status(StatusCode.ERROR, str(failure)))
    session.end()


def delete_then_close(tracer: Tracer) -> None:
    """One teardown: the delete, then the client's close, siblings beneath the session."""
    with tracer.start_as_current_span("Agent.Session"):
        with tracer.start_as_current_span("MCP.DeleteSession"):
            pass
        with tracer.start_as_current_span("MCP.Close"):
            pass


SHAPES: dict[str, Callable[[Tracer], None]] = {
    "cancelled_flip": cancelled_flip,
    "same_text": same_text,
    "masked_by_close": masked_by_close,
    "delete_then_close": delete_then_close,
}

if __name__ == "__main__":
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    SHAPES[sys.argv[1]](provider.get_tracer("shapes"))
    provider.shutdown()
