"""The upstream of a proxying sidecar: the user's real MCP server, reached over HTTP with aiohttp's client.

One :class:`Upstream` per sidecar, one ``aiohttp.ClientSession`` per upstream, created on the sidecar
loop at the first forwarded request and closed (bounded) when the sidecar stops. A request is sent with
:meth:`Upstream.send`; its answer comes back as an :class:`UpstreamResponse` whose body is read chunk by
chunk as the upstream sends it, so body faults can act on the real bytes. A failure to get an answer
(connection refused, timed out, reset) is raised as :class:`UpstreamError`, which says which it was:
the journal records it as the upstream's (``RequestRecord.error_by == 'upstream'``).

Headers: every end-to-end header the client sent is passed on (``Mcp-Session-Id``,
``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Authorization``, ``Accept``,
``Content-Type``, ``User-Agent``, ``Origin``, ...); hop-by-hop headers (RFC 9110 7.6.1: ``Connection``
and the names it lists, ``Keep-Alive``, ``Transfer-Encoding``, ``TE``, ``Trailer``, ``Upgrade``,
``Proxy-*``) are dropped, and so are ``Host`` (the upstream's own is sent), ``Content-Length``
(recomputed) and ``Expect`` (the body is read already). ``Accept-Encoding: identity`` is sent
instead of the client's, so the answer's bytes are the ones the faults cut. The answer's end-to-end
headers come back the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict

from pytest_mcpfaults.sidecar.config import DEFAULT_UPSTREAM_TIMEOUT
from pytest_mcpfaults.sidecar.journal import UpstreamFailure

__all__ = [
    "HOP_BY_HOP",
    "Upstream",
    "UpstreamError",
    "UpstreamFailure",
    "UpstreamResponse",
    "end_to_end",
]

#: Headers that concern one connection only (RFC 9110 7.6.1, plus the de-facto ``Proxy-Connection``).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Expect: the sidecar has read the whole body already (its own server answered any 100-continue)
_NOT_SENT = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
_NOT_RELAYED = HOP_BY_HOP | {"content-length", "content-encoding"}
#: How long an idle pooled connection to the upstream is kept (below uvicorn's 5 s keep-alive, so the
#: upstream rarely closes a connection the pool is about to reuse).
_KEEPALIVE = 2.0
#: How long closing the client session may take at stop.
_CLOSE_BOUND = 1.0


class UpstreamError(Exception):
    """The upstream gave no (complete) answer; :attr:`failure` says why."""

    def __init__(self, failure: UpstreamFailure, message: str) -> None:
        super().__init__(message)
        self.failure: UpstreamFailure = failure


def end_to_end(pairs: Iterable[tuple[str, str]], drop: frozenset[str]) -> list[tuple[str, str]]:
    """The pairs worth passing on: not in ``drop`` (lower-case names), nor named by a ``Connection``
    header among them."""
    pairs = list(pairs)
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for token in value.split(",")
    }
    return [(n, v) for n, v in pairs if n.lower() not in drop and n.lower() not in named]


def _failure(exc: BaseException) -> UpstreamError:
    """The :class:`UpstreamError` an aiohttp client failure means."""
    if isinstance(exc, UpstreamError):
        return exc
    if isinstance(exc, asyncio.TimeoutError):  # ServerTimeoutError and ConnectionTimeoutError too
        return UpstreamError("timed_out", f"no answer: {type(exc).__name__}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        what = f"{type(exc.os_error).__name__}: {exc.os_error.strerror or exc.os_error}"
        return UpstreamError("refused", f"cannot connect: {what}")
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return UpstreamError("reset", f"connection closed before the answer was complete: {exc}")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)) or (
        isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)
    ):
        return UpstreamError("reset", f"connection reset: {exc}")
    return UpstreamError("error", f"{type(exc).__name__}: {exc}")


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
    _raw: aiohttp.ClientResponse
    received: int = 0  # body bytes read so far
    ended_at: float | None = None  # when the body ended (or failed)
    failure: UpstreamError | None = None

    @property
    def at_eof(self) -> bool:
        """Whether the whole body has come (and been read)."""
        return self._raw.content.is_eof()

    @property
    def sse(self) -> bool:
        return self.content_type == "text/event-stream"

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as the upstream sends it; raises :class:`UpstreamError` when it stops short."""
        content = self._raw.content
        try:
            while True:
                chunk = await content.readany()  # bounded by the request's sock_read timeout, if any
                if not chunk:
                    break
                self.received += len(chunk)
                yield chunk
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            self.failure = _failure(exc)
            self.ended_at = time.monotonic()
            self.close()
            raise self.failure from exc
        self.ended_at = time.monotonic()
        self._raw.release()

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([c async for c in self.chunks()])

    def close(self) -> None:
        """Close the connection (an unread or half-read body cannot go back to the pool)."""
        if self.ended_at is None:
            self.ended_at = time.monotonic()
        self._raw.close()


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
        self.mcp_path = parts.path or "/"
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._open: set[UpstreamResponse] = set()
        self.closed = False

    def url_for(self, path: str) -> str:
        """The upstream URL of ``path`` (a path of the upstream's origin)."""
        return self.origin + path

    def _client(self) -> aiohttp.ClientSession:
        if self.closed:
            raise UpstreamError("refused", "the sidecar has stopped: its upstream client is closed")
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=_KEEPALIVE)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout),
                skip_auto_headers=("User-Agent", "Accept", "Content-Type"),
                cookie_jar=aiohttp.DummyCookieJar(),  # the client's cookies are its own: passed as sent
            )
        return self._session

    async def send(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        *,
        bound_body: bool = True,
    ) -> UpstreamResponse:
        """Send one request; the answer once its status line and headers are in. ``bound_body``:
        bound the gaps between body chunks by the timeout too. Raises :class:`UpstreamError`."""
        out = CIMultiDict(end_to_end(headers, _NOT_SENT))
        for name, value in self.rewrites.items():  # upstream_headers=: set or drop, whatever was sent
            out.popall(name, None)
            if value is not None:
                out[name] = value
        out["Accept-Encoding"] = "identity"
        sent = time.monotonic()
        try:
            # aiohttp's sock_read bounds the wait for the headers and each read of the body after them
            # (ServerTimeoutError); a GET's body is not bounded, so its headers are bounded apart.
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self.timeout, sock_read=self.timeout if bound_body else None
            )
            request = self._client().request(
                method, url, headers=out, data=body or None, allow_redirects=False, timeout=timeout
            )
            if bound_body or self.timeout is None:
                raw = await request
            else:
                raw = await asyncio.wait_for(request, self.timeout)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _failure(exc) from exc
        encoded = "Content-Encoding" in raw.headers
        resp = UpstreamResponse(
            status=raw.status,
            headers=end_to_end(raw.headers.items(), _NOT_RELAYED),
            content_type=raw.content_type,
            content_length=None if encoded else raw.content_length,
            sent_at=sent,
            headers_at=time.monotonic(),
            _raw=raw,
        )
        self._open.add(resp)
        return resp

    def done(self, resp: UpstreamResponse) -> None:
        """Forget ``resp`` (its body was read, or it was closed)."""
        self._open.discard(resp)
        if resp.ended_at is None:
            resp.close()

    async def close(self) -> None:
        """Close every open answer and the client session (its pooled connections). Bounded; once
        closed, :meth:`send` refuses."""
        self.closed = True
        for resp in list(self._open):
            resp.close()
        self._open.clear()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(session.close(), _CLOSE_BOUND)
