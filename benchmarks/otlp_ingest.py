"""A 1,000-span OTLP export ingested by the sidecar's receiver over a real socket, beside the cost of
decoding the same payload with opentelemetry-proto alone, measured side by side in one run.

The payload is what the SDK's own exporter sends: 1,000 real spans (100 sessions of 10 spans each:
the session, the agent's run, 7 tool calls with attributes, a failed delete with its exception event)
encoded by ``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans``.

Rows, each the median of REPEAT rounds, interleaved round by round:

* the receiver: ``POST /v1/traces`` on a kept-alive httpx connection, until the 200 answer (HTTP,
  protobuf decode, conversion to recorder spans, recording);
* the same export as OTLP JSON (built with ``json_format``, ids turned to hex);
* the receiver's decode and conversion alone (``decode_export``), no HTTP;
* opentelemetry-proto alone: ``ExportTraceServiceRequest.FromString`` of the same bytes;
* a bare aiohttp handler that reads the same body and answers 200 (the HTTP part alone);
* the first query afterwards: ``recorder.spans()`` (parents resolved) and ``check()``.

Target: the receiver ingests the 1,000-span export in under 50 ms.
Run: ``.venv/bin/python benchmarks/otlp_ingest.py``
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import _bench
import httpx
from aiohttp import web
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.otlp.decode import PROTOBUF, decode_export

REPEAT = 41
SESSIONS = 100  # x 10 spans


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[object] = []

    def export(self, spans):  # type: ignore[no-untyped-def]
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def payload() -> bytes:
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-harness"}))
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("bench")
    for i in range(SESSIONS):
        try:
            with tracer.start_as_current_span("Agent.Session", attributes={"session": i}):
                with tracer.start_as_current_span("Agent.Run"):
                    for n in range(7):
                        attrs = {"mcp.method.name": "tools/call", "tool": "echo", "n": n, "args": ("a", "b")}
                        with tracer.start_as_current_span("MCP send tools/call echo", attributes=attrs):
                            pass
                with tracer.start_as_current_span("MCP.DeleteSession"):
                    raise RuntimeError(f"Error closing session {i}: Service is no longer alive")
        except RuntimeError:
            pass
    provider.shutdown()
    assert len(keep.spans) == SESSIONS * 10
    data: bytes = encode_spans(keep.spans).SerializeToString()  # type: ignore[arg-type]
    return data


def as_json(data: bytes) -> bytes:
    d = json_format.MessageToDict(ExportTraceServiceRequest.FromString(data))
    for rs in d["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in sp:
                        sp[key] = base64.b64decode(sp[key]).hex()
    return json.dumps(d).encode()


async def _bare_handler(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=b"", content_type=PROTOBUF)


def _bare_site() -> tuple[str, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="bench-bare-loop", daemon=True).start()

    async def start() -> str:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/traces", _bare_handler)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/v1/traces"

    return asyncio.run_coroutine_threadsafe(start(), loop).result(10), loop


def main() -> None:
    data = payload()
    jdata = as_json(data)
    bare_url, _ = _bare_site()
    results: dict[str, list[float]] = {k: [] for k in ("post", "json", "decode", "proto", "bare", "query")}
    with Sidecar(max_body_bytes=64 << 20) as sc, httpx.Client(timeout=30) as client:
        rec = sc.span_recorder
        url = sc.otlp_url
        headers = {"Content-Type": PROTOBUF}

        def post() -> None:
            r = client.post(url, content=data, headers=headers)
            assert r.status_code == 200, r.content
            assert r.content == b""  # an ExportTraceServiceResponse with nothing rejected

        def post_json() -> None:
            r = client.post(url, content=jdata, headers={"Content-Type": "application/json"})
            assert r.status_code == 200, r.text
            assert r.json() == {}

        def bare() -> None:
            assert client.post(bare_url, content=data, headers=headers).status_code == 200

        def query() -> None:
            assert len(rec.spans()) == SESSIONS * 10
            assert len(rec.check()) == SESSIONS  # every session flipped by its delete

        for _ in range(3):  # warm-up
            post(), post_json(), bare(), rec.clear()
        for _ in range(REPEAT):
            for name, fn in (
                ("post", post),
                ("query", query),
                ("json", post_json),
                ("decode", lambda: decode_export(data, PROTOBUF)),
                ("proto", lambda: ExportTraceServiceRequest.FromString(data)),
                ("bare", bare),
            ):
                if name in ("post", "json"):
                    rec.clear()
                results[name].append(_bench.timed(fn, repeat=1, warmup=0)[0])
        assert sc.errors == []
    m = {k: _bench.median(v) for k, v in results.items()}
    n = SESSIONS * 10
    kib = f"{len(data) / 1024:.0f} KiB protobuf, {len(jdata) / 1024:.0f} KiB JSON"
    labels = {
        "post": "receiver: `POST /v1/traces` protobuf, until the 200",
        "json": "receiver: the same export as OTLP JSON",
        "decode": "receiver's decode + conversion alone (`decode_export`)",
        "proto": "opentelemetry-proto alone: `ExportTraceServiceRequest.FromString`",
        "bare": "bare aiohttp handler reading the body (HTTP alone)",
        "query": "first query afterwards: `spans()` + `check()`",
    }
    rows = [[label, _bench.fmt_s(m[k]), f"{m[k] / m['proto']:.1f}x"] for k, label in labels.items()]
    title = f"OTLP ingest: one export of {n:,} spans ({kib}), median of {REPEAT}"
    _bench.table(title, rows, ["", "median", "vs opentelemetry-proto alone"])
    print()
    took = _bench.fmt_s(m["post"])
    print(
        _bench.verdict(
            m["post"] < 0.050, f"the receiver ingests a {n:,}-span export in {took} (target < 50 ms)"
        )
    )


if __name__ == "__main__":
    main()
