"""The control endpoint of the standalone sidecar (``python -m pytest_mcpfaults serve``).

Mounted on the sidecar itself under :data:`CONTROL_PREFIX` (see :meth:`Sidecar.mount`), so harnesses in
any language can inject faults, release held requests, freeze and revive the sidecar and read the journal
over plain HTTP. Every request needs ``Authorization: Bearer <token>``. Control requests are never
subject to faults, freezes or patience, and are not written to the journal as requests.

Its routes and their answers are the table of docs/cli.md, "The control endpoint" (the span routes:
:mod:`pytest_mcpfaults.otlp.control_routes`).

The journal answer is written in pieces, yielding to the loop between them, so a large journal never
stalls the sidecar's own traffic while it is sent (``serve`` keeps a bounded journal: see
:meth:`~pytest_mcpfaults.core.journal.Journal.set_limit`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.records import GROUPS, ConnectionRecord, RequestRecord
from pytest_mcpfaults.options.validation import is_count
from pytest_mcpfaults.otlp.control_routes import (
    MAX_WAITS,
    Handler,
    Query,
    Refused,
    Route,
    SpanWork,
    span_routes,
)
from pytest_mcpfaults.transports.http_io import BodyError, read_bounded
from pytest_mcpfaults.transports.loop import WorkerPool
from pytest_mcpfaults.transports.server import Sidecar

#: Where the control endpoint is mounted on the sidecar.
CONTROL_PREFIX = "/_mcpfaults"
#: Nesting depth refused in a control body (deeper is not a fault list, and would exhaust the stack).
MAX_BODY_DEPTH = 32
#: The shape of ``GET /journal``'s records (1: before a request's groups, ``held``, ``upstream``,
#: ``auth`` and ``cancel``, were objects: ``hold``, ``upstream_status``, ``token`` ... were flat).
JOURNAL_VERSION = 2
_CHUNK = 256  # records serialised between two yields to the loop
_REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
_CONN_FIELDS = tuple(f.name for f in dataclasses.fields(ConnectionRecord))


def _as_dict(record: object, fields: tuple[str, ...]) -> dict[str, Any]:
    """A record as JSON: its fields, a request's groups (flat dataclasses) as objects or ``null``
    (``dataclasses.asdict``, which walks every value, is slower)."""
    out = {name: getattr(record, name) for name in fields}
    for name in GROUPS:
        if (group := out.get(name)) is not None:
            out[name] = dict(vars(group))
    return out


def _journal_head(sidecar: Sidecar) -> dict[str, Any]:
    """The journal answer without its two long lists (``requests``, ``connections``)."""
    journal = sidecar.journal
    return {
        "state": sidecar.state,
        "faults": [str(f) for f in sidecar.plan],
        "version": JOURNAL_VERSION,
        "fired": journal.fired,
        "patience_violations": [
            {
                "request": dataclasses.asdict(v.request),
                "fault": v.fault,
                "budget": v.budget,
                "expected": v.expected,
                "text": v.describe(),
            }
            for v in journal.violations
        ],
        "sessions": list(sidecar.sessions),
        "ended_sessions": list(sidecar.ended_sessions),
        "errors": [repr(e) for e in sidecar.errors],
        "journal_limit": journal.limit,
        "total_requests": journal.total_requests,
        "dropped_requests": journal.dropped_requests,
        "dropped_connections": journal.dropped_connections,
        "span_limit": sidecar.span_recorder.received_limit,
        "dropped_spans": sidecar.span_recorder.dropped_received,
    }


def _query_int(query: Query, name: str, minimum: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if not is_count(value, minimum):
        raise Refused(400, f"query parameter {name} must be an integer >= {minimum}, got {raw!r}")
    return value


def _depth_ok(data: bytes) -> bool:
    """Whether a JSON text nests at most ``MAX_BODY_DEPTH`` deep (brackets inside strings are
    counted too: a real fault list is nowhere near the limit)."""
    depth = 0
    for byte in data:
        if byte in b"[{":
            depth += 1
            if depth > MAX_BODY_DEPTH:
                return False
        elif byte in b"]}":
            depth -= 1
    return True


def _closing(status: int, error: str) -> web.Response:
    """A refusal after which the connection is closed (a body left unread, or still coming)."""
    resp = _reply(status, {"error": error})
    resp.force_close()
    return resp


def _reply(status: int, data: dict[str, Any]) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="mcpfaults"'} if status == 401 else None
    text = json.dumps(data) + "\n"  # a final newline: friendly to curl and line readers
    return web.Response(text=text, status=status, headers=headers, content_type="application/json")


class Control:
    """The control endpoint for one sidecar; :meth:`mount` puts it on the sidecar under ``prefix``.

    Actions call the sidecar's public (blocking) methods on a worker thread of the endpoint's own
    (never asyncio's default pool, never one a span wait holds), so they behave exactly as the Python
    API does and no wait delays them.
    """

    def __init__(
        self, sidecar: Sidecar, token: str, prefix: str = CONTROL_PREFIX, *, max_waits: int = MAX_WAITS
    ) -> None:
        if not isinstance(token, str) or len(token) < 16:
            raise ValueError("Control: token must be a string of at least 16 characters")
        self.sidecar, self.prefix, self._token = sidecar, prefix, token
        self._actions = WorkerPool("mcpfaults-control", max_workers=2)
        self._routes: dict[tuple[str, str], Route] = {
            ("GET", "/faults"): lambda query: self._get_faults,
            ("POST", "/faults"): lambda query: self._post_faults,
            ("DELETE", "/faults"): self._call(sidecar.clear_faults),
            ("POST", "/release"): self._call(sidecar.release),
            ("POST", "/freeze"): self._call(sidecar.freeze),
            ("POST", "/revive"): self._call(sidecar.revive),
            ("GET", "/journal"): self._journal,
            **span_routes(sidecar, SpanWork(max_waits)),
        }

    def mount(self) -> Control:
        self.sidecar.mount(self.prefix, self.handle)
        return self

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Authenticate, route, answer JSON. Runs on the sidecar's loop thread."""
        auth = request.headers.get("Authorization", "")
        scheme, _, given = auth.partition(" ")
        # Header bytes that are not UTF-8 arrive as surrogates (which .encode() refuses): bytes as sent.
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode("utf-8", "surrogateescape"), self._token.encode()
        ):
            why = "missing" if not auth else "wrong"
            return _reply(401, {"error": f"{why} control token: send 'Authorization: Bearer <token>'"})
        sub = request.path[len(self.prefix) :]
        route = self._routes.get((request.method, sub))
        if route is None:
            allowed = sorted(m for m, p in self._routes if p == sub)
            if allowed:
                return _reply(
                    405, {"error": f"{request.method} {request.path}: allowed: {', '.join(allowed)}"}
                )
            paths = sorted({self.prefix + p for _, p in self._routes})
            return _reply(404, {"error": f"no control route {request.path!r}; routes: {', '.join(paths)}"})
        query = Query(request.query)
        try:
            handler = route(query)  # reads the query (refusing a bad value), acts on nothing yet
            if (unknown := query.unknown()) is not None:
                return _reply(400, {"error": f"{request.method} {request.path}: {unknown}"})
            return await handler(request)
        except ConnectionResetError:  # the client hung up mid-request: nobody reads an answer
            return web.Response(status=499)
        except Refused as exc:
            resp = _reply(exc.status, {"error": str(exc)})
            if exc.status == 503:
                resp.headers["Retry-After"] = "1"
            return resp
        except (RuntimeError, ValueError) as exc:  # e.g. freeze on a stopped sidecar
            return _reply(409, {"error": str(exc)})

    async def _get_faults(self, request: web.BaseRequest) -> web.Response:
        return _reply(200, {"faults": [str(f) for f in self.sidecar.plan]})

    async def _read(self, request: web.BaseRequest) -> bytes | web.Response:
        """The body, bounded as the sidecar bounds its own: ``max_body_bytes`` (413) and
        ``idle_timeout`` for a body still arriving (408); else the refusal to send."""
        try:
            body = await read_bounded(
                request, self.sidecar.options.max_body_bytes, self.sidecar.options.idle_timeout
            )
        except BodyError as exc:
            return _closing(exc.status, exc.message)
        if body is None:
            return _closing(413, f"request body over {self.sidecar.options.max_body_bytes} bytes")
        return body

    async def _post_faults(self, request: web.BaseRequest) -> web.Response:
        raw = await self._read(request)
        if isinstance(raw, web.Response):
            return raw
        if not _depth_ok(raw):
            return _reply(400, {"error": f"body nests deeper than {MAX_BODY_DEPTH} levels: not a fault list"})
        try:
            body = json.loads(raw or b"null")
        except (ValueError, RecursionError) as exc:
            return _reply(400, {"error": f"body is not JSON: {exc}"})
        specs = body.get("faults") if isinstance(body, dict) else None
        extra = sorted(set(body) - {"faults"}) if isinstance(body, dict) else []
        if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs) or extra:
            why = f"; unknown key(s) {', '.join(map(repr, extra))}" if extra else ""
            return _reply(
                400, {"error": f'body must be {{"faults": ["<fault spec>", ...]}}{why}, got {body!r}'}
            )
        try:
            plan = [F.parse_fault(s) for s in specs]
        except ValueError as exc:
            return _reply(400, {"error": str(exc)})
        await self._actions.submit(lambda: self.sidecar.inject(*plan))
        return _reply(200, {"added": [str(f) for f in plan], "faults": [str(f) for f in self.sidecar.plan]})

    def _call(self, action: Callable[[], None]) -> Route:
        async def run(request: web.BaseRequest) -> web.Response:
            await self._actions.submit(action)
            return _reply(200, {"state": self.sidecar.state})

        return lambda query: run

    def _journal(self, query: Query) -> Handler:
        since, limit = _query_int(query, "since", 0) or 0, _query_int(query, "limit", 1)
        return lambda request: self._write_journal(request, since, limit)

    async def _write_journal(
        self, request: web.BaseRequest, since: int, limit: int | None
    ) -> web.StreamResponse:
        """The journal (a page of it with ``since=``/``limit=``), written a chunk of records at a time
        with a yield to the loop between chunks: the records are immutable snapshots taken at once."""
        journal = self.sidecar.journal
        requests = journal.requests_since(since, limit)
        # Nothing returned: continue from the same place (a request arriving meanwhile must not be skipped).
        after = requests[-1].id + 1 if requests else since
        more = bool(journal.requests_since(after, 1)) if limit is not None else False
        head = _journal_head(self.sidecar)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json; charset=utf-8"})
        await resp.prepare(request)
        try:
            await resp.write(f'{{"state": {json.dumps(head.pop("state"))}, '.encode())
            await resp.write(f'"faults": {json.dumps(head.pop("faults"))}, "requests": ['.encode())
            await _write_records(resp, requests, _REQUEST_FIELDS)
            await resp.write(b'], "connections": [')
            await _write_records(resp, journal.connections, _CONN_FIELDS)
            tail = json.dumps({**head, "next": after, "more": more})
            await resp.write(b"], " + tail[1:].encode() + b"\n")
            await resp.write_eof()
        except ConnectionResetError:  # the client went away mid-answer
            pass
        return resp


async def _write_records(resp: web.StreamResponse, records: tuple[Any, ...], fields: tuple[str, ...]) -> None:
    for start in range(0, len(records), _CHUNK):
        text = ", ".join(json.dumps(_as_dict(r, fields)) for r in records[start : start + _CHUNK])
        await resp.write(((", " if start else "") + text).encode())
        await asyncio.sleep(0)  # let the sidecar's own traffic through between chunks
