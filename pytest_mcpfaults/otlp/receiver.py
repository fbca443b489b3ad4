"""The sidecar's OTLP/HTTP trace receiver: ``POST /v1/traces`` answered as the OTLP specification says
(docs/spans.md, "The receiver").

The receiver's own listener (started on first use of ``Sidecar.otel_env``) is
reached by no fault: it keeps answering while the sidecar is dead or frozen, so the spans a harness
exports after its sidecar died still arrive (and the mounted control endpoint can be read). A large
export is decoded off the loop every sidecar of the process shares (2,000 spans take some 10 ms).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from pytest_mcpfaults.core.timeouts import within
from pytest_mcpfaults.otlp.decode import (
    INVALID_ARGUMENT,
    JSON,
    PROTOBUF,
    UNIMPLEMENTED,
    OtlpDecodeError,
    decode_export,
    encode_response,
    encode_status,
)
from pytest_mcpfaults.transports.connections import Connections
from pytest_mcpfaults.transports.http_io import BodyError, ConnectionReportingServer, read_body
from pytest_mcpfaults.transports.loop import WorkerPool

if TYPE_CHECKING:
    from pytest_mcpfaults.core.journal import Journal
    from pytest_mcpfaults.options.fields import SidecarOptions
    from pytest_mcpfaults.spans.recorder import SpanRecorder
    from pytest_mcpfaults.spans.records import RecordedSpan

#: Bodies larger than this (bytes, decompressed) are decoded off the loop; smaller ones cost less
#: than the hop to a thread.
DECODE_OFF_LOOP = 32 * 1024
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@dataclass
class OtlpStats:
    """What the receiver took in, for the messages of a wait for spans that failed."""

    exports: int = 0
    spans: int = 0
    rejected: int = 0
    refused: int = 0
    last_refusal: str | None = None

    def describe(self) -> str:
        text = f"{self.exports} OTLP export(s) received, {self.spans} span(s) recorded"
        if self.rejected:
            text += f", {self.rejected} rejected"
        if self.refused:
            text += f"; {self.refused} request(s) refused, the last: {self.last_refusal}"
        return text


class OtlpService:
    """What a sidecar holds for spans from other processes: the receiver on ``opts.otlp_path`` (``None``:
    off), the recorder spans go to (``opts.span_recorder``, or its own, made on first use) and its own
    listening socket on loopback, started by :meth:`start_listener`, whose connections are journaled,
    and bounded (``max_body_bytes``, ``idle_timeout``), as the sidecar's port's are."""

    def __init__(
        self,
        opts: SidecarOptions,
        journal: Journal,
        on_error: Callable[[str, BaseException], None],
        mounted: Callable[[str], Handler | None],
    ) -> None:
        self.path = opts.otlp_path
        self.journal = journal
        self._recorder = opts.span_recorder
        self._lock = threading.Lock()
        self._mounted = mounted
        self._on_error = on_error
        self.max_body_bytes, self.body_timeout = opts.max_body_bytes, opts.idle_timeout
        self.stats = OtlpStats()
        self._decoder = WorkerPool("mcpfaults-otlp-decode", max_workers=1)  # threads start on first use
        self.conns = Connections(journal, self.body_timeout)  # the own listener's
        self._server: asyncio.Server | None = None
        self._web: ConnectionReportingServer | None = None
        self.host, self.port = "", 0
        #: Set by :meth:`close`: waits for spans give up.
        self.closed = threading.Event()

    def recorder_now(self) -> SpanRecorder:
        """The recorder received spans go to (made on first use when none was given)."""
        with self._lock:
            if self._recorder is None:
                from pytest_mcpfaults.spans.recorder import SpanRecorder

                self._recorder = SpanRecorder()
            return self._recorder

    def serves(self, path: str) -> bool:
        return self.path is not None and path == self.path

    async def start_listener(self, host: str) -> OtlpService:
        """Start the receiver's own listener (once) on ``host``."""
        if self._server is None:
            self._web = ConnectionReportingServer(
                self._on_own_port, self.conns.made, self.conns.lost,
                access_log=None, handler_cancellation=True,
            )  # fmt: skip
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(self._web, host, 0, reuse_address=True)
            self.host, self.port = host, self._server.sockets[0].getsockname()[1]
        return self

    async def _on_own_port(self, request: web.BaseRequest) -> web.StreamResponse:
        conn = self.conns.live.get(request.protocol)
        if conn is None:  # connection already gone
            return web.Response(status=500)
        own = self.serves(request.path)
        mounted = None if own else self._mounted(request.path)
        if not own and mounted is None:
            return web.json_response({"error": f"no route {request.path!r} on the OTLP port"}, status=404)
        conn.busy += 1
        try:
            return await (self.handle(request, conn.id) if mounted is None else mounted(request))
        finally:
            conn.busy -= 1
            self.conns.arm_idle(conn)

    async def close(self) -> None:
        self.closed.set()
        server, self._server = self._server, None
        if server is not None:
            server.close()
            for conn in list(self.conns.live.values()):
                conn.closed_by_us = True
                conn.transport.abort()
            for _ in range(3):  # let connection_lost run for the aborted transports
                await asyncio.sleep(0)
        web_server, self._web = self._web, None
        if web_server is not None:
            await web_server.shutdown(0.05)
        self._decoder.close()

    def wait_for_span(self, pattern: str, timeout: float, count: int) -> list[RecordedSpan]:
        """``SpanRecorder.wait_for_span`` on the recorder; its failure also says what the receiver got."""
        from pytest_mcpfaults.spans.queries import SpanLookupError

        recorder = self.recorder_now()
        try:
            return recorder.wait_for_span(pattern, timeout=timeout, count=count, cancel=self.closed)
        except SpanLookupError as exc:
            got = self.stats.describe()
            if recorder.dropped_received:
                got += (
                    f"; {recorder.dropped_received} oldest received span(s) dropped by the span limit "
                    f"({recorder.received_limit})"
                )
            raise SpanLookupError(f"{exc}; the sidecar's OTLP receiver: {got}") from None

    async def handle(self, request: web.BaseRequest, conn_id: int) -> web.StreamResponse:
        """Answer one request on connection ``conn_id`` (a journal connection id) and journal it."""
        journal = self.journal
        rid = journal.add_request(
            conn_id=conn_id,
            method=request.method,
            path=request.path,
            user_agent=request.headers.get("User-Agent"),
        )
        resp: web.Response | None = None
        try:
            resp = await self._answer(request, rid)
            return resp
        except Exception as exc:  # a bug of ours: answer 500 and surface it in the test
            self._on_error(f"{request.method} {request.path}", exc)
            journal.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
            resp = web.Response(status=500, text=f"mcpfaults OTLP receiver error: {exc!r}")
            return resp
        finally:
            status = resp.status if resp is not None else 500
            sent = len(resp.body) if resp is not None and isinstance(resp.body, bytes) else 0
            journal.end_request(rid, status=status, bytes_sent=sent)

    def _refuse(self, rid: int, status: int, media: str, message: str, **headers: str) -> web.Response:
        self.journal.update_request(rid, error=message, error_by="client")
        self.stats.refused += 1
        self.stats.last_refusal = f"{status} {message}"
        code = INVALID_ARGUMENT if status == 400 else UNIMPLEMENTED
        body = encode_status(media, code, message)
        resp = web.Response(status=status, body=body, content_type=media, headers=headers or None)
        if headers.get("Connection") == "close":
            resp.force_close()  # the header alone does not make aiohttp close it
        return resp

    async def _answer(self, request: web.BaseRequest, rid: int) -> web.Response:
        if request.method != "POST":
            return self._refuse(
                rid, 405, JSON, f"the OTLP receiver answers POST only, got {request.method}", Allow="POST"
            )
        media = request.content_type  # lower-cased, without parameters
        if media not in (PROTOBUF, JSON):
            got = request.headers.get("Content-Type", "(none)")
            why = f"OTLP/HTTP traces are sent as {PROTOBUF} or {JSON}, got Content-Type {got!r}"
            return self._refuse(rid, 415, JSON, why)
        try:
            read = read_body(request, self.max_body_bytes)  # the decompressed body, bounded
            body = await (read if self.body_timeout is None else within(read, self.body_timeout))
        except asyncio.TimeoutError:
            why = f"request body not complete within {self.body_timeout:g} s"
            return self._refuse(rid, 408, media, why, Connection="close")
        except BodyError as exc:  # another encoding (415), a gzip body that does not inflate (400)
            return self._refuse(rid, exc.status, media, exc.message)
        if body is None:
            # the rest is never inflated; closing the connection stops reading it too
            return self._refuse(
                rid, 413, media, f"request body over {self.max_body_bytes} bytes", Connection="close"
            )
        try:
            if len(body) > DECODE_OFF_LOOP:
                decoded = await self._decoder.submit(lambda: decode_export(body, media))
            else:
                decoded = decode_export(body, media)
        except OtlpDecodeError as exc:
            return self._refuse(rid, 400, media, str(exc))
        recorder = self.recorder_now()
        rejected, reasons = decoded.rejected, list(decoded.reasons)
        for source, spans in decoded.batches:
            if recorder.add_received(spans, source) < len(spans):
                rejected += len(spans)
                reasons.append("the span recorder is not recording (no test asked for spans)")
        self.stats.exports += 1
        self.stats.spans += decoded.accepted - (rejected - decoded.rejected)
        self.stats.rejected += rejected
        message = "; ".join(dict.fromkeys(reasons))
        return web.Response(status=200, body=encode_response(media, rejected, message), content_type=media)
