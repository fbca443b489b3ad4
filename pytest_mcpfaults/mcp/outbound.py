"""What a tool sends the client on its own during its call: server-to-client requests, whose answers
it awaits, and notifications. Transport-free: the transport does the I/O (:class:`Link`).

As the 2025-11-25 spec's Streamable HTTP transport says for messages related to a request, each goes
on the tool call's own answer (an SSE stream whose last event is the result). Only the session a
request went to answers it (its id, ``mcpfaults-`` and 32 random hex digits, is unguessable): any
other answer is refused, counted on the request's journal record, and the tool keeps waiting.
A server-request fault that fired on the call is armed for it (:attr:`ServerMessages.armed`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pytest_mcpfaults.behaviour.server_requests import Outbound, malformed_event, malformed_input
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.core.records import ServerMessageLog
from pytest_mcpfaults.mcp.jsonrpc import McpRequest

#: The MCP logging levels, least severe first (RFC 5424's).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: The requests a tool can send the client (:meth:`ToolContext.request`).
SERVER_REQUESTS = ("sampling/createMessage", "elicitation/create", "roots/list", "ping")
#: How many duplicate or malformed copies (:meth:`ServerMessages.copy_sent`) await an answer at most.
_COPIES_KEPT = 256
#: Those the stateless era (2026-07-28) has, as input requests of an ``InputRequiredResult``.
INPUT_REQUESTS = ("sampling/createMessage", "elicitation/create", "roots/list")
#: The ``_meta`` key a stateless-era request names its logging level with.
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"


class ClientRequestError(Exception):
    """The client answered a tool's request with a JSON-RPC error (``code``, ``message``). Left
    uncaught in a tool handler it answers the call ``isError: true`` with its text: the client's
    refusal is not the tool's bug."""

    def __init__(self, method: str, code: Any, message: Any) -> None:
        self.method, self.code, self.message = method, code, message
        super().__init__(f"the client answered `{method}` with error {code}: {message}")


class NotInThisEra(Exception):
    """A tool asked for what the call's protocol era does not have (``ping`` in the stateless era)."""


class Link(Protocol):
    """What only the transport can do for a tool call's own messages."""

    async def send_message(self, message: Mapping[str, Any] | bytes, headers: Mapping[str, str]) -> None:
        """One event on the call's answer stream (bytes: framed already), opened with ``headers``."""

    async def await_answer(
        self,
        answer: asyncio.Future[dict[str, Any]],
        what: str,
        dropped: Callable[[], str | None] | None = None,
    ) -> None:
        """Past the patience budget: a violation naming ``what`` and ``dropped()`` (how a fault lost the
        answer), then :class:`~pytest_mcpfaults.core.errors.Dropped`, as when the client goes away."""

    def watch_round(self, answer: asyncio.Future[dict[str, Any]], what: str) -> None:
        """A patience violation naming ``what`` unless a stateless-era round's retry (``answer``) comes in
        time."""


def level_problem(level: Any) -> str | None:
    if isinstance(level, str) and level in LOG_LEVELS:
        return None
    return f"level must be one of {', '.join(LOG_LEVELS)}, got {level!r}"


@dataclasses.dataclass
class _Awaited:
    """Whom a request went to: a transport ``session``, or an input round (only the retry answers)."""

    seq: int
    answer: asyncio.Future[dict[str, Any]]
    session: str | None
    in_round: bool
    refused: int = 0


