"""``Sidecar``: a fake MCP sidecar on loopback that can die, freeze, hang, stall and lie.

A real aiohttp server on ``127.0.0.1`` (port 0 by default) hosted on the process-wide loop thread of
:mod:`pytest_mcpfaults.sidecar.loop`. Every public method is called from the test's thread; the
request handling runs on the loop thread. The journal is shared, lock-protected, and read as snapshots.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web, web_protocol

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.otlp.receiver import OtlpService
from pytest_mcpfaults.sidecar import core
from pytest_mcpfaults.sidecar import loop as _loop
from pytest_mcpfaults.sidecar.config import DEFAULT_PATIENCE, LOOPBACK_NAMES, ReplyMode
from pytest_mcpfaults.sidecar.errors import SidecarError
from pytest_mcpfaults.sidecar.http_io import ConnectionReportingServer, Stamp, read_body
from pytest_mcpfaults.sidecar.inject import Delivery, Dropped, deliver, reset_transport
from pytest_mcpfaults.sidecar.journal import BudgetSource, HoldOutcome, PatienceViolation, RequestFields
from pytest_mcpfaults.sidecar.legacy_sse import TransportName
from pytest_mcpfaults.sidecar.mcp import Era, reply_body
from pytest_mcpfaults.sidecar.options import SidecarOptions, build_options, response_headers, takes_options
from pytest_mcpfaults.sidecar.proxy import Proxy, Relayed
from pytest_mcpfaults.sidecar.sse_stream import StreamWriter
from pytest_mcpfaults.sidecar.stdio_upstream import Piped, StdioUpstream
from pytest_mcpfaults.sidecar.timeouts import within
from pytest_mcpfaults.sidecar.tools import Tool
from pytest_mcpfaults.sidecar.upstream import Upstream
from pytest_mcpfaults.sidecar.waits import SidecarWaits
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.validation import is_loopback_host

if TYPE_CHECKING:
    from pytest_mcpfaults.spans import RecordedSpan, SpanRecorder

__all__ = ["DEFAULT_PATIENCE", "Sidecar", "SidecarError"]


@dataclass(eq=False)
class _Conn:
    id: int
    transport: asyncio.Transport
    lost: asyncio.Future[None]
    closed_by_us: bool = False
    current: int | None = None
    busy: int = 0  # requests being handled (mounted ones too)
    idle_timer: asyncio.TimerHandle | None = None
    idle_since: float = 0.0  # loop time the connection last became idle


@dataclass(eq=False)
class _Hold:
    rid: int
    fault: F.Fault
    release: asyncio.Future[HoldOutcome]
    started: float = field(default_factory=time.monotonic)


def _numeric_family(host: str) -> int | None:
    """``AF_INET`` / ``AF_INET6`` for a numeric address (``127.0.0.1``, ``::1``), else ``None``."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family
    return None


class _Exchange:
    """One request's :class:`~pytest_mcpfaults.sidecar.core.Transport`: what the core asks of the
    socket while deciding (hold it, die, pause, keep an event stream open)."""

    def __init__(self, sidecar: Sidecar, request: web.BaseRequest, conn: _Conn, rid: int, out: Delivery):
        self.sidecar, self.request, self.conn, self.rid, self.out = sidecar, request, conn, rid, out
        self.stream: web.StreamResponse | None = None

    async def hold(self, fault: F.Fault) -> None:
        out = self.out  # what was sent so far, recorded before the hold
        self.sidecar.journal.update_request(
            self.rid, status=out.status, bytes_sent=out.bytes_sent, body_bytes=out.body_bytes
        )
        await self.sidecar._hold(self.rid, self.conn, fault)

    async def hold_stream(self, fault: F.Fault) -> None:
        """Hold a legacy SSE stream: journaled on its ``GET`` record, with the fault that holds it."""
        self.sidecar.journal.update_request(self.rid, fault=str(fault), fault_kind=fault.kind)
        await self.hold(fault)

    async def die(self, restart: bool) -> None:
        await self.sidecar._die_transport(restart=restart)

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def event_stream(self) -> None:
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(self.request)
        await resp.write(b": stream open\n\n")
        self.out.status, self.out.bytes_sent = 200, 15
        self.stream = resp
        await self.sidecar._stream_until_teardown()


