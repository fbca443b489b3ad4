"""A production trace of the bundled example harness: the unhardened runner's one benchmark session
against a real sidecar under a fault, its spans exported by the OTel SDK (OTLP protobuf, as its OTLP
exporter sends them), and the same export in the OTLP/JSON mapping (ids as hex strings), as the OTel
collector's file exporter writes it. ``docs/examples/from_trace/unhardened.json`` is
``otlp_json(unhardened_export("backend_gone@tool:delete_session[times=1]"))``."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from example_modules import load
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pytest_mcpfaults import Sidecar, parse_fault

harness = load("examples/harness")


def unhardened_export(fault: str) -> bytes:
    """The unhardened runner's session under ``fault``, as the SDK's OTLP exporter encodes it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Sidecar(era="session", faults=[parse_fault(fault)], patience=2.0) as sc:
        config = harness.RunnerConfig(
            mcp_url=sc.mcp_url,
            health_url=sc.health_url,
            health_interval=0.05,
            read_timeout=1.0,
            call_timeout=3.0,
        )
        runner = harness.Runner(config, hardened=False, tracer=provider.get_tracer("example"))
        with contextlib.suppress(Exception):  # a second delete against a dead sidecar escapes it
            asyncio.run(asyncio.wait_for(runner.run(["task-1"]), 30))
    provider.shutdown()
    data: bytes = encode_spans(exporter.get_finished_spans()).SerializeToString()
    return data


def unhardened_exports(faults: Sequence[str]) -> list[bytes]:
    """:func:`unhardened_export` of each fault, all at once (each its own sidecar, loop and provider):
    a held delete waits out the runner's timeout, which the others need not wait for in turn."""
    with ThreadPoolExecutor(max_workers=len(faults) or 1) as pool:
        return list(pool.map(unhardened_export, faults))


def otlp_json(export: bytes) -> str:
    """An OTLP protobuf export in the OTLP/JSON mapping (trace and span ids as hex strings)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    message.ParseFromString(export)
    data = MessageToDict(message)
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(data, indent=1) + "\n"