class ServerMessages:
    """One sidecar's requests to its clients awaiting an answer, by JSON-RPC id; journals every
    message and answer. Loop thread only."""

    def __init__(self, journal: ServerMessageLog) -> None:
        self.journal = journal
        self._pending: dict[str, _Awaited] = {}
        #: A server-request fault armed for a call (by its journal id): what its tool's requests carry.
        self.armed: dict[int, Outbound] = {}
        self._dropping: dict[str, tuple[int, str]] = {}  # id -> (the POST's status, the fault)
        #: the copies a fault sent, by the id they carry: their journal seq and session
        self._copies: dict[Any, list[tuple[int, str | None]]] = {}
        self._dropped_records: dict[str, tuple[float, int, str]] = {}  # id -> (when, status, fault)

    def copy_sent(
        self, mid: Any, outcome: str, effect: Outbound, session: str | None = None, **fields: Any
    ) -> None:
        """Journal a copy a fault sent (``duplicate``, ``malformed``), awaiting an answer carrying ``mid``."""
        seq = self.journal.add_server_message(outcome=outcome, fault=effect.fault, id=mid, **fields)
        kept = self._copies.setdefault(mid, [])
        kept.append((seq, session))
        del kept[:-_COPIES_KEPT]  # a bounded memory of them (serve runs for long; id None is shared)
        while len(self._copies) > _COPIES_KEPT:
            del self._copies[next(iter(self._copies))]

    def dropped(self, mid: str) -> str | None:
        """How a fault lost the client's answer to ``mid``, worded for a verdict, or ``None``."""
        rec = self._dropped_records.get(mid)
        if rec is None:
            return None
        at, status, fault = rec
        return (
            f"it came at {at:.1f} s and `{fault}` answered its POST {status} and never handed it to the tool"
        )

    def new_request(
        self, method: str, params: Any, ctx: ToolContext
    ) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """Its JSON-RPC id (unguessable: a client learns it only from the request) and its answer."""
        mid = f"mcpfaults-{secrets.token_hex(16)}"
        seq = self.journal.add_server_message(
            method=method, request_id=ctx.rid, tool=ctx.tool, params=params, id=mid
        )
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[mid] = _Awaited(seq, fut, ctx.session, ctx.stateless)
        return mid, fut

    def notified(self, method: str, params: Any, rid: int, tool: str | None) -> None:
        self.journal.add_server_message(
            method=method, request_id=rid, tool=tool, params=params, outcome="sent"
        )

    def refused(self, message: Mapping[str, Any]) -> None:
        """A POSTed response refused: counted on the request its id names."""
        mid = message.get("id")
        pending = self._pending.get(mid) if isinstance(mid, str) else None
        if pending is not None:
            pending.refused += 1
            self.journal.update_server_message(pending.seq, refused=pending.refused)

    def answer_status(
        self, message: Mapping[str, Any], session: str | None = None, *, bound: bool = True
    ) -> tuple[int, str | None]:
        """A client's response, POSTed in ``session`` (``bound=False``: carried by a round's retry, which
        proved the round): the status its POST gets (``202``, as the mcp SDK accepts any response of a
        live session, or a dropping fault's) and why it answers nothing (the client's mistake)."""
        mid: Any = message.get("id")
        pending = self._pending.get(mid) if isinstance(mid, str) else None
        if bound and pending is not None and (pending.in_round or pending.session != session):
            self.refused(message)
            whose = (
                "an input request of a stateless-era round (only the call's retry carrying its "
                "requestState answers it)"
                if pending.in_round
                else "a request the sidecar sent another session"
            )
            return 202, f"refused: a response to {whose}, not one of session {session} (id {mid!r})"
        now = self.journal.now()
        answered = {"answered_at": now, "result": message.get("result"), "error": message.get("error")}
        if pending is None:
            copies = self._copies.get(mid) if isinstance(mid, (str, int, type(None))) else None
            mine = [i for i, (_, s) in enumerate(copies or ()) if not bound or s == session]
            if copies and mine:  # an answer to a duplicate or malformed copy: the client's, not a mistake
                self.journal.update_server_message(copies.pop(mine[0])[0], **answered)
                return 202, None
            return 202, f"a response to no request the sidecar is awaiting (id {mid!r})"
        drop = self._dropping.pop(mid, None)
        if drop is not None:  # lost on its way: the tool never hears
            self._close(mid, outcome="dropped", fault=drop[1], **answered)
            self._dropped_records[mid] = (now, *drop)
            return drop[0], None
        self._close(mid, outcome="error" if "error" in message else "answered", **answered)
        if not pending.answer.done():
            pending.answer.set_result(dict(message))
        return 202, None

    def lose(self, mid: str, result: Any, fault: str) -> None:
        """A stateless-era round's answer that ``fault`` lost."""
        self._close(mid, outcome="dropped", answered_at=self.journal.now(), result=result, fault=fault)

    def give_up(self, mid: str) -> None:
        self._dropping.pop(mid, None)
        self._dropped_records.pop(mid, None)
        self._close(mid, outcome="unanswered")

    def _close(self, mid: str, **fields: Any) -> None:
        pending = self._pending.pop(mid, None)
        if pending is not None:
            self.journal.update_server_message(pending.seq, **fields)


