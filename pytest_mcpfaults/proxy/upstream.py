"""The upstream of a proxying sidecar: the user's real MCP server, reached over HTTP/1.1 on a small
pool of keep-alive connections of the sidecar loop. An answer's body is read chunk by chunk as the
upstream sends it, so body faults act on the real bytes (sent with ``Accept-Encoding: identity``);
no answer at all is an :class:`UpstreamError` saying why (refused, timed out, reset).

The answer is read by aiohttp's own client protocol (``ResponseHandler``: its response parser, framing,
decompression, the ``sock_read`` bound), not through ``aiohttp.ClientSession``, whose request machinery
cost the sidecar loop about 0.4 ms of CPU per forwarded request, more than the rest of proxying put
together (``benchmarks/proxy.py``).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.http import HttpProcessingError
from aiohttp.streams import StreamReader
from multidict import CIMultiDict
from yarl import URL

from pytest_mcpfaults.core.records import UpstreamFailure
from pytest_mcpfaults.core.timeouts import within
from pytest_mcpfaults.mcp.jsonrpc import Reply, rpc_error
from pytest_mcpfaults.options.checks import DEFAULT_UPSTREAM_TIMEOUT, HOP_BY_HOP, NOT_FORWARDED
from pytest_mcpfaults.proxy.streams import Framing, RelayedStream, StreamLog

#: JSON-RPC code of a gateway's error (the implementation-defined server error range).
GATEWAY_ERROR = -32000

_NOT_RELAYED = HOP_BY_HOP | {"content-length", "content-encoding"}
#: How long an idle pooled connection to the upstream is kept (below uvicorn's 5 s keep-alive, so the
#: upstream rarely closes a connection the pool is about to reuse).
_KEEPALIVE = 2.0
#: Methods sent with ``Content-Length: 0`` when they carry no body (as aiohttp's client sends them).
_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
#: Methods whose request is sent again, once, on a new connection when a reused keep-alive connection
#: turns out to have been closed by the upstream before it answered (RFC 9112 9.3.1; aiohttp does so).
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
#: Read buffer of an upstream connection (aiohttp's default).
_READ_BUFSIZE = 1 << 16


class UpstreamError(Exception):
    """The upstream gave no (complete) answer; :attr:`failure` says why (the journal's
    ``error_by == 'upstream'``)."""

    def __init__(self, failure: UpstreamFailure, message: str) -> None:
        super().__init__(message)
        self.failure: UpstreamFailure = failure


R = TypeVar("R", bound=Reply)


def gateway_error(kind: type[R], exc: UpstreamError, upstream: str, mid: Any, /, **fields: Any) -> R:
    """The reply a gateway answers for an upstream that gave no answer: 504 Gateway Timeout when it
    timed out, else 502 Bad Gateway, with a JSON-RPC error naming the upstream (the upstream's error)."""
    timed_out = exc.failure == "timed_out"
    what = "Gateway Timeout" if timed_out else "Bad Gateway"
    payload = rpc_error(GATEWAY_ERROR, f"{what}: {upstream}: {exc}", mid).payload
    status = 504 if timed_out else 502
    return kind(status, payload, sse=False, error=str(exc), error_by="upstream", **fields)


class Abandoned(Exception):
    """Nobody waits for the rest of an answer being read (the client has gone)."""


def _over(limit: int) -> str:
    return f"over the rewrite_max_bytes limit of {limit} bytes that a fault rewriting it may buffer"


def end_to_end(pairs: Iterable[tuple[str, str]], drop: frozenset[str]) -> list[tuple[str, str]]:
    """The pairs worth passing on: not in ``drop`` (lower-case names), nor named by a ``Connection``
    header among them."""
    kept: list[tuple[str, str, str]] = []  # (lower-case name, name, value)
    named: set[str] = set()
    for name, value in pairs:  # one pass, each name lowered once (every forwarded request and answer)
        lower = name.lower()
        if lower == "connection":
            named.update(token.strip().lower() for token in value.split(","))
        if lower not in drop:
            kept.append((lower, name, value))
    return [(n, v) for lower, n, v in kept if lower not in named]


#: What reading an answer can raise: aiohttp's client errors (timeouts, disconnects, a cut body),
#: socket errors, and a response that is not HTTP.
_READ_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError, HttpProcessingError)


def _failure(exc: BaseException) -> UpstreamError:
    if isinstance(exc, UpstreamError):
        return exc
    if isinstance(exc, asyncio.TimeoutError):  # ServerTimeoutError and ConnectionTimeoutError too
        return UpstreamError("timed_out", f"no answer: {type(exc).__name__}")
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return UpstreamError("reset", f"connection closed before the answer was complete: {exc}")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)) or (
        isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)
    ):
        return UpstreamError("reset", f"connection reset: {exc}")
    return UpstreamError("error", f"{type(exc).__name__}: {exc}")


