"""A stdio MCP server as a proxying sidecar's upstream (``Sidecar(upstream_command=[...])``).

The child runs in its own process group (killed with it at stop, bounded), its stderr drained into a
bounded tail so it can never block on it. It speaks one MCP session over its pipes, so the HTTP side
stays the sidecar's: the endpoint keeps the transport sessions, each forwarded request goes down the
pipe with an id of the sidecar's (clients on different HTTP sessions may reuse ids), and the answer
comes back as a :class:`Piped` reply the sidecar delivers as its own, so every body fault acts on those
bytes. docs/proxy.md ("A stdio server as the upstream") says what differs from an HTTP upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_mcpfaults.core.core import Incoming, SidecarCore
from pytest_mcpfaults.core.records import UpstreamLeg
from pytest_mcpfaults.core.routing import RequestInfo
from pytest_mcpfaults.mcp.endpoint import learn_listing
from pytest_mcpfaults.mcp.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    McpRequest,
    Reply,
    client_error,
    rpc_error,
)
from pytest_mcpfaults.proxy.cassette.recorder import Recorder
from pytest_mcpfaults.proxy.lifecycle import signal_group
from pytest_mcpfaults.proxy.relay import shaped_like
from pytest_mcpfaults.proxy.upstream import UpstreamError, gateway_error
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.transports.loop import cancel_all

#: How long the child gets after SIGTERM, and then after SIGKILL.
_TERM_BOUND = 1.0
#: The longest line read from the child's stdout.
_LINE_LIMIT = 64 << 20
#: How much of the child's stderr is kept (its tail), for error messages.
_STDERR_TAIL = 8192
#: ``upstream_write_buffer``: how many bytes may wait for the child to read its stdin before a request
#: waits for room (within ``upstream_timeout``; then 504). One message is written whole on top of it.
WRITE_BUFFER = 1 << 20


@dataclass
class Piped(Reply):
    """The child's answer (or the gateway error for none), with the upstream leg to journal."""

    leg: UpstreamLeg | None = None