class ToolContext:
    """What an ``async def`` tool handler taking ``ctx`` gets for its call: send the client requests
    and await their answers (:meth:`elicit`, :meth:`sample`, :meth:`list_roots`, :meth:`ping`,
    :meth:`request`), and notifications (:meth:`progress`, :meth:`log`), each on the call's own
    answer stream and journaled (``sidecar.journal.server_messages``).

    ``progress_token``: the call's ``_meta.progressToken`` (``None``: no progress asked for);
    ``log_level``: the least severe level the client asked for (``logging/setLevel``, or the
    stateless era's ``_meta["io.modelcontextprotocol/logLevel"]``; ``None``: no log is sent)."""

    def __init__(
        self, messages: ServerMessages, link: Link, req: McpRequest, rid: int, log_levels: Mapping[str, str]
    ) -> None:
        self._messages, self._link, self.rid, self.tool = messages, link, rid, req.tool or ""
        #: No transport session: the stateless era's call (a session-era call always has one, live).
        self.session = req.session_id if req.era == "session" else None
        self.stateless = self.session is None
        self._headers = {"Mcp-Session-Id": self.session} if self.session else {}
        level = req.meta.get(LOG_LEVEL_META) if self.session is None else log_levels.get(self.session)
        self.progress_token = req.meta.get("progressToken")
        self.log_level: str | None = level if level_problem(level) is None else None
        #: The method of the request whose answer the call awaits now.
        self.awaiting: str | None = None
        self._inputs: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[dict[str, Any]], str]] = (
            asyncio.Queue()
        )
        self.effect = messages.armed.get(rid)

    async def next_input(self) -> tuple[str, dict[str, Any], asyncio.Future[dict[str, Any]], str]:
        """A stateless-era call's next input request: key, request, answer future, verdict wording."""
        return await self._inputs.get()

    def rebind(self, retry: ToolContext) -> None:
        """A stateless-era call resumed by a retry: later messages go on the retry's stream."""
        self._link, self.rid, self.effect = retry._link, retry.rid, retry.effect
        self.progress_token, self.log_level = retry.progress_token, retry.log_level

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send the client request ``method`` (one of :data:`SERVER_REQUESTS`) and return its result;
        :class:`ClientRequestError` if the client answers an error."""
        if method not in SERVER_REQUESTS:
            raise ValueError(
                f"ToolContext.request: method must be one of {', '.join(SERVER_REQUESTS)}, got {method!r}"
            )
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"ToolContext.request: params must be a mapping or None, got {params!r}")
        sent_at = self._messages.journal.now()
        if self.stateless and method not in INPUT_REQUESTS:
            raise NotInThisEra(
                f"`{method}` does not exist in the stateless era (2026-07-28): a tool there can ask the "
                f"client only for {', '.join(INPUT_REQUESTS)} (as input requests)"
            )
        mid, fut = self._messages.new_request(method, params, self)
        self.awaiting = method
        how = ", as an input request of its input_required result" if self.stateless else ""
        during = f"during tools/call {self.tool}{how}{self._malformed_note()}"
        what = f"the server's `{method}` (sent at {sent_at:.1f} s {during})"
        try:
            if self.stateless:  # an input round: answered input_required, resumed by the client's retry
                self._inputs.put_nowait((mid, {"method": method, "params": dict(params or {})}, fut, what))
                await fut
            else:
                message: dict[str, Any] = {"jsonrpc": "2.0", "id": mid, "method": method}
                if params is not None:
                    message["params"] = dict(params)
                if self.effect is not None:
                    await self._send_faulted(message)
                else:
                    await self._send(message)
                await self._link.await_answer(fut, what, functools.partial(self._messages.dropped, mid))
        finally:
            self.awaiting = None
            self._messages.give_up(mid)
        answer = fut.result()
        if "error" in answer:
            err = answer["error"] if isinstance(answer["error"], Mapping) else {}
            raise ClientRequestError(method, err.get("code"), err.get("message"))
        return answer.get("result")

    async def elicit(self, message: str, requested_schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``elicitation/create`` (form mode): the result (``{"action": "accept", "content": {...}}``)."""
        schema = (
            dict(requested_schema) if requested_schema is not None else {"type": "object", "properties": {}}
        )
        result = await self.request("elicitation/create", {"message": message, "requestedSchema": schema})
        return result if isinstance(result, dict) else {}

    async def sample(
        self, prompt: str | Sequence[Mapping[str, Any]], *, max_tokens: int = 100, **params: Any
    ) -> dict[str, Any]:
        """``sampling/createMessage``. ``prompt``: a user message's text, or the ``messages`` list;
        ``params``: more of the request's params (``systemPrompt`` ...)."""
        if isinstance(prompt, str):
            messages: list[Any] = [{"role": "user", "content": {"type": "text", "text": prompt}}]
        else:
            messages = [dict(m) for m in prompt]
        result = await self.request(
            "sampling/createMessage", {"messages": messages, "maxTokens": max_tokens, **params}
        )
        return result if isinstance(result, dict) else {}

    async def list_roots(self) -> list[dict[str, Any]]:
        """``roots/list``: the client's roots."""
        result = await self.request("roots/list")
        roots = result.get("roots") if isinstance(result, dict) else None
        return list(roots) if isinstance(roots, list) else []

    async def ping(self) -> None:
        """``ping``: the client answers an empty result."""
        await self.request("ping")

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Send the notification ``method`` as is (no check of whether the client asked for it)."""
        self._messages.notified(method, dict(params), self.rid, self.tool)
        await self._send({"jsonrpc": "2.0", "method": method, "params": dict(params)})

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """``notifications/progress``, if the client asked for progress; whether it was sent."""
        for name, value in (("progress", progress), ("total", total)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise ValueError(f"ToolContext.progress: {name} must be a finite number, got {value!r}")
        if self.progress_token is None:
            return False
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)
        return True

    async def log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """``notifications/message`` at ``level`` (one of :data:`LOG_LEVELS`), if the client asked for
        that level or a less severe one; whether it was sent."""
        problem = level_problem(level)
        if problem is not None:
            raise ValueError(f"ToolContext.log: {problem}")
        if self.log_level is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.notify("notifications/message", params)
        return True

    def _malformed_note(self) -> str:
        effect = self.effect
        if effect is None or effect.malformed is None or (self.stateless and effect.malformed == "no_id"):
            return ""
        where = "beside a malformed entry" if self.stateless else "after a malformed copy"
        return f", {where} from `{effect.fault}`"

    def faulted_round(self, key: str, request: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """A stateless-era round's ``inputRequests`` as the call's fault says (a malformed entry first;
        ``no_id`` has no analogue, the keys being the ids), and the text of the fault that loses the
        round's answer (the first round only), or ``None``."""
        effect, requests = self.effect, {key: dict(request)}
        if effect is None:
            return requests, None
        if effect.malformed is not None and effect.malformed != "no_id":
            bad = f"{key}-malformed"
            requests = {bad: malformed_input(request, effect.malformed), **requests}
            about = {"method": request["method"], "request_id": self.rid, "tool": self.tool}
            self._messages.copy_sent(bad, "malformed", effect, params=request.get("params"), **about)
        if effect.drop_status is None:
            return requests, None
        self.effect = dataclasses.replace(effect, drop_status=None)
        return requests, effect.fault

    async def _send_faulted(self, message: Mapping[str, Any]) -> None:
        """A request sent as the call's fault says (only the first request's answer is dropped)."""
        effect, messages, mid = self.effect, self._messages, str(message["id"])
        assert effect is not None
        about = {
            "method": message["method"],
            "request_id": self.rid,
            "tool": self.tool,
            "session": self.session,
        }
        if effect.drop_status is not None:  # before it is sent: its answer may come at once
            messages._dropping[mid] = (effect.drop_status, effect.fault)
            self.effect = dataclasses.replace(effect, drop_status=None)
        if effect.malformed is not None:
            data, answerable = malformed_event(message, effect.malformed, f"{mid}-malformed")
            messages.copy_sent(answerable, "malformed", effect, params=message.get("params"), **about)
            await self._send(data)
        await self._send(message)
        for _ in range(effect.copies - 1):
            messages.copy_sent(mid, "duplicate", effect, params=message.get("params"), **about)
            await self._send(message)

    async def _send(self, message: Mapping[str, Any] | bytes) -> None:
        try:
            await self._link.send_message(message, self._headers)
        except ConnectionError as exc:  # the client went away: the call ends, not a bug of the tool
            raise Dropped from exc


async def notify_before(
    messages: ServerMessages, link: Link, rid: int, req: McpRequest, count: int, interval: float, holds: bool
) -> None:
    """A fault's ``count`` notifications before the answer to ``req`` (journal id ``rid``) on its stream,
    ``interval`` seconds apart: progress with the request's progress token, or without one log
    messages unless the fault ``holds`` the request."""
    token = req.meta.get("progressToken")
    if token is None and holds:
        return
    headers = {"Mcp-Session-Id": req.session_id} if req.era == "session" and req.session_id else {}
    for i in range(1, count + 1):
        if i > 1 and interval:
            await asyncio.sleep(interval)
        if token is not None:
            method, params = "notifications/progress", {"progressToken": token, "progress": i}
        else:
            data = f"notification {i} of {count}"
            method, params = "notifications/message", {"level": "info", "data": data, "logger": "mcpfaults"}
        messages.notified(method, params, rid, req.tool)
        await link.send_message({"jsonrpc": "2.0", "method": method, "params": params}, headers)
