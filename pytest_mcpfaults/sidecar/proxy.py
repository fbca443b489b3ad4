"""Proxy mode: the user's real MCP server as the source of the normal answer (``Sidecar(upstream=URL)``).

Every request the plan does not answer is forwarded to the upstream (:mod:`.upstream`) and its answer
relayed back chunk by chunk (:mod:`.relay`), so body faults cut and stall the real bytes and the tool
faults rewrite the real result. What the sidecar still answers itself, without forwarding:

* the faults that act before forwarding (die, freeze, hang, status, jsonrpc_error, session_expired,
  terminating, error_payload, flap, absent; ``delay`` waits, then forwards);
* ``/health`` unless ``upstream_health`` names the upstream's own health path;
* requests of an era the sidecar's ``era`` leaves out (``era='session'``: ``server/discover`` gets the
  400 a session-only server gives, so clients fall back to sessions; ``era='stateless'``:
  ``initialize`` gets the unsupported-version error), as the fake answers them;
* requests on a transport session the sidecar ended: by ``session_expired`` (the upstream is sent a
  ``DELETE`` for it, so its session ends too) or by ``die`` (every session seen before it, as a
  restarted server has lost them): 404 "Session not found", as the fake answers.

An upstream that gives no answer is surfaced as a gateway does: 502 Bad Gateway (refused, reset,
not HTTP) or 504 Gateway Timeout (no answer within ``upstream_timeout``) with a JSON-RPC error body,
journaled with ``error_by='upstream'`` and ``upstream_failure``. Once the status line has been relayed,
a failing upstream resets the client's connection (the status cannot be taken back).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.inject import Delivery
from pytest_mcpfaults.sidecar.journal import Journal
from pytest_mcpfaults.sidecar.mcp import INVALID_REQUEST, Era, McpEndpoint, Reply, rpc_error
from pytest_mcpfaults.sidecar.relay import relay
from pytest_mcpfaults.sidecar.routing import RequestInfo
from pytest_mcpfaults.sidecar.upstream import Upstream, UpstreamError

__all__ = ["DEFERRED", "Proxy"]

#: Faults whose reply is made after forwarding, from the upstream's answer (the tool still runs).
DEFERRED = (F.ToolError, F.BackendGone)
#: JSON-RPC code of a gateway's error (implementation-defined server error range).
GATEWAY_ERROR = -32000


class Proxy:
    """The proxy-mode half of one sidecar: which requests go upstream, and forwarding them. Loop
    thread only."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        era: Era,
        upstream_health: str | None,
        journal: Journal,
        endpoint: McpEndpoint,
    ) -> None:
        self.upstream = upstream
        self.era = era
        self.upstream_health = upstream_health
        self.journal = journal
        self.endpoint = endpoint  # the fake's endpoint: only for the era gate's answers
        self.seen: set[str] = set()  # transport sessions the upstream assigned, live as far as we know
        self.ended: set[str] = set()  # sessions the sidecar ended (session_expired, die)
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- what the sidecar answers itself ---------------------------------------------------
    async def local(self, info: RequestInfo, headers: Mapping[str, str]) -> Reply | None:
        """The answer the sidecar gives without forwarding (see the module docstring), or ``None``."""
        if info.kind == "health" and self.upstream_health is None:
            return Reply(200, {"status": "ok"}, sse=False)
        if info.kind != "mcp":
            return None
        sid = headers.get("Mcp-Session-Id")
        if sid and sid in self.ended:
            return rpc_error(INVALID_REQUEST, "Session not found", status=404)
        m = info.mcp
        if m is not None and (
            (self.era == "session" and m.era == "stateless")
            or (self.era == "stateless" and m.method == "initialize")
        ):
            return await self.endpoint.post(m, headers)  # the fake's refusal, as a one-era server
        return None

    def end_session(self, sid: str | None, headers: Mapping[str, str]) -> None:
        """``session_expired``: later requests on ``sid`` get 404 here, and the upstream's session is
        ended with a ``DELETE`` (in the background, bounded by the upstream timeout)."""
        if not sid:
            return
        self.ended.add(sid)
        self.seen.discard(sid)
        keep = ("Mcp-Session-Id", "MCP-Protocol-Version", "Authorization")
        pairs = [(k, headers[k]) for k in keep if k in headers]
        task = asyncio.get_running_loop().create_task(self._delete(pairs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete(self, headers: list[tuple[str, str]]) -> None:
        with contextlib.suppress(UpstreamError):
            resp = await self.upstream.send("DELETE", self.upstream.url, headers, b"")
            try:
                await resp.read()
            finally:
                self.upstream.done(resp)

    def forget_all(self) -> None:
        """``die``: every session seen so far is lost, as with a restarted server."""
        self.ended |= self.seen
        self.seen.clear()

    # -- forwarding ------------------------------------------------------------------------
    def target(self, request: web.BaseRequest, info: RequestInfo) -> str:
        """The upstream URL a request goes to: the upstream's MCP URL for the MCP endpoint, its health
        path for ``/health``, the same path on the upstream's origin for anything else."""
        if info.kind == "mcp":
            url = self.upstream.url
        elif info.kind == "health":
            assert self.upstream_health is not None
            url = self.upstream.url_for(self.upstream_health)
        else:
            url = self.upstream.url_for(request.path)
        return url + (f"?{request.query_string}" if request.query_string else "")

    async def forward(
        self,
        request: web.BaseRequest,
        body: bytes,
        info: RequestInfo,
        *,
        rid: int,
        fault: F.Fault | None,
        forced: Reply | None,
        hold: Callable[[], Awaitable[None]],
        out: Delivery,
    ) -> web.StreamResponse | Reply:
        """Forward the request and relay the answer (shaped by ``fault``; ``forced``: a deferred tool
        fault's reply). A :class:`Reply` when the upstream gave no answer (502/504), for the caller
        to deliver."""
        j = self.journal
        j.update_request(rid, upstream_sent_at=j.now())
        try:
            resp = await self.upstream.send(
                request.method,
                self.target(request, info),
                list(request.headers.items()),
                body,
                bound_body=request.method != "GET",
            )
        except UpstreamError as exc:
            failed = {"upstream_failure": exc.failure, "error": str(exc), "error_by": "upstream"}
            j.update_request(rid, upstream_ended_at=j.now(), **failed)
            return self._gateway_error(exc, info)
        j.update_request(rid, upstream_status=resp.status, upstream_answered_at=j.now())
        self._track(request, resp.status, resp.headers)

        completed: list[bool] = []

        def complete() -> None:  # the body is out: the record is finished before the client can close
            if completed:
                return
            completed.append(True)
            j.update_request(
                rid,
                status=out.status,
                bytes_sent=out.bytes_sent,
                body_bytes=out.body_bytes,
                upstream_bytes=resp.received,
                upstream_ended_at=resp_end(),
                ended_at=j.now(),
            )

        def resp_end() -> float:
            return j.now() - (time.monotonic() - resp.ended_at) if resp.ended_at is not None else j.now()

        try:
            mid = info.mcp.id if info.mcp else None
            return await relay(
                request, resp, fault=fault, forced=forced, mid=mid, hold=hold, out=out, complete=complete
            )
        except UpstreamError as exc:  # failed while reading a body to rewrite, before anything was sent
            j.update_request(rid, error=str(exc), error_by="upstream")
            return self._gateway_error(exc, info)
        finally:
            self.upstream.done(resp)
            fields: dict[str, Any] = {"upstream_bytes": resp.received, "upstream_ended_at": resp_end()}
            if resp.failure is not None:
                fields.update(upstream_failure=resp.failure.failure)
                if j.request(rid).error_by is None:
                    fields.update(error=str(resp.failure), error_by="upstream")
            j.update_request(rid, **fields)

    def _track(self, request: web.BaseRequest, status: int, headers: list[tuple[str, str]]) -> None:
        """Keep :attr:`seen` up to date: a session the upstream assigns, one a DELETE ended."""
        for name, value in headers:
            if name.lower() == "mcp-session-id" and value not in self.ended:
                self.seen.add(value)
        if request.method == "DELETE" and 200 <= status < 300:
            self.seen.discard(request.headers.get("Mcp-Session-Id", ""))

    def _gateway_error(self, exc: UpstreamError, info: RequestInfo) -> Reply:
        timed_out = exc.failure == "timed_out"
        status = 504 if timed_out else 502
        what = "Gateway Timeout" if timed_out else "Bad Gateway"
        mid = info.mcp.id if info.mcp is not None else None
        reply = rpc_error(GATEWAY_ERROR, f"{what}: upstream {self.upstream.url}: {exc}", mid, status=status)
        reply.sse = False
        return reply

    async def close(self) -> None:
        """Cancel background DELETEs and close the upstream client (bounded)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=0.5)
        await self.upstream.close()