class _Conn:
    """One kept-alive connection; ``local``: this end's address (the peer the upstream's log names)."""

    __slots__ = ("idle_since", "key", "local", "proto", "reused")

    def __init__(self, key: tuple[str, int, bool], proto: ResponseHandler) -> None:
        self.key, self.proto = key, proto
        self.idle_since = 0.0
        self.reused = False
        transport = proto.transport
        name = transport.get_extra_info("sockname") if transport is not None else None
        if not isinstance(name, tuple) or len(name) < 2:
            self.local = "?"
        else:
            self.local = f"[{name[0]}]:{name[1]}" if ":" in str(name[0]) else f"{name[0]}:{name[1]}"

    @property
    def usable(self) -> bool:
        return self.proto.is_connected() and not self.proto.should_close

    def close(self) -> None:
        self.proto.close()


@functools.lru_cache(maxsize=64)  # the MCP URL and a few paths are what recur
def _target(url: str) -> tuple[tuple[str, int, bool], str, str]:
    """Where ``url`` goes: the pool's key, the ``Host`` header, the request target (percent-encoded as
    aiohttp's client encodes it)."""
    try:
        u = URL(url)
        host, port = u.raw_host or "", u.port or (443 if u.scheme == "https" else 80)
    except ValueError as exc:
        raise UpstreamError("error", f"not a URL the upstream can be sent: {url!r}: {exc}") from exc
    host_header = f"[{host}]" if ":" in host else host
    if not u.is_default_port():
        host_header += f":{port}"
    return (host, port, u.scheme == "https"), host_header, u.raw_path_qs


