"""The test-process side of a stdio server: the loopback listener its children connect back to
(:class:`StdioChannel`) and each child over it (:class:`ChildLink`). Every method runs on the loop
thread."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hmac
import json
import os
import signal
import threading
from typing import Any, Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import BodyShaper, Hold, Write, halve, shape_of
from pytest_mcpfaults.behaviour.child import pipe_writes
from pytest_mcpfaults.behaviour.connection import Holding, effect_of
from pytest_mcpfaults.core.core import FREEZE, Answer, Incoming, SidecarCore
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.core.holds import Holds, patience_of
from pytest_mcpfaults.core.records import ClosedBy, HoldOutcome
from pytest_mcpfaults.faults.kinds import IgnoreEof, IgnoreSigterm
from pytest_mcpfaults.mcp.jsonrpc import Reply
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.stdio.procfs import exit_status, stdin_state, wait_exited
from pytest_mcpfaults.stdio.records import (
    CancelRecord,
    ChildRecord,
    SignalRecord,
    StdioViolation,
)
from pytest_mcpfaults.stdio.wire import MAX_LINE, MAX_MESSAGE
from pytest_mcpfaults.transports.loop import cancel_all
from pytest_mcpfaults.transports.views import NoAnswerStream

#: How long a child whose control channel closed may take to exit before it is killed.
_EXIT_GRACE = 1.0
_HELLO_TIMEOUT = 5.0
#: How long a child whose stdin closed goes on answering the requests it read before it exits.
_EOF_GRACE = 2.0
_FROZEN_POLL = 0.05


class StdioChannel:
    """The listener one stdio server's children connect to, and what their links share (the records
    and the patience violations are read under ``cond``)."""

    def __init__(self, sidecar_core: SidecarCore, token: str) -> None:
        self.core, self.journal, self.token = sidecar_core, sidecar_core.journal, token
        self.listener: asyncio.Server | None = None
        self.address = ""
        self.events = sidecar_core.plan.events  # the plan's ignore_eof / ignore_sigterm, shared
        self.patience, self.guarded = sidecar_core.options.patience, True
        self.live: dict[int, ChildLink] = {}
        self.records: list[ChildRecord] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.cond = threading.Condition()
        self.expect_hang = sidecar_core.options.expect_hang
        self.violations: list[StdioViolation] = []  # read under cond

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def violate(self, child: ChildLink, v: StdioViolation) -> None:
        """Record ``v`` (expected, too, when the server expects hangs), then kill the child."""
        if self.expect_hang:
            v = dataclasses.replace(v, expected=True)
        with self.cond:
            self.violations.append(v)
            self.cond.notify_all()
        child.kill("patience")

    def arm_close(self, child: ChildLink, fault: F.Fault, since: float) -> None:
        """A fault keeps the child alive past a request to end it: the client may wait ``patience``."""
        budget = self.patience
        if budget is None or child.close_timer is not None:
            return

        def expired() -> None:
            if child.record.alive:
                self.violate(child, StdioViolation("close", child.record, str(fault), budget, False, since))

        child.close_timer = asyncio.get_running_loop().call_later(budget, expired)

    async def watch_frozen(self, child: ChildLink, budget: float) -> None:
        """While ``child`` is stopped by ``freeze()``: once the client has input waiting in its stdin
        (or has closed it) for ``budget`` seconds, record a violation and kill the child."""
        since: float | None = None
        while child.record.alive and child.record.stopped:
            pending, closed = stdin_state(child.pid)
            now = self.journal.now()
            if pending or closed:
                since = now if since is None else since
                if now - since >= budget:
                    v = StdioViolation("frozen", child.record, "freeze()", budget, False, since)
                    self.violate(child, dataclasses.replace(v, pending_bytes=pending or -1))
                    return
            else:
                since = None
            await asyncio.sleep(_FROZEN_POLL)

    def event_fault(self, event: str) -> F.Fault | None:
        """The first fault reacting to ``event`` in the plan whose trigger fires on it (counted)."""
        for fault, state in self.events:
            if fault.event == event and state.consider():
                self.journal.add_fired(fault.kind, what=str(fault))
                return fault
        return None

    async def start(self, guarded: bool) -> None:
        """Listen for children; ``guarded``: a guardian watches each one (the server's flag, as it is at
        its start: a standalone child clears it after construction)."""
        self.guarded = guarded
        self.listener = await asyncio.start_server(self.on_connection, "127.0.0.1", 0, limit=MAX_MESSAGE)
        host, port = self.listener.sockets[0].getsockname()[:2]
        self.address = f"{host}:{port}"

    async def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
        killed = []
        for child in list(self.live.values()):
            child.holds.end("teardown")
            child.kill("teardown")
            killed.append(child.pid)
        gone = [c.gone for c in self.live.values() if not c.gone.done()]
        if gone:
            await asyncio.wait(gone, timeout=3.0)
        await wait_exited(killed, timeout=2.0)  # when stop() returns, no child of the test runs
        for child in list(self.live.values()):  # not seen to go: record it as ended anyway
            child.writer.close()
            child.ended()
        await cancel_all(self.tasks)

    def live_child(self, what: str) -> ChildLink:
        children = list(self.live.values())
        if not children:
            raise RuntimeError(f"StdioServer.{what}(): no live child (has the harness spawned it?)")
        return children[-1]

    def release(self) -> None:
        for child in list(self.live.values()):
            child.holds.end("released")
            if child.record.stopped:
                child.signal(signal.SIGCONT, "SIGCONT")
                child.update(stopped=False)
        self.core.thaw()

    async def on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), _HELLO_TIMEOUT)
            hello = json.loads(line)
            token = str(hello.get("token", ""))
            if hello.get("t") != "hello" or not hmac.compare_digest(token, self.token):
                raise ValueError("not a hello with this server's token")
            pid = int(hello["pid"])
        except (asyncio.TimeoutError, ValueError, KeyError, TypeError, AttributeError):
            writer.close()
            return
        if self.core.state == "stopped":
            writer.close()
            return
        if self.core.state == "dead":
            self.core.state = "running"  # the harness spawned a new child after a die
        cid = self.journal.add_connection(f"stdio child pid {pid}")
        record = ChildRecord(id=cid, pid=pid, started_at=self.journal.now())
        child = ChildLink(self, pid, writer, record)
        with self.cond:
            self.records.append(record)
            self.cond.notify_all()
        self.live[cid] = child
        if self.guarded:
            guardian.watch(pid)
        try:
            while True:
                raw = await reader.readline()
                if not raw:
                    break
                child.on_message(json.loads(raw))
        except ConnectionError:
            pass
        except Exception as exc:  # a message we cannot read: a bug of ours, surfaced in the test
            self.core.record_error(f"stdio control channel of child pid {pid}", exc)
            child.kill("control channel lost")
        finally:
            await child.reap()


class ChildLink:
    """One child as the test process sees it: its messages (a stdin line, EOF, a signal, its exit), each
    request from line to answer, its holds, the signals the test process sends it."""

    def __init__(
        self, channel: StdioChannel, pid: int, writer: asyncio.StreamWriter, record: ChildRecord
    ) -> None:
        self.channel, self.core, self.journal = channel, channel.core, channel.journal
        self.cid, self.pid, self.writer, self.record = record.id, pid, writer, record
        loop = asyncio.get_running_loop()
        self.gone: asyncio.Future[None] = loop.create_future()
        self.stdin_closed: asyncio.Future[None] = loop.create_future()
        self.holds = Holds(self.journal)
        self.ended_by_us: str | None = None  # exit_how when the test process ended it
        self.exiting = False  # told to exit: a line sent to it now may never be written
        self.bye: tuple[str, int] | None = None
        self.close_timer: asyncio.TimerHandle | None = None
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self.requests: set[asyncio.Task[None]] = set()
        self.holding: set[asyncio.Task[Any]] = set()  # the requests' tasks in a hold

    def send(self, **message: Any) -> None:
        if not self.writer.is_closing():
            self.writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def update(self, **fields: Any) -> None:
        self.record = dataclasses.replace(self.record, **fields)
        channel = self.channel
        with channel.cond:
            channel.records[[r.id for r in channel.records].index(self.cid)] = self.record
            channel.cond.notify_all()

    # -- what the test process does to it ----------------------------------------------------------
    def signal(self, sig: int, name: str) -> None:
        if not self.record.alive:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
        self.update(signals=(*self.record.signals, SignalRecord(name, self.journal.now(), "sent")))
        if sig == signal.SIGKILL and self.ended_by_us is None:
            self.ended_by_us = "kill()"

    def kill(self, how: str) -> None:
        if self.ended_by_us is None:
            self.ended_by_us = how
        self.signal(signal.SIGKILL, "SIGKILL")

    def freeze(self) -> None:
        """``freeze()``: stop the child (SIGSTOP), watched for a client waiting on it past patience."""
        self.signal(signal.SIGSTOP, "SIGSTOP")
        self.update(stopped=True)
        self.core.freeze(FREEZE)
        if self.channel.patience is not None:
            self.channel.spawn(self.channel.watch_frozen(self, self.channel.patience))

    # -- what it tells the test process ------------------------------------------------------------
    def on_message(self, message: dict[str, Any]) -> None:
        t = message.get("t")
        if t == "in":
            if "over" in message:
                coro = self.on_over(int(message["over"]))
            else:
                body = base64.b64decode(message["b64"]) if "b64" in message else str(message["line"]).encode()
                coro = self.on_line(body)
            task = self.channel.spawn(coro)
            self.requests.add(task)
            task.add_done_callback(self.requests.discard)
        elif t == "eof":
            self.on_eof(int(message["n"]))
        elif t == "sig":
            self.on_sig(int(message["n"]), str(message["name"]))
        elif t == "bye":
            self.bye = (str(message.get("how")), int(message.get("code", 0)))

    def on_eof(self, n: int) -> None:
        now = self.journal.now()
        fault = self.channel.event_fault(IgnoreEof.event)
        self.update(stdin_closed_at=now, ignored_eof=fault is not None)
        if not self.stdin_closed.done():
            self.stdin_closed.set_result(None)  # held requests end: the client gave up on them
        if fault is not None:
            self.send(t="ans", n=n, keep=True)
            self.channel.arm_close(self, fault, now)
        else:
            self.channel.spawn(self.exit_on_eof(n))

    async def exit_on_eof(self, n: int) -> None:
        """Answer the requests already read (a pipeline's last request too), then let the child exit."""
        pending = [t for t in self.requests if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=_EOF_GRACE)
        self.exiting = True
        self.send(t="ans", n=n, keep=False)

    def on_sig(self, n: int, name: str) -> None:
        now = self.journal.now()
        fault = self.channel.event_fault(IgnoreSigterm.event)
        action: Literal["ignored", "died"] = "ignored" if fault is not None else "died"
        self.update(signals=(*self.record.signals, SignalRecord(name, now, action)))
        self.send(t="ans", n=n, keep=fault is not None)
        self.exiting = fault is None
        if fault is not None:
            self.channel.arm_close(self, fault, now)

    async def reap(self) -> None:
        """The control channel closed: once the child has exited (or, past a short grace, been
        killed: a child the test process cannot talk to does not run on), record it as gone."""
        if not await wait_exited([self.pid], timeout=_EXIT_GRACE) and self.cid in self.channel.live:
            self.kill("control channel lost")
            await wait_exited([self.pid], timeout=_EXIT_GRACE)
        # its holds end first, journaled (bounded) before its exit is: wait_exit() finds them final
        self.holds.end("client_closed" if self.ended_by_us is None else "teardown")
        if self.holding:
            await asyncio.wait(set(self.holding), timeout=_EXIT_GRACE)
        self.ended()

    def ended(self) -> None:
        """Record the child as gone (once): its holds end, its exit is journaled."""
        if self.channel.live.pop(self.cid, None) is None:
            return
        self.writer.close()  # its socket is released now, not when the server is collected
        if self.close_timer is not None:
            self.close_timer.cancel()
        for fut in (self.gone, self.stdin_closed):
            if not fut.done():
                fut.set_result(None)
        self.holds.end("client_closed" if self.ended_by_us is None else "teardown")
        how, code = self.ended_by_us, None
        if self.bye is not None and how in (None, "die fault"):
            how, code = self.bye
        if how == "die fault":
            code = 1
        if self.channel.guarded:
            guardian.forget(self.pid)
        now = self.journal.now()
        closed_by: ClosedBy = "sidecar" if self.ended_by_us is not None else "client"
        self.journal.update_connection(self.cid, closed_at=now, closed_by=closed_by)
        # last: it wakes wait_exit(), which then reads the journal
        self.update(exited_at=now, exit_how=how or "killed", exit_code=code, stopped=False)
        if code is None:
            self.channel.spawn(self.record_exit_code())

    async def record_exit_code(self) -> None:
        code = await exit_status(self.pid)
        if code is not None:
            self.update(exit_code=code)

    # -- its requests ------------------------------------------------------------------------------
    async def on_over(self, size: int) -> None:
        """A stdin line over ``MAX_LINE`` bytes (the child dropped it unread): the client's error,
        journaled, and answered with a JSON-RPC error (``id: null``: the line was never parsed)."""
        text = (
            f"stdin line of {size} bytes is over the stdio line limit of {MAX_LINE} bytes "
            "(stdio_max_line); it was dropped unread"
        )
        rid = self.journal.add_request(conn_id=self.cid, method="POST", path=self.core.options.mcp_path)
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}
        line = json.dumps(error, separators=(",", ":")) + "\n"
        # journaled before it is sent: a client that has the answer finds it in the journal
        self.journal.end_request(rid, status=413, bytes_sent=len(line), error=text, error_by="client")
        self.send(t="out", d=line)

    async def on_line(self, body: bytes) -> None:
        j = self.journal
        rid = j.add_request(
            conn_id=self.cid, method="POST", path=self.core.options.mcp_path,
            protocol_version=self.headers.get("MCP-Protocol-Version"),
        )  # fmt: skip
        sent = 0
        status: int | None = None
        rpc_id = self.note_ids(body)
        try:
            incoming = Incoming(
                "POST", self.core.options.mcp_path, self.headers, list(self.headers.items()), body
            )
            exchange = _Exchange(self, rid)
            answer = await self.core.decide(rid, incoming, exchange)
            assert answer is not None  # None only for a GET event stream
            if self.exiting or self.ended_by_us is not None or not self.record.alive:
                # the child exited (stdin closed, a signal, a kill) before the answer was made: no line
                j.update_request(rid, client_closed=True, client_closed_at=j.now())
                return
            status = answer.reply.status
            sent = await exchange.deliver(answer, rpc_id)
        except Dropped:
            sent = j.request(rid).bytes_sent  # what a stall wrote before its hold ended stays written
        except Exception as exc:  # a bug of ours: surface it in the test
            self.core.record_error(f"stdio message {body[:80]!r}", exc)
            j.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
        finally:
            j.end_request(rid, status=status, bytes_sent=sent)

    def note_ids(self, body: bytes) -> Any:
        """The message's ``id``; record a ``notifications/cancelled`` naming an earlier request on the
        child's record (what the client gave up on, and when)."""
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(message, dict):
            return None
        params = message.get("params")
        if message.get("method") == "notifications/cancelled" and isinstance(params, dict):
            target = self.named(params.get("requestId"))
            if target is not None:
                reason = params.get("reason") if isinstance(params.get("reason"), str) else None
                self.update(cancels=(*self.record.cancels, CancelRecord(target, self.journal.now(), reason)))
        return message.get("id")

    def named(self, rpc_id: object) -> int | None:
        """The journal id of this child's latest request with JSON-RPC id ``rpc_id`` (a cancel's
        ``requestId``), from the journal's records: nothing is kept per request here."""
        if rpc_id is None:
            return None
        for r in reversed(self.journal.requests):
            if r.conn_id == self.cid and r.rpc_id == rpc_id and type(r.rpc_id) is type(rpc_id):
                return r.id
        return None


