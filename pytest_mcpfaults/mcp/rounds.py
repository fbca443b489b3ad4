"""A tool's requests to the client in the stateless era (2026-07-28): input rounds (SEP-2322,
multi round-trip requests). Transport-free.

The 2026-07-28 protocol has no server-to-client requests on a stream: a ``tools/call`` whose tool needs
the client's input is answered with an ``InputRequiredResult`` (``resultType: "input_required"``,
``inputRequests`` keyed by the server, an opaque ``requestState``), and the client retries the call
with ``inputResponses`` under the same keys and the ``requestState`` echoed. The sidecar keeps the
handler suspended between the two: its ``await ctx.elicit(...)`` returns what the retry carried, and
the retry is answered with what the handler does next (its result, or another round). A client that
never retries leaves the handler waiting: the transport watches each round with the patience budget
(:meth:`~pytest_mcpfaults.mcp.outbound.Link.watch_round`), the verdict's "the client never
answered the server's `elicitation/create`".
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_mcpfaults.mcp.outbound import Link, ServerMessages, ToolContext

__all__ = ["InputRounds", "LostRound"]


@dataclass(eq=False)
class _Round:
    task: asyncio.Future[Any]
    tool: str
    ctx: ToolContext
    key: str
    answer: asyncio.Future[dict[str, Any]]
    #: the text of the fault (``drop_client_answer``) that loses this round's answer, if any
    lost_by: str | None = None
    #: the keys of the malformed entries a fault added (``malformed_server_request``)
    copies: tuple[str, ...] = ()
    #: with ``auth=``, the principal of the call: only its retry resumes the round
    principal: str | None = None


@dataclass(frozen=True)
class LostRound:
    """A retry whose round a fault lost: answered as a server that lost its state answers (``why``);
    ``fault``: the fault's text (the journal's ``dropped`` server message names it)."""

    why: str
    fault: str


class InputRounds:
    """The stateless-era calls waiting for the client's retry, by ``requestState``. Loop thread only."""

    def __init__(self) -> None:
        self._open: dict[str, _Round] = {}

    async def next(
        self, task: asyncio.Future[Any], ctx: ToolContext, link: Link, principal: str | None = None
    ) -> dict[str, Any] | None:
        """Run the call's handler (``task``) until it ends (``None``: answer its outcome) or asks the
        client for input: then the ``InputRequiredResult`` to answer, the round kept until the retry
        (of ``principal``, the call's, with ``auth=``)."""
        wanted = asyncio.ensure_future(ctx.next_input())
        await asyncio.wait((task, wanted), return_when=asyncio.FIRST_COMPLETED)
        if not wanted.done():
            wanted.cancel()
            return None
        key, input_request, answer, what = wanted.result()
        token = uuid.uuid4().hex
        requests, lost_by = ctx.faulted_round(key, input_request)  # as the call's fault says, if any
        copies = tuple(k for k in requests if k != key)
        self._open[token] = _Round(task, ctx.tool, ctx, key, answer, lost_by, copies, principal)
        task.add_done_callback(_retrieve)  # a round never retried: its outcome is nobody's
        link.watch_round(answer, what)
        return {"resultType": "input_required", "inputRequests": requests, "requestState": token}

    def resume(
        self,
        token: Any,
        tool: str | None,
        responses: Any,
        messages: ServerMessages,
        retry: ToolContext,
        principal: str | None = None,
    ) -> tuple[asyncio.Future[Any], ToolContext] | str | LostRound:
        """A retry carrying ``requestState`` ``token``: hand its ``inputResponses`` to the suspended
        handler (journaled as the answer to its request) and return the handler and its ``ctx``, now
        sending on this retry's stream (``retry``: the context the retry would have had); or why the
        retry answers no round (the client's mistake); or, for a round a fault loses, the
        :class:`LostRound` (the answer journaled ``dropped``, the handler cancelled). A retry of
        another ``principal`` than the call's (``auth=``) is answered as an unknown ``requestState``
        (as the mcp SDK binds it to the principal), counted on the request's record (``refused``), and
        the round stays open for its own client."""
        rnd = self._open.get(token) if isinstance(token, str) else None
        unknown = f"requestState {token!r} names no input round of this server (unknown, or answered already)"
        if rnd is None:
            return unknown
        if rnd.principal != principal:
            messages.refused({"id": rnd.key})
            return unknown
        if rnd.tool != tool:
            return f"requestState {token!r} is a round of tool {rnd.tool}, not {tool}"
        del self._open[token]
        response = responses.get(rnd.key) if isinstance(responses, Mapping) else None
        for copy in rnd.copies:  # a client that answered a malformed entry too: journaled on its copy
            if isinstance(responses, Mapping) and copy in responses:
                messages.answer({"id": copy, "result": responses[copy]})
        if rnd.lost_by is not None:
            messages.lose(rnd.key, response, rnd.lost_by)
            rnd.task.cancel()
            rnd.answer.cancel()  # its patience watch ends: the retry was answered
            return LostRound(unknown, rnd.lost_by)
        if response is None:
            error = {"code": -32602, "message": f"the retry carried no inputResponses[{rnd.key!r}]"}
            messages.answer({"id": rnd.key, "error": error})
        else:
            messages.answer({"id": rnd.key, "result": response})
        rnd.ctx.rebind(retry)
        return rnd.task, rnd.ctx

    def forget(self) -> None:
        """The process died or stopped: every suspended handler is cancelled."""
        for rnd in self._open.values():
            rnd.task.cancel()
        self._open.clear()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