@dataclass(eq=False)
class UpstreamResponse:
    """One answer of the upstream, its body still coming. Read it once, with :meth:`chunks` or
    :meth:`read`; :meth:`close` drops the connection when the body was not read to its end."""

    status: int
    headers: list[tuple[str, str]]  # end-to-end, as relayed to the client
    content_type: str
    content_length: int | None  # of the body as relayed (None: unknown, or content-encoded upstream)
    sent_at: float  # time.monotonic() when the request was sent
    headers_at: float  # ... when the status line and headers came
    entry: RelayedStream  # this answer in the upstream's stream journal (how it ended, as an HTTP message)
    _payload: StreamReader
    _conn: _Conn
    _upstream: Upstream = field(repr=False)
    received: int = 0  # body bytes read so far
    #: Called with each body chunk as it is read (a cassette's recorder), or ``None``.
    tap: Callable[[bytes], None] | None = None
    ended_at: float | None = None  # when the body ended (or failed)
    failure: UpstreamError | None = None

    @property
    def at_eof(self) -> bool:
        return self._payload.is_eof()

    @property
    def sse(self) -> bool:
        return self.content_type == "text/event-stream"

    @property
    def timeout(self) -> float | None:
        return self._upstream.timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as the upstream sends it; raises :class:`UpstreamError` when it stops short."""
        payload = self._payload
        try:
            while chunk := await payload.readany():  # bounded by the sock_read timeout, if any
                self._took(chunk)
                yield chunk
        except _READ_ERRORS as exc:
            raise self._failed(exc) from exc
        self._ended()

    async def read(
        self,
        *,
        max_bytes: int | None = None,
        within: float | None = None,
        abandoned: Callable[[], bool] = lambda: False,
    ) -> bytes:
        """The whole body, bounded when asked: at most ``max_bytes`` (else :class:`UpstreamError`
        ``'error'``), within ``within`` seconds (else ``'timed_out'``), :class:`Abandoned` as soon as
        ``abandoned()`` says nobody waits for it any more."""
        parts: list[bytes] = []
        chunks = self.chunks()
        deadline = time.monotonic() + within if within is not None else None
        try:
            if max_bytes is not None and self.content_length is not None and self.content_length > max_bytes:
                raise UpstreamError(
                    "error", f"its answer announces {self.content_length} bytes, {_over(max_bytes)}"
                )
            while True:
                step = chunks.__anext__()
                try:
                    if deadline is not None:
                        step = asyncio.wait_for(step, max(deadline - time.monotonic(), 0.0))
                    parts.append(await step)
                except StopAsyncIteration:
                    break
                except asyncio.TimeoutError:
                    raise UpstreamError(
                        "timed_out", f"its answer was not complete within upstream_timeout={within:g} s"
                    ) from None
                if max_bytes is not None and self.received > max_bytes:
                    raise UpstreamError("error", f"its answer is {_over(max_bytes)}")
                if abandoned():
                    raise Abandoned(f"the client left after {self.received} bytes of the answer")
        except (UpstreamError, Abandoned) as exc:
            if self.failure is None:  # (chunks() failed it already)
                self._failed(exc)
            raise
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _took(self, chunk: bytes) -> None:
        self.received += len(chunk)
        self.entry.read(len(chunk))
        if self.tap is not None:
            self.tap(chunk)

    def _ended(self) -> None:
        self.ended_at = time.monotonic()
        self.entry.ended("complete")
        self._upstream.release(self._conn)

    def _failed(self, exc: BaseException) -> UpstreamError:
        if isinstance(exc, Abandoned):  # not the upstream's failure: the connection is dropped
            self.close(f"its client left after {self.received} body bytes")
            return UpstreamError("reset", str(exc))
        self.failure = _failure(exc)
        self.ended_at = time.monotonic()
        cut, framing = str(self.failure), self.entry.framing
        if isinstance(exc, (UpstreamError, asyncio.TimeoutError)):  # the sidecar's bound, not an end
            self.entry.ended("closed by the sidecar", cut)
        else:  # the connection ended (or broke) before the body's end: say what, in its framing
            if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError)):
                if framing == "chunked":
                    cut = "the connection ended without the chunked body's last chunk (0 CRLF CRLF)"
                elif framing == "content-length":
                    announced = f"{self.content_length} bytes announced"
                    cut = f"the connection ended after {self.received} of the {announced}"
            self.entry.ended("cut", cut)
        self.close()
        return self.failure

    def close(self, why: str = "the relay ended before the body (the client left, a fault cut it)") -> None:
        """Close the connection (an unread or half-read body cannot go back to the pool)."""
        if self.ended_at is None:
            self.ended_at = time.monotonic()
        self.entry.ended("closed by the sidecar", why)
        self._upstream.discard(self._conn)


class Upstream:
    """The user's MCP server at ``url``; requests outside its MCP endpoint go to the same origin.

    ``timeout`` bounds connecting plus the status line and headers, and then each gap between two
    chunks of a POST's body; a ``GET`` body (the server's event stream, silent for as long as it has
    nothing to say) is not bounded. ``None``: nothing is bounded. Loop thread only."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT,
        headers: Mapping[str, str | None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.url = url
        #: Header rewrites on every forwarded request: a value replaces the client's, ``None`` drops it.
        self.rewrites = dict(headers or {})
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.timeout = timeout
        self._idle: list[_Conn] = []  # kept-alive connections, the most recently used last
        self._busy: set[_Conn] = set()  # connections a request or an answer holds
        self._expiry: asyncio.TimerHandle | None = None
        self._tls: ssl.SSLContext | None = None
        self._open: set[UpstreamResponse] = set()
        self.closed = False
        #: How each answer ended, as an HTTP message (any thread may :meth:`~StreamLog.snapshot` it).
        self.streams = StreamLog()

    def _head(
        self, method: str, host: str, path: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> bytes:
        kept = end_to_end(headers, NOT_FORWARDED)
        if self.rewrites:  # upstream_headers=: set or drop, whatever was sent
            out: CIMultiDict[str] = CIMultiDict(kept)
            for name, value in self.rewrites.items():
                out.popall(name, None)
                if value is not None:
                    out[name] = value
            kept = list(out.items())
        lines = [f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"]
        lines.extend(f"{name}: {value}\r\n" for name, value in kept)
        lines.append("Accept-Encoding: identity\r\n")
        if body or method not in _BODYLESS:
            lines.append(f"Content-Length: {len(body)}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("utf-8", "surrogateescape")

    async def _connect(self, key: tuple[str, int, bool]) -> _Conn:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.key == key and conn.usable and now - conn.idle_since < _KEEPALIVE:
                conn.reused = True
                self._busy.add(conn)
                return conn
            conn.close()
        host, port, tls = key
        loop = asyncio.get_running_loop()
        if tls and self._tls is None:
            self._tls = ssl.create_default_context()
        connecting = loop.create_connection(
            lambda: ResponseHandler(loop=loop), host, port, ssl=self._tls if tls else None
        )
        try:
            _, proto = await (connecting if self.timeout is None else within(connecting, self.timeout))
        except asyncio.TimeoutError:  # an OSError too (Python 3.11+): timed out, not refused
            raise
        except OSError as exc:  # refused, an unresolvable name, the TLS handshake
            raise UpstreamError(
                "refused", f"cannot connect: {type(exc).__name__}: {exc.strerror or exc}"
            ) from exc
        sock = proto.transport.get_extra_info("socket") if proto.transport is not None else None
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # the head and body go out at once
        conn = _Conn(key, proto)
        self._busy.add(conn)
        return conn

    async def send(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        *,
        bound_body: bool = True,
    ) -> UpstreamResponse:
        """Send one request; the answer once its status line and headers are in. ``bound_body``:
        bound the gaps between body chunks by the timeout too. Raises :class:`UpstreamError`."""
        if self.closed:
            raise UpstreamError("refused", "the sidecar has stopped: its upstream client is closed")
        key, host, path = _target(url)
        data = self._head(method, host, path, headers, body) + body
        sent = time.monotonic()
        conn, message, payload = await self._exchange_retried(key, method, data, bound_body)
        encoded = "Content-Encoding" in message.headers
        ctype = message.headers.get("Content-Type")
        length = message.headers.get("Content-Length")
        content_type = ctype.split(";", 1)[0].strip().lower() if ctype else "application/octet-stream"
        framing: Framing = (
            "chunked" if message.chunked else "content-length" if length is not None else "close-delimited"
        )
        session = next((v for n, v in headers if n.lower() == "mcp-session-id"), None)
        entry = RelayedStream(0, method, path, session, conn.local, message.code, content_type, framing)
        resp = UpstreamResponse(
            status=message.code,
            headers=end_to_end(message.headers.items(), _NOT_RELAYED),
            content_type=content_type,
            content_length=None if encoded or length is None else int(length),
            sent_at=sent,
            headers_at=time.monotonic(),
            entry=self.streams.opened(entry),
            _payload=payload,
            _conn=conn,
            _upstream=self,
        )
        self._open.add(resp)
        return resp

    async def _exchange_retried(
        self, key: tuple[str, int, bool], method: str, data: bytes, bound_body: bool
    ) -> tuple[_Conn, aiohttp.http.RawResponseMessage, StreamReader]:
        for attempt in (1, 2):
            conn: _Conn | None = None
            try:
                conn = await self._connect(key)
                message, payload = await self._exchange(conn, method, data, bound_body)
                return conn, message, payload
            except BaseException as exc:
                if conn is not None:
                    self.discard(conn)
                # a reused connection the upstream had closed before it read the request: once more,
                # on a new one, if sending it twice is harmless (as aiohttp's client does)
                retry = (
                    attempt == 1 and conn is not None and conn.reused and method in _IDEMPOTENT
                    and isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError))
                )  # fmt: skip
                if retry:
                    continue
                if isinstance(exc, _READ_ERRORS):
                    raise _failure(exc) from exc
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _exchange(
        self, conn: _Conn, method: str, data: bytes, bound_body: bool
    ) -> tuple[aiohttp.http.RawResponseMessage, StreamReader]:
        """Write the request on ``conn``; its answer's head (1xx skipped) and body stream. aiohttp's
        ``sock_read`` bounds the gaps in a ``bound_body`` body; the head is bounded here."""
        proto = conn.proto
        proto.set_response_params(
            skip_payload=method == "HEAD",
            read_until_eof=True,
            auto_decompress=True,
            read_timeout=self.timeout if bound_body else None,
            read_bufsize=_READ_BUFSIZE,
        )
        assert proto.transport is not None
        proto.transport.write(data)
        timer = None
        if self.timeout is not None:  # fail the wait for the headers, as aiohttp's sock_read does
            late = aiohttp.ServerTimeoutError(f"no status line and headers within {self.timeout:g} s")
            timer = asyncio.get_running_loop().call_later(self.timeout, proto.set_exception, late)
        try:
            while True:
                message, payload = await proto.read()
                if not 100 <= message.code <= 199 or message.code == 101:
                    return message, payload
        finally:
            if timer is not None:
                timer.cancel()

    def release(self, conn: _Conn) -> None:
        """``conn``'s answer was read to its end: keep it for the next request, if it may be kept."""
        self._busy.discard(conn)
        if self.closed or not conn.usable:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        if self._expiry is None:
            self._expiry = asyncio.get_running_loop().call_later(_KEEPALIVE, self._expire)

    def discard(self, conn: _Conn) -> None:
        self._busy.discard(conn)
        conn.close()

    def _expire(self) -> None:
        self._expiry = None
        now = time.monotonic()
        kept = []
        for conn in self._idle:
            if conn.usable and now - conn.idle_since < _KEEPALIVE:
                kept.append(conn)
            else:
                conn.close()
        self._idle = kept
        if kept:
            wait = _KEEPALIVE - (now - kept[0].idle_since)
            self._expiry = asyncio.get_running_loop().call_later(max(wait, 0.05), self._expire)

    def done(self, resp: UpstreamResponse) -> None:
        self._open.discard(resp)
        if resp.ended_at is None:
            resp.close()

    async def close(self) -> None:
        """Close every open answer and connection (bounded: closing does not wait); :meth:`send` then
        refuses."""
        self.closed = True
        for resp in list(self._open):
            resp.close("the sidecar stopped")
        self._open.clear()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for conn in [*self._idle, *self._busy]:
            conn.close()
        self._idle.clear()
        self._busy.clear()
