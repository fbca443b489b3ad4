"""The socket transport of one :class:`~pytest_mcpfaults.transports.server.Sidecar`: its listener, and
each request from bytes to the core's :class:`~pytest_mcpfaults.core.core.Answer` and back, on the loop
thread."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, cast

from aiohttp import web, web_protocol

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import PLAIN, BodyShaper, Cut, Step, halve_event, shape_of
from pytest_mcpfaults.behaviour.connection import Holding, effect_of
from pytest_mcpfaults.core import core
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.core.holds import Holds, patience_of
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import Held, HoldOutcome, RequestRecord
from pytest_mcpfaults.core.resumption import Resumed, primes
from pytest_mcpfaults.mcp.endpoint import encode, reply_body
from pytest_mcpfaults.mcp.jsonrpc import EVENT_STREAM
from pytest_mcpfaults.options.validation import LOOPBACK_NAMES
from pytest_mcpfaults.otlp.receiver import OtlpService
from pytest_mcpfaults.proxy.proxy import Proxy, Relayed
from pytest_mcpfaults.proxy.stdio_upstream import Piped, StdioUpstream
from pytest_mcpfaults.transports.connections import Conn, Connections
from pytest_mcpfaults.transports.http_io import BodyError, ConnectionReportingServer, read_bounded
from pytest_mcpfaults.transports.inject import Delivery, cut, deliver, reset_transport, write_steps
from pytest_mcpfaults.transports.legacy_sse import LegacyAnswer, LegacyReply
from pytest_mcpfaults.transports.loop import WorkerPool, cancel_all
from pytest_mcpfaults.transports.notices import Listening, OpenStream, StreamNotices
from pytest_mcpfaults.transports.sse_stream import StreamWriter
from pytest_mcpfaults.verdicts.violation import PatienceViolation

#: A mounted handler (``Sidecar.mount``): a coroutine answering a request on the loop thread.
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


def _numeric_family(host: str) -> int | None:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family
    return None


class _Exchange:
    """One request's :class:`~pytest_mcpfaults.core.core.Transport`: what the core asks of the
    socket while deciding (hold it, die, pause, keep an event stream open)."""

    def __init__(
        self, listener: SocketListener, request: web.BaseRequest, conn: Conn, rid: int, out: Delivery
    ):
        self.listener, self.request, self.conn, self.rid, self.out = listener, request, conn, rid, out
        self.stream: web.StreamResponse | None = None
        #: The request's answer, opened as an SSE stream by a tool's first message of its own.
        self.answer_stream: web.StreamResponse | None = None

    async def send_message(self, message: Mapping[str, Any] | bytes, headers: Mapping[str, str]) -> None:
        if self.answer_stream is None:
            resp = web.StreamResponse(
                status=200,
                headers={**headers, **EVENT_STREAM},
            )
            await resp.prepare(self.request)
            self.answer_stream, self.out.status = resp, 200
        data = message if isinstance(message, bytes) else encode(message, True)[0]
        await self.answer_stream.write(data)
        self.out.bytes_sent += len(data)

    async def await_answer(
        self,
        answer: asyncio.Future[dict[str, Any]],
        what: str,
        dropped: Callable[[], str | None] | None = None,
    ) -> None:
        """As :class:`~pytest_mcpfaults.mcp.outbound.Link` says; past the budget the connection is
        reset, as a held request's."""
        journal, conn = self.listener.journal, self.conn
        journal.update_request(self.rid, status=self.out.status, bytes_sent=self.out.bytes_sent)
        started, held_at = time.monotonic(), journal.now()
        budget = self.listener.options.patience
        await asyncio.wait((answer, conn.lost), timeout=budget, return_when=asyncio.FIRST_COMPLETED)
        if answer.done():
            return
        if conn.lost.done():
            raise Dropped
        assert budget is not None
        rec = journal.update_request(self.rid, held=Held(held_at, "patience", time.monotonic() - started))
        conn.reset()
        self.unanswered(rec, what, budget, dropped() if dropped is not None else None)
        raise Dropped

    def unanswered(self, rec: RequestRecord, what: str, budget: float, dropped: str | None = None) -> None:
        method = what.split("`")[1] if what.count("`") >= 2 else what
        expected = bool(self.listener.options.expect_hang)
        v = PatienceViolation(rec, method, budget, expected, "sidecar", awaiting=what, dropped=dropped)
        self.listener.journal.violations.add(v)

    def watch_round(self, answer: asyncio.Future[dict[str, Any]], what: str) -> None:
        budget = self.listener.options.patience
        if budget is not None:
            self.listener.spawn(self._watch_round(answer, what, budget))

    async def _watch_round(self, answer: asyncio.Future[dict[str, Any]], what: str, budget: float) -> None:
        await asyncio.wait((answer,), timeout=budget)
        if not answer.done():
            self.unanswered(self.listener.journal.request(self.rid), what, budget)

    async def finish_stream(self, answer: core.Answer) -> web.StreamResponse:
        """Send the reply as the last event of the answer stream a tool's own messages opened, shaped
        by the answer's body fault (from the event's first byte), and end the stream."""
        resp = self.answer_stream
        assert resp is not None
        data, _ = reply_body(answer.reply, True)
        shape = shape_of(answer.fault)
        if shape.halves:
            data = halve_event(data)
        if shape.resets_at_once:
            raise cut(self.request.transport)
        fault = answer.fault

        async def held() -> None:
            assert fault is not None
            await self.hold(fault)

        shaper = BodyShaper(shape)
        steps = [*shaper.start(), *shaper.feed(data), *shaper.end()]
        await write_steps(self.request, resp, steps, held, self.out)
        await resp.write_eof()
        return resp

    async def listen_stream(self, answer: core.Answer) -> web.StreamResponse:
        assert answer.reply.listen is not None
        notices = self.listener.notices
        listening = notices.listen(answer.reply.listen, self.conn.reset)
        try:
            return await self._serve_listen(answer, listening)
        finally:
            notices.unlisten(listening)

    async def _serve_listen(self, answer: core.Answer, listening: Listening) -> web.StreamResponse:
        """Serve one listen stream until the client closes it (raises :class:`Dropped`), the sidecar
        stops (the result, then the end of the stream) or its body fault ends it."""
        listen, out, lost, fault = listening.listen, self.out, self.conn.lost, answer.fault
        shape = shape_of(fault)
        if shape.resets_at_once:  # RST before the status line
            raise cut(self.request.transport)
        events_left = shape.resumable[0] if shape.resumable is not None else None  # close_stream
        shaper = BodyShaper(PLAIN if shape.resumable is not None else shape)
        ack = encode(listen.ack(), True)[0]
        if shape.halves:
            ack = halve_event(ack)

        async def held() -> None:
            if listening.closing.done():  # stopping: a held stream just ends
                raise Dropped
            assert fault is not None  # only a body fault holds
            await self.hold(fault, patience=out.bytes_sent < len(ack))  # the ack is the stream's first bytes

        headers = {**answer.reply.headers, **EVENT_STREAM, "X-Accel-Buffering": "no"}
        resp = web.StreamResponse(status=answer.reply.status, headers=headers)
        await resp.prepare(self.request)
        out.status = resp.status

        async def send(steps: list[Step]) -> None:
            await write_steps(self.request, resp, steps, held, out)
            self.listener.journal.update_request(self.rid, status=out.status, bytes_sent=out.bytes_sent)

        sent = 0
        if events_left != 0:  # close_stream(after_events=0): not even the ack
            await send([*shaper.start(), *shaper.feed(ack)])
            sent = 1
        while events_left is None or sent < events_left:
            nxt = asyncio.ensure_future(listening.queue.get())
            await asyncio.wait((nxt, listening.closing, lost), return_when=asyncio.FIRST_COMPLETED)
            if not nxt.done():
                nxt.cancel()
                if lost.done():  # the client closed its stream: its subscription ends
                    raise Dropped
                await send([*shaper.feed(encode(listen.closing(), True)[0]), *shaper.end()])  # stopping
                break
            await send(shaper.feed(nxt.result()))
            sent += 1
        await resp.write_eof()
        return resp

    def reply_later(self, later: LegacyReply) -> None:
        """Make this legacy message's reply after its 202, in a task of its own, on the connection of
        its session's stream (a hold of the reply ends when the stream closes; patience resets it)."""
        listener = self.listener
        cid = listener.journal.request(later.session.rid).conn_id
        conn = next((c for c in listener.conns.live.values() if c.id == cid), self.conn)
        listener.replying.add(self.rid)
        listener.spawn(_Exchange(listener, self.request, conn, self.rid, self.out).make_reply(later))

    async def make_reply(self, later: LegacyReply) -> None:
        journal = self.listener.journal
        try:
            await later.make(self)
        except (Dropped, ConnectionError):  # its hold ended without a release (patience, the stream gone)
            pass
        except Exception as exc:  # a bug of ours: surface it in the test
            self.listener.core.record_error(f"the reply of {journal.request(self.rid).label}", exc)
            journal.update_request(self.rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
        finally:
            self.listener.replying.discard(self.rid)
            journal.end_request(self.rid)

    async def hold(self, fault: F.Fault, patience: bool = True) -> None:
        """Hold the request until release, client hang-up, teardown or patience (``patience=False``:
        not bounded by it, a listen stream its client listens to); what was sent so far is journaled
        first. Raises ``Dropped`` unless it ends in a release (or a cancellation)."""
        listener, conn, rid, out = self.listener, self.conn, self.rid, self.out
        listener.journal.update_request(
            rid, status=out.status, bytes_sent=out.bytes_sent, body_bytes=out.body_bytes
        )
        budget, source, expected = patience_of(fault, listener.options.patience, listener.options.expect_hang)
        ends: dict[asyncio.Future[Any], HoldOutcome] = {conn.lost: "client_closed"}
        cancelled = listener.core.cancels.held_until_cancelled(rid, fault)  # answer_after_cancel
        if cancelled is not None:
            ends = {cancelled: "cancelled", **ends}
        effect = effect_of(fault)  # a blackhole's hold silences the connection (whatever else it holds)
        silenced = _silence(conn, listener.journal) if isinstance(effect, Holding) and effect.silent else None
        try:
            outcome, rec, _ = await listener.holds.hold(rid, budget if patience else None, ends)
        finally:
            listener.core.cancels.landed(rid)
            if silenced is not None and not conn.transport.is_closing():
                conn.transport.set_protocol(silenced)  # the path is back (a release: the request answered)
        if outcome == "patience":
            assert budget is not None
            conn.reset()
            listener.journal.violations.add(PatienceViolation(rec, str(fault), budget, expected, source))
        if outcome not in ("released", "cancelled"):
            raise Dropped

    async def hold_stream(self, fault: F.Fault) -> None:
        """Hold a legacy SSE stream: journaled on its ``GET`` record, with the fault that holds it."""
        self.listener.journal.update_request(self.rid, fault=str(fault), fault_kind=fault.kind)
        await self.hold(fault)

    async def die(self, restart: bool) -> None:
        await self.listener.die_transport(restart=restart)

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def event_stream(self, resumed: Resumed | None = None, fault: F.Fault | None = None) -> None:
        """A ``GET`` stream: its priming event (protocol 2025-11-25 on; else a comment), or the events
        a resuming client missed; then its notifications until teardown or the client goes away."""
        shape = shape_of(fault)
        if shape.resets_at_once:
            raise cut(self.request.transport)
        resp = web.StreamResponse(status=200, headers=EVENT_STREAM)
        await resp.prepare(self.request)
        session, resumption = self.request.headers.get("Mcp-Session-Id"), self.listener.core.resumption
        if resumed is None:
            key = self.rid
            priming = primes(self.request.headers.get("MCP-Protocol-Version"))
            first = resumption.open(key, session, priming=priming, get=True) or b": stream open\n\n"
        else:
            key, first = resumed.stream, resumed.events
        ending = shape.ending if isinstance(shape.ending, Cut) and shape.cut is not None else None
        cut_at = shape.cut if ending is not None else None
        self.out.status, self.stream, notices = 200, resp, self.listener.notices
        self.out.bytes_sent = len(first) if cut_at is None else min(len(first), cut_at)
        # Open for notices before the first write: one posted meanwhile is written after these bytes (a
        # write's bytes reach the transport before it first yields), never kept for a dormant stream.
        cutter = functools.partial(self.cut, ending) if ending is not None else None
        notices.open(resp, OpenStream(session, self.rid, self.out, key, cut_at, cutter))
        try:
            await resp.write(first[: self.out.bytes_sent])
            if cutter is not None and cut_at is not None and len(first) >= cut_at:
                cutter()
                raise Dropped
            with self.listener.holds.stream() as teardown:  # until then, or until the client goes away
                await asyncio.wait((teardown, self.conn.lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            notices.close(resp)
            resumption.left(key)

    def cut(self, ending: Cut) -> None:
        """Cut this request's connection as ``ending`` says (FIN or RST): the sidecar closed it."""
        self.conn.closed_by_us = True
        cut(self.request.transport, ending.how)


class _Silent(asyncio.Protocol):
    """A connection's protocol while a ``blackhole`` holds it: what the client sends is dropped (never
    parsed, never answered), while its close (EOF, loss) still reaches the connection's own protocol,
    so the hold ends with ``client_closed`` and the connection's record with its close."""

    def __init__(self, own: asyncio.BaseProtocol) -> None:
        self.own = own

    def data_received(self, data: bytes) -> None:
        pass  # into the void

    def eof_received(self) -> bool | None:
        return cast(asyncio.Protocol, self.own).eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.own.connection_lost(exc)

    def pause_writing(self) -> None:
        self.own.pause_writing()

    def resume_writing(self) -> None:
        self.own.resume_writing()


def _silence(conn: Conn, journal: Journal) -> asyncio.BaseProtocol:
    """Make ``conn`` silent (journaled: ``silent_at``); returns its own protocol, to put back."""
    own = conn.transport.get_protocol()
    conn.transport.set_protocol(_Silent(own))
    journal.update_connection(conn.id, silent_at=journal.now())
    return own


class SocketListener:
    """The socket side of one sidecar: listen (and listen again after a ``die``), read each request
    on its connection, ask the core, write its answer. Every method runs on the loop thread."""

    def __init__(
        self,
        sidecar_core: core.SidecarCore,
        pool: WorkerPool,
        proxy: Proxy | None,
        stdio: StdioUpstream | None,
    ) -> None:
        self.core, self.journal, self.options = sidecar_core, sidecar_core.journal, sidecar_core.options
        self.pool, self.proxy, self.stdio = pool, proxy, stdio
        self.otlp: OtlpService  # set by the sidecar, which builds it with mounted_for
        self.port = self.options.port
        self.tasks: set[asyncio.Task[Any]] = set()  # request handlers in flight: cancelled at stop()
        self.conns = Connections(self.journal, self.options.idle_timeout)
        self.holds = Holds(self.journal)
        self.replying: set[int] = set()  # legacy messages whose reply is being made: their record ends then
        #: The MCP endpoint's open GET streams and the notifications the core posts to them.
        self.notices = StreamNotices(
            self.journal, sidecar_core.mcp.surface.is_subscribed, sidecar_core.resumption.event
        )
        sidecar_core.notify = sidecar_core.mcp.surface.on_change = self.notices.post
        self.server: asyncio.Server | None = None
        self.web: ConnectionReportingServer | None = None
        self.mounted: tuple[str, Handler] | None = None

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in a task of its own, cancelled at stop()."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def start(self) -> None:
        self.web = ConnectionReportingServer(
            self.handle, self.conn_made, self.conn_lost,
            access_log=None, handler_cancellation=False,
        )  # fmt: skip
        if self.stdio is not None:
            await self.stdio.start()
        try:
            await self.listen()
        except BaseException:
            if self.stdio is not None:
                await self.stdio.close()
            raise
        self.core.state = "running"

    async def listen(self) -> None:
        assert self.web is not None
        self.server = await bind(self.web, self.options.host, self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.core.state = "stopped"
        self.core.mcp.calls.rounds.forget()
        await self.close_listener()
        self.holds.teardown()
        await self.notices.end_listens(timeout=0.5)  # each listen stream's result, then its end
        self.conns.abort_all()
        # abort() closes each socket in a later loop callback: wait for those, so that when stop()
        # returns no socket of this sidecar is left open (an idle keep-alive connection otherwise
        # outlived stop(), and shutdown() below does not always yield to the loop).
        lost = [c.lost for c in self.conns.live.values() if not c.lost.done()]
        if lost:
            await asyncio.wait(lost, timeout=0.5)
        await self.otlp.close()
        await cancel_all(self.tasks)  # the request handlers still running
        self.tasks.clear()
        if self.proxy is not None:
            await self.proxy.upstream.close()  # every upstream connection (bounded)
        if self.stdio is not None:
            await self.stdio.close()
        self.pool.close()
        if self.web is not None:
            await self.web.shutdown(0.05)
        self.server = None

    async def close_listener(self) -> None:
        """Close the listening socket without stranding connections the loop has just accepted.

        asyncio builds the transport of an accepted socket a loop step later and, before Python 3.12,
        fails to (``Server._attach`` asserts) once the server is closed, leaking the socket. So: stop
        accepting, let those transports reach ``connection_made`` (they are then aborted like every
        other connection), and only then close.
        """
        server, self.server = self.server, None
        if server is None:
            return
        loop = asyncio.get_running_loop()
        for sock in getattr(server, "sockets", None) or ():  # asyncio.Server has them
            with contextlib.suppress(NotImplementedError, ValueError, OSError):  # other loops: best effort
                loop.remove_reader(sock.fileno())
        for _ in range(3):  # accept task step, then connection_made: two loop steps, plus one spare
            await asyncio.sleep(0)
        server.close()

    def mounted_for(self, path: str) -> Handler | None:
        if self.mounted is not None and (path + "/").startswith(self.mounted[0] + "/"):
            return self.mounted[1]
        return None

    async def release(self) -> None:
        self.core.thaw()
        self.holds.end("released")

    async def revive(self) -> None:
        if self.core.state == "dead":
            await self.listen()
            self.core.state = "running"
        elif self.core.state == "frozen":
            await self.release()

    async def die(self, *, restart: bool) -> None:
        self.core.lose_process(restart=restart)
        await self.die_transport(restart=restart)

    async def die_transport(self, *, restart: bool) -> None:
        """The socket's part of dying (the core forgot the process's state)."""
        if not restart:
            await self.close_listener()
        self.holds.end("teardown")
        self.conns.abort_all()

    # -- connections -----------------------------------------------------------------------------
    def conn_made(self, handler: web_protocol.RequestHandler, transport: asyncio.Transport) -> None:
        self.conns.made(handler, transport)
        conn = self.conns.live[handler]
        if self.core.state in ("stopped", "dead"):  # accepted just before the listener closed
            conn.closed_by_us = True
            # Reset after aiohttp's start() task took its first step (it is created right after this
            # hook and asserts that the connection is still there): two call_soon hops.
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, reset_transport, transport)

    def conn_lost(self, handler: web_protocol.RequestHandler) -> None:
        """The client's close ends the request the connection is on (and its hold, in the same write,
        so a reader woken by ``client_closed`` never sees a held request without its outcome)."""
        conn = self.conns.live.get(handler)
        self.conns.lost(handler)
        if conn is None or conn.closed_by_us or conn.current is None:
            return
        rec = self.journal.request(conn.current)
        if rec.done:
            return
        now = self.journal.now()
        held = rec.held
        if held is not None and held.outcome is None:
            held = Held(held.at, "client_closed", now - held.at)
        self.journal.update_request(conn.current, client_closed=True, client_closed_at=now, held=held)
        self.core.cancels.stream_closed(conn.current)  # the 2026-07-28 era's cancellation

    # -- request handling ------------------------------------------------------------------------
    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        conn = self.conns.live.get(request.protocol)
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        idle = conn.idle() if conn is not None else 0.0  # before it is busy: since its last request
        if conn is not None:
            conn.busy += 1  # the idle timer, if it fires now, waits for the end of the request
        try:
            if conn is not None and self.otlp.serves(request.path):  # no fault, freeze or patience
                return await self.otlp.handle(request, conn.id)
            if (mounted := self.mounted_for(request.path)) is not None:
                return await mounted(request)
            if conn is None:  # connection already gone
                return web.Response(status=500)
            return await self.handle_recorded(request, conn, idle)
        finally:
            if task is not None:
                self.tasks.discard(task)
            if conn is not None:
                conn.busy -= 1
                self.conns.arm_idle(conn)

    async def handle_recorded(self, request: web.BaseRequest, conn: Conn, idle: float) -> web.StreamResponse:
        rid = self.journal.add_request(
            conn_id=conn.id,
            method=request.method,
            path=request.path,
            user_agent=request.headers.get("User-Agent"),
            protocol_version=request.headers.get("MCP-Protocol-Version"),
            last_event_id=request.headers.get("Last-Event-ID"),
            idle_before=idle,
        )
        conn.current = rid
        out = Delivery()
        try:
            return await self.respond(request, conn, rid, out, idle)
        except (Dropped, ConnectionError):  # also: a write found the transport closing or gone (drain)
            if not conn.lost.done():  # reset/truncate/die cut it: the sidecar closed it, not the client
                conn.closed_by_us = True
            return web.Response(status=500)  # the transport is gone; aiohttp drops this
        except Exception as exc:  # a bug of ours: answer 500 and surface it in the test
            self.core.record_error(f"{request.method} {request.path}", exc)
            self.journal.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
            out.status = 500
            return web.Response(status=500, text=f"mcpfaults sidecar error: {exc!r}")
        finally:
            if rid in self.replying:  # a legacy message's 202 is sent: its record ends with its reply
                self.journal.update_request(rid, status=out.status, bytes_sent=out.bytes_sent)
            else:
                self.journal.end_request(rid, status=out.status, bytes_sent=out.bytes_sent)
            if conn.current == rid:
                conn.current = None

    async def respond(
        self, request: web.BaseRequest, conn: Conn, rid: int, out: Delivery, idle: float = 0.0
    ) -> web.StreamResponse:
        try:
            body = await read_bounded(request, self.options.max_body_bytes, self.options.idle_timeout)
        except BodyError as exc:  # too slow (408), another Content-Encoding (415), does not inflate (400)
            self.journal.update_request(rid, error=exc.message, error_by="client")
            out.status = exc.status
            conn.closed_by_us = True
            return web.Response(status=exc.status, text=exc.message, headers={"Connection": "close"})
        exchange = _Exchange(self, request, conn, rid, out)
        if body is None:  # refused while reading: never buffered
            answer: core.Answer | None = core.Answer(self.core.too_large(), None, False)
        else:
            incoming = core.Incoming(
                request.method, request.path, request.headers, request.headers.items(), body,
                request.query_string, idle,
            )  # fmt: skip
            answer = await self.core.decide(rid, incoming, exchange)
        if answer is None:
            assert exchange.stream is not None
            return exchange.stream
        if answer.reply.listen is not None:
            return await exchange.listen_stream(answer)
        if exchange.answer_stream is not None:  # a tool's messages went first: the reply is the last event
            return await exchange.finish_stream(answer)
        if isinstance(answer, LegacyAnswer) and answer.stream is not None:
            return await self.legacy_stream(exchange, answer)
        if answer.after is not None:
            await self.answer_then(exchange, answer, answer.after)
        if isinstance(answer, LegacyAnswer) and answer.replying is not None:
            exchange.reply_later(answer.replying)
        if answer.reply.headers.get("Connection", "").lower() == "close":
            conn.closed_by_us = True  # aiohttp closes the connection after this answer (413, Terminating)
        if isinstance(answer.reply, Relayed):
            return await self.relay(exchange, answer, answer.reply)
        if isinstance(answer.reply, Piped):  # the stdio upstream's leg, complete before the client's
            self.journal.update_request(rid, upstream=answer.reply.leg)
        return await deliver(request, answer, hold=exchange.hold, out=out)

    async def legacy_stream(self, exchange: _Exchange, answer: LegacyAnswer) -> web.StreamResponse:
        """Serve a legacy SSE stream: the endpoint event, then its session's outbox until teardown,
        the client closes it, or the server ends the session (a clean end)."""
        session, request, conn, out = answer.stream, exchange.request, exchange.conn, exchange.out
        assert session is not None
        if shape_of(answer.fault).resets_at_once:  # RST before the status line
            session.close()
            raise cut(request.transport)
        resp = web.StreamResponse(status=answer.reply.status, headers=answer.reply.headers)
        await resp.prepare(request)
        out.status = answer.reply.status
        writer = StreamWriter(request, resp, out, exchange.hold_stream, answer.fault)
        try:
            with self.holds.stream() as teardown:
                await resp.write(b"")  # the status line and headers now: aiohttp buffers them until a write
                await writer.event(session.endpoint_event())
                while True:
                    nxt = asyncio.ensure_future(session.next())
                    await asyncio.wait((nxt, teardown, conn.lost), return_when=asyncio.FIRST_COMPLETED)
                    if not nxt.done():  # teardown, or the client closed the stream
                        nxt.cancel()
                        raise Dropped
                    event = nxt.result()
                    if event is None:  # the server ended the session
                        await resp.write_eof()
                        return resp
                    await writer.event(event)
        finally:
            session.close()

    async def answer_then(
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
        cut(exchange.request.transport, "fin")
        await then()
        raise Dropped

    async def relay(self, exchange: _Exchange, answer: core.Answer, reply: Relayed) -> web.StreamResponse:
        """Proxy mode: relay the upstream's answer. A long-lived one's (a GET's or a listen's: the
        upstream's event stream, which may stay silent for ever) is abandoned, its upstream connection
        closed, when the client goes away."""
        assert self.proxy is not None
        delivering = self.proxy.deliver(exchange.request, answer, exchange.rid, exchange.hold, exchange.out)
        if not reply.long_lived:  # bounded: a client gone fails a write
            return await delivering
        relaying = asyncio.ensure_future(delivering)
        await asyncio.wait((relaying, exchange.conn.lost), return_when=asyncio.FIRST_COMPLETED)
        if not relaying.done():
            relaying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relaying
            raise Dropped
        return relaying.result()


async def bind(web_server: ConnectionReportingServer, host: str, port: int) -> asyncio.Server:
    """Listen for ``web_server`` on ``host`` (a numeric address, a name, or a loopback name:
    :func:`_bind_name`) and ``port`` (0: any free one)."""
    loop = asyncio.get_running_loop()
    family = _numeric_family(host)
    if family is not None:  # bound here: create_server(host=...) resolves it again every start
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP: asyncio sets NODELAY
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
            return await loop.create_server(web_server, sock=sock)
        except BaseException:
            sock.close()
            raise
    if host not in LOOPBACK_NAMES:
        return await loop.create_server(web_server, host, port, reuse_address=True)
    return await _bind_name(loop, web_server, host, port)


async def _bind_name(
    loop: asyncio.AbstractEventLoop, web_server: ConnectionReportingServer, host: str, wanted: int
) -> asyncio.Server:
    """``localhost``: listen on each loopback address it resolves to (``127.0.0.1``, and ``::1`` on
    dual-stack hosts) on ONE port, the one ``url`` names (asyncio alone would pick a free port
    per address). With port 0 a free port of the first address is tried on the others; taken
    there, another is drawn (5 tries). An explicit port must be free on every address. An IPv6
    address that cannot be bound (IPv6 disabled) is left out."""
    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    addrs = sorted(
        {str(i[4][0]) for i in infos if ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback},
        key=lambda a: (":" in a, a),  # 127.0.0.1 first
    )
    if not addrs:
        raise OSError(f"Sidecar: host {host!r} resolves to no loopback address")
    for attempt in range(5):
        port = wanted
        if port == 0 and len(addrs) > 1:  # a port free on the first address, then bind them all on it
            probe = await loop.create_server(web_server, addrs[0], 0, reuse_address=True)
            port = probe.sockets[0].getsockname()[1]
            probe.close()
        try:
            return await loop.create_server(web_server, addrs, port, reuse_address=True)
        except OSError as exc:
            v4 = [a for a in addrs if ":" not in a]
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and v4 and v4 != addrs:
                addrs = v4  # ::1 listed (/etc/hosts) but IPv6 disabled: the address clients can reach
                continue
            if exc.errno != errno.EADDRINUSE or wanted != 0 or attempt == 4:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
