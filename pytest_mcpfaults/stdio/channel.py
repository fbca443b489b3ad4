"""The control channel of a :class:`~pytest_mcpfaults.stdio.server.StdioServer`: the loopback listener
its children connect back to, each child's messages (a stdin line, EOF, a signal, its exit), each
request from line to the core's answer and back, the holds, the signals the test process sends, and
the patience violations. ``StdioServer`` (the public face: plan, lifecycle, what the harness is given,
runtime control) composes one :class:`StdioChannel`; every method of it runs on the loop thread.
"""

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
from collections.abc import Mapping
from typing import Any, Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.fault_types import IgnoreEof, IgnoreSigterm
from pytest_mcpfaults.sidecar.body import BodyShaper, Hold, Write, halve, shape_of
from pytest_mcpfaults.sidecar.connection import Holding, effect_of
from pytest_mcpfaults.sidecar.core import FREEZE, Answer, Dropped, Incoming, SidecarCore
from pytest_mcpfaults.sidecar.records import ClosedBy, Held, HoldOutcome
from pytest_mcpfaults.sidecar.resumption import Resumed
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.stdio.child_faults import pipe_writes
from pytest_mcpfaults.stdio.procfs import exit_status, stdin_state, wait_exited
from pytest_mcpfaults.stdio.records import (
    CancelRecord,
    ChildRecord,
    SignalRecord,
    StdioViolation,
    ViolationKind,
)
from pytest_mcpfaults.stdio.replies import reply_line, request_id
from pytest_mcpfaults.stdio.wire import MAX_LINE, MAX_MESSAGE

__all__ = ["MCP_PATH", "StdioChannel"]

#: The path a stdio request is answered as (the core's MCP endpoint).
MCP_PATH = "/mcp"
_HELLO_TIMEOUT = 5.0
_FROZEN_POLL = 0.05
#: How long a child whose control channel closed may take to exit before it is killed.
_EXIT_GRACE = 1.0


@dataclasses.dataclass(eq=False)
class _Hold:
    rid: int
    release: asyncio.Future[HoldOutcome]


@dataclasses.dataclass(eq=False)
class _Child:
    cid: int
    pid: int
    writer: asyncio.StreamWriter
    gone: asyncio.Future[None]
    stdin_closed: asyncio.Future[None]
    record: ChildRecord
    holds: set[_Hold] = dataclasses.field(default_factory=set)
    ended_by_us: str | None = None  # exit_how when the test process ended it
    bye: tuple[str, int] | None = None
    close_timer: asyncio.TimerHandle | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    requests: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)
    rpc_ids: dict[Any, int] = dataclasses.field(default_factory=dict)  # JSON-RPC id -> journal id


class _ChildTransport:
    """What only the pipe can do for one request: hold it, make the child die, pause."""

    def __init__(self, channel: StdioChannel, child: _Child, rid: int) -> None:
        self.channel, self.child, self.rid = channel, child, rid

    async def hold(self, fault: F.Fault) -> None:
        await self.channel.hold(self.child, self.rid, fault)

    async def die(self, restart: bool) -> None:
        self.child.ended_by_us = "die fault"
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.channel.send(self.child, t="exit", code=1)

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


