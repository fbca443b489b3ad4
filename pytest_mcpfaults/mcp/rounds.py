"""A tool's requests to the client in the stateless era (2026-07-28): input rounds (SEP-2322,
multi round-trip requests). Transport-free.

A ``tools/call`` whose tool needs the client's input is answered with an ``InputRequiredResult``
(``inputRequests`` keyed by the server, an opaque ``requestState``); the client retries the call with
``inputResponses`` under the same keys and the ``requestState`` echoed. The handler stays suspended
between the two, and the retry is answered with what it does next (its result, or another round).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_mcpfaults.mcp.outbound import Link, ServerMessages, ToolContext


@dataclass(eq=False)
class _Round:
    task: asyncio.Future[Any]
    ctx: ToolContext
    key: str
    answer: asyncio.Future[dict[str, Any]]
    lost_by: str | None = None  # the fault that loses this round's answer
    copies: tuple[str, ...] = ()  # the keys of the malformed entries a fault added
    principal: str | None = None


@dataclass(frozen=True)
class LostRound:
    """A retry whose round a fault lost: answered as a server that lost its state answers (``why``)."""

    why: str


class InputRounds:
    """The stateless-era calls waiting for the client's retry, by ``requestState``. Loop thread only."""

    def __init__(self) -> None:
        self._open: dict[str, _Round] = {}

    async def next(
        self, task: asyncio.Future[Any], ctx: ToolContext, link: Link, principal: str | None = None
    ) -> dict[str, Any] | None:
        """Run the call's handler until it ends (``None``) or asks the client for input: then the
        ``InputRequiredResult`` to answer, the round kept until ``principal``'s retry."""
        wanted = asyncio.ensure_future(ctx.next_input())
        await asyncio.wait((task, wanted), return_when=asyncio.FIRST_COMPLETED)
        if not wanted.done():
            wanted.cancel()
            return None
        key, input_request, answer, what = wanted.result()
        token = uuid.uuid4().hex
        requests, lost_by = ctx.faulted_round(key, input_request)  # as the call's fault says, if any
        copies = tuple(k for k in requests if k != key)
        self._open[token] = _Round(task, ctx, key, answer, lost_by, copies, principal)
        task.add_done_callback(_retrieve)  # a round never retried: its outcome is nobody's
        link.watch_round(answer, what)
        return {"resultType": "input_required", "inputRequests": requests, "requestState": token}

    def resume(
        self, params: Mapping[str, Any], messages: ServerMessages, retry: ToolContext, principal: str | None
    ) -> tuple[asyncio.Future[Any], ToolContext] | str | LostRound:
        """A retry (its call's ``params``) carrying ``requestState``: hand its ``inputResponses`` to the
        suspended handler and return the handler and its ``ctx`` (now sending on the ``retry``'s
        stream); or why the retry answers no round; or, for a round a fault loses, the
        :class:`LostRound`. Another ``principal``'s retry is answered as an unknown ``requestState`` (as
        the mcp SDK binds it to the principal) and the round stays open for its own client."""
        token: Any = params.get("requestState")
        responses = params.get("inputResponses")
        rnd = self._open.get(token) if isinstance(token, str) else None
        unknown = f"requestState {token!r} names no input round of this server (unknown, or answered already)"
        if rnd is None:
            return unknown
        if rnd.principal != principal:
            messages.refused({"id": rnd.key})
            return unknown
        if rnd.ctx.tool != retry.tool:
            return f"requestState {token!r} is a round of tool {rnd.ctx.tool}, not {retry.tool}"
        del self._open[token]
        response = responses.get(rnd.key) if isinstance(responses, Mapping) else None
        for copy in rnd.copies:  # a client that answered a malformed entry too: journaled on its copy
            if isinstance(responses, Mapping) and copy in responses:
                messages.answer_status({"id": copy, "result": responses[copy]}, bound=False)
        if rnd.lost_by is not None:
            messages.lose(rnd.key, response, rnd.lost_by)
            rnd.task.cancel()
            rnd.answer.cancel()  # its patience watch ends: the retry was answered
            return LostRound(unknown)
        if response is None:
            error = {"code": -32602, "message": f"the retry carried no inputResponses[{rnd.key!r}]"}
            messages.answer_status({"id": rnd.key, "error": error}, bound=False)
        else:
            messages.answer_status({"id": rnd.key, "result": response}, bound=False)
        rnd.ctx.rebind(retry)
        return rnd.task, rnd.ctx

    def forget(self) -> None:
        for rnd in self._open.values():
            rnd.task.cancel()
        self._open.clear()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
