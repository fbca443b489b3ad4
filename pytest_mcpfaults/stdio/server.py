"""``StdioServer``: a fault-injected MCP server that the harness spawns as a child process (stdio).

The harness runs ``server.command`` with ``server.args`` and ``server.env`` (``python -m
pytest_mcpfaults stdio`` plus the address of a control listener on ``127.0.0.1``). The child
(:mod:`pytest_mcpfaults.stdio.child`) relays every stdin line here; this side, in the test process,
owns the plan, the trigger states, the journal and the patience budget, decides each answer with the
sidecar's MCP endpoint and faults, and tells the child what to write and when to exit. So assertions
read like the HTTP sidecar's, and the test process owns every child: whatever the harness did, a
child still alive when the server stops is killed (SIGKILL), and a guardian process kills it should
the test process die abruptly (:mod:`pytest_mcpfaults.stdio.guardian`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hmac
import json
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.fault_types import IgnoreEof, IgnoreSigterm
from pytest_mcpfaults.sidecar import loop as _loop
from pytest_mcpfaults.sidecar.config import DEFAULT_PATIENCE, DEFAULT_TOOL_TIMEOUT
from pytest_mcpfaults.sidecar.core import FREEZE, Answer, Dropped, Incoming, SidecarCore
from pytest_mcpfaults.sidecar.journal import ClosedBy, HoldOutcome
from pytest_mcpfaults.sidecar.tools import TOOL_SETS, Tool
from pytest_mcpfaults.sidecar.views import SidecarViews
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.stdio.config import check_kwargs
from pytest_mcpfaults.stdio.procfs import exit_status, stdin_state, wait_exited, wait_stopped
from pytest_mcpfaults.stdio.records import (
    CancelRecord,
    ChildRecord,
    SignalRecord,
    StdioViolation,
    ViolationKind,
)
from pytest_mcpfaults.stdio.replies import reply_line, request_id
from pytest_mcpfaults.stdio.verdict import verdict_text
from pytest_mcpfaults.stdio.wire import CONTROL_ENV, MAX_LINE, MAX_MESSAGE, TOKEN_ENV

__all__ = ["StdioServer"]

_MCP_PATH = "/mcp"
_HELLO_TIMEOUT = 5.0
_FROZEN_POLL = 0.05
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_MAX_LINE = MAX_LINE
#: How long a child whose control channel closed may take to exit before it is killed.
_EXIT_GRACE = 1.0
_EVENT_KINDS = (IgnoreEof, IgnoreSigterm)


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

    def __init__(self, server: StdioServer, child: _Child, rid: int) -> None:
        self.server, self.child, self.rid = server, child, rid

    async def hold(self, fault: F.Fault) -> None:
        await self.server._hold(self.child, self.rid, fault)

    async def die(self, restart: bool) -> None:
        self.child.ended_by_us = "die fault"
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.server._send(self.child, t="exit", code=1)

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def event_stream(self) -> None:  # pragma: no cover - no GET stream over stdio
        raise Dropped


class StdioServer(SidecarViews):
    """A fault-injected MCP server over stdio, spawned by the harness under test.

    Hand the harness :attr:`command`, :attr:`args` and :attr:`env` (e.g. the mcp SDK's
    ``StdioServerParameters(command=server.command, args=server.args, env=server.env)``); the child
    connects back to this object, which keeps the plan, the journal and the runtime control.

    Args:
        faults: the plan (faults or their text forms; kinds that apply to stdio only, see
            ``docs/faults.md``): first match wins, as for the HTTP sidecar.
        era: ``'session'`` (the default: ``initialize``, then requests; ``server/discover`` gets an
            error), ``'auto'`` (both) or ``'stateless'``.
        tools: extra tools (:class:`~pytest_mcpfaults.Tool`) served beside the built-in sets, as for
            :class:`~pytest_mcpfaults.Sidecar`.
        tool_sets: built-in tool sets (``'basic'``, ``'benchmark'``), as for
            :class:`~pytest_mcpfaults.Sidecar`.
        patience: seconds a client may wait on the child (a held request, a child kept alive after
            stdin closed or a signal, a frozen child with input waiting) before the test process kills
            the child and records a :class:`~pytest_mcpfaults.stdio.records.StdioViolation`; ``None``:
            no budget.
        expect_hang: violations are reported but do not fail the test.
        service_url: the backend URL named in :class:`~pytest_mcpfaults.faults.BackendGone` payloads
            (default: this server's own :attr:`url`), as for :class:`~pytest_mcpfaults.Sidecar`.
        tool_timeout: seconds one tool handler call may take; ``None``: unbounded. As for
            :class:`~pytest_mcpfaults.Sidecar`.
    """

    def __init__(
        self,
        *,
        faults: Sequence[F.Fault | str] = (),
        era: str = "session",
        tools: Iterable[Tool] = (),
        tool_sets: Sequence[str] = TOOL_SETS,
        patience: float | None = DEFAULT_PATIENCE,
        expect_hang: bool = False,
        service_url: str | None = None,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    ) -> None:
        era_ = check_kwargs(
            faults,
            era,
            tools,
            tool_sets,
            patience,
            expect_hang,
            service_url,
            tool_timeout,
            mcp_path=_MCP_PATH,
        )
        self.era, self.patience, self.expect_hang = era_, patience, expect_hang
        self._pool = _loop.WorkerPool("mcpfaults-stdio-tool-handler")
        self.core = SidecarCore(
            mcp_path=_MCP_PATH,
            health_path=None,
            era=era_,
            reply="json",
            tools=tools,
            tool_sets=tool_sets,
            faults=(),
            get_stream=False,
            allowed_origins=(),
            max_body_bytes=_MAX_LINE,
            service_url=lambda: service_url or self.url,
            tool_timeout=tool_timeout,
            run_sync=self._pool.submit,
        )
        self._faults: list[F.Fault] = []  # the whole plan, in order (the core answers requests)
        self._events: list[tuple[F.Fault, F.TriggerState]] = []  # ignore_eof / ignore_sigterm
        self._add_faults(faults, "faults=")
        self._token = secrets.token_urlsafe(24)
        self._listener: asyncio.Server | None = None
        self._address = ""
        self._live: dict[int, _Child] = {}
        self._records: list[ChildRecord] = []
        self._violations: list[StdioViolation] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cond = threading.Condition()

    # -- plan ----------------------------------------------------------------------------------------
    def _add_faults(self, faults: Sequence[F.Fault | str], argname: str) -> None:
        plan = F.as_plan(faults, argname=argname.rstrip("="))
        F.check_transport(plan, "stdio", f"StdioServer {argname}")
        for f in plan:
            if isinstance(f, F.Die) and f.restart:
                raise ValueError(
                    f"StdioServer {argname}: {str(f)!r}: a stdio child cannot restart itself (the harness "
                    "spawns it); use die without restart= (the child exits with status 1)"
                )
        self._faults.extend(plan)
        self._events.extend((f, F.TriggerState(f.trigger)) for f in plan if isinstance(f, _EVENT_KINDS))
        self.core.inject([f for f in plan if not isinstance(f, _EVENT_KINDS)])

    @property
    def plan(self) -> tuple[F.Fault, ...]:
        """Every fault planned so far (constructor and ``inject()``), in order."""
        return tuple(self._faults)

    def inject(self, *faults: F.Fault | str) -> None:
        """Add faults to the plan at runtime (after those already planned)."""
        plan = list(faults)
        _loop.run(self._run(lambda: self._add_faults(plan, "inject()")))

    def clear_faults(self) -> None:
        """Forget every planned fault (held requests stay held: see :meth:`release`)."""
        _loop.run(self._run(self._clear))

    def _clear(self) -> None:
        self._faults.clear()
        self._events.clear()
        self.core.clear_faults()

    @staticmethod
    async def _run(fn: Callable[[], None]) -> None:
        fn()

    # -- lifecycle -----------------------------------------------------------------------------------
    #: Whether a guardian process kills the children should this process die abruptly.
    guarded = True

    def start(self) -> StdioServer:
        """Listen for children on ``127.0.0.1`` (an ephemeral port); returns ``self``."""
        if self.core.state != "new":
            raise RuntimeError(f"StdioServer.start(): already {self.core.state}; a server starts once")
        if self.guarded:
            guardian.ensure()
        _loop.run(self._start())
        self.core.state = "running"
        return self

    async def _start(self) -> None:
        self._listener = await asyncio.start_server(self._on_connection, "127.0.0.1", 0, limit=MAX_MESSAGE)
        host, port = self._listener.sockets[0].getsockname()[:2]
        self._address = f"{host}:{port}"

    def stop(self) -> None:
        """Kill every child still alive (SIGKILL; a stopped one too), wait for each to go (bounded),
        end every hold and stop listening. Idempotent."""
        if self.core.state in ("new", "stopped"):
            self.core.state = "stopped"
            return
        self.core.state = "stopped"
        _loop.run(self._stop(), timeout=10.0)
        self._pool.close()

    async def _stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        killed = []
        for child in list(self._live.values()):
            self._end_holds(child, "teardown")
            self._kill(child, "teardown")
            killed.append(child.pid)
        gone = [c.gone for c in self._live.values() if not c.gone.done()]
        if gone:
            await asyncio.wait(gone, timeout=3.0)
        await wait_exited(killed, timeout=2.0)  # when stop() returns, no child of the test runs
        for child in list(self._live.values()):  # not seen to go: record it as ended anyway
            child.writer.close()
            self._gone(child)
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    @property
    def running(self) -> bool:
        return self.core.state in ("running", "frozen", "dead")

    # -- what the harness is given -------------------------------------------------------------------
    @property
    def command(self) -> str:
        """The executable the harness runs: this Python interpreter."""
        return sys.executable

    @property
    def args(self) -> list[str]:
        """The arguments: ``['-m', 'pytest_mcpfaults', 'stdio']``."""
        return ["-m", "pytest_mcpfaults", "stdio"]

    @property
    def env(self) -> dict[str, str]:
        """The environment the child needs (merge it over the harness's own): the control address and
        token, and ``PYTHONPATH`` naming this package's directory."""
        if self.core.state == "new":
            raise RuntimeError("StdioServer.env: the server is not started yet (call start() first)")
        path = os.environ.get("PYTHONPATH")
        return {
            CONTROL_ENV: self._address,
            TOKEN_ENV: self._token,
            "PYTHONPATH": _PACKAGE_ROOT + (os.pathsep + path if path else ""),
        }

    @property
    def url(self) -> str:
        """Where the server is, for messages and reports: ``stdio:`` and its command line."""
        return "stdio:" + " ".join(["python", *self.args])

    @property
    def mcp_url(self) -> str:
        raise RuntimeError(
            "StdioServer.mcp_url: a stdio server has no URL; give the harness command/args/env"
        )

    # -- what was observed ---------------------------------------------------------------------------
    @property
    def children(self) -> tuple[ChildRecord, ...]:
        """Every child that connected, in order (snapshots)."""
        with self._cond:
            return tuple(self._records)

    @property
    def child(self) -> ChildRecord:
        """The latest child (an error before any child connected)."""
        with self._cond:
            if not self._records:
                raise RuntimeError(
                    "StdioServer.child: no child has connected yet (has the harness spawned it?)"
                )
            return self._records[-1]

    @property
    def patience_violations(self) -> tuple[StdioViolation, ...]:
        with self._cond:
            return tuple(self._violations)

    def wait_child(self, timeout: float = 10.0) -> ChildRecord:
        """Wait until a child has connected; return it."""
        self._wait(lambda: bool(self._records), timeout, "a stdio child to connect")
        return self.child

    def wait_exit(self, timeout: float = 10.0) -> ChildRecord:
        """Wait until the latest child has exited; return it."""
        self.wait_child(timeout)
        self._wait(lambda: not self._records[-1].alive, timeout, "the stdio child to exit")
        return self.child

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    # -- runtime control -----------------------------------------------------------------------------
    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL by default: the server crashes) to the latest live child."""
        child = self._live_child("kill")
        name = signal.Signals(sig).name
        _loop.run(self._run(lambda: self._signal(child, sig, name)))
        if sig == signal.SIGKILL:
            self.journal.add_fired("die", what="kill()")

    def freeze(self) -> None:
        """Stop the latest live child (SIGSTOP): nothing is read or written until :meth:`revive` or
        :meth:`release`. Input the client sends meanwhile waits in the pipe; a client that waits on it
        past the patience budget gets a violation (the child is then killed)."""
        child = self._live_child("freeze")
        _loop.run(self._run(lambda: self._stop_child(child)))
        wait_stopped(child.pid)  # stopped for real before the test goes on (a line could slip in otherwise)
        self.journal.add_fired("freeze", what="freeze()")

    def revive(self) -> None:
        """Continue a stopped child (SIGCONT), releasing what it held."""
        if self.running:
            _loop.run(self._run(self._release))

    def release(self) -> None:
        """Let every held request go (stalled lines finish, hung requests are answered) and continue a
        stopped child (SIGCONT)."""
        if self.running:
            _loop.run(self._run(self._release))

    def _live_child(self, what: str) -> _Child:
        children = list(self._live.values())
        if not children:
            raise RuntimeError(f"StdioServer.{what}(): no live child (has the harness spawned it?)")
        return children[-1]

    def _release(self) -> None:
        for child in list(self._live.values()):
            self._end_holds(child, "released")
            if child.record.stopped:
                self._signal(child, signal.SIGCONT, "SIGCONT")
                self._update(child, stopped=False)
        self.core.thaw()

    def _stop_child(self, child: _Child) -> None:
        self._signal(child, signal.SIGSTOP, "SIGSTOP")
        self._update(child, stopped=True)
        self.core.freeze(FREEZE)
        if self.patience is not None:
            self._spawn(self._watch_frozen(child, self.patience))

    def _signal(self, child: _Child, sig: int, name: str) -> None:
        if not child.record.alive:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, sig)
        self._update(child, signals=(*child.record.signals, SignalRecord(name, self.journal.now(), "sent")))
        if sig == signal.SIGKILL and child.ended_by_us is None:
            child.ended_by_us = "kill()"

    def _kill(self, child: _Child, how: str) -> None:
        if child.ended_by_us is None:
            child.ended_by_us = how
        self._signal(child, signal.SIGKILL, "SIGKILL")

    # -- the control channel (loop thread) ------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), _HELLO_TIMEOUT)
            hello = json.loads(line)
            token = str(hello.get("token", ""))
            if hello.get("t") != "hello" or not hmac.compare_digest(token, self._token):
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
        with self._cond:
            self._records.append(record)
            self._cond.notify_all()
        self._live[cid] = child
        if self.guarded:
            guardian.watch(pid)
        try:
            while True:
                raw = await reader.readline()
                if not raw:
                    break
                self._on_message(child, json.loads(raw))
        except ConnectionError:
            pass
        except Exception as exc:  # a message we cannot read: a bug of ours, surfaced in the test
            self.core.record_error(f"stdio control channel of child pid {pid}", exc)
            self._kill(child, "control channel lost")
        finally:
            await self._reap(child)

    async def _reap(self, child: _Child) -> None:
        """The control channel closed: once the child has exited (or, past a short grace, been
        killed: a child the test process cannot talk to does not run on), record it as gone."""
        if not await wait_exited([child.pid], timeout=_EXIT_GRACE) and child.cid in self._live:
            self._kill(child, "control channel lost")
            await wait_exited([child.pid], timeout=_EXIT_GRACE)
        self._gone(child)

    def _on_message(self, child: _Child, message: dict[str, Any]) -> None:
        t = message.get("t")
        if t == "in":
            if "over" in message:
                coro = self._on_over(child, int(message["over"]))
            else:
                body = base64.b64decode(message["b64"]) if "b64" in message else str(message["line"]).encode()
                coro = self._on_line(child, body)
            task = asyncio.get_running_loop().create_task(coro)
            self._tasks.add(task)
            child.requests.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(child.requests.discard)
        elif t == "eof":
            self._on_eof(child, int(message["n"]))
        elif t == "sig":
            self._on_sig(child, int(message["n"]), str(message["name"]))
        elif t == "bye":
            child.bye = (str(message.get("how")), int(message.get("code", 0)))

    def _send(self, child: _Child, **message: Any) -> None:
        if not child.writer.is_closing():
            child.writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def _event_fault(self, cls: type[F.Fault]) -> F.Fault | None:
        """The first fault of ``cls`` in the plan whose trigger fires on this event (counted)."""
        for fault, state in self._events:
            if isinstance(fault, cls) and state.consider():
                self.journal.add_fired(fault.kind, what=str(fault))
                return fault
        return None

    def _on_eof(self, child: _Child, n: int) -> None:
        now = self.journal.now()
        fault = self._event_fault(IgnoreEof)
        self._update(child, stdin_closed_at=now, ignored_eof=fault is not None)
        if not child.stdin_closed.done():
            child.stdin_closed.set_result(None)  # held requests end: the client gave up on them
        if fault is not None:
            self._send(child, t="ans", n=n, keep=True)
            self._arm_close(child, fault, now)
        else:
            self._spawn(self._exit_on_eof(child, n))

    async def _exit_on_eof(self, child: _Child, n: int) -> None:
        """Answer the requests already read (a pipeline's last request too), then let the child exit."""
        pending = [t for t in child.requests if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=2.0)
        self._send(child, t="ans", n=n, keep=False)

    def _on_sig(self, child: _Child, n: int, name: str) -> None:
        now = self.journal.now()
        fault = self._event_fault(IgnoreSigterm)
        action: Literal["ignored", "died"] = "ignored" if fault is not None else "died"
        self._update(child, signals=(*child.record.signals, SignalRecord(name, now, action)))
        self._send(child, t="ans", n=n, keep=fault is not None)
        if fault is not None:
            self._arm_close(child, fault, now)

    def _arm_close(self, child: _Child, fault: F.Fault, since: float) -> None:
        """A fault keeps the child alive past a request to end it: the client may wait ``patience``."""
        if self.patience is None or child.close_timer is not None:
            return
        loop = asyncio.get_running_loop()
        child.close_timer = loop.call_later(self.patience, self._close_expired, child, fault, since)

    def _close_expired(self, child: _Child, fault: F.Fault, since: float) -> None:
        if not child.record.alive:
            return
        assert self.patience is not None
        self._violate("close", child, str(fault), self.patience, since)
        self._kill(child, "patience")

    def _violate(
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
        with self._cond:
            self._violations.append(v)
            self._cond.notify_all()

    async def _watch_frozen(self, child: _Child, budget: float) -> None:
        """While ``child`` is stopped by ``freeze()``: once the client has input waiting in its stdin
        (or has closed it) for ``budget`` seconds, record a violation and kill the child."""
        since: float | None = None
        while child.record.alive and child.record.stopped:
            pending, closed = stdin_state(child.pid)
            now = self.journal.now()
            if pending or closed:
                since = now if since is None else since
                if now - since >= budget:
                    self._violate(
                        "frozen", child, "freeze()", budget, since, pending=pending if pending else -1
                    )
                    self._kill(child, "patience")
                    return
            else:
                since = None
            await asyncio.sleep(_FROZEN_POLL)

    def _gone(self, child: _Child) -> None:
        if self._live.pop(child.cid, None) is None:
            return
        child.writer.close()  # its socket is released now, not when this server is collected
        if child.close_timer is not None:
            child.close_timer.cancel()
        for fut in (child.gone, child.stdin_closed):
            if not fut.done():
                fut.set_result(None)
        self._end_holds(child, "client_closed" if child.ended_by_us is None else "teardown")
        how, code = child.ended_by_us, None
        if child.bye is not None and how in (None, "die fault"):
            how, code = child.bye
        if how == "die fault":
            code = 1
        self._update(
            child, exited_at=self.journal.now(), exit_how=how or "killed", exit_code=code, stopped=False
        )
        if code is None:
            self._spawn(self._record_exit_code(child))
        if self.guarded:
            guardian.forget(child.pid)
        closed_by: ClosedBy = "sidecar" if child.ended_by_us is not None else "client"
        self.journal.update_connection(child.cid, closed_at=self.journal.now(), closed_by=closed_by)

    async def _record_exit_code(self, child: _Child) -> None:
        code = await exit_status(child.pid)
        if code is not None:
            self._update(child, exit_code=code)

    def _update(self, child: _Child, **fields: Any) -> None:
        child.record = dataclasses.replace(child.record, **fields)
        with self._cond:
            self._records[[r.id for r in self._records].index(child.cid)] = child.record
            self._cond.notify_all()

    # -- requests -------------------------------------------------------------------------------------
    async def _on_line(self, child: _Child, body: bytes) -> None:
        j = self.journal
        rid = j.add_request(
            conn_id=child.cid, method="POST", path=self.mcp_path,
            protocol_version=child.headers.get("MCP-Protocol-Version"),
        )  # fmt: skip
        sent = 0
        status: int | None = None
        self._note_ids(child, rid, body)
        try:
            incoming = Incoming("POST", _MCP_PATH, child.headers, list(child.headers.items()), body)
            answer = await self.core.decide(rid, incoming, _ChildTransport(self, child, rid))
            assert answer is not None  # None only for a GET event stream
            status = answer.reply.status
            sent = await self._deliver(child, rid, answer, body)
        except Dropped:
            sent = j.request(rid).bytes_sent  # what a stall wrote before its hold ended stays written
        except Exception as exc:  # a bug of ours: surface it in the test
            self.core.record_error(f"stdio message {body[:80]!r}", exc)
            j.update_request(rid, error=f"{type(exc).__name__}: {exc}", error_by="sidecar")
        finally:
            j.end_request(rid, status=status, bytes_sent=sent)

    async def _on_over(self, child: _Child, size: int) -> None:
        """A stdin line over ``MAX_LINE`` bytes (the child dropped it unread): the client's error,
        journaled, and answered with a JSON-RPC error (``id: null``: the line was never parsed)."""
        j = self.journal
        text = (
            f"stdin line of {size} bytes is over the stdio line limit of {MAX_LINE} bytes "
            "(stdio_max_line); it was dropped unread"
        )
        rid = j.add_request(conn_id=child.cid, method="POST", path=self.mcp_path)
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}
        line = json.dumps(error, separators=(",", ":")) + "\n"
        self._send(child, t="out", d=line)
        j.update_request(rid, error=text, error_by="client")
        j.end_request(rid, status=413, bytes_sent=len(line))

    def _note_ids(self, child: _Child, rid: int, body: bytes) -> None:
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
            cancel = CancelRecord(target, self.journal.now(), reason if isinstance(reason, str) else None)
            self._update(child, cancels=(*child.record.cancels, cancel))

    async def _deliver(self, child: _Child, rid: int, answer: Answer, body: bytes) -> int:
        reply, fault = answer.reply, answer.fault
        sid = reply.headers.get("Mcp-Session-Id")
        if sid and "Mcp-Session-Id" not in child.headers:
            child.headers["Mcp-Session-Id"] = sid
            result = (reply.payload or {}).get("result") if isinstance(reply.payload, dict) else None
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                child.headers["MCP-Protocol-Version"] = version
            self._update(child, session_id=sid)
        line = reply_line(reply, request_id(body))
        if isinstance(fault, F.StdoutNoise):
            self._send(child, t="out", d="".join(fault.text + "\n" for _ in range(fault.lines)))
        elif isinstance(fault, F.StderrFlood):
            self._send(child, t="err", n=fault.bytes)
        if line is None:
            return 0
        if isinstance(fault, F.MalformedJson):
            line = line[: max(1, len(line) // 2)]
        if isinstance(fault, F.Stall):
            head = line[: fault.after_bytes]
            if head:
                self._send(child, t="out", d=head)
            self.journal.update_request(rid, status=reply.status, bytes_sent=len(head.encode()))
            await self._hold(child, rid, fault)
            self._send(child, t="out", d=line[fault.after_bytes :] + "\n")
            return len(line.encode()) + 1
        self._send(child, t="out", d=line + "\n")
        return len(line.encode()) + 1

    async def _hold(self, child: _Child, rid: int, fault: F.Fault) -> None:
        """Hold request ``rid`` until release, the client giving up (stdin closed, the child ended),
        teardown or patience. Raises ``Dropped`` unless released."""
        loop = asyncio.get_running_loop()
        hold = _Hold(rid, loop.create_future())
        child.holds.add(hold)
        j = self.journal
        started = j.now()
        j.update_request(rid, held=True, held_at=started)
        if isinstance(fault, F.Freeze) and not child.record.stopped:
            self._signal(child, signal.SIGSTOP, "SIGSTOP")
            self._update(child, stopped=True)
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
        fields: dict[str, Any] = {"hold": outcome, "waited": now - started}
        if outcome == "client_closed":
            fields.update(client_closed=True, client_closed_at=now)
        j.update_request(rid, **fields)
        if outcome == "patience":
            assert budget is not None
            expected = bool(getattr(fault, "expect_hang", False))
            self._violate("hold", child, str(fault), budget, started, rid=rid, own=own is not None,
                          expected=expected)  # fmt: skip
            self._kill(child, "patience")
        if outcome != "released":
            raise Dropped

    def _end_holds(self, child: _Child, outcome: HoldOutcome) -> None:
        for hold in list(child.holds):
            if not hold.release.done():
                hold.release.set_result(outcome)

    # -- verdicts -------------------------------------------------------------------------------------
    def patience_verdict(self, violations: Sequence[StdioViolation]) -> str:
        """The failure message for patience violations of this server (see ``docs/stdio.md``)."""
        return verdict_text(self.url, self.journal, violations)

    def assert_no_patience_violations(self) -> None:
        from pytest_mcpfaults.sidecar.patience import PatienceError

        v = self.patience_violations
        if v:
            raise PatienceError(self.patience_verdict(v))
