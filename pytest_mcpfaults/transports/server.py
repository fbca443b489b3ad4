"""``Sidecar``: a fake MCP sidecar on loopback that can die, freeze, hang, stall and lie.

A real aiohttp server on ``127.0.0.1`` (port 0 by default) hosted on the process-wide loop thread of
:mod:`pytest_mcpfaults.transports.loop`. Every public method is called from the test's thread; the
request handling runs on the loop thread. The journal is shared, lock-protected, and read as snapshots.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.auth.server import AuthServer, check_auth_plan
from pytest_mcpfaults.behaviour.server_requests import check_outbound_plan
from pytest_mcpfaults.core import core
from pytest_mcpfaults.mcp.endpoint import Era
from pytest_mcpfaults.mcp.tools import Tool
from pytest_mcpfaults.options.checks import ReplyMode
from pytest_mcpfaults.options.fields import SidecarOptions, build_options, takes_options
from pytest_mcpfaults.options.validation import is_loopback_host
from pytest_mcpfaults.otlp.receiver import OtlpService
from pytest_mcpfaults.proxy.cassette.fileformat import take_cassette
from pytest_mcpfaults.proxy.cassette.matching import Rules
from pytest_mcpfaults.proxy.cassette.recorder import Recorder
from pytest_mcpfaults.proxy.cassette.redact import redact_command
from pytest_mcpfaults.proxy.cassette.replay import Replay
from pytest_mcpfaults.proxy.lifecycle import UpstreamServer, free_port
from pytest_mcpfaults.proxy.proxy import Proxy
from pytest_mcpfaults.proxy.stdio_upstream import StdioUpstream
from pytest_mcpfaults.proxy.upstream import Upstream
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.transports import loop as _loop
from pytest_mcpfaults.transports.legacy_sse import serve_legacy
from pytest_mcpfaults.transports.listener import SocketListener
from pytest_mcpfaults.verdicts import patience
from pytest_mcpfaults.verdicts.violation import PatienceViolation
from pytest_mcpfaults.verdicts.waits import SidecarWaits

if TYPE_CHECKING:
    from pytest_mcpfaults.spans.recorder import SpanRecorder
    from pytest_mcpfaults.spans.records import RecordedSpan


def _replay(opts: SidecarOptions) -> Replay | None:
    """``cassette=``: the recorded server the sidecar answers from, with the matching rules."""
    if opts.cassette is None:
        return None
    rules = Rules(frozenset(opts.cassette_ignore), opts.cassette_order, not opts.cassette_once)
    return Replay(take_cassette(opts.cassette), rules)


def _recorded_origin(replay: Replay | None) -> str | None:
    """The origin of the server a cassette was recorded from (what ``backend_gone`` names)."""
    if replay is None or replay.cassette.upstream is None:
        return None
    parts = urlsplit(replay.cassette.upstream)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else None


def _recorder(opts: SidecarOptions, upstream: str) -> Recorder | None:
    """``record=``: what records the exchanges with the upstream ``upstream``."""
    if opts.record is None:
        return None
    merge = opts.record_mode == "new_episodes"
    return Recorder(opts.record, upstream=upstream, redact=opts.record_redact, merge=merge)


def _served_url(opts: SidecarOptions) -> str | None:
    """``upstream=``, its port 0 (``upstream_serve=`` picks a free one) replaced by a free port."""
    url = opts.upstream
    if url is None or opts.upstream_serve is None:
        return url
    parts = urlsplit(url)
    if parts.port != 0:
        return url
    host = parts.hostname or "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return parts._replace(netloc=f"{shown}:{free_port(host)}").geturl()


class Sidecar(SidecarWaits):
    """A fake MCP sidecar on loopback. Use as a context manager, or ``start()`` / ``stop()``.

    Its keyword arguments are the fields of
    :class:`~pytest_mcpfaults.options.fields.SidecarOptions` (each one's default, ``serve`` flag and
    meaning: the options table of docs/sidecar.md), checked once when it is built; ``options`` holds
    them.
    """

    @takes_options(SidecarOptions)
    def __init__(self, **options: Any) -> None:
        """A sidecar with these options (nothing binds until :meth:`start`)."""
        opts = self.options = build_options(options)
        self.upstream = _served_url(opts)
        self.upstream_command = cast("list[str] | None", opts.upstream_command)  # copied by SidecarOptions
        self.otlp_path, self.host = opts.otlp_path, opts.host
        self.era, self.reply = cast(Era, opts.era), cast(ReplyMode, opts.reply)
        self.patience, self.expect_hang = opts.patience, opts.expect_hang
        # Sync tool handlers of the user's run here, off the shared loop (one blocking handler must not
        # stall every sidecar of the process); threads start on first use.
        self._pool = _loop.WorkerPool("mcpfaults-tool-handler")
        self.core = self._build_core(opts)
        self._listener = SocketListener(self.core, self._pool, self._proxy, self._stdio)
        self._otlp = self._listener.otlp = OtlpService(
            opts, self.journal, self.core.record_error, self._listener.mounted_for
        )

    def _build_core(self, opts: SidecarOptions) -> core.SidecarCore:
        """The core these options describe, and its upstream in proxy mode."""
        upstream_client: Upstream | None = None
        self._upstream_server: UpstreamServer | None = None
        self._served: UpstreamServer | None = None  # upstream_serve=: the sidecar runs it
        if self.upstream is not None:
            upstream_client = Upstream(
                self.upstream, timeout=opts.upstream_timeout, headers=opts.upstream_headers
            )
            serve = cast("list[str] | None", opts.upstream_serve)
            self._upstream_server = UpstreamServer(serve, upstream_client.url, upstream_client.streams)
            self._served = self._upstream_server if self._upstream_server.command is not None else None
        service_url = opts.service_url
        self.replay = replay = _replay(opts)
        origin = upstream_client.origin if upstream_client is not None else _recorded_origin(replay)
        sidecar_core = core.SidecarCore(
            opts,
            # backend_gone names the upstream's address in proxy mode (and the recorded one's in replay),
            # the sidecar's own otherwise
            service_url=lambda: service_url or origin or self.url,
            run_sync=self._pool.submit,
            auth=(
                AuthServer(opts.auth, mcp_path=opts.mcp_path, base_url=lambda: self.url)
                if opts.auth is not None
                else None
            ),
            source=replay,
        )
        serve_legacy(sidecar_core)
        self._proxy: Proxy | None = None
        self.recorder: Recorder | None = None
        if upstream_client is not None:
            self.recorder = _recorder(opts, upstream_client.url)
            self._proxy = Proxy(upstream_client, sidecar_core, self.recorder)
            sidecar_core.upstream = self._proxy
        self._stdio: StdioUpstream | None = None
        if self.upstream_command is not None:
            self.recorder = _recorder(opts, "stdio: " + redact_command(self.upstream_command))
            self._stdio = StdioUpstream(self.upstream_command, sidecar_core, self.recorder)
            sidecar_core.upstream = self._stdio
        if sidecar_core.upstream is not None and is_loopback_host(opts.host):
            sidecar_core.refuse_foreign_hosts()  # the upstream's DNS-rebinding check, which it cannot do
        return sidecar_core

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Sidecar:
        """Bind and start serving; returns ``self``. The port is known afterwards."""
        if self.core.state != "new":
            raise RuntimeError(f"Sidecar.start(): already {self.core.state}; a sidecar starts once")
        if self._stdio is not None:
            guardian.ensure()  # from the test's thread: the upstream child is watched from its spawn
        served = self._served
        if served is not None and not served.running:  # (the test may have started it already)
            served.start()  # before the sidecar serves: its first request finds it up
        try:
            _loop.run(self._listener.start())
        except BaseException:
            if served is not None:
                served.close()
            raise
        return self

    def stop(self) -> None:
        """Release every held request, abort every connection, cancel every request handler still
        running (a ``delay``, the ``sleep`` tool, an async tool handler) and wait for them, close.
        A sync tool handler cannot be interrupted: its call is abandoned (it runs to its end on its
        worker thread; the sidecar keeps no reference to it). Bounded; idempotent. With ``record=``,
        the cassette is written then."""
        if self.core.state in ("new", "stopped"):
            self.core.state = "stopped"
            if self._served is not None:
                self._served.close()  # started by the test before the sidecar, or again after
            return
        try:
            _loop.run(self._listener.stop(), timeout=10.0)
        finally:
            if self._served is not None:
                self._served.close()  # after the listener: no relay is left reading it
        if self.recorder is not None:
            self.recorder.save()

    # -- addresses -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self.core.state == "new":
            raise RuntimeError("Sidecar.port: the sidecar is not started yet (call start() first)")
        return self._listener.port

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
        :class:`~pytest_mcpfaults.spans.SpanLookupError` naming the spans recorded instead and what
        the receiver took in."""
        return self._otlp.wait_for_span(pattern, timeout, count)

    @property
    def sse_url(self) -> str:
        """The legacy HTTP+SSE transport's stream, :attr:`url` + ``sse_path`` (what ``sse_client`` is
        given); an error unless ``transport`` is ``'sse'`` or ``'both'``."""
        if self.core.path_transport is None:
            raise RuntimeError(
                f"Sidecar.sse_url: this sidecar serves transport={self.options.transport!r}; pass "
                "transport='sse' or 'both' to serve the legacy HTTP+SSE transport"
            )
        return self.url + self.options.sse_path

    @property
    def transport(self) -> str:
        """Which MCP transports it serves: ``'streamable_http'``, ``'sse'`` or ``'both'``."""
        return self.options.transport

    @property
    def upstream_server(self) -> UpstreamServer:
        """The HTTP upstream's lifecycle and the journal of the streams relayed from it: ``start()``,
        ``stop(graceful=True, timeout=5.0)`` (``upstream_serve=``), ``streams``,
        ``assert_streams_complete()`` (docs/proxy.md, "The server's lifecycle")."""
        if self._upstream_server is None:
            raise RuntimeError(
                "Sidecar.upstream_server: this sidecar has no HTTP upstream; pass upstream='http://...' "
                "(and upstream_serve=[...] for the sidecar to run it)"
            )
        return self._upstream_server

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
        if self.replay is not None:
            raise ValueError(
                f"Sidecar.add_tool({name!r}): this sidecar replays {self.options.cassette}, whose tools "
                "are the recorded server's; record the server with the tool"
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
        _loop.run(self._listener.die(restart=False))

    def freeze(self) -> None:
        """Stop answering (like SIGSTOP): accept connections, hold every request until released.
        Counted as a ``freeze`` in :attr:`fired`, like a planned :class:`~pytest_mcpfaults.faults.Freeze`."""
        self._require_running("freeze")
        self.journal.add_fired("freeze", what="freeze()")
        _loop.run(_loop.call(lambda: self.core.freeze(core.FREEZE)))

    def revive(self) -> None:
        """Come back: a dead sidecar listens again on the same port (sessions lost with the
        process); a frozen one answers again (held requests are released)."""
        self._require_running("revive")
        _loop.run(self._listener.revive())

    def _checked(self, faults: Sequence[F.Fault | str], where: str) -> tuple[F.Fault, ...]:
        plan = F.as_plan(faults)
        F.check_transport(plan, "http", f"Sidecar {where}")  # stdio-only kinds act on a child process
        check_auth_plan(plan, self.options.auth, f"Sidecar {where}")
        proxied = self.options.upstream is not None or bool(self.options.upstream_command)
        check_outbound_plan(plan, proxied, f"Sidecar {where}")
        return plan

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
        self._listener.mounted = (prefix, handler)

    def release(self) -> None:
        """Let every held request go (stalled bodies finish, hung requests are answered) and end a freeze."""
        if self.running:
            _loop.run(self._listener.release())

    def patience_verdict(self, violations: Sequence[PatienceViolation]) -> str:
        """The failure message for patience violations of this sidecar (see ``docs/hangs.md``)."""
        return patience.patience_verdict(self, violations)

    def _require_running(self, what: str) -> None:
        if not self.running:
            raise RuntimeError(f"Sidecar.{what}(): the sidecar is {self.core.state}, not running")