class StdioChannel:
    """The test-process side of every child of one stdio server (see the module docstring)."""

    def __init__(
        self,
        sidecar_core: SidecarCore,
        events: list[tuple[F.Fault, F.TriggerState]],
        token: str,
        *,
        patience: float | None,
        expect_hang: bool,
        guarded: bool,
    ) -> None:
        self.core, self.journal = sidecar_core, sidecar_core.journal
        self.events = events  # the server's ignore_eof / ignore_sigterm plan, shared
        self.token, self.patience, self.expect_hang, self.guarded = token, patience, expect_hang, guarded
        self.listener: asyncio.Server | None = None
        self.address = ""
        self.live: dict[int, _Child] = {}
        self.records: list[ChildRecord] = []
        self.violations: list[StdioViolation] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.cond = threading.Condition()

    async def start(self) -> None:
        self.listener = await asyncio.start_server(self.on_connection, "127.0.0.1", 0, limit=MAX_MESSAGE)
        host, port = self.listener.sockets[0].getsockname()[:2]
        self.address = f"{host}:{port}"

    async def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
        killed = []
        for child in list(self.live.values()):
            self.end_holds(child, "teardown")
            self.kill(child, "teardown")
            killed.append(child.pid)
        gone = [c.gone for c in self.live.values() if not c.gone.done()]
        if gone:
            await asyncio.wait(gone, timeout=3.0)
        await wait_exited(killed, timeout=2.0)  # when stop() returns, no child of the test runs
        for child in list(self.live.values()):  # not seen to go: record it as ended anyway
            child.writer.close()
            self.gone(child)
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    def live_child(self, what: str) -> _Child:
        children = list(self.live.values())
        if not children:
            raise RuntimeError(f"StdioServer.{what}(): no live child (has the harness spawned it?)")
        return children[-1]

    def release(self) -> None:
        for child in list(self.live.values()):
            self.end_holds(child, "released")
            if child.record.stopped:
                self.signal(child, signal.SIGCONT, "SIGCONT")
                self.update(child, stopped=False)
        self.core.thaw()

    def stop_child(self, child: _Child) -> None:
        self.signal(child, signal.SIGSTOP, "SIGSTOP")
        self.update(child, stopped=True)
        self.core.freeze(FREEZE)
        if self.patience is not None:
            self.spawn(self.watch_frozen(child, self.patience))

    def signal(self, child: _Child, sig: int, name: str) -> None:
        if not child.record.alive:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, sig)
        self.update(child, signals=(*child.record.signals, SignalRecord(name, self.journal.now(), "sent")))
        if sig == signal.SIGKILL and child.ended_by_us is None:
            child.ended_by_us = "kill()"

    def kill(self, child: _Child, how: str) -> None:
        if child.ended_by_us is None:
            child.ended_by_us = how
        self.signal(child, signal.SIGKILL, "SIGKILL")

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

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
        loop = asyncio.get_running_loop()
        cid = self.journal.add_connection(f"stdio child pid {pid}")
        record = ChildRecord(id=cid, pid=pid, started_at=self.journal.now())
        child = _Child(cid, pid, writer, loop.create_future(), loop.create_future(), record)
        child.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
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
                self.on_message(child, json.loads(raw))
        except ConnectionError:
            pass
        except Exception as exc:  # a message we cannot read: a bug of ours, surfaced in the test
            self.core.record_error(f"stdio control channel of child pid {pid}", exc)
            self.kill(child, "control channel lost")
        finally:
            await self.reap(child)

    async def reap(self, child: _Child) -> None:
        """The control channel closed: once the child has exited (or, past a short grace, been
        killed: a child the test process cannot talk to does not run on), record it as gone."""
        if not await wait_exited([child.pid], timeout=_EXIT_GRACE) and child.cid in self.live:
            self.kill(child, "control channel lost")
            await wait_exited([child.pid], timeout=_EXIT_GRACE)
        self.gone(child)

    def on_message(self, child: _Child, message: dict[str, Any]) -> None:
        t = message.get("t")
        if t == "in":
            if "over" in message:
                coro = _on_over(self, child, int(message["over"]))
            else:
                body = base64.b64decode(message["b64"]) if "b64" in message else str(message["line"]).encode()
                coro = self.on_line(child, body)
            task = asyncio.get_running_loop().create_task(coro)
            self.tasks.add(task)
            child.requests.add(task)
            task.add_done_callback(self.tasks.discard)
            task.add_done_callback(child.requests.discard)
        elif t == "eof":
            self.on_eof(child, int(message["n"]))
        elif t == "sig":
            self.on_sig(child, int(message["n"]), str(message["name"]))
        elif t == "bye":
            child.bye = (str(message.get("how")), int(message.get("code", 0)))

    def send(self, child: _Child, **message: Any) -> None:
        if not child.writer.is_closing():
            child.writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def event_fault(self, event: str) -> F.Fault | None:
        """The first fault reacting to ``event`` in the plan whose trigger fires on it (counted)."""
        for fault, state in self.events:
            if fault.event == event and state.consider():
                self.journal.add_fired(fault.kind, what=str(fault))
                return fault
        return None

    def on_eof(self, child: _Child, n: int) -> None:
        now = self.journal.now()
        fault = self.event_fault(IgnoreEof.event)
        self.update(child, stdin_closed_at=now, ignored_eof=fault is not None)
        if not child.stdin_closed.done():
            child.stdin_closed.set_result(None)  # held requests end: the client gave up on them
        if fault is not None:
            self.send(child, t="ans", n=n, keep=True)
            self.arm_close(child, fault, now)
        else:
            self.spawn(_exit_on_eof(self, child, n))

    def on_sig(self, child: _Child, n: int, name: str) -> None:
        now = self.journal.now()
        fault = self.event_fault(IgnoreSigterm.event)
        action: Literal["ignored", "died"] = "ignored" if fault is not None else "died"
        self.update(child, signals=(*child.record.signals, SignalRecord(name, now, action)))
        self.send(child, t="ans", n=n, keep=fault is not None)
        if fault is not None:
            self.arm_close(child, fault, now)

    def arm_close(self, child: _Child, fault: F.Fault, since: float) -> None:
        """A fault keeps the child alive past a request to end it: the client may wait ``patience``."""
        if self.patience is None or child.close_timer is not None:
            return
        loop = asyncio.get_running_loop()
        child.close_timer = loop.call_later(self.patience, self.close_expired, child, fault, since)

    def close_expired(self, child: _Child, fault: F.Fault, since: float) -> None:
        if not child.record.alive:
            return
        assert self.patience is not None
        self.violate("close", child, str(fault), self.patience, since)
        self.kill(child, "patience")

    def violate(
        self,
        kind: ViolationKind,
        child: _Child,
        fault: str,
        budget: float,
        since: float,
        *,
        rid: int | None = None,
        own: bool = False,
        expected: bool = False,
        pending: int = 0,
    ) -> None:
        later = tuple(
            r
            for r in self.journal.requests
            if r.conn_id == child.cid
            and r.id != rid
            and r.started_at >= since
            and r.mcp_method != "notifications/cancelled"
        )
        v = StdioViolation(
            kind,
            child.record,
            fault,
            budget,
            bool(self.expect_hang or expected),
            since,
            request=self.journal.request(rid) if rid is not None else None,
            budget_from="fault" if own else "sidecar",
            pending_bytes=pending,
            later=later if kind == "hold" else (),
        )
        with self.cond:
            self.violations.append(v)
            self.cond.notify_all()

    async def watch_frozen(self, child: _Child, budget: float) -> None:
        """While ``child`` is stopped by ``freeze()``: once the client has input waiting in its stdin
        (or has closed it) for ``budget`` seconds, record a violation and kill the child."""
        since: float | None = None
        while child.record.alive and child.record.stopped:
            pending, closed = stdin_state(child.pid)
            now = self.journal.now()
            if pending or closed:
                since = now if since is None else since
                if now - since >= budget:
                    self.violate(
                        "frozen", child, "freeze()", budget, since, pending=pending if pending else -1
                    )
                    self.kill(child, "patience")
                    return
            else:
                since = None
            await asyncio.sleep(_FROZEN_POLL)

    def gone(self, child: _Child) -> None:
        if self.live.pop(child.cid, None) is None:
            return
        child.writer.close()  # its socket is released now, not when this server is collected
        if child.close_timer is not None:
            child.close_timer.cancel()
        for fut in (child.gone, child.stdin_closed):
            if not fut.done():
                fut.set_result(None)
        self.end_holds(child, "client_closed" if child.ended_by_us is None else "teardown")
        how, code = child.ended_by_us, None
        if child.bye is not None and how in (None, "die fault"):
            how, code = child.bye
        if how == "die fault":
            code = 1
        self.update(
            child, exited_at=self.journal.now(), exit_how=how or "killed", exit_code=code, stopped=False
        )
        if code is None:
            self.spawn(_record_exit_code(self, child))
        if self.guarded:
            guardian.forget(child.pid)
        closed_by: ClosedBy = "sidecar" if child.ended_by_us is not None else "client"
        self.journal.update_connection(child.cid, closed_at=self.journal.now(), closed_by=closed_by)

    def update(self, child: _Child, **fields: Any) -> None:
        child.record = dataclasses.replace(child.record, **fields)
        with self.cond:
            self.records[[r.id for r in self.records].index(child.cid)] = child.record
            self.cond.notify_all()

    async def on_line(self, child: _Child, body: bytes) -> None:
        j = self.journal
        rid = j.add_request(
            conn_id=child.cid, method="POST", path=self.core.mcp_path,
            protocol_version=child.headers.get("MCP-Protocol-Version"),
        )  # fmt: skip
        sent = 0
        status: int | None = None
        _note_ids(self, child, rid, body)
        try:
            incoming = Incoming("POST", MCP_PATH, child.headers, list(child.headers.items()), body)
            answer = await self.core.decide(rid, incoming, _ChildTransport(self, child, rid))
            assert answer is not None  # None only for a GET event stream
            status = answer.reply.status
            sent = await _deliver(self, child, rid, answer, body)
        except Dropped:
            sent = j.request(rid).bytes_sent  # what a stall wrote before its hold ended stays written
        except Exception as exc:  # a bug of ours: surface it in the test
            self.core.record_error(f"stdio message {body[:80]!r}", exc)
            j.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
        finally:
            j.end_request(rid, status=status, bytes_sent=sent)

    async def hold(self, child: _Child, rid: int, fault: F.Fault) -> None:
        """Hold request ``rid`` until release, the client giving up (stdin closed, the child ended),
        teardown or patience. Raises ``Dropped`` unless released."""
        loop = asyncio.get_running_loop()
        hold = _Hold(rid, loop.create_future())
        child.holds.add(hold)
        j = self.journal
        started = j.now()
        j.update_request(rid, held=Held(started))
        if effect_of(fault) == Holding(freezes=True) and not child.record.stopped:
            self.signal(child, signal.SIGSTOP, "SIGSTOP")
            self.update(child, stopped=True)
        own = getattr(fault, "patience", None)
        budget = own or self.patience
        try:
            await asyncio.wait(
                (hold.release, child.gone, child.stdin_closed), timeout=budget,
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
        finally:
            child.holds.discard(hold)
        outcome: HoldOutcome
        if hold.release.done():
            outcome = hold.release.result()
        elif child.gone.done() or child.stdin_closed.done():
            outcome = "client_closed"
        else:
            outcome = "patience"
        now = j.now()
        fields: dict[str, Any] = {"held": Held(started, outcome, now - started)}
        if outcome == "client_closed":
            fields.update(client_closed=True, client_closed_at=now)
        j.update_request(rid, **fields)
        if outcome == "patience":
            assert budget is not None
            expected = bool(getattr(fault, "expect_hang", False))
            self.violate("hold", child, str(fault), budget, started, rid=rid, own=own is not None,
                          expected=expected)  # fmt: skip
            self.kill(child, "patience")
        if outcome != "released":
            raise Dropped

    def end_holds(self, child: _Child, outcome: HoldOutcome) -> None:
        for hold in list(child.holds):
            if not hold.release.done():
                hold.release.set_result(outcome)


async def _exit_on_eof(channel: StdioChannel, child: _Child, n: int) -> None:
    """Answer the requests already read (a pipeline's last request too), then let the child exit."""
    pending = [t for t in child.requests if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=2.0)
    channel.send(child, t="ans", n=n, keep=False)


async def _record_exit_code(channel: StdioChannel, child: _Child) -> None:
    code = await exit_status(child.pid)
    if code is not None:
        channel.update(child, exit_code=code)


async def _on_over(channel: StdioChannel, child: _Child, size: int) -> None:
    """A stdin line over ``MAX_LINE`` bytes (the child dropped it unread): the client's error,
    journaled, and answered with a JSON-RPC error (``id: null``: the line was never parsed)."""
    j = channel.journal
    text = (
        f"stdin line of {size} bytes is over the stdio line limit of {MAX_LINE} bytes "
        "(stdio_max_line); it was dropped unread"
    )
    rid = j.add_request(conn_id=child.cid, method="POST", path=channel.core.mcp_path)
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}
    line = json.dumps(error, separators=(",", ":")) + "\n"
    # journaled before it is sent: a client that has the answer finds it in the journal
    j.end_request(rid, status=413, bytes_sent=len(line), error=text, error_by="client")
    channel.send(child, t="out", d=line)


