"""One child of a stdio server as the test process sees it over the control channel: its messages (a
stdin line, EOF, a signal, its exit), each request from line to the core's answer and back, its holds,
and the signals the test process sends it. Every method runs on the loop thread."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import signal
import threading
from collections.abc import Mapping
from typing import Any, Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import BodyShaper, Hold, Write, halve, shape_of
from pytest_mcpfaults.behaviour.child import pipe_writes
from pytest_mcpfaults.behaviour.connection import Holding, effect_of
from pytest_mcpfaults.core.core import FREEZE, Answer, Dropped, Incoming, SidecarCore
from pytest_mcpfaults.core.holds import Holds
from pytest_mcpfaults.core.records import ClosedBy, HoldOutcome
from pytest_mcpfaults.core.resumption import Resumed
from pytest_mcpfaults.faults.kinds import IgnoreEof, IgnoreSigterm
from pytest_mcpfaults.mcp.endpoint import Reply
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.stdio.procfs import exit_status, wait_exited
from pytest_mcpfaults.stdio.records import CancelRecord, ChildRecord, SignalRecord
from pytest_mcpfaults.stdio.verdict import StdioVerdicts
from pytest_mcpfaults.stdio.wire import MAX_LINE

__all__ = ["ChildLink", "Children"]

#: How long a child whose control channel closed may take to exit before it is killed.
_EXIT_GRACE = 1.0


class Children:
    """What the links of one stdio server's children share: the core, the records (read under
    ``cond``), the live links, their tasks, the plan's child events, the patience budget and its
    verdicts. The :class:`~pytest_mcpfaults.stdio.channel.StdioChannel` listening for them is one."""

    def __init__(
        self,
        sidecar_core: SidecarCore,
        events: list[tuple[F.Fault, F.TriggerState]],
        *,
        patience: float | None,
        expect_hang: bool,
        guarded: bool,
    ) -> None:
        self.core, self.journal = sidecar_core, sidecar_core.journal
        self.events = events  # the server's ignore_eof / ignore_sigterm plan, shared
        self.patience, self.guarded = patience, guarded
        self.live: dict[int, ChildLink] = {}
        self.records: list[ChildRecord] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.cond = threading.Condition()
        self.verdicts = StdioVerdicts(self.journal, self.cond, patience, expect_hang)

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def event_fault(self, event: str) -> F.Fault | None:
        """The first fault reacting to ``event`` in the plan whose trigger fires on it (counted)."""
        for fault, state in self.events:
            if fault.event == event and state.consider():
                self.journal.add_fired(fault.kind, what=str(fault))
                return fault
        return None


class ChildLink:
    """The test-process side of one child (see the module docstring)."""

    def __init__(
        self, channel: Children, pid: int, writer: asyncio.StreamWriter, record: ChildRecord
    ) -> None:
        self.channel, self.core, self.journal = channel, channel.core, channel.journal
        self.cid, self.pid, self.writer, self.record = record.id, pid, writer, record
        loop = asyncio.get_running_loop()
        self.gone: asyncio.Future[None] = loop.create_future()
        self.stdin_closed: asyncio.Future[None] = loop.create_future()
        self.holds = Holds(self.journal)
        self.ended_by_us: str | None = None  # exit_how when the test process ended it
        self.bye: tuple[str, int] | None = None
        self.close_timer: asyncio.TimerHandle | None = None
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self.requests: set[asyncio.Task[None]] = set()
        self.rpc_ids: dict[Any, int] = {}  # JSON-RPC id -> journal id

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
            self.channel.spawn(self.channel.verdicts.watch_frozen(self, self.channel.patience))

    # -- what it tells the test process ------------------------------------------------------------
    def on_message(self, message: dict[str, Any]) -> None:
        t = message.get("t")
        if t == "in":
            if "over" in message:
                coro = self.on_over(int(message["over"]))
            else:
                body = base64.b64decode(message["b64"]) if "b64" in message else str(message["line"]).encode()
                coro = self.on_line(body)
            task = asyncio.get_running_loop().create_task(coro)
            self.channel.tasks.add(task)
            self.requests.add(task)
            task.add_done_callback(self.channel.tasks.discard)
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
            self.channel.verdicts.arm_close(self, fault, now)
        else:
            self.channel.spawn(self.exit_on_eof(n))

    async def exit_on_eof(self, n: int) -> None:
        """Answer the requests already read (a pipeline's last request too), then let the child exit."""
        pending = [t for t in self.requests if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=2.0)
        self.send(t="ans", n=n, keep=False)

    def on_sig(self, n: int, name: str) -> None:
        now = self.journal.now()
        fault = self.channel.event_fault(IgnoreSigterm.event)
        action: Literal["ignored", "died"] = "ignored" if fault is not None else "died"
        self.update(signals=(*self.record.signals, SignalRecord(name, now, action)))
        self.send(t="ans", n=n, keep=fault is not None)
        if fault is not None:
            self.channel.verdicts.arm_close(self, fault, now)

    async def reap(self) -> None:
        """The control channel closed: once the child has exited (or, past a short grace, been
        killed: a child the test process cannot talk to does not run on), record it as gone."""
        if not await wait_exited([self.pid], timeout=_EXIT_GRACE) and self.cid in self.channel.live:
            self.kill("control channel lost")
            await wait_exited([self.pid], timeout=_EXIT_GRACE)
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
        self.update(exited_at=self.journal.now(), exit_how=how or "killed", exit_code=code, stopped=False)
        if code is None:
            self.channel.spawn(self.record_exit_code())
        if self.channel.guarded:
            guardian.forget(self.pid)
        closed_by: ClosedBy = "sidecar" if self.ended_by_us is not None else "client"
        self.journal.update_connection(self.cid, closed_at=self.journal.now(), closed_by=closed_by)

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
        self.note_ids(rid, body)
        try:
            incoming = Incoming(
                "POST", self.core.options.mcp_path, self.headers, list(self.headers.items()), body
            )
            exchange = _Exchange(self, rid)
            answer = await self.core.decide(rid, incoming, exchange)
            assert answer is not None  # None only for a GET event stream
            status = answer.reply.status
            sent = await exchange.deliver(answer, body)
        except Dropped:
            sent = j.request(rid).bytes_sent  # what a stall wrote before its hold ended stays written
        except Exception as exc:  # a bug of ours: surface it in the test
            self.core.record_error(f"stdio message {body[:80]!r}", exc)
            j.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
        finally:
            j.end_request(rid, status=status, bytes_sent=sent)

    def note_ids(self, rid: int, body: bytes) -> None:
        """Remember which journal request each JSON-RPC id is, and record a ``notifications/cancelled``
        naming one of them on the child's record (what the client gave up on, and when)."""
        try:
            message = json.loads(body)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        rpc_id = message.get("id")
        if rpc_id is not None and isinstance(message.get("method"), str):
            with contextlib.suppress(TypeError):  # an unhashable id: the core answers it as invalid
                self.rpc_ids[rpc_id] = rid
        params = message.get("params")
        if message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
            return
        try:
            target = self.rpc_ids.get(params.get("requestId"))
        except TypeError:
            return
        if target is not None:
            reason = params.get("reason")
            cancel = CancelRecord(target, self.journal.now(), reason if isinstance(reason, str) else None)
            self.update(cancels=(*self.record.cancels, cancel))


class _Exchange:
    """One request's :class:`~pytest_mcpfaults.core.core.Transport` on the child's pipe: hold it,
    make the child die, pause; then write its answer."""

    def __init__(self, child: ChildLink, rid: int) -> None:
        self.child, self.rid = child, rid

    async def hold(self, fault: F.Fault) -> None:
        """Hold the request until release, the client giving up (stdin closed, the child ended),
        teardown or patience (then the child is killed). Raises ``Dropped`` unless released."""
        child, channel = self.child, self.child.channel
        if effect_of(fault) == Holding(freezes=True) and not child.record.stopped:
            child.signal(signal.SIGSTOP, "SIGSTOP")
            child.update(stopped=True)
        own = getattr(fault, "patience", None)
        budget = own or channel.patience
        ends: dict[asyncio.Future[Any], HoldOutcome] = {
            child.gone: "client_closed",
            child.stdin_closed: "client_closed",
        }
        outcome, _, started = await child.holds.hold(self.rid, budget, ends, records_close=True)
        if outcome == "patience":
            assert budget is not None
            expected = bool(getattr(fault, "expect_hang", False))
            channel.verdicts.violate(
                "hold",
                child,
                str(fault),
                budget,
                started,
                rid=self.rid,
                own=own is not None,
                expected=expected,
            )
            child.kill("patience")
        if outcome != "released":
            raise Dropped

    async def die(self, restart: bool) -> None:
        self.child.ended_by_us = "die fault"
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.child.send(t="exit", code=1)

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def event_stream(
        self, resumed: Resumed | None = None, fault: F.Fault | None = None
    ) -> None:  # pragma: no cover - no GET stream over stdio
        raise Dropped

    async def send_message(self, message: Mapping[str, Any] | bytes, headers: Mapping[str, str]) -> None:
        method = message.get("method") if isinstance(message, Mapping) else "message"
        raise ValueError(
            f"a tool's own {method!r} (ctx) is not sent over stdio yet: use the socket "
            "sidecar's Streamable HTTP transport"
        )

    async def await_answer(
        self, answer: asyncio.Future[dict[str, Any]], what: str, dropped: object = None
    ) -> None:  # pragma: no cover
        raise Dropped

    def watch_round(self, answer: asyncio.Future[dict[str, Any]], what: str) -> None:
        raise ValueError("a tool's own requests are not sent over stdio yet: use the socket sidecar")

    async def deliver(self, answer: Answer, body: bytes) -> int:
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
        line = reply_line(reply, request_id(body))
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
        """Write ``line`` and its newline as the body shaper's steps say: the bytes before a hold in one
        write, the rest with the newline in another (the stdio kinds shape by holding only)."""
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


def request_id(body: bytes) -> Any:
    """The ``id`` of a message (``None`` when it has none or is not JSON)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return message.get("id") if isinstance(message, dict) else None


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