class StdioUpstream:
    """The child process of one sidecar and the core's :class:`~.core.Upstream` over it. Loop
    thread only."""

    def __init__(self, command: Sequence[str], sidecar_core: SidecarCore, recorder: Recorder | None) -> None:
        self.command = list(command)
        #: ``record=``: the cassette each whole answer of the child is recorded into.
        self.recorder = recorder
        self.timeout = sidecar_core.options.upstream_timeout
        self.endpoint = sidecar_core.mcp
        self.journal = sidecar_core.journal
        self.pid: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr = bytearray()
        self._gone: UpstreamError | None = None
        self._on_error = sidecar_core.record_error
        #: Lines of its stdout that answered no request (skipped), and, for error messages, how many
        #: and the last one's reason (empty when none was).
        self.skipped = 0
        self.skipped_note = ""

    @property
    def name(self) -> str:
        return " ".join(self.command)

    # -- the process -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn the child. Raises ``OSError`` (the program cannot be run) with the command named."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: stop() kills the tree it started
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            raise OSError(
                exc.errno, f"Sidecar: upstream_command {self.command!r} cannot be run: {exc}"
            ) from exc
        self.pid = self._proc.pid
        guardian.watch(self.pid, group=True)  # killed with its group should this process die abruptly
        stdout, stderr = self._proc.stdout, self._proc.stderr
        assert stdout is not None
        assert stderr is not None
        self._tasks = [asyncio.ensure_future(self._read(stdout)), asyncio.ensure_future(self._drain(stderr))]

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        try:
            while line := await stdout.readline():
                self._dispatch(line)
        except (OSError, ValueError) as exc:  # ValueError: a line over the limit
            self._fail(UpstreamError("reset", f"reading its stdout failed: {exc}"))
            return
        except Exception as exc:  # a bug of ours: surfaced, and no request waits for a dead reader
            self._on_error(f"reading the stdout of upstream command {self.name!r}", exc)
            self._fail(UpstreamError("reset", f"reading its stdout failed: {type(exc).__name__}: {exc}"))
            return
        code = await self._wait(_TERM_BOUND)
        tail = bytes(self._stderr[-400:]).decode("utf-8", "replace").strip()
        why = f"exited (code {code})" if code is not None else "closed its stdout"
        why += f"; its stderr ends: {tail}" if tail else ""
        self._fail(UpstreamError("reset", f"the upstream process {why}"))

    async def _drain(self, stderr: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while chunk := await stderr.read(4096):
                self._stderr += chunk
                del self._stderr[:-_STDERR_TAIL]

    async def _wait(self, bound: float) -> int | None:
        assert self._proc is not None
        with contextlib.suppress(asyncio.TimeoutError):
            return await asyncio.wait_for(self._proc.wait(), bound)
        return None

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:  # not JSON (a stray print): nothing to match it to
            why = "that is not JSON" if isinstance(exc, ValueError) else "of JSON nested too deep to parse"
            self._skip(f"a line of {len(line)} bytes {why}")
            return
        if not isinstance(message, dict):
            self._skip(f"a line of {len(line)} bytes that is JSON but not an object")
            return
        if "method" in message:  # the child asks (sampling, roots) or notifies: no client to ask
            if "id" in message:
                error = {"code": METHOD_NOT_FOUND, "message": "Method not found (via a sidecar)"}
                with contextlib.suppress(UpstreamError, OSError):
                    self._write({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        mid = message.get("id")
        fut = self._pending.pop(mid, None) if type(mid) is int else None  # not True for 1
        if fut is None:  # another id than sent (a string, a late answer after a 504): answers nothing
            self._skip(f"an answer with id {mid!r}, which no request waits for")
        elif not fut.done():
            fut.set_result(message)

    def _skip(self, why: str) -> None:
        self.skipped += 1
        self.skipped_note = (
            f"; it wrote {self.skipped} line(s) that answered no request, skipped (the last: {why})"
        )

    def _fail(self, gone: UpstreamError) -> None:
        self._gone = gone
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(gone)

    def _write(self, message: Mapping[str, Any]) -> None:
        if self._gone is not None:
            raise self._gone
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            raise UpstreamError("refused", "the upstream process is not running")
        proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    async def _send(self, message: Mapping[str, Any], timeout: float | None) -> None:
        """Write ``message`` once fewer than :data:`WRITE_BUFFER` bytes wait for the child to read
        them; wait for that at most ``timeout`` (a child that stopped reading its stdin costs each
        request its ``upstream_timeout``, and the sidecar's memory stays bounded)."""
        proc = self._proc
        stdin = proc.stdin if proc is not None else None
        if stdin is not None and not stdin.is_closing():
            waiting = stdin.transport.get_write_buffer_size()
            if waiting > WRITE_BUFFER:
                with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                    await asyncio.wait_for(stdin.drain(), timeout)
                waiting = stdin.transport.get_write_buffer_size()
                if waiting > WRITE_BUFFER:
                    raise UpstreamError(
                        "timed_out",
                        f"it is not reading its stdin: {waiting} bytes wait in the pipe, over the "
                        f"upstream_write_buffer of {WRITE_BUFFER} bytes, for upstream_timeout={timeout} s",
                    )
        self._write(message)

    async def close(self) -> None:
        """Kill the child's process group (SIGTERM, then SIGKILL); bounded, idempotent."""
        proc = self._proc
        if proc is None:
            return
        self._fail(UpstreamError("refused", "the sidecar has stopped"))
        if proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                signal_group(proc.pid, sig)
                if await self._wait(_TERM_BOUND) is not None:
                    break
        signal_group(proc.pid, signal.SIGKILL)  # what it started, if still there
        guardian.forget(proc.pid)
        await cancel_all(self._tasks, _TERM_BOUND)
        self._proc = None  # closed: a second close() signals nothing (its pid may be reused)

    # -- the core's Upstream ---------------------------------------------------------------------
    async def answer(self, incoming: Incoming, info: RequestInfo, forced: Reply | None) -> Reply | None:
        if info.kind != "mcp":
            return None  # health and other paths: the sidecar's own
        sid = incoming.headers.get("Mcp-Session-Id")
        if sid and sid in self.endpoint.sessions.ended:
            return rpc_error(INVALID_REQUEST, "Session not found", status=404)
        if incoming.method == "DELETE":
            sent = time.monotonic()
            deleted = self.endpoint.delete(sid)
            self._record(incoming, None, deleted, sent)
            return deleted
        if incoming.method != "POST":
            return Reply(405, None, {"Allow": "POST, DELETE"})
        m = info.mcp
        if m is None:
            assert info.bad_body is not None
            return info.bad_body
        if m.era == "stateless":
            return client_error(INVALID_REQUEST, "Bad Request: Missing session ID")
        if m.method != "initialize":
            problem = self.endpoint.check_session(m.session_id)
            if problem is not None:
                return problem
        sent = time.monotonic()
        reply = await self._forward(m, forced)
        if forced is None:  # a rewritten answer is not what the child said
            self._record(incoming, m, reply, sent)
        return reply

    def _record(self, incoming: Incoming, m: McpRequest | None, reply: Reply, sent: float) -> None:
        """Record a whole answer of the child (``record=``); a gateway error is not the child's."""
        if self.recorder is None or reply.error_by is not None:
            return
        body = json.dumps(reply.payload).encode() if reply.payload is not None else b""
        pending = self.recorder.start(
            incoming.method, incoming.headers, m, status=reply.status, response_headers=reply.headers.items(),
            content_type="application/json", sent_at=sent, headers_at=time.monotonic(),
        )  # fmt: skip
        pending.feed(body)  # the whole answer at once
        self.recorder.finish(pending, complete=True)

    async def _forward(self, m: McpRequest, forced: Reply | None) -> Reply:
        headers = {"Mcp-Session-Id": m.session_id} if m.session_id else {}
        sent = time.monotonic()
        leg = UpstreamLeg(sent - self.journal.t0)
        try:
            if m.method is None or m.is_notification:  # a response or a notification: written, 202
                await self._send(m.message, self.timeout)
                return Piped(202, headers=headers, leg=replace(leg, ended_at=self.journal.now()))
            pipe_id = next(self._ids)
            fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._pending[pipe_id] = fut
            try:
                deadline = time.monotonic() + self.timeout if self.timeout is not None else None
                await self._send({**m.message, "id": pipe_id}, self.timeout)
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                answer = await asyncio.wait_for(fut, left)
            except asyncio.TimeoutError:
                raise UpstreamError(
                    "timed_out", f"no answer within upstream_timeout={self.timeout} s{self.skipped_note}"
                ) from None
            finally:
                self._pending.pop(pipe_id, None)
        except UpstreamError as gone:
            return self._gateway_error(gone, m.id, leg)
        except OSError as exc:  # a broken pipe: the child is gone
            broken = UpstreamError("reset", f"writing to its stdin failed: {exc}")
            return self._gateway_error(broken, m.id, leg)
        out_bytes = len(json.dumps(answer, separators=(",", ":")).encode()) + 1
        now = self.journal.now()
        leg = replace(leg, answered_at=now, ended_at=now, bytes=out_bytes)
        answer["id"] = m.id
        if m.method == "initialize" and "result" in answer:
            result = answer["result"]
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            headers = {"Mcp-Session-Id": self.endpoint.sessions.open(str(version or ""), None)}
        if m.method == "tools/list":  # the tools' output schemas, for a fault answering in place
            learn_listing(self.endpoint.listed_schemas, answer)
        if forced is not None and "result" in answer:
            forced.headers.update(headers)
            return Piped(forced.status, shaped_like(forced, answer), forced.headers, sse=forced.sse, leg=leg)
        return Piped(200, answer, headers, leg=leg)

    def _gateway_error(self, gone: UpstreamError, mid: Any, leg: UpstreamLeg) -> Piped:
        leg = replace(leg, ended_at=self.journal.now(), failure=gone.failure)
        return gateway_error(Piped, gone, f"upstream command {self.name!r}", mid, leg=leg)
