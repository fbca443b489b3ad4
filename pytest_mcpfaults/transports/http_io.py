"""aiohttp plumbing that the sidecar's listener and the OTLP receiver's own listener share: a low-level
server that reports each connection's opening and loss, and a bounded read of a request body.

Both servers run with aiohttp's own decompression off (``auto_decompress=False``): :func:`read_body`
inflates ``gzip`` and ``deflate`` bodies itself, a piece at a time, and stops as soon as the inflated
size passes the limit (aiohttp inflated every byte received, the rest of a bomb too, on the loop, and
answered another encoding with a 400 of its own before any handler ran).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import http_exceptions, web, web_protocol, web_server

from pytest_mcpfaults.core.timeouts import within

#: The ``Content-Encoding`` values a body may have (``""``: none), and the zlib ``wbits`` of each.
ENCODINGS: dict[str, int] = {"": 0, "identity": 0, "gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
                             "deflate": zlib.MAX_WBITS}  # fmt: skip
_PIECE = 65536  # compressed bytes read, and inflated bytes produced, at a time
#: After answering without reading a whole body (413, 408), drain the rest for at most this long
#: (aiohttp's default: 10 s), then close: a client that keeps sending cannot keep a connection busy.
LINGERING_TIME = 1.0


class BodyError(Exception):
    """A request body refused while it was read: 415 for an encoding not in :data:`ENCODINGS`, 400 for
    a body that does not inflate; ``message`` says which."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class _Redact(logging.Filter):
    """A request aiohttp cannot parse is logged as one line naming what is wrong: never the traceback
    aiohttp logs, whose exception text quotes the offending header line (an ``Authorization`` bearer
    token included). Other errors are logged as aiohttp logs them."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, http_exceptions.HttpProcessingError):
            what = _what_was_wrong(exc)
            record.msg, record.args = "%s refused with 400: %s", (record.getMessage(), what)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _what_was_wrong(exc: http_exceptions.HttpProcessingError) -> str:
    """The parse error's description without the bytes it quotes (``Invalid header value char``,
    ``Got more than 8190 bytes when reading``): whatever follows a colon or a bytes literal goes."""
    text = (exc.message or type(exc).__name__).splitlines()[0]
    for cut in (":", "b'", 'b"', "bytearray("):
        text = text.split(cut, 1)[0]
    return text.strip() or type(exc).__name__


#: The logger of both servers (aiohttp's ``aiohttp.server`` otherwise), with :class:`_Redact`.
LOGGER = logging.getLogger("pytest_mcpfaults.transports.http")
LOGGER.addFilter(_Redact())


class ConnectionReportingServer(web_server.Server):
    """aiohttp's low-level server, with each connection's opening and loss reported to its owner
    (both servers journal their connections), logging to :data:`LOGGER`, lingering
    :data:`LINGERING_TIME` at most, with aiohttp's decompression off (:func:`read_body` inflates)."""

    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
        made: Callable[[web_protocol.RequestHandler, asyncio.Transport], None],
        lost: Callable[[web_protocol.RequestHandler], None],
        **kwargs: Any,
    ) -> None:
        kwargs = {"lingering_time": LINGERING_TIME, "auto_decompress": False, "logger": LOGGER, **kwargs}
        super().__init__(handler, **kwargs)
        self._made, self._lost = made, lost

    def connection_made(self, handler: web_protocol.RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self._made(handler, transport)

    def connection_lost(self, handler: web_protocol.RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self._lost(handler)


def _encoding(request: web.BaseRequest) -> str:
    if "Content-Encoding" not in request.headers:  # nearly every request
        return ""
    encoding = request.headers["Content-Encoding"].strip().lower()
    if encoding not in ENCODINGS or len(request.headers.getall("Content-Encoding", ())) > 1:
        shown = ", ".join(request.headers.getall("Content-Encoding", ()))
        raise BodyError(415, f"Content-Encoding {shown!r} is not supported (gzip, deflate or none)")
    return encoding


async def read_body(request: web.BaseRequest, max_bytes: int) -> bytes | None:
    """The request's whole body, inflated (``gzip``, ``deflate``), or ``None`` once it is over
    ``max_bytes`` (announced or received, inflated or not: never inflated nor buffered beyond that).
    Raises :class:`BodyError` for another encoding (checked first) or a body that does not inflate."""
    wbits = ENCODINGS[_encoding(request)]
    announced = request.content_length
    if announced is not None and announced > max_bytes:
        return None
    if wbits:
        return await _inflate(request, max_bytes, wbits)
    if announced is not None:
        # The body is exactly the announced bytes: usually one read, with no second read for its end.
        first = await request.content.read(announced)
        if len(first) == announced or not first:
            return first
        chunks, size = [first], len(first)
    else:
        chunks, size = [], 0
    while chunk := await request.content.read(_PIECE):
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def read_bounded(request: web.BaseRequest, max_bytes: int, idle_timeout: float | None) -> bytes | None:
    """:func:`read_body`; a body still coming in must be complete within ``idle_timeout``, as headers
    must (else :class:`BodyError` 408)."""
    read = read_body(request, max_bytes)
    if idle_timeout is None or request.content.is_eof():  # the whole body is here already
        return await read
    try:
        return await within(read, idle_timeout)
    except asyncio.TimeoutError:
        raise BodyError(408, f"request body not complete within idle_timeout={idle_timeout:g} s") from None


async def _inflate(request: web.BaseRequest, max_bytes: int, wbits: int) -> bytes | None:
    """Inflate the body a piece at a time, at most ``max_bytes + 1`` bytes in all: a bomb costs what
    it takes to pass the limit, then nothing more (the rest is never inflated)."""
    out: list[bytes] = []
    size = 0
    inflater: Any = None
    try:
        while not (inflater is not None and inflater.eof) and (chunk := await request.content.read(_PIECE)):
            if inflater is None:
                # "deflate" is the zlib format, but some clients send raw deflate (no zlib header)
                raw = wbits == zlib.MAX_WBITS and chunk[0] & 0x0F != 8
                inflater = zlib.decompressobj(-zlib.MAX_WBITS if raw else wbits)
            data = chunk
            while True:
                room = min(_PIECE, max_bytes + 1 - size)
                piece = inflater.decompress(data, room)
                size += len(piece)
                if size > max_bytes:
                    return None
                out.append(piece)
                data = inflater.unconsumed_tail
                if inflater.eof or (not data and len(piece) < room):
                    break
    except zlib.error as exc:
        raise BodyError(400, _undecodable(request, str(exc))) from None
    if inflater is None:
        return b""
    if not inflater.eof:
        raise BodyError(400, _undecodable(request, "it ends before its compressed stream does"))
    return b"".join(out)


def _undecodable(request: web.BaseRequest, why: str) -> str:
    return f"body does not decode ({request.headers['Content-Encoding'].strip()} encoding): {why}"
