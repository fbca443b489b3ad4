"""Relaying an upstream's answer to the client, shaped by the body fault that fired, on the real bytes.

The proxy's counterpart of :func:`pytest_mcpfaults.transports.inject.deliver`: :func:`relay` writes what
the upstream is sending, chunk by chunk as it arrives, so ``stall(after_bytes=N)`` stalls after the
upstream's first N bytes. The faults that rewrite an answer and ``endless_sse`` on a JSON answer read
the whole answer first; :func:`rewrite` makes the new bytes, in the upstream's framing (JSON or SSE).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import BodyShaper, Shape, halve, shape_of
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.mcp.endpoint import encode, fit_structured
from pytest_mcpfaults.mcp.jsonrpc import Reply, sse_message
from pytest_mcpfaults.proxy.sse_parse import SseParser
from pytest_mcpfaults.proxy.upstream import Abandoned, UpstreamError, UpstreamResponse
from pytest_mcpfaults.transports.inject import Delivery, cut, write_steps

#: A JSON answer of at most this many bytes (its Content-Length) that no body fault shapes is relayed in
#: one write once it has come; anything else is relayed chunk by chunk as the upstream sends it.
_ONE_WRITE = 1 << 16
#: ``rewrite_max_bytes``: the most of an upstream's answer a fault that needs all of it (``tool_error``,
#: ``backend_gone``, ``malformed_json``, ``endless_sse`` on JSON) buffers; a longer answer is a 502. It
#: must also be complete within ``upstream_timeout`` (else 504), and reading stops when the client left.
REWRITE_MAX_BYTES = 16 << 20


def _events(body: bytes) -> list[str]:
    return body.decode("utf-8", errors="replace").replace("\r\n", "\n").split("\n\n")


def _event_message(event: str, mid: Any) -> dict[str, Any] | None:
    data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
    try:
        message = json.loads(data) if data else None
    except ValueError:
        return None
    if isinstance(message, dict) and ("result" in message or "error" in message) and message.get("id") == mid:
        return message
    return None


def listed_response(body: bytes, sse: bool, mid: Any) -> dict[str, Any] | None:
    """The upstream's JSON-RPC response to ``mid`` in ``body`` (JSON, or one of the SSE events)."""
    if not sse:
        try:
            message = json.loads(body)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None
    for event in _events(body):
        message = _event_message(event, mid)
        if message is not None:
            return message
    return None


def _replace_sse(body: bytes, payload: Any, mid: Any) -> bytes:
    """``body`` (an SSE stream) with the event carrying the JSON-RPC response to ``mid`` replaced by
    ``payload``; the other events (notifications, progress) and the event's ``id:`` stay."""
    events = _events(body)
    for i, event in enumerate(events):
        if _event_message(event, mid) is None:
            continue
        lines = event.split("\n")
        kept = [line for line in lines if line.startswith(("id:", "event:", "retry:"))] or ["event: message"]
        events[i] = "\n".join([*kept, f"data: {json.dumps(payload, separators=(',', ':'))}"])
        return "\n\n".join(events).encode()
    return encode(payload, True)[0]  # no response event found: the answer is the forced one alone


def shaped_like(forced: Reply, real: dict[str, Any] | None) -> Any:
    """``forced``'s payload, a successful result shaped like the upstream's ``real`` one (its
    ``structuredContent``)."""
    payload = copy.deepcopy(forced.payload)
    if real is not None and isinstance(real.get("result"), dict) and isinstance(payload.get("result"), dict):
        fit_structured(payload["result"], real["result"])
    return payload


def rewrite(fault: F.Fault, reply: Reply | None, body: bytes, sse: bool, mid: Any) -> bytes:
    """The bytes the client gets instead of the upstream's ``body``: cut in half for
    ``malformed_json``; for ``tool_error`` / ``backend_gone``, the upstream's framing with its response
    replaced by ``reply`` (what :meth:`~pytest_mcpfaults.core.core.SidecarCore.forced_reply` made)."""
    if shape_of(fault).halves:
        return halve(body)
    if reply is None:
        return body
    payload = shaped_like(reply, listed_response(body, sse, mid))
    if sse:
        return _replace_sse(body, payload, mid)
    return encode(payload, False)[0]


