"""from-trace end to end on the bundled example harness: a trace the OTel SDK exports (its OTLP
protobuf encoding) from the unhardened runner under a real fault, a clean run recorded with a real
sidecar, the plan inferred with no fault written by hand, and that plan replayed: the unhardened runner
breaks the same invariant the trace broke, the hardened one does not. Where several plans fit, they are
tried in turn until one reproduces the trace's shape (the same spans ERROR)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from example_modules import load
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pytest_mcpfaults import Sidecar, parse_fault
from pytest_mcpfaults.from_trace.capture import clean_run_detail
from pytest_mcpfaults.from_trace.footprint import clean_run_from_detail
from pytest_mcpfaults.from_trace.infer import SpanNames, infer
from pytest_mcpfaults.from_trace.read import decode_trace
from pytest_mcpfaults.from_trace.shape import shape_differences
from pytest_mcpfaults.from_trace.trace import pick_trace
from pytest_mcpfaults.invariants import check_all
from pytest_mcpfaults.spans import RecordedSpan, SpanRecorder

harness = load("examples/harness")
NAMES = SpanNames()


def run_once(faults: list[Any], hardened: bool, provider: TracerProvider) -> Sidecar:
    """One benchmark session of the example runner against a real sidecar with ``faults``."""
    with Sidecar(era="session", faults=faults, patience=2.0) as sc:
        config = harness.RunnerConfig(
            mcp_url=sc.mcp_url,
            health_url=sc.health_url,
            health_interval=0.05,
            read_timeout=1.0,
            call_timeout=3.0,
        )
        runner = harness.Runner(config, hardened=hardened, tracer=provider.get_tracer("example"))
        # a second delete against a dead sidecar escapes the unhardened runner
        with contextlib.suppress(Exception):
            asyncio.run(asyncio.wait_for(runner.run(["task-1"]), 30))
    provider.force_flush()
    return sc


def recorded(faults: list[Any], hardened: bool) -> tuple[list[RecordedSpan], Sidecar]:
    recorder = SpanRecorder()
    provider = recorder.attach(TracerProvider(shutdown_on_exit=False))
    sc = run_once(faults, hardened, provider)
    provider.shutdown()
    return recorder.spans(), sc


def production_trace(fault: str) -> bytes:
    """The unhardened runner under ``fault``, its spans exported by the OTel SDK as OTLP protobuf."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_once([parse_fault(fault)], False, provider)
    provider.shutdown()
    data: bytes = encode_spans(exporter.get_finished_spans()).SerializeToString()
    return data


def broken(spans: list[RecordedSpan]) -> set[str]:
    return {v.invariant for v in check_all(spans)}


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("backend_gone@tool:delete_session[times=1]", "error_payload"),
        ("error_payload(reason='backend timed out')@tool:delete_session[times=1]", "error_payload"),
        ("jsonrpc_error(code=-32001,message='backend busy')@tool:delete_session[times=1]", "jsonrpc_error"),
        ("tool_error(text='delete failed')@tool:delete_session[times=1]", "error_payload"),
        ("die@tool:delete_session[times=1]", ("die", "reset")),
        ("reset@tool:delete_session[times=1]", "reset"),
        ("session_expired@tool:delete_session[times=1]", "session_expired"),
        ("status(code=500)@tool:delete_session[times=1]", "status"),
        ("hang@tool:delete_session[times=1]", "hang"),
        ("stall@tool:delete_session[times=1]", "hang"),
    ],
)
def test_a_trace_of_the_unhardened_runner_replays_against_the_clean_test(
    fault: str, kind: str | tuple[str, ...]
) -> None:
    data = production_trace(fault)
    read = decode_trace(data, "prod.pb")
    trace = pick_trace(read.spans, "prod.pb", NAMES.session)
    want = broken(list(trace.spans))
    assert "cleanup_never_flips" in want  # the incident's shape: the failed delete flipped the session

    clean_spans, clean_sc = recorded([], hardened=False)
    assert broken(clean_spans) == set()
    clean = clean_run_from_detail(clean_run_detail(clean_spans, [clean_sc]), "clean", NAMES.session)
    got = infer(trace, clean, NAMES)

    first = next(i for i in got.inferences if i.faults)
    assert first.span.name == "MCP.DeleteSession" and first.step == "tool:delete_session#1"
    assert got.plan[0].startswith(kind), got.plan
    assert first.reason.startswith(f"MCP.DeleteSession (span {first.span.span_id_hex}) recorded ")
    # the plans to try, in order, until one reproduces the trace's shape (its spans ERROR or not)
    tried: list[tuple[tuple[str, ...], list[str]]] = []
    for plan in got.plans():
        spans, _ = recorded([parse_fault(f) for f in plan], hardened=False)
        tried.append((plan, shape_differences(trace, spans, NAMES.session)))
        if not tried[-1][1]:
            break
    assert not tried[-1][1], tried
    if fault.startswith("die"):  # a reset at the first delete lets the second succeed: not the trace's shape
        assert [p for p, _ in tried] == [
            ("reset@tool:delete_session[nth=1]",),
            ("die@tool:delete_session[nth=1]",),
        ]
        assert tried[0][1] == [
            "(session #1) / MCP.DeleteSession #2: ERROR in the trace, not ERROR in the replay"
        ]
    assert broken(spans) == want, (tried, [i.reason for i in got.inferences])
    spans, _ = recorded([parse_fault(f) for f in tried[-1][0]], hardened=True)
    assert "cleanup_never_flips" not in broken(spans)