def _note_ids(channel: StdioChannel, child: _Child, rid: int, body: bytes) -> None:
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
            child.rpc_ids[rpc_id] = rid
    params = message.get("params")
    if message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
        return
    try:
        target = child.rpc_ids.get(params.get("requestId"))
    except TypeError:
        return
    if target is not None:
        reason = params.get("reason")
        cancel = CancelRecord(target, channel.journal.now(), reason if isinstance(reason, str) else None)
        channel.update(child, cancels=(*child.record.cancels, cancel))


async def _deliver(channel: StdioChannel, child: _Child, rid: int, answer: Answer, body: bytes) -> int:
    reply, fault = answer.reply, answer.fault
    sid = reply.headers.get("Mcp-Session-Id")
    if sid and "Mcp-Session-Id" not in child.headers:
        child.headers["Mcp-Session-Id"] = sid
        result = (reply.payload or {}).get("result") if isinstance(reply.payload, dict) else None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(version, str):
            child.headers["MCP-Protocol-Version"] = version
        channel.update(child, session_id=sid)
    line = reply_line(reply, request_id(body))
    for message in pipe_writes(fault):  # stdout_noise, stderr_flood
        channel.send(child, **message)
    if line is None:
        return 0
    shape = shape_of(fault)
    if shape.halves:
        line = halve(line)
    if shape.streams and fault is not None:  # a stall: part of the line (ASCII JSON), then held
        await _shaped(channel, child, rid, reply.status, fault, BodyShaper(shape), line.encode())
        return len(line.encode()) + 1
    channel.send(child, t="out", d=line + "\n")
    return len(line.encode()) + 1


async def _shaped(
    channel: StdioChannel,
    child: _Child,
    rid: int,
    status: int,
    fault: F.Fault,
    shaper: BodyShaper,
    line: bytes,
) -> None:
    """Write ``line`` and its newline as the body shaper's steps say: the bytes before a hold in one
    write, the rest with the newline in another (the stdio kinds shape by holding only)."""
    pending, sent = b"", 0
    for step in [*shaper.start(), *shaper.feed(line), *shaper.end()]:
        match step:
            case Write(data=data):
                pending += data
            case Hold():
                if pending:
                    channel.send(child, t="out", d=pending.decode())
                pending, sent = b"", sent + len(pending)
                channel.journal.update_request(rid, status=status, bytes_sent=sent)
                await channel.hold(child, rid, fault)
            case _:  # pragma: no cover - drip, truncate and reset do not apply to stdio
                raise AssertionError(f"{step} on a stdio pipe")
    channel.send(child, t="out", d=pending.decode() + "\n")