async def relay(
    request: web.BaseRequest,
    resp: UpstreamResponse,
    *,
    fault: F.Fault | None,
    forced: Reply | None,
    mid: Any,
    hold: Callable[[], Awaitable[None]],
    out: Delivery,
    complete: Callable[[], None] = lambda: None,
) -> web.StreamResponse:
    """Write the upstream's answer ``resp`` to the client, shaped by the body ``fault`` or rewritten
    (``forced``: a tool fault's reply, for the response to ``mid``). :class:`Dropped` when the connection
    was cut on purpose or the upstream failed after the status line (the client's connection is then
    reset, as a server failing mid-answer looks); an :class:`UpstreamError` before that propagates.
    ``complete``: called before the body's end is sent (a client closing on the last byte then finds
    the request's record finished)."""
    headers = list(resp.headers)
    body: bytes | None = None
    sse = resp.sse
    if fault is None and not sse and resp.content_length is not None and resp.content_length <= _ONE_WRITE:
        body = await resp.read()  # a small JSON answer, no fault to shape it: one write, as a server's
    shape = shape_of(fault)
    rewriter = shape.halves or (fault is not None and fault.rewrites_upstream)
    if (rewriter or shape.open_stream) and (fault_rewrites(fault, resp) or not sse):
        assert fault is not None  # only a fault has a shape or rewrites
        body, headers, sse = await _read_whole(request, resp, fault, forced, mid, headers)
    if shape.resets_at_once:
        if body is None and request.method == "POST":
            await _finish(request, resp)  # the upstream ran the request: its answer ended, unread
        raise cut(request.transport)
    out.status = resp.status
    if body is not None and not shape.open_stream:  # small, or rewritten: one plain answer
        out.bytes_sent = len(body)
        return web.Response(status=resp.status, body=body, headers=headers)
    web_resp = web.StreamResponse(status=resp.status, headers=headers)
    if sse:
        web_resp.content_type = "text/event-stream"
    if body is None and resp.content_length is not None:  # (endless_sse never announces a length)
        web_resp.content_length = out.body_bytes = resp.content_length
    await web_resp.prepare(request)
    if body is not None:  # endless_sse: the whole answer, then the stream stays open
        shaper = BodyShaper(shape)
        await write_steps(request, web_resp, [*shaper.feed(body), *shaper.end()], hold, out)
        complete()
        await web_resp.write_eof()
        return web_resp
    try:
        await _stream(request, web_resp, resp, shape, hold, out, complete if fault is None else None)
    except UpstreamError:  # the upstream failed mid-answer: the status line is out, so cut the client
        raise cut(request.transport) from None
    complete()
    await web_resp.write_eof()
    return web_resp


async def _read_whole(
    request: web.BaseRequest,
    resp: UpstreamResponse,
    fault: F.Fault,
    forced: Reply | None,
    mid: Any,
    headers: list[tuple[str, str]],
) -> tuple[bytes, list[tuple[str, str]], bool]:
    """The whole answer, read (bounded) for a fault that needs all of it: rewritten, or framed as one
    SSE event for ``endless_sse`` on JSON; its bytes, headers and whether it is SSE."""
    sse = resp.sse
    try:
        body = await resp.read(
            max_bytes=REWRITE_MAX_BYTES, within=resp.timeout, abandoned=lambda: _gone(request)
        )
    except Abandoned:
        raise Dropped from None
    if fault_rewrites(fault, resp):
        body = rewrite(fault, forced, body, sse, mid)
    if shape_of(fault).open_stream and not sse:  # a JSON answer, framed as one SSE event
        headers = [(n, v) for n, v in headers if n.lower() != "content-type"]
        body = sse_message(body)
        sse = True
    return body, headers, sse


async def _finish(request: web.BaseRequest, resp: UpstreamResponse) -> None:
    # before a reset that sends none of it: an SSE answer's status line comes before the tool has run, and
    # the proxy table promises the upstream ran the request, so its answer is read (bounded as a rewrite's
    # read: an answer that fails or is too long is reset all the same)
    with contextlib.suppress(UpstreamError, Abandoned):
        await resp.read(max_bytes=REWRITE_MAX_BYTES, within=resp.timeout, abandoned=lambda: _gone(request))


async def _stream(
    request: web.BaseRequest,
    web_resp: web.StreamResponse,
    resp: UpstreamResponse,
    shape: Shape,
    hold: Callable[[], Awaitable[None]],
    out: Delivery,
    complete: Callable[[], None] | None,
) -> None:
    # the body copied chunk by chunk: a streamed body fault acts at its byte offset, or at the end
    shaper = BodyShaper(shape)
    await write_steps(request, web_resp, shaper.start(), hold, out)  # stall before the first byte
    async for chunk in resp.chunks():
        await write_steps(request, web_resp, shaper.feed(chunk), hold, out)
        if resp.at_eof and complete is not None:  # that was the last chunk: the record is finished now
            complete()
    await write_steps(request, web_resp, shaper.end(), hold, out)  # a cut past the end, or its hold


def _gone(request: web.BaseRequest) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def fault_rewrites(fault: F.Fault | None, resp: UpstreamResponse) -> bool:
    """Whether ``fault`` rewrites this answer (the tool faults relay an error status as it is)."""
    if shape_of(fault).halves:
        return True
    return fault is not None and fault.rewrites_upstream and 200 <= resp.status < 300


#: The longest SSE event looked into for a notification; a longer one (a large result) is skipped.
EVENT_MAX_BYTES = 1 << 20


class NotificationTap:
    """An SSE body's notifications (responses, requests and data-less priming events passed over),
    handed to ``notified(method, params)`` as each event ends; chained before the tap ``then`` (which
    gets every chunk, unchanged)."""

    def __init__(self, notified: Callable[[str, Any], None], then: Callable[[bytes], None] | None) -> None:
        self.notified, self.then = notified, then
        self._parser = SseParser(EVENT_MAX_BYTES)

    def feed(self, chunk: bytes) -> None:
        if self.then is not None:
            self.then(chunk)
        for event in self._parser.feed(chunk):
            data = event["data"]
            if data:
                self._event(data)

    def _event(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
            self.notified(message["method"], message.get("params"))