def _http_plan(faults: Sequence[F.Fault | str], where: str) -> tuple[F.Fault, ...]:
    """The plan, refusing stdio-only kinds (``ignore_eof`` …) by name: they act on a child process."""
    plan = F.as_plan(faults)
    F.check_transport(plan, "http", f"Sidecar {where}")
    return plan


class Sidecar(SidecarWaits):
    """A fake MCP sidecar on loopback. Use as a context manager, or ``start()`` / ``stop()``.

    Its keyword arguments are the fields of
    :class:`~pytest_mcpfaults.sidecar.options.SidecarOptions` (each one's default, ``serve`` flag and
    meaning: the options table of docs/sidecar.md), checked once when it is built; ``options`` holds
    them.
    """

    @takes_options(SidecarOptions)
    def __init__(self, **options: Any) -> None:
        """A sidecar with these options (nothing binds until :meth:`start`)."""
        opts = self.options = build_options("Sidecar", options)
        self.upstream, self.upstream_health = opts.upstream, opts.upstream_health
        self.upstream_command = cast("list[str] | None", opts.upstream_command)  # copied by SidecarOptions
        self.upstream_timeout = opts.upstream_timeout
        self.upstream_headers = cast("dict[str, str | None]", opts.upstream_headers)
        self.tool_timeout, self.idle_timeout = opts.tool_timeout, opts.idle_timeout
        self.otlp_path = opts.otlp_path
        self.host = opts.host
        self.era, self.reply = cast(Era, opts.era), cast(ReplyMode, opts.reply)
        self.patience, self.expect_hang = opts.patience, opts.expect_hang
        self.max_body_bytes = opts.max_body_bytes
        self._port = opts.port
        # Sync tool handlers of the user's run here, off the shared loop (one blocking handler must not
        # stall every sidecar of the process); threads start on first use.
        self._pool = _loop.WorkerPool("mcpfaults-tool-handler")
        self.core = self._build_core(opts)
        self._tasks: set[asyncio.Task[Any]] = set()  # request handlers in flight: cancelled at stop()
        self._conns: dict[web_protocol.RequestHandler, _Conn] = {}
        self._holds: set[_Hold] = set()
        self._streams: set[asyncio.Future[str]] = set()
        self._server: asyncio.Server | None = None
        self._web: ConnectionReportingServer | None = None
        self._mounted: tuple[str, Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]] | None = None
        self._otlp = OtlpService(
            opts.otlp_path, self.journal, opts.span_recorder, max_body_bytes=opts.max_body_bytes,
            body_timeout=opts.idle_timeout, on_error=self.core.record_error, mounted=self._mounted_for,
        )  # fmt: skip

    def _build_core(self, opts: SidecarOptions) -> core.SidecarCore:
        """The core these options describe, and its upstream in proxy mode."""
        upstream_client = (
            Upstream(opts.upstream, timeout=opts.upstream_timeout, headers=self.upstream_headers)
            if opts.upstream is not None
            else None
        )
        service_url = opts.service_url
        sidecar_core = core.SidecarCore(
            mcp_path=opts.mcp_path,
            health_path=opts.health_path,
            era=self.era,
            reply=self.reply,
            tools=opts.tools,
            tool_sets=opts.tool_sets,
            faults=cast("tuple[F.Fault, ...]", opts.faults),  # parsed by SidecarOptions
            get_stream=opts.get_stream,
            allowed_origins=opts.allowed_origins,
            max_body_bytes=opts.max_body_bytes,
            # backend_gone names the upstream's address in proxy mode, the sidecar's own otherwise
            service_url=lambda: service_url or (upstream_client.origin if upstream_client else self.url),
            tool_timeout=opts.tool_timeout,
            run_sync=self._pool.submit,
            transport=cast(TransportName, opts.transport),
            sse_path=opts.sse_path,
            messages_path=opts.messages_path,
        )
        self._proxy: Proxy | None = None
        if upstream_client is not None:
            self._proxy = Proxy(
                upstream_client, era=self.era, upstream_health=opts.upstream_health, endpoint=sidecar_core.mcp
            )
            sidecar_core.upstream = self._proxy
        self._stdio: StdioUpstream | None = None
        if self.upstream_command is not None:
            self._stdio = StdioUpstream(
                self.upstream_command, timeout=opts.upstream_timeout, endpoint=sidecar_core.mcp,
                journal=sidecar_core.journal, on_error=sidecar_core.record_error,
            )  # fmt: skip
            sidecar_core.upstream = self._stdio
        if sidecar_core.upstream is not None and is_loopback_host(opts.host):
            sidecar_core.refuse_foreign_hosts()  # the upstream's DNS-rebinding check, which it cannot do
        return sidecar_core

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Sidecar:
        """Bind and start serving; returns ``self``. The port is known afterwards."""
        if self.core.state != "new":
            raise RuntimeError(f"Sidecar.start(): already {self.core.state}; a sidecar starts once")
        if self._stdio is not None and self._stdio.guarded:
            guardian.ensure()  # from the test's thread: the upstream child is watched from its spawn
        _loop.run(self._start())
        return self

    def _stamp(self) -> Stamp | None:
        """The one place every answer on this sidecar's listener is stamped, whoever makes it (the
        core's reply, a relayed upstream answer, an event stream, the adapter's own 408/413/500,
        aiohttp's 400): the headers of the options that name one (``SidecarOptions``, ``header=``)."""
        headers = response_headers(self.options)
        if not headers:
            return None  # nothing to stamp: aiohttp's own request class, no hook

        def stamp(response: web.StreamResponse) -> None:
            response.headers.update(headers)

        return stamp

    async def _start(self) -> None:
        # lingering_time: after answering without reading a body (413), drain it for at most 1 s
        # (aiohttp's default: 10 s), then close: a client that keeps sending cannot keep it busy.
        self._web = ConnectionReportingServer(
            self._handle, self._conn_made, self._conn_lost, self._stamp(),
            access_log=None, handler_cancellation=False, lingering_time=1.0,
        )  # fmt: skip
        if self._stdio is not None:
            await self._stdio.start()
        try:
            await self._listen()
        except BaseException:
            if self._stdio is not None:
                await self._stdio.close()
            raise
        self.core.state = "running"

    async def _listen(self) -> None:
        assert self._web is not None
        loop = asyncio.get_running_loop()
        family = _numeric_family(self.host)
        if family is not None:  # bound here: create_server(host=...) resolves it again every start
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP: asyncio sets NODELAY
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((self.host, self._port))
                self._server = await loop.create_server(self._web, sock=sock)
            except BaseException:
                sock.close()
                raise
        elif self.host not in LOOPBACK_NAMES:
            self._server = await loop.create_server(self._web, self.host, self._port, reuse_address=True)
        else:
            self._server = await self._listen_name(loop)
        self._port = self._server.sockets[0].getsockname()[1]

    async def _listen_name(self, loop: asyncio.AbstractEventLoop) -> asyncio.Server:
        """``localhost``: listen on each loopback address it resolves to (``127.0.0.1``, and ``::1`` on
        dual-stack hosts) on ONE port, the one ``url`` names (asyncio alone would pick a free port
        per address). With port 0 a free port of the first address is tried on the others; taken
        there, another is drawn (5 tries). An explicit port must be free on every address. An IPv6
        address that cannot be bound (IPv6 disabled) is left out."""
        assert self._web is not None
        infos = await loop.getaddrinfo(self.host, None, type=socket.SOCK_STREAM)
        addrs = sorted(
            {str(i[4][0]) for i in infos if ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback},
            key=lambda a: (":" in a, a),  # 127.0.0.1 first
        )
        if not addrs:
            raise OSError(f"Sidecar: host {self.host!r} resolves to no loopback address")
        for attempt in range(5):
            port = self._port
            if port == 0 and len(addrs) > 1:  # a port free on the first address, then bind them all on it
                probe = await loop.create_server(self._web, addrs[0], 0, reuse_address=True)
                port = probe.sockets[0].getsockname()[1]
                probe.close()
            try:
                return await loop.create_server(self._web, addrs, port, reuse_address=True)
            except OSError as exc:
                v4 = [a for a in addrs if ":" not in a]
                if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and v4 and v4 != addrs:
                    addrs = v4  # ::1 listed (/etc/hosts) but IPv6 disabled: the address clients can reach
                    continue
                if exc.errno != errno.EADDRINUSE or self._port != 0 or attempt == 4:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Release every held request, abort every connection, cancel every request handler still
        running (a ``delay``, the ``sleep`` tool, an async tool handler) and wait for them, close.
        A sync tool handler cannot be interrupted: its call is abandoned (it runs to its end on its
        worker thread; the sidecar keeps no reference to it). Bounded; idempotent."""
        if self.core.state in ("new", "stopped"):
            self.core.state = "stopped"
            return
        _loop.run(self._stop(), timeout=10.0)

    async def _stop(self) -> None:
        self.core.state = "stopped"
        await self._close_listener()
        self._end_holds("teardown")
        for fut in self._streams:
            if not fut.done():
                fut.set_result("teardown")
        self._abort_all()
        # abort() closes each socket in a later loop callback: wait for those, so that when stop()
        # returns no socket of this sidecar is left open (an idle keep-alive connection otherwise
        # outlived stop(), and shutdown() below does not always yield to the loop).
        lost = [c.lost for c in self._conns.values() if not c.lost.done()]
        if lost:
            await asyncio.wait(lost, timeout=0.5)
        await self._otlp.close()
        await self._cancel_handlers()
        if self._proxy is not None:
            await self._proxy.close()
        if self._stdio is not None:
            await self._stdio.close()
        self._pool.close()
        if self._web is not None:
            await self._web.shutdown(0.05)
        self._server = None

    async def _cancel_handlers(self) -> None:
        """Cancel the request handlers still running and wait for them (bounded: 1 s)."""
        me = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not me and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        self._tasks.clear()

    async def _close_listener(self) -> None:
        """Close the listening socket without stranding connections the loop has just accepted.

        asyncio builds the transport of an accepted socket a loop step later and, before Python 3.12,
        fails to (``Server._attach`` asserts) once the server is closed, leaking the socket. So: stop
        accepting, let those transports reach ``connection_made`` (they are then aborted like every
        other connection), and only then close.
        """
        server, self._server = self._server, None
        if server is None:
            return
        loop = asyncio.get_running_loop()
        for sock in getattr(server, "sockets", None) or ():  # asyncio.Server has them
            with contextlib.suppress(NotImplementedError, ValueError, OSError):  # other loops: best effort
                loop.remove_reader(sock.fileno())
        for _ in range(3):  # accept task step, then connection_made: two loop steps, plus one spare
            await asyncio.sleep(0)
        server.close()

    @property
    def running(self) -> bool:
        """Started and not stopped (a dead or frozen sidecar is still 'running' until stopped)."""
        return self.core.state in ("running", "frozen", "dead")

    # -- addresses -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self.core.state == "new":
            raise RuntimeError("Sidecar.port: the sidecar is not started yet (call start() first)")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- spans from other processes (OTLP) ------------------------------------------------------------
    @property
    def span_recorder(self) -> SpanRecorder:
        """The recorder spans received on :attr:`otlp_path` join (``span_recorder=``, else its own)."""
        return self._otlp.recorder_now()

    @property
    def otlp_url(self) -> str:
        """The full URL of the OTLP trace receiver (``http://127.0.0.1:<port>/v1/traces``) on the
        receiver's own port, which no fault reaches: it answers while the sidecar is dead or frozen.
        Started on first use (the sidecar must be running); the main port answers the path too."""
        if self.otlp_path is None:
            raise RuntimeError("Sidecar.otlp_url: the OTLP receiver is off (otlp_path=None)")
        self._require_running("otlp_url")
        host = "127.0.0.1" if self.host == "localhost" else self.host
        listener = _loop.run(self._otlp.start_listener(host))
        shown = f"[{listener.host}]" if ":" in listener.host else listener.host
        return f"http://{shown}:{listener.port}{self.otlp_path}"

    @property
    def otel_env(self) -> dict[str, str]:
        """The environment a child process needs to export its spans here with the standard OTLP
        exporters: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (:attr:`otlp_url`) and
        ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (``http/protobuf``)."""
        return {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.otlp_url,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        }

    def wait_for_span(self, pattern: str, timeout: float = 10.0, count: int = 1) -> list[RecordedSpan]:
        """Wait until ``count`` spans named like ``pattern`` have ended in :attr:`span_recorder` (a flush
        barrier for exporters that batch); returns them. On timeout raises
        :class:`~pytest_mcpfaults.spans.SpanLookupError` naming the spans recorded instead and what the
        receiver took in."""
        return self._otlp.wait_for_span(pattern, timeout, count)

    def _mounted_for(self, path: str) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]] | None:
        if self._mounted is not None and (path + "/").startswith(self._mounted[0] + "/"):
            return self._mounted[1]
        return None

    @property
    def sse_url(self) -> str:
        """The legacy HTTP+SSE transport's stream, :attr:`url` + ``sse_path`` (what ``sse_client`` is
        given); an error unless ``transport`` is ``'sse'`` or ``'both'``."""
        if self.core.legacy is None:
            raise RuntimeError(
                f"Sidecar.sse_url: this sidecar serves transport={self.core.transport!r}; pass "
                "transport='sse' or 'both' to serve the legacy HTTP+SSE transport"
            )
        return self.url + self.core.legacy.sse_path

    @property
    def transport(self) -> str:
        """Which MCP transports it serves: ``'streamable_http'``, ``'sse'`` or ``'both'``."""
        return self.core.transport

    @property
    def upstream_pid(self) -> int | None:
        """The process id of the stdio upstream (``upstream_command``) once started, else ``None``."""
        return self._stdio.pid if self._stdio is not None else None

    # -- tools -----------------------------------------------------------------------------------
    def add_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        input_schema: Mapping[str, Any],
        description: str = "",
    ) -> Tool:
        """Serve a new tool (sync or async ``handler``, called with the arguments as keywords)."""
        if self.upstream is not None or self.upstream_command is not None:
            proxied = self.upstream or self.upstream_command
            raise ValueError(
                f"Sidecar.add_tool({name!r}): this sidecar proxies {proxied}, whose tools are its "
                "own; add the tool to the upstream server"
            )
        tool = Tool(name, handler, input_schema, description)
        self.core.add_tool(tool)
        return tool

    def tool(
        self, name: str | None = None, *, input_schema: Mapping[str, Any], description: str = ""
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of :meth:`add_tool`; the name defaults to the function's."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_tool(
                name or fn.__name__,
                fn,
                input_schema=input_schema,
                description=description or (fn.__doc__ or ""),
            )
            return fn

        return register

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self.core.tools)

    # -- runtime faults --------------------------------------------------------------------------
    def kill(self) -> None:
        """Die now: close the listener (connection refused) and reset every open connection.
        Counted as a ``die`` in :attr:`fired`, like a planned :class:`~pytest_mcpfaults.faults.Die`."""
        self._require_running("kill")
        self.journal.add_fired("die", what="kill()")
        _loop.run(self._die(restart=False))

    def freeze(self) -> None:
        """Stop answering (like SIGSTOP): accept connections, hold every request until released.
        Counted as a ``freeze`` in :attr:`fired`, like a planned :class:`~pytest_mcpfaults.faults.Freeze`."""
        self._require_running("freeze")
        self.journal.add_fired("freeze", what="freeze()")
        _loop.run(self._set_frozen(core.FREEZE))

    def revive(self) -> None:
        """Come back: a dead sidecar listens again on the same port (sessions lost with the
        process); a frozen one answers again (held requests are released)."""
        self._require_running("revive")
        _loop.run(self._revive())

    def inject(self, *faults: F.Fault | str) -> None:
        """Append faults to the plan, effective for the next request."""
        plan = _http_plan(list(faults), "inject()")
        _loop.run(self._inject(plan))

    def clear_faults(self) -> None:
        """Remove every planned fault (held requests stay held: see :meth:`release`)."""
        _loop.run(self._inject(None))

    def mount(self, prefix: str, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]) -> None:
        """Answer ``prefix`` and every path under it with ``handler`` (a coroutine run on the loop thread)
        instead of the sidecar: no fault, freeze or patience applies, and no request record is written
        (the TCP connection is still recorded). The command line's control endpoint uses this."""
        own = (self.mcp_path, self.health_path, self.otlp_path)
        shadowed = [p for p in own if p and (p + "/").startswith(prefix + "/")]
        if not prefix.startswith("/") or prefix.endswith("/") or shadowed:
            raise ValueError(
                f"Sidecar.mount(): prefix must be a path like '/_control' that does not cover the MCP, "
                f"health or OTLP path, got {prefix!r}"
            )
        self._mounted = (prefix, handler)

    def release(self) -> None:
        """Let every held request go (stalled bodies finish, hung requests are answered) and end a freeze."""
        if self.running:
            _loop.run(self._release())

    def _require_running(self, what: str) -> None:
        if not self.running:
            raise RuntimeError(f"Sidecar.{what}(): the sidecar is {self.core.state}, not running")

    async def _inject(self, plan: Sequence[F.Fault] | None) -> None:
        if plan is None:
            self.core.clear_faults()
        else:
            self.core.inject(plan)

    async def _set_frozen(self, fault: F.Fault) -> None:
        self.core.freeze(fault)

    async def _release(self) -> None:
        self.core.thaw()
        self._end_holds("released")

    async def _revive(self) -> None:
        if self.core.state == "dead":
            await self._listen()
            self.core.state = "running"
        elif self.core.state == "frozen":
            await self._release()

    async def _die(self, *, restart: bool) -> None:
        self.core.lose_process(restart=restart)
        await self._die_transport(restart=restart)

    async def _die_transport(self, *, restart: bool) -> None:
        """The socket's part of dying: the listener closes (unless restarting), every held request
        ends, every connection is reset."""
        if not restart:
            await self._close_listener()
        self._end_holds("teardown")
        self._abort_all()

    async def _stream_until_teardown(self) -> None:
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._streams.add(done)
        try:
            await done
        finally:
            self._streams.discard(done)

    def _end_holds(self, outcome: HoldOutcome) -> None:
        for hold in list(self._holds):
            if not hold.release.done():
                hold.release.set_result(outcome)

    def _abort_all(self) -> None:
        for conn in list(self._conns.values()):
            conn.closed_by_us = True
            reset_transport(conn.transport)

    # -- connections -----------------------------------------------------------------------------
    def _conn_made(self, handler: web_protocol.RequestHandler, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername")
        cid = self.journal.add_connection(f"{peer[0]}:{peer[1]}" if peer else "?")
        conn = self._conns[handler] = _Conn(cid, transport, asyncio.get_running_loop().create_future())
        self._arm_idle(conn)
        if self.core.state in ("stopped", "dead"):  # accepted just before the listener closed
            conn.closed_by_us = True
            # Reset after aiohttp's start() task took its first step (it is created right after this
            # hook and asserts that the connection is still there): two call_soon hops.
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, reset_transport, transport)

    def _conn_lost(self, handler: web_protocol.RequestHandler) -> None:
        conn = self._conns.pop(handler, None)
        if conn is None:
            return
        if conn.idle_timer is not None:
            conn.idle_timer.cancel()
            conn.idle_timer = None
        now = self.journal.now()
        self.journal.update_connection(
            conn.id, closed_at=now, closed_by="sidecar" if conn.closed_by_us else "client"
        )
        if not conn.closed_by_us and conn.current is not None:
            rec = self.journal.request(conn.current)
            if not rec.done:
                fields: RequestFields = {"client_closed": True, "client_closed_at": now}
                if rec.held and rec.hold is None and rec.held_at is not None:
                    # a held request ends with the close: record its outcome in the same write, so a
                    # reader woken by client_closed never sees a held request without its outcome
                    fields["hold"], fields["waited"] = "client_closed", now - rec.held_at
                self.journal.update_request(conn.current, **fields)
        if not conn.lost.done():
            conn.lost.set_result(None)

    def _arm_idle(self, conn: _Conn) -> None:
        """(Re)start the connection's idle bound: a complete request must come within idle_timeout.

        Lazy, as aiohttp's keep-alive timer is: each request only moves ``idle_since``; the one timer
        re-arms itself for the new deadline when it fires early, and does nothing while a request is
        being handled (its end calls this again)."""
        if self.idle_timeout is None or conn.busy:
            return
        loop = asyncio.get_running_loop()
        conn.idle_since = loop.time()
        if conn.idle_timer is None:
            conn.idle_timer = loop.call_at(conn.idle_since + self.idle_timeout, self._idle_expired, conn)

    def _idle_expired(self, conn: _Conn) -> None:
        conn.idle_timer = None
        if conn.busy or conn.lost.done() or conn.transport.is_closing():
            return
        assert self.idle_timeout is not None
        loop = asyncio.get_running_loop()
        deadline = conn.idle_since + self.idle_timeout
        if loop.time() < deadline:  # a request came and went since the timer was set
            conn.idle_timer = loop.call_at(deadline, self._idle_expired, conn)
            return
        conn.closed_by_us = True
        self.journal.update_connection(conn.id, timed_out=True)
        conn.transport.close()  # FIN, as servers end idle keep-alive / slow-header connections

    # -- request handling ------------------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        conn = self._conns.get(request.protocol)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        if conn is not None:
            conn.busy += 1  # the idle timer, if it fires now, waits for the end of the request
        try:
            if conn is not None and self._otlp.serves(request.path):  # no fault, freeze or patience
                return await self._otlp.receiver.handle(request, conn.id)
            if self._mounted is not None and (request.path + "/").startswith(self._mounted[0] + "/"):
                return await self._mounted[1](request)
            if conn is None:  # connection already gone
                return web.Response(status=500)
            return await self._handle_recorded(request, conn)
        finally:
            if task is not None:
                self._tasks.discard(task)
            if conn is not None:
                conn.busy -= 1
                if not conn.lost.done():
                    self._arm_idle(conn)

    async def _handle_recorded(self, request: web.BaseRequest, conn: _Conn) -> web.StreamResponse:
        rid = self.journal.add_request(
            conn_id=conn.id,
            method=request.method,
            path=request.path,
            user_agent=request.headers.get("User-Agent"),
            protocol_version=request.headers.get("MCP-Protocol-Version"),
        )
        conn.current = rid
        out = Delivery()
        try:
            return await self._answer(request, conn, rid, out)
        except (Dropped, ConnectionResetError):  # also: a body write found the transport closing
            if not conn.lost.done():  # reset/truncate/die cut it: the sidecar closed it, not the client
                conn.closed_by_us = True
            return web.Response(status=500)  # the transport is gone; aiohttp drops this
        except Exception as exc:  # a bug of ours: answer 500 and surface it in the test
            self.core.record_error(f"{request.method} {request.path}", exc)
            self.journal.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
            out.status = 500
            return web.Response(status=500, text=f"mcpfaults sidecar error: {exc!r}")
        finally:
            self.journal.end_request(rid, status=out.status, bytes_sent=out.bytes_sent)
            if conn.current == rid:
                conn.current = None

    async def _answer(
        self, request: web.BaseRequest, conn: _Conn, rid: int, out: Delivery
    ) -> web.StreamResponse:
        """Read the body (bounded in size and time), let the core decide, write its answer."""
        try:
            if self.idle_timeout is None or request.content.is_eof():  # the whole body is here already
                body = await read_body(request, self.max_body_bytes)
            else:  # a body still coming in must be complete within idle_timeout, as headers must
                body = await within(read_body(request, self.max_body_bytes), self.idle_timeout)
        except asyncio.TimeoutError:
            text = f"request body not complete within idle_timeout={self.idle_timeout:g} s"
            self.journal.update_request(rid, error=text, error_by="client")
            out.status = 408
            conn.closed_by_us = True
            return web.Response(status=408, text=text, headers={"Connection": "close"})
        exchange = _Exchange(self, request, conn, rid, out)
        if body is None:  # refused while reading: never buffered
            answer: core.Answer | None = core.Answer(self.core.too_large(), None, False)
        else:
            incoming = core.Incoming(
                request.method, request.path, request.headers, request.headers.items(), body,
                request.query_string,
            )  # fmt: skip
            answer = await self.core.decide(rid, incoming, exchange)
        if answer is None:
            assert exchange.stream is not None
            return exchange.stream
        if answer.stream is not None:
            return await self._legacy_stream(exchange, answer)
        if answer.after is not None:
            await self._answer_then(exchange, answer, answer.after)
        if answer.reply.headers.get("Connection", "").lower() == "close":
            conn.closed_by_us = True  # aiohttp closes the connection after this answer (413, Terminating)
        if isinstance(answer.reply, Relayed):
            return await self._relay(request, conn, rid, answer, exchange, out)
        if isinstance(answer.reply, Piped):  # the stdio upstream's leg, complete before the client's
            self.journal.update_request(rid, **answer.reply.leg)
        return await deliver(request, answer, hold=exchange.hold, out=out)

    async def _legacy_stream(self, exchange: _Exchange, answer: core.Answer) -> web.StreamResponse:
        """Serve a legacy SSE stream: the status and headers, the endpoint event, then each event its
        session's outbox gets, until teardown, the client closes it, or the server ends the session
        (a clean end of the stream)."""
        session, request, conn, out = answer.stream, exchange.request, exchange.conn, exchange.out
        assert session is not None
        assert self.core.legacy is not None
        if isinstance(answer.fault, F.Reset) and answer.fault.after_bytes == 0:  # RST before the status line
            self.core.close_stream(session)
            reset_transport(request.transport)
            raise Dropped
        resp = web.StreamResponse(status=answer.reply.status, headers=answer.reply.headers)
        await resp.prepare(request)
        out.status = answer.reply.status
        writer = StreamWriter(request, resp, out, exchange.hold_stream, answer.fault)
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._streams.add(done)
        try:
            await writer.start()
            await writer.event(session.endpoint_event())
            while True:
                nxt = asyncio.ensure_future(session.next())
                await asyncio.wait((nxt, done, conn.lost), return_when=asyncio.FIRST_COMPLETED)
                if not nxt.done():  # teardown, or the client closed the stream
                    nxt.cancel()
                    raise Dropped
                event = nxt.result()
                if event is None:  # the server ended the session
                    await resp.write_eof()
                    return resp
                await writer.event(event)
        finally:
            self._streams.discard(done)
            self.core.close_stream(session)

    async def _answer_then(
        self, exchange: _Exchange, answer: core.Answer, then: Callable[[], Awaitable[None]]
    ) -> None:
        """Send the answer in full and close its connection (FIN), then run ``then`` (a legacy
        message POST's ``die``: the 202 reaches the client, then the process dies). Raises Dropped."""
        body, ctype = reply_body(answer.reply, False)
        resp = web.Response(status=answer.reply.status, body=body, headers=answer.reply.headers)
        resp.content_type = ctype
        await resp.prepare(exchange.request)
        await resp.write_eof()
        exchange.out.status, exchange.out.bytes_sent = answer.reply.status, len(body)
        exchange.conn.closed_by_us = True
        transport = exchange.request.transport
        if transport is not None:
            transport.close()
        await then()
        raise Dropped

    async def _relay(
        self,
        request: web.BaseRequest,
        conn: _Conn,
        rid: int,
        answer: core.Answer,
        exchange: _Exchange,
        out: Delivery,
    ) -> web.StreamResponse:
        """Proxy mode: relay the upstream's answer. A GET's (the upstream's event stream, which may stay
        silent for ever) is abandoned, its upstream connection closed, when the client goes away."""
        assert self._proxy is not None
        if request.method != "GET":  # bounded by upstream_timeout; a client gone fails the next write
            return await self._proxy.deliver(
                request, answer, journal=self.journal, rid=rid, hold=exchange.hold, out=out
            )
        relaying = asyncio.ensure_future(
            self._proxy.deliver(request, answer, journal=self.journal, rid=rid, hold=exchange.hold, out=out)
        )
        await asyncio.wait((relaying, conn.lost), return_when=asyncio.FIRST_COMPLETED)
        if not relaying.done():
            relaying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relaying
            raise Dropped
        return relaying.result()

    # -- holding ---------------------------------------------------------------------------------
    async def _hold(self, rid: int, conn: _Conn, fault: F.Fault) -> None:
        """Hold a request until release, client hang-up, teardown or patience. Raises ``Dropped``
        unless it ends in a release."""
        fut: asyncio.Future[HoldOutcome] = asyncio.get_running_loop().create_future()
        hold = _Hold(rid, fault, fut)
        self._holds.add(hold)
        self.journal.update_request(rid, held=True, held_at=self.journal.now())
        own = getattr(fault, "patience", None)
        budget = own or self.patience
        try:
            await asyncio.wait((fut, conn.lost), timeout=budget, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._holds.discard(hold)
        waited = time.monotonic() - hold.started
        outcome: HoldOutcome
        if fut.done():
            outcome = fut.result()
        elif conn.lost.done():
            outcome = "client_closed"
        else:
            outcome = "patience"
        rec = self.journal.request(rid)
        if not (outcome == "client_closed" and rec.hold == "client_closed"):  # else _conn_lost wrote it
            rec = self.journal.update_request(rid, hold=outcome, waited=waited)
        if outcome == "patience":
            assert budget is not None
            expected = bool(self.expect_hang or getattr(fault, "expect_hang", False))
            conn.closed_by_us = True
            reset_transport(conn.transport)
            source: BudgetSource = "fault" if own is not None else "sidecar"
            self.journal.add_violation(PatienceViolation(rec, str(fault), budget, expected, source))
        if outcome != "released":
            raise Dropped
