"""The sidecar's journal: every request and every connection, readable from the test thread.

The loop thread writes; any thread reads. Readers get frozen snapshots (:class:`RequestRecord`,
:class:`ConnectionRecord`), never live objects, and can wait for a condition without sleeping.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar

from pytest_mcpfaults import events
from pytest_mcpfaults.fault_types import fault_kinds
from pytest_mcpfaults.sidecar.mcp import ErrorBy, RequestEra
from pytest_mcpfaults.validation import is_count

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Answered",
    "BudgetSource",
    "CancelHow",
    "CancelOutcome",
    "CancellationRecord",
    "ClosedBy",
    "ConnectionFields",
    "ConnectionRecord",
    "FiredRecord",
    "HoldOutcome",
    "Journal",
    "PatienceViolation",
    "RecordLog",
    "RequestFields",
    "RequestRecord",
    "ServerMessageLog",
    "ServerMessageOutcome",
    "ServerMessageRecord",
    "StreamRecord",
    "UpstreamFailure",
    "answered",
]

HoldOutcome = Literal["released", "client_closed", "patience", "teardown", "cancelled"]
"""How a held request ended (:attr:`RequestRecord.hold`)."""
CancelOutcome = Literal["stopped", "ignored", "answered"]
"""What the sidecar did with a request the client cancelled while it was in flight
(:attr:`RequestRecord.cancel_outcome`)."""
CancelHow = Literal["notification", "closed"]
"""How the client cancelled (:attr:`CancellationRecord.how`): a ``notifications/cancelled``, or (the
2026-07-28 era's cancellation) closing the request's response stream."""
ClosedBy = Literal["client", "sidecar"]
"""Who closed a connection (:attr:`ConnectionRecord.closed_by`)."""
BudgetSource = Literal["fault", "sidecar"]
"""Where a patience budget came from (:attr:`PatienceViolation.budget_from`)."""
Answered = Literal["none", "partial", "complete"]
"""What the client had received of a held request (:func:`answered`)."""
UpstreamFailure = Literal["refused", "timed_out", "reset", "error"]
"""Why a proxying sidecar's upstream gave no (complete) answer (:attr:`RequestRecord.upstream_failure`):
``'refused'`` (no connection: nothing listens there, or the name does not resolve), ``'timed_out'`` (no
answer within ``upstream_timeout``), ``'reset'`` (the connection was reset or closed before the answer
was complete) or ``'error'`` (anything else, e.g. an answer that is not HTTP)."""

ServerMessageOutcome = Literal["sent", "answered", "error", "unanswered", "dropped", "duplicate", "malformed"]
"""What became of a message the sidecar sent on its own (:attr:`ServerMessageRecord.outcome`)."""


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request as the sidecar saw it. Times are seconds since the sidecar started.

    ``hold`` says how a held request ended: ``'released'`` (``release()``), ``'client_closed'`` (the
    client gave up), ``'patience'`` (the budget ran out and the sidecar aborted the connection),
    ``'teardown'`` (the sidecar stopped), or ``None`` when it was never held. ``held_at`` is when the
    hold began; ``user_agent`` and ``protocol_version`` are the request's ``User-Agent`` and
    ``MCP-Protocol-Version`` headers (``None`` when absent): what the sidecar knows of the client;
    ``body_bytes`` the announced ``Content-Length`` of a response held while its body was streamed.
    ``tool``, ``prompt`` and ``resource`` are what a ``tools/call``, a ``prompts/get`` and a
    ``resources/read`` / ``subscribe`` / ``unsubscribe`` named (the tool's and prompt's names, the URI).

    ``rpc_id`` is the JSON-RPC id of an MCP request (``None`` for a notification or a non-MCP request);
    ``cancelled_at`` when a cancellation naming it arrived while it was in flight (see
    :class:`CancellationRecord`) and ``cancel_outcome`` what the sidecar did then: ``'stopped'`` (its
    tool stopped, no JSON-RPC response sent), ``'ignored'`` (``ignore_cancel``: it ran on
    and was answered in full), ``'answered'`` (``answer_after_cancel``: released and answered in full);
    ``None`` when the cancel came too late to change the answer (it was being sent). ``ran_on``: the
    call was stopped (cancelled, past ``tool_timeout``, at teardown) while its sync tool handler ran on
    a worker thread, which the sidecar cannot stop: the handler ran on, and what it returned was not
    sent; ``ran_until`` is when it ended (``None`` while it still runs).
    ``last_event_id`` is the request's ``Last-Event-ID`` header (a client resuming a stream:
    :class:`StreamRecord`).

    ``error`` says what went wrong and ``error_by`` whose it was: ``'client'`` (a mistake in the
    request, answered with the protocol's own error; never a sidecar error), ``'tool'`` (the tool's
    handler raised or ran past ``tool_timeout``: re-raised in the test), ``'upstream'`` (a proxying
    sidecar's upstream was refused, timed out or reset: see ``upstream_failure``; not re-raised, the
    client got what a gateway answers) or ``'sidecar'`` (a bug of the sidecar: 500, re-raised in the
    test); both ``None`` when nothing went wrong.

    The upstream leg (proxy mode, ``Sidecar(upstream=...)``; all ``None``/0 for a request the sidecar
    answered itself): ``upstream_sent_at`` when the request was forwarded, ``upstream_answered_at`` when
    the upstream's status line and headers came, ``upstream_ended_at`` when its body ended (or it
    failed); ``upstream_status`` its HTTP status, ``upstream_bytes`` the body bytes it sent (what the
    client got is ``status`` and ``bytes_sent``), and ``upstream_failure`` why it gave no complete
    answer (``'refused'``, ``'timed_out'``, ``'reset'``, ``'error'``).

    With ``auth=`` (docs/auth.md): ``token`` names the bearer token an MCP request carried (``'t1'``,
    ``'t2'`` ... as the sidecar issued them, ``'static1'`` ... as ``auth=`` lists them, ``'unknown'``;
    ``None``: no token), ``auth_error`` the ``error`` of the challenge it was refused with
    (``'invalid_token'``, ``'insufficient_scope'``; ``'missing'``: no token was sent); a token request
    records its ``grant`` (``grant_type``: ``'authorization_code'``, ``'client_credentials'``,
    ``'refresh_token'``) and the token it ``issued``; a request to the authorization server by a client
    registered at its registration endpoint names it in ``client`` (``'c1'``, ``'c2'`` ... in the order
    they registered: the registration itself, its authorization requests, its token requests).
    """

    id: int
    conn_id: int
    method: str
    path: str
    mcp_method: str | None = None
    tool: str | None = None
    prompt: str | None = None
    resource: str | None = None
    session_id: str | None = None
    era: RequestEra | None = None
    status: int | None = None
    bytes_sent: int = 0
    body_bytes: int | None = None
    fault: str | None = None
    fault_kind: str | None = None
    held: bool = False
    held_at: float | None = None
    hold: HoldOutcome | None = None
    waited: float | None = None
    client_closed: bool = False
    client_closed_at: float | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    error: str | None = None
    error_by: ErrorBy | None = None
    user_agent: str | None = None
    protocol_version: str | None = None
    upstream_sent_at: float | None = None
    upstream_answered_at: float | None = None
    upstream_ended_at: float | None = None
    upstream_status: int | None = None
    upstream_bytes: int = 0
    upstream_failure: UpstreamFailure | None = None
    token: str | None = None
    auth_error: str | None = None
    grant: str | None = None
    issued: str | None = None
    client: str | None = None
    rpc_id: str | int | float | None = None
    cancelled_at: float | None = None
    cancel_outcome: CancelOutcome | None = None
    last_event_id: str | None = None
    ran_on: bool = False
    ran_until: float | None = None

    @property
    def forwarded(self) -> bool:
        """Whether the request was forwarded to the upstream (proxy mode)."""
        return self.upstream_sent_at is not None

    @property
    def upstream_time(self) -> float | None:
        """Seconds from forwarding the request to the end of the upstream's answer (or its failure);
        ``None`` when not forwarded or not ended yet."""
        if self.upstream_sent_at is None or self.upstream_ended_at is None:
            return None
        return self.upstream_ended_at - self.upstream_sent_at

    @property
    def label(self) -> str:
        """``'POST tools/call delete_session'``-style label used in sequences and messages."""
        parts = [self.method, self.mcp_method or self.path]
        named = self.tool or self.prompt or self.resource
        if named:
            parts.append(named)
        return " ".join(parts)

    @property
    def done(self) -> bool:
        return self.ended_at is not None


@dataclass(frozen=True)
class ServerMessageRecord:
    """A message the sidecar sent the client on its own, on the answer stream of request
    ``request_id`` (a ``tools/call``, whose tool is ``tool``): a server-to-client request
    (``sampling/createMessage``, ``elicitation/create``, ``roots/list``, ``ping``; ``id`` is its
    JSON-RPC id) or a notification (``notifications/progress``, ``notifications/message``; ``id`` is
    ``None``). Times are seconds since the sidecar started.

    ``outcome``: ``'sent'`` (a notification), ``None`` (a request still awaiting its answer),
    ``'answered'`` (the client POSTed a result: ``result``), ``'error'`` (it POSTed a JSON-RPC error:
    ``error``, e.g. ``Elicitation not supported`` from a client without that callback) or
    ``'unanswered'`` (the tool call ended first: the patience budget ran out, the client closed the
    stream, or the sidecar stopped). ``answered_at`` is when the answer came.

    Written by a server-request fault (``fault`` is its text): ``'dropped'`` (``drop_client_answer``:
    the client answered, ``answered_at`` and ``result`` / ``error`` say when and what, and the answer
    never reached the tool), ``'duplicate'`` (a copy ``duplicate_server_request`` sent again with the
    same ``id``) and ``'malformed'`` (the malformed copy ``malformed_server_request`` sent first, its
    ``id`` the one it carried, ``None`` when a client could read none). A duplicate or malformed copy
    the client answered has ``answered_at`` and its ``result`` / ``error`` too.

    ``refused``: how many answers carrying its ``id`` the sidecar refused (the request still awaits
    its own client's): POSTed in another session, in none, or in an unknown one or one another
    principal opened (``auth=``), or, for a stateless-era input request, anything but the call's
    retry carrying the round's ``requestState`` (a bare POSTed response, a retry of another
    principal). A POST the ``auth=`` layer refuses (``401``) does not count: it never gets this far.
    The POST's own record says why (``error``, ``error_by="client"``)."""

    seq: int
    method: str
    request_id: int
    sent_at: float
    tool: str | None = None
    params: Any = None
    id: str | None = None
    outcome: ServerMessageOutcome | None = None
    answered_at: float | None = None
    result: Any = None
    error: Any = None
    fault: str | None = None
    refused: int = 0

    @property
    def is_request(self) -> bool:
        """Whether this is a request (it awaits an answer), not a notification."""
        return self.id is not None

    @property
    def label(self) -> str:
        """e.g. ``elicitation/create during tools/call ask_user``."""
        return f"{self.method} during tools/call {self.tool}" if self.tool else self.method


@dataclass(frozen=True)
class ConnectionRecord:
    """One TCP connection. ``closed_by`` is ``'client'`` or ``'sidecar'``, ``None`` while open;
    ``timed_out``: the sidecar closed it because no complete request came within ``idle_timeout``
    (an idle keep-alive connection, or one sending its headers too slowly)."""

    id: int
    peer: str
    opened_at: float
    closed_at: float | None = None
    closed_by: ClosedBy | None = None
    requests: int = 0
    timed_out: bool = False

    @property
    def open(self) -> bool:
        return self.closed_at is None


@dataclass(frozen=True)
class FiredRecord:
    """A fault that fired: its kind, when (seconds since the sidecar started), the request it fired on
    (``None`` for one the test called, such as ``kill()``), ``what`` fired it in words (the fault's
    text, or the runtime call: ``'kill()'``), ``next_request``, the id the next request to arrive
    after it would get (the requests since are those with ids from there on, the fired one aside), and
    ``expect_hang``, the fault's own ``expect_hang`` (the test expects its client to wait)."""

    at: float
    kind: str
    request_id: int | None = None
    what: str | None = None
    next_request: int = 0
    expect_hang: bool = False


@dataclass(frozen=True)
class CancellationRecord:
    """The client cancelled a request: a ``notifications/cancelled`` (``how='notification'``; its own
    record is ``notification``), or, in the 2026-07-28 era, closing an in-flight request's response
    stream (``how='closed'``, ``notification`` is ``None``). Times are seconds since the sidecar started.

    ``names`` is the JSON-RPC id it names (``params.requestId`` as sent; ``None`` when missing) and
    ``reason`` its ``params.reason``; ``cancels`` the journal id of the request it names (the latest
    request with that id in the same transport session and era; ``None``: no such request was seen),
    ``since_sent`` the seconds from that request's arrival to the cancellation, ``in_flight`` whether
    that request was still in flight then (not yet answered in full).
    """

    at: float
    how: CancelHow
    names: str | int | float | None
    session_id: str | None = None
    era: RequestEra | None = None
    notification: int | None = None
    reason: str | None = None
    cancels: int | None = None
    since_sent: float | None = None
    in_flight: bool = False


@dataclass(frozen=True)
class StreamRecord:
    """An event stream the sidecar closed gracefully (``close_stream``) before the reply was sent,
    and whether the client resumed it. Times are seconds since the sidecar started.

    ``request_id`` is the journal id of the request the stream answers, ``session_id`` its session;
    ``closed_at`` when it ended, after ``events_sent`` events, the last with the id ``last_event_id``
    (``None`` when none was sent: the client has no id to resume with), and a ``retry: retry_ms``
    field; ``kept`` events were kept back. ``resumed_by`` is the journal id of the first ``GET``
    whose ``Last-Event-ID`` named an event of this stream, ``resumed_at`` when it came and
    ``resumed_with`` the id it sent; ``replayed`` the events it got (all ``None``/0 until then).
    """

    request_id: int
    session_id: str | None
    closed_at: float
    events_sent: int
    last_event_id: str | None
    retry_ms: int
    kept: int
    resumed_at: float | None = None
    resumed_by: int | None = None
    resumed_with: str | None = None
    replayed: int = 0


@dataclass(frozen=True)
class PatienceViolation:
    """A held request outlived its patience budget; the sidecar aborted the connection (RST).

    ``request`` is the record as it was when the budget ran out (``hold='patience'``, ``waited`` set);
    ``fault`` the text form of the fault that held it; ``budget`` the budget in seconds and
    ``budget_from`` where it came from (``'fault'``: the fault's ``patience=``; ``'sidecar'``: the
    sidecar's, set by ``Sidecar(patience=)``, the marker or the ini option); ``expected`` whether the
    test said it expects the hang (then it is reported but does not fail the test).

    ``awaiting``: no fault held it, the tool did: it awaited the client's answer to a request of its own
    (the server's ``elicitation/create`` ...), worded for the headline, e.g. ``the server's
    `elicitation/create` (sent at 0.2 s during tools/call ask_user)``; ``fault`` is then that method.
    """

    request: RequestRecord
    fault: str
    budget: float
    expected: bool
    budget_from: BudgetSource = "sidecar"
    awaiting: str | None = None
    #: How a fault (``drop_client_answer``) lost the client's answer to ``awaiting`` (``None``: no answer
    #: came), e.g. ``it came at 0.3 s and `drop_client_answer` answered its POST 202 and never handed
    #: it to the tool``.
    dropped: str | None = None

    @property
    def waited(self) -> float:
        """Seconds the client waited on the held request before the sidecar aborted it."""
        return self.request.waited if self.request.waited is not None else self.budget

    @property
    def client_closed(self) -> bool:
        """Whether the client closed the held request itself before the abort (for a violation: no)."""
        return self.request.client_closed

    @property
    def answered(self) -> Answered:
        """What the client had received when the budget ran out: ``'none'`` (no status line: a hung or
        frozen request), ``'partial'`` (status, headers and part of the body: a stalled response) or
        ``'complete'`` (the whole announced body, and the connection kept open)."""
        return answered(self.request)

    @property
    def kind(self) -> str:
        """The kind of the fault that held the request (``'freeze'`` for ``Sidecar.freeze()``)."""
        return self.request.fault_kind or self.fault.split("(", 1)[0].split("@", 1)[0]

    def what(self) -> str:
        """The held request as a harness author names it, e.g. ``a frozen `DELETE /mcp` (session era)``."""
        r = self.request
        req = f"`{r.method} {r.path}`"
        if r.mcp_method:
            req += f" ({r.mcp_method}{' ' + r.tool if r.tool else ''})"
        if r.era:
            req += f" ({r.era} era)"
        cls = fault_kinds().get(self.kind)
        if cls is not None and cls.held_wording is not None:
            return cls.held_wording.format(request=req)
        return f"a held {req}" if self.answered == "none" else f"the response to {req}"

    def describe(self, era: RequestEra | None = None) -> str:
        """The headline, from what the sidecar observed: what the client had received when the budget
        ran out (nothing: a request held and never answered; the status and part of the body: a
        stalled response; all of it: a connection kept open), and that it never closed the connection
        itself. ``era`` overrides the era shown (the request's own otherwise)."""
        v = self
        if era is not None:
            v = dataclasses.replace(self, request=dataclasses.replace(self.request, era=era))
        r, b = v.request, f"{self.budget:g} s"
        if self.awaiting is not None and r.hold != "patience":  # a stateless-era input round
            return (
                f"the client never answered {self.awaiting}: it did not retry the call with the answer "
                f"within {b} (the whole budget), and the tool is still waiting for it"
            )
        if self.awaiting is not None and self.dropped is not None:
            return (
                f"the sidecar dropped the client's answer to {self.awaiting}: {self.dropped}; the tool "
                f"call waited {b} (the whole budget) with its answer stream open ({r.bytes_sent} bytes "
                "sent); without the budget it would have waited for ever"
            )
        if self.awaiting is not None:
            return (
                f"the client never answered {self.awaiting}: it waited {b} (the whole budget) with the "
                f"tool call's answer stream open ({r.bytes_sent} bytes sent) and never closed it; without "
                "the budget the tool call would have waited for ever"
            )
        answered = self.answered
        if answered == "complete":
            return (
                f"the client kept the connection open for {b} (the whole budget) after {v.what()} was sent "
                f"in full (status {r.status}, all {r.bytes_sent} bytes of its Content-Length), and never "
                "released it (a connection leak, if it was done with it)"
            )
        cls = fault_kinds().get(v.kind)
        if cls is not None and cls.held_headline is not None:
            head = cls.held_headline.format(what=v.what(), bytes_sent=r.bytes_sent)
        elif answered == "none":
            head = f"{v.what()}, never answered (no status line was sent), and never closed the connection"
        else:
            head = (
                f"{v.what()}, which stalled after the status line ({r.status}) and {r.bytes_sent} bytes of "
                "body, and never released the connection"
            )
        return (
            f"the client waited {b} (the whole budget) on {head}; without the budget it would have waited "
            f"as long as its own read timeout allows (if it has one, it is longer than {b})"
        )

    def details(self) -> str:
        """Which fault held it, which budget ran out, and what happened to the connection."""
        source = "its fault's patience=" if self.budget_from == "fault" else "the sidecar's patience"
        if self.awaiting is not None and self.request.hold != "patience":
            return (
                f"no fault: the tool awaited the client's answer to its `{self.fault}`, which the call's "
                f"input_required result asked for; the {self.budget:g} s budget ({source}) ran out with "
                "nothing held (the client's retry never came), so nothing was aborted"
            )
        if self.awaiting is not None and self.dropped is not None:
            return (
                f"`{self.request.fault}` lost the client's answer to the tool's `{self.fault}`; when the "
                f"{self.budget:g} s budget ({source}) ran out the sidecar aborted connection "
                f"#{self.request.conn_id} (RST)"
            )
        if self.awaiting is not None:
            return (
                f"no fault: the tool awaited the client's answer to its `{self.fault}`; when the "
                f"{self.budget:g} s budget ({source}) ran out the sidecar aborted connection "
                f"#{self.request.conn_id} (RST)"
                + (
                    "; the client had closed it itself"
                    if self.client_closed
                    else "; the client never closed it"
                )
            )
        return (
            f"held by `{self.fault}`; when the {self.budget:g} s budget ({source}) ran out the sidecar "
            f"aborted connection #{self.request.conn_id} (RST)"
            + ("; the client had closed it itself" if self.client_closed else "; the client never closed it")
        )


def answered(r: RequestRecord) -> Answered:
    """What the client has received of ``r``: ``'none'`` (no status line sent), ``'partial'`` (status
    and part of the body), ``'complete'`` (the whole announced ``Content-Length`` body)."""
    if r.status is None:
        return "none"
    if r.body_bytes is not None and r.bytes_sent >= r.body_bytes:
        return "complete"
    return "partial"


_R = TypeVar("_R", RequestRecord, ConnectionRecord, ServerMessageRecord)
_T = TypeVar("_T")
_FIELDS: dict[type, frozenset[str]] = {
    cls: frozenset(f.name for f in dataclasses.fields(cls))
    for cls in (RequestRecord, ConnectionRecord, ServerMessageRecord)
}


def _request_done(rec: RequestRecord) -> bool:
    return rec.ended_at is not None


def _connection_closed(rec: ConnectionRecord) -> bool:
    return rec.closed_at is not None


def _settled_message(rec: ServerMessageRecord) -> bool:
    return rec.outcome is not None


def _drop_oldest(store: dict[int, _R], limit: int, done: Callable[[_R], bool]) -> int:
    """Delete the oldest records of ``store`` for which ``done`` holds until at most ``limit`` remain
    (records not done are skipped, never dropped); returns how many were deleted."""
    excess = len(store) - limit
    if excess <= 0:
        return 0
    drop = []
    for key, rec in store.items():  # oldest first
        if done(rec):
            drop.append(key)
            if len(drop) == excess:
                break
    for key in drop:
        del store[key]
    return len(drop)


def _replace(record: _R, fields: Mapping[str, Any]) -> _R:
    """``dataclasses.replace`` for the journal's records, without re-running ``__init__`` (a journal
    write happens several times per request, on the sidecar's hot path). Unknown fields still raise."""
    unknown = fields.keys() - _FIELDS[type(record)]
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field(s) {sorted(unknown)}")
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(fields)
    return new


class ServerMessageLog:
    """The :class:`ServerMessageRecord` records of one journal (``journal.server_messages``), in the order
    they were sent: iterate it, or read :attr:`records` / :meth:`requests`. Shares the journal's lock,
    so the journal's waits wake on its writes. A bounded journal (:meth:`Journal.set_limit`) keeps at
    most its limit of them too, dropping the oldest settled ones (a request still awaiting its answer
    is kept) and counting them in :attr:`dropped`; a ``seq`` is never reused."""

    def __init__(self, cond: threading.Condition, now: Callable[[], float]) -> None:
        self._cond, self.now = cond, now
        self._records: dict[int, ServerMessageRecord] = {}
        self._next = 0
        self.limit: int | None = None
        self.dropped = 0

    def add_server_message(self, **fields: Any) -> int:
        """A message sent now (the fields of a :class:`ServerMessageRecord`); its ``seq``."""
        with self._cond:
            seq = self._next
            self._next += 1
            self._records[seq] = ServerMessageRecord(seq=seq, sent_at=self.now(), **fields)
            self.trim()
            self._cond.notify_all()
            return seq

    def trim(self) -> None:
        """Drop the oldest settled records beyond :attr:`limit`."""
        if self.limit is not None:
            self.dropped += _drop_oldest(self._records, self.limit, _settled_message)

    def update_server_message(self, seq: int, **fields: Any) -> ServerMessageRecord | None:
        """Update record ``seq`` (``None``: it was dropped from a bounded journal)."""
        with self._cond:
            old = self._records.get(seq)
            if old is None:
                return None
            rec = self._records[seq] = _replace(old, fields)
            self._cond.notify_all()
            return rec

    @property
    def records(self) -> tuple[ServerMessageRecord, ...]:
        with self._cond:
            return tuple(self._records.values())

    def requests(self, method: str | None = None) -> tuple[ServerMessageRecord, ...]:
        """The server-to-client requests sent (of ``method``, if given), not the notifications."""
        return tuple(r for r in self.records if r.is_request and method in (None, r.method))

    def __iter__(self) -> Iterator[ServerMessageRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        with self._cond:
            return len(self._records)


class RequestFields(TypedDict, total=False):
    """The fields of a :class:`RequestRecord` a sidecar writes after creating it (typed keywords of
    :meth:`Journal.update_request`)."""

    mcp_method: str | None
    tool: str | None
    prompt: str | None
    resource: str | None
    session_id: str | None
    era: RequestEra | None
    status: int | None
    bytes_sent: int
    body_bytes: int | None
    fault: str | None
    fault_kind: str | None
    held: bool
    held_at: float | None
    hold: HoldOutcome | None
    waited: float | None
    client_closed: bool
    client_closed_at: float | None
    ended_at: float | None
    error: str | None
    error_by: ErrorBy | None
    upstream_sent_at: float | None
    upstream_answered_at: float | None
    upstream_ended_at: float | None
    upstream_status: int | None
    upstream_bytes: int
    upstream_failure: UpstreamFailure | None
    token: str | None
    auth_error: str | None
    grant: str | None
    issued: str | None
    client: str | None
    rpc_id: str | int | float | None
    cancelled_at: float | None
    cancel_outcome: CancelOutcome | None
    ran_on: bool
    ran_until: float | None


class ConnectionFields(TypedDict, total=False):
    """The fields of a :class:`ConnectionRecord` a sidecar writes after creating it."""

    closed_at: float | None
    closed_by: ClosedBy | None
    timed_out: bool


class RecordLog(Generic[_T]):
    """A list of the journal's records of one kind, oldest first: ``add`` and ``replace`` (loop
    thread), ``records`` and iteration (any thread; a snapshot). Shares the journal's lock, so a
    change wakes its waits."""

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond
        self._records: list[_T] = []

    def add(self, record: _T) -> int:
        """Append ``record``; its index."""
        with self._cond:
            self._records.append(record)
            self._cond.notify_all()
            return len(self._records) - 1

    def replace(self, index: int, record: _T) -> None:
        with self._cond:
            self._records[index] = record
            self._cond.notify_all()

    @property
    def records(self) -> tuple[_T, ...]:
        with self._cond:
            return tuple(self._records)

    def __iter__(self) -> Iterator[_T]:
        return iter(self.records)

    def __len__(self) -> int:
        with self._cond:
            return len(self._records)


class Journal:
    """Thread-safe store of request and connection records; :meth:`snapshot` reads, waits wait.

    Unbounded by default (a test's sidecar keeps everything: assertions read the whole journal). With a
    limit (:meth:`set_limit`, ``serve --journal-limit``) it is a ring: once more than ``limit`` requests
    are kept, the oldest *finished* ones are dropped and counted in :attr:`dropped_requests` (connections
    likewise: the oldest *closed* ones, :attr:`dropped_connections`). A request still in flight (held,
    streaming) is never dropped, so the journal may exceed the limit by the requests in flight. Ids are
    never reused: a request's id is its arrival number, whatever was dropped before it.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._cond = threading.Condition()
        self._requests: dict[int, RequestRecord] = {}  # by id, in id (arrival) order
        self._conns: dict[int, ConnectionRecord] = {}
        self._next_request = 0
        self._next_conn = 0
        self._violations: list[PatienceViolation] = []
        #: What the sidecar sent clients on its own (server requests and notifications).
        self.server_messages = ServerMessageLog(self._cond, self.now)
        #: Every cancellation the client sent (:class:`CancellationRecord`).
        self.cancellations: RecordLog[CancellationRecord] = RecordLog(self._cond)
        #: Every event stream the sidecar closed gracefully for the client to resume (:class:`StreamRecord`).
        self.streams: RecordLog[StreamRecord] = RecordLog(self._cond)
        self._fired: dict[str, int] = {}
        self._last_fired: FiredRecord | None = None
        self._last_request_at: float | None = None
        self.limit: int | None = None
        self.dropped_requests = 0
        self.dropped_connections = 0
        self.t0 = time.monotonic()
        self.set_limit(limit)
        events.notify("sidecar")

    def set_limit(self, limit: int | None) -> None:
        """Keep at most ``limit`` requests, connections and server messages (``None``: keep everything)."""
        if limit is not None and not is_count(limit, minimum=1):
            raise ValueError(f"Journal: limit must be a positive integer or None, got {limit!r}")
        with self._cond:
            self.limit = self.server_messages.limit = limit
            self._trim()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _trim(self) -> None:
        """Drop the oldest finished requests and closed connections beyond the limit (lock held)."""
        if self.limit is None:
            return
        self.dropped_requests += _drop_oldest(self._requests, self.limit, _request_done)
        self.dropped_connections += _drop_oldest(self._conns, self.limit, _connection_closed)
        self.server_messages.trim()

    # -- writers (loop thread) ---------------------------------------------------------------
    def add_request(self, **fields: Any) -> int:
        """A new request; counted on its connection (``conn_id``) when that is in the journal."""
        with self._cond:
            rid = self._next_request
            self._next_request += 1
            started = self._last_request_at = self.now()
            self._requests[rid] = RequestRecord(id=rid, started_at=started, **fields)
            conn = self._conns.get(fields.get("conn_id", -1))
            if conn is not None:
                self._conns[conn.id] = _replace(conn, {"requests": conn.requests + 1})
            self._trim()
            self._cond.notify_all()
            return rid

    def update_request(self, rid: int, **fields: Unpack[RequestFields]) -> RequestRecord:
        with self._cond:
            rec = _replace(self._requests[rid], fields)
            self._requests[rid] = rec
            self._cond.notify_all()
            return rec

    def end_request(self, rid: int, **fields: Unpack[RequestFields]) -> RequestRecord:
        """Record the request's last fields and, unless its end was already recorded (a relayed body's
        end is recorded as it is sent), that it ended now: one write, one wake-up of the readers."""
        with self._cond:
            rec = self._requests[rid]
            if rec.ended_at is None:
                fields["ended_at"] = self.now()
            rec = self._requests[rid] = _replace(rec, fields)
            self._cond.notify_all()
            return rec

    def request(self, rid: int) -> RequestRecord:
        with self._cond:
            return self._requests[rid]

    def add_connection(self, peer: str) -> int:
        with self._cond:
            cid = self._next_conn
            self._next_conn += 1
            self._conns[cid] = ConnectionRecord(id=cid, peer=peer, opened_at=self.now())
            self._trim()
            self._cond.notify_all()
            return cid

    def update_connection(self, cid: int, **fields: Unpack[ConnectionFields]) -> None:
        with self._cond:
            self._conns[cid] = _replace(self._conns[cid], fields)
            self._cond.notify_all()

    def add_violation(self, v: PatienceViolation) -> None:
        with self._cond:
            self._violations.append(v)
            self._cond.notify_all()

    def add_fired(
        self, kind: str, request_id: int | None = None, what: str | None = None, expect_hang: bool = False
    ) -> None:
        """Count a fault of ``kind`` that fired (on request ``request_id``, or by the test's runtime
        call ``what``); the latest is kept (:attr:`last_activity`)."""
        with self._cond:
            self._fired[kind] = self._fired.get(kind, 0) + 1
            fired = FiredRecord(self.now(), kind, request_id, what, self._next_request, expect_hang)
            self._last_fired = fired
        events.notify("fired", kind)

    # -- readers (any thread) ----------------------------------------------------------------
    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        with self._cond:
            return tuple(self._requests.values())

    def requests_since(self, since: int, limit: int | None = None) -> tuple[RequestRecord, ...]:
        """The kept requests with ``id >= since``, oldest first, at most ``limit`` of them."""
        with self._cond:
            ids = self._requests.keys()
            first = next(iter(ids), self._next_request)
            if since <= first and limit is None:
                return tuple(self._requests.values())
            out = []
            for rid in range(max(since, first), self._next_request):
                rec = self._requests.get(rid)
                if rec is not None:
                    out.append(rec)
                    if limit is not None and len(out) >= limit:
                        break
            return tuple(out)

    @property
    def total_requests(self) -> int:
        """How many requests the sidecar has seen, dropped ones included (the next request's id)."""
        with self._cond:
            return self._next_request

    @property
    def connections(self) -> tuple[ConnectionRecord, ...]:
        with self._cond:
            return tuple(self._conns.values())

    @property
    def violations(self) -> tuple[PatienceViolation, ...]:
        with self._cond:
            return tuple(self._violations)

    @property
    def fired(self) -> dict[str, int]:
        """How often each fault kind fired, by kind name."""
        with self._cond:
            return dict(self._fired)

    @property
    def last_activity(self) -> tuple[FiredRecord | None, float | None]:
        """The latest fault that fired and when the latest request arrived (seconds since the sidecar
        started), read together; each ``None`` before the first."""
        with self._cond:
            return self._last_fired, self._last_request_at

    def sequence(self) -> list[str]:
        """The requests as labels, e.g. ``['POST initialize', 'POST notifications/initialized', ...]``."""
        return [r.label for r in self.requests]

    def open_connections(self) -> tuple[ConnectionRecord, ...]:
        return tuple(c for c in self.connections if c.open)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.requests)

    def __len__(self) -> int:
        with self._cond:
            return len(self._requests)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Block until ``predicate()`` is true (re-checked on every journal change) or fail after
        ``timeout`` seconds with an ``AssertionError`` that says ``what`` was awaited."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(timed_out(self, timeout, what))
                self._cond.wait(min(left, 0.05))

    def format(self, requests: list[RequestRecord] | None = None) -> str:
        """A readable excerpt: one line per request, with connection, status, fault and hold."""
        lines = []
        for r in requests if requests is not None else list(self.requests):
            bits = [
                f"#{r.id:<3} conn#{r.conn_id:<3} {r.label:<40}",
                f"status={r.status}",
                f"bytes={r.bytes_sent}",
            ]
            if r.forwarded:
                leg = f"upstream={r.upstream_status}/{r.upstream_bytes}B"
                if r.upstream_time is not None:
                    leg += f"/{r.upstream_time * 1000:.1f}ms"
                if r.upstream_failure:
                    leg += f" upstream_failure={r.upstream_failure}"
                bits.append(leg)
            if r.token or r.auth_error or r.grant or r.client:
                bits.append(" ".join(
                    f"{name}={value}" for name, value in (
                        ("token", r.token), ("auth_error", r.auth_error), ("client", r.client),
                        ("grant", r.grant), ("issued", r.issued),
                    ) if value
                ))  # fmt: skip
            if r.fault:
                bits.append(f"fault={r.fault}")
            if r.held:
                bits.append(
                    f"hold={r.hold} waited={r.waited:.3f}s" if r.waited is not None else "hold=active"
                )
            if r.cancelled_at is not None:
                bits.append(f"cancelled at {r.cancelled_at:.3f}s ({r.cancel_outcome or 'too late to stop'})")
            if r.ran_on:
                ran = f"ran on until {r.ran_until:.3f}s" if r.ran_until is not None else "still runs"
                bits.append(f"its sync handler {ran} (its result is not sent)")
            if r.client_closed:
                bits.append(f"client closed at {r.client_closed_at:.3f}s")
            lines.append("  ".join(bits))
        return "\n".join(lines)


#: How many of the latest requests a timed-out :meth:`Journal.wait_for` shows.
WAIT_EXCERPT = 20


def timed_out(journal: Journal, timeout: float, what: str) -> str:
    """The message of a :meth:`Journal.wait_for` that timed out: what was awaited, then what the sidecar
    saw instead, as a patience verdict shows it: the latest request and how long before the deadline it
    came (the nearest the journal got), the faults that fired, the connections still open, and the
    journal's latest requests."""
    requests = journal.requests
    head = f"timed out after {timeout} s waiting for {what}"
    if not requests:
        return f"{head}: no request reached the sidecar in that time"
    last = requests[-1]
    ago = journal.now() - (last.ended_at if last.ended_at is not None else last.started_at)
    fired = ", ".join(f"`{k}` x{n}" for k, n in journal.fired.items()) or "none"
    conns = ", ".join(f"#{c.id}" for c in journal.open_connections()) or "none"
    shown = list(requests[-WAIT_EXCERPT:])
    return "\n".join(
        [
            f"{head}: the sidecar saw {journal.total_requests} request(s), the latest "
            f"`{last.label}` (#{last.id}) {ago:.3f} s before the deadline",
            f"   faults fired: {fired}",
            f"   open connections: {conns}",
            f"   the journal's latest {len(shown)}:",
            *("      " + line for line in journal.format(shown).splitlines()),
        ]
    )
