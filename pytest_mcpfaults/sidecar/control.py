"""The control endpoint of the standalone sidecar (``python -m pytest_mcpfaults serve``).

Mounted on the sidecar itself under :data:`CONTROL_PREFIX` (see :meth:`Sidecar.mount`), so harnesses in
any language can inject faults, release held requests, freeze and revive the sidecar and read the journal
over plain HTTP. Every request needs ``Authorization: Bearer <token>``. Control requests are never
subject to faults, freezes or patience, and are not written to the journal as requests.

=========================  =====================================================================
``GET    /faults``         the plan: ``{"faults": ["status(code=503)@health[times=3]", ...]}``
``POST   /faults``         append faults: body ``{"faults": ["hang@health", ...]}`` (all or none)
``DELETE /faults``         clear the plan (held requests stay held: see ``/release``)
``POST   /release``        let every held request go and end a freeze
``POST   /freeze``         stop answering: hold every request until ``/release`` or ``/revive``
``POST   /revive``         answer again (a frozen sidecar releases what it held)
``GET    /journal``        requests, connections, fired counts, patience violations, state
=========================  =====================================================================
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.sidecar.server import Sidecar

__all__ = ["CONTROL_PREFIX", "Control", "journal_json"]

#: Where the control endpoint is mounted on the sidecar.
CONTROL_PREFIX = "/_mcpfaults"


def journal_json(sidecar: Sidecar) -> dict[str, Any]:
    """Everything the sidecar observed, as a JSON-ready dict."""
    journal = sidecar.journal
    return {
        "state": sidecar.state,
        "faults": [str(f) for f in sidecar.plan],
        "requests": [dataclasses.asdict(r) for r in journal.requests],
        "connections": [dataclasses.asdict(c) for c in journal.connections],
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
    }


def _reply(status: int, data: dict[str, Any]) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="mcpfaults"'} if status == 401 else None
    text = json.dumps(data) + "\n"  # a final newline: friendly to curl and line readers
    return web.Response(text=text, status=status, headers=headers, content_type="application/json")


class Control:
    """The control endpoint for one sidecar; :meth:`mount` puts it on the sidecar under ``prefix``.

    Actions call the sidecar's public (blocking) methods in a worker thread, so they behave exactly as
    the Python API does.
    """

    def __init__(self, sidecar: Sidecar, token: str, prefix: str = CONTROL_PREFIX) -> None:
        if not isinstance(token, str) or len(token) < 16:
            raise ValueError("Control: token must be a string of at least 16 characters")
        self.sidecar, self.prefix, self._token = sidecar, prefix, token
        self._routes: dict[tuple[str, str], Callable[[web.BaseRequest], Awaitable[web.Response]]] = {
            ("GET", "/faults"): self._get_faults,
            ("POST", "/faults"): self._post_faults,
            ("DELETE", "/faults"): self._call(sidecar.clear_faults),
            ("POST", "/release"): self._call(sidecar.release),
            ("POST", "/freeze"): self._call(sidecar.freeze),
            ("POST", "/revive"): self._call(sidecar.revive),
            ("GET", "/journal"): self._journal,
        }

    def mount(self) -> Control:
        """Mount on the sidecar; returns ``self``."""
        self.sidecar.mount(self.prefix, self.handle)
        return self

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Authenticate, route, answer JSON. Runs on the sidecar's loop thread."""
        auth = request.headers.get("Authorization", "")
        scheme, _, given = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self._token.encode()
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
        try:
            return await route(request)
        except (RuntimeError, ValueError) as exc:  # e.g. freeze on a stopped sidecar
            return _reply(409, {"error": str(exc)})

    async def _get_faults(self, request: web.BaseRequest) -> web.Response:
        return _reply(200, {"faults": [str(f) for f in self.sidecar.plan]})

    async def _post_faults(self, request: web.BaseRequest) -> web.Response:
        try:
            body = json.loads(await request.read() or b"null")
        except ValueError as exc:
            return _reply(400, {"error": f"body is not JSON: {exc}"})
        specs = body.get("faults") if isinstance(body, dict) else None
        if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
            return _reply(400, {"error": f'body must be {{"faults": ["<fault spec>", ...]}}, got {body!r}'})
        try:
            plan = [F.parse_fault(s) for s in specs]
        except ValueError as exc:
            return _reply(400, {"error": str(exc)})
        await asyncio.to_thread(self.sidecar.inject, *plan)
        return _reply(200, {"added": [str(f) for f in plan], "faults": [str(f) for f in self.sidecar.plan]})

    def _call(self, action: Callable[[], None]) -> Callable[[web.BaseRequest], Awaitable[web.Response]]:
        async def run(request: web.BaseRequest) -> web.Response:
            await asyncio.to_thread(action)
            return _reply(200, {"state": self.sidecar.state})

        return run

    async def _journal(self, request: web.BaseRequest) -> web.Response:
        return _reply(200, journal_json(self.sidecar))
