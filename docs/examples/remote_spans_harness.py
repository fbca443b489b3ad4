"""A harness in its own process that exports its spans the standard way: OTLP over HTTP.

It runs one benchmark session against an MCP sidecar with the official ``mcp`` client, traced with
its own ``TracerProvider``, ``BatchSpanProcessor`` and ``OTLPSpanExporter``, which reads the
receiver's address from ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the sidecar's ``otel_env``)::

    python remote_spans_harness.py MCP_URL [--hardened]

Unhardened, the cleanup failure escapes ``MCP.DeleteSession`` into ``Agent.Session`` (the flip);
hardened, it stays on ``MCP.DeleteSession``. ``docs/examples/remote_spans_test.py`` runs both.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp.client import Client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


# --8<-- [start:harness]
async def call(mcp_url, tool, arguments):
    async with Client(mcp_url) as client:
        result = await client.call_tool(tool, arguments)
    return json.loads(result.content[0].text)


async def run_session(tracer, mcp_url, hardened):
    with tracer.start_as_current_span("Agent.Session"):
        created = await call(mcp_url, "create_session", {"task_id": "task-1"})
        with tracer.start_as_current_span("Agent.Run"):
            pass  # the agent's work
        try:
            with tracer.start_as_current_span("MCP.DeleteSession"):
                deleted = await call(mcp_url, "delete_session", {"session_id": created["session_id"]})
                if "error" in deleted:
                    raise RuntimeError(deleted["error"])
        except RuntimeError:
            if not hardened:
                raise  # the flip: the cleanup failure escapes into Agent.Session


def main(argv):
    provider = TracerProvider(resource=Resource.create({"service.name": "subprocess-harness"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # endpoint from the environment
    trace.set_tracer_provider(provider)  # the mcp SDK's own spans (MCP send ...) are exported too
    try:
        asyncio.run(run_session(provider.get_tracer("harness"), argv[1], "--hardened" in argv))
    except RuntimeError as exc:
        print(f"session failed: {exc}", file=sys.stderr)
        return 1
    finally:
        provider.shutdown()  # exports the spans still in the batch, and waits for the answer
    return 0


# --8<-- [end:harness]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