class _Exchange(NoAnswerStream):
    """One request's :class:`~pytest_mcpfaults.core.core.Transport` on the child's pipe: hold it,
    make the child die, pause; then write its answer."""

    error = ValueError
    no_messages = "is not sent over stdio yet: use the socket sidecar's Streamable HTTP transport"
    no_rounds = "a tool's own requests are not sent over stdio yet: use the socket sidecar"

    def __init__(self, child: ChildLink, rid: int) -> None:
        self.child, self.rid = child, rid

    async def hold(self, fault: F.Fault) -> None:
        """Hold the request until release, the client giving up (stdin closed, the child ended),
        teardown or patience (then the child is killed). Raises ``Dropped`` unless released."""
        child, channel = self.child, self.child.channel
        if effect_of(fault) == Holding(freezes=True) and not child.record.stopped:
            child.signal(signal.SIGSTOP, "SIGSTOP")
            child.update(stopped=True)
        budget, source, expected = patience_of(fault, channel.patience)
        ends: dict[asyncio.Future[Any], HoldOutcome] = {
            child.gone: "client_closed",
            child.stdin_closed: "client_closed",
        }
        task = asyncio.current_task()
        assert task is not None
        child.holding.add(task)
        try:
            outcome, _, started = await child.holds.hold(self.rid, budget, ends, records_close=True)
        finally:
            child.holding.discard(task)
        if outcome == "patience":
            assert budget is not None
            journal, rid = child.journal, self.rid
            later = tuple(
                r
                for r in journal.requests
                if r.conn_id == child.cid
                and r.id != rid
                and r.started_at >= started
                and r.mcp_method != "notifications/cancelled"
            )
            v = StdioViolation("hold", child.record, str(fault), budget, expected, started, later=later)
            channel.violate(child, dataclasses.replace(v, request=journal.request(rid), budget_from=source))
        if outcome != "released":
            raise Dropped

    async def die(self, restart: bool) -> None:
        self.child.ended_by_us = "die fault"
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.child.send(t="exit", code=1)

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def deliver(self, answer: Answer, rpc_id: Any) -> int:
        """Write the answer's line (and the fault's own writes) to the child; the bytes sent."""
        child, (reply, fault) = self.child, (answer.reply, answer.fault)
        sid = reply.headers.get("Mcp-Session-Id")
        if sid and "Mcp-Session-Id" not in child.headers:
            child.headers["Mcp-Session-Id"] = sid
            result = (reply.payload or {}).get("result") if isinstance(reply.payload, dict) else None
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                child.headers["MCP-Protocol-Version"] = version
            child.update(session_id=sid)
        line = reply_line(reply, rpc_id)
        for message in pipe_writes(fault):  # stdout_noise, stderr_flood
            child.send(**message)
        if line is None:
            return 0
        shape = shape_of(fault)
        if shape.halves:
            line = halve(line)
        if shape.streams and fault is not None:  # a stall: part of the line (ASCII JSON), then held
            await self.shaped(reply.status, fault, BodyShaper(shape), line.encode())
        else:
            child.send(t="out", d=line + "\n")
        return len(line.encode()) + 1

    async def shaped(self, status: int, fault: F.Fault, shaper: BodyShaper, line: bytes) -> None:
        """Write ``line`` and its newline as the body shaper's steps say (the stdio kinds shape by
        holding only)."""
        pending, sent = b"", 0
        for step in [*shaper.start(), *shaper.feed(line), *shaper.end()]:
            match step:
                case Write(data=data):
                    pending += data
                case Hold():
                    if pending:
                        self.child.send(t="out", d=pending.decode())
                    pending, sent = b"", sent + len(pending)
                    self.child.journal.update_request(self.rid, status=status, bytes_sent=sent)
                    await self.hold(fault)
                case _:  # pragma: no cover - drip, truncate and reset do not apply to stdio
                    raise AssertionError(f"{step} on a stdio pipe")
        self.child.send(t="out", d=pending.decode() + "\n")


def reply_line(reply: Reply, request_id: Any = None) -> str | None:
    """The JSON-RPC line answering ``reply`` (``None``: nothing to write, e.g. for a notification).

    An error the HTTP sidecar answers with ``id: null`` (its HTTP status tells the client which POST
    failed, e.g. ``server/discover`` refused in the session era) carries the request's id over
    stdio, where replies are matched to requests by id alone."""
    payload = reply.payload
    if not isinstance(payload, dict) or "jsonrpc" not in payload:
        return None
    if "error" in payload and payload.get("id") is None and request_id is not None:
        payload = {**payload, "id": request_id}
    return json.dumps(payload, separators=(",", ":"))
