"""The journal's records: what a sidecar saw of every request, connection, cancellation, closed
stream, fault that fired and message it sent on its own, as frozen snapshots, and the logs holding
some of them (:class:`RecordLog`, :class:`ServerMessageLog`). The store is :class:`~.journal.Journal`.

A :class:`RequestRecord` keeps what every request has flat, and what only some have in groups,
``None`` until written: :class:`Held`, :class:`UpstreamLeg`, :class:`AuthSeen`, :class:`CancelSeen`.
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pytest_mcpfaults.mcp.endpoint import ErrorBy, RequestEra

__all__ = [
    "GROUPS",
    "AuthSeen",
    "CancelHow",
    "CancelOutcome",
    "CancelSeen",
    "CancellationRecord",
    "ClosedBy",
    "ConnectionRecord",
    "FiredRecord",
    "Held",
    "HoldOutcome",
    "RecordLog",
    "RequestRecord",
    "ServerMessageLog",
    "ServerMessageOutcome",
    "ServerMessageRecord",
    "StreamRecord",
    "UpstreamFailure",
    "UpstreamLeg",
    "drop_oldest",
    "replace_record",
]

HoldOutcome = Literal["released", "client_closed", "patience", "teardown", "cancelled"]
"""How a held request ended (:attr:`Held.outcome`)."""
CancelOutcome = Literal["stopped", "ignored", "answered"]
"""What the sidecar did with a request the client cancelled while it was in flight
(:attr:`CancelSeen.outcome`)."""
CancelHow = Literal["notification", "closed"]
"""How the client cancelled (:attr:`CancellationRecord.how`): a ``notifications/cancelled``, or (the
2026-07-28 era's cancellation) closing the request's response stream."""
ClosedBy = Literal["client", "sidecar"]
"""Who closed a connection (:attr:`ConnectionRecord.closed_by`)."""
UpstreamFailure = Literal["refused", "timed_out", "reset", "error"]
"""Why a proxying sidecar's upstream gave no (complete) answer (:attr:`UpstreamLeg.failure`):
``'refused'`` (no connection: nothing listens there, or the name does not resolve), ``'timed_out'`` (no
answer within ``upstream_timeout``), ``'reset'`` (the connection was reset or closed before the answer
was complete) or ``'error'`` (anything else, e.g. an answer that is not HTTP)."""

ServerMessageOutcome = Literal["sent", "answered", "error", "unanswered", "dropped", "duplicate", "malformed"]
"""What became of a message the sidecar sent on its own (:attr:`ServerMessageRecord.outcome`)."""


@dataclass(frozen=True)
class Held:
    """A fault held the request (:attr:`RequestRecord.held`): from ``at`` until it ended, ``waited``
    seconds later, with ``outcome``: ``'released'`` (``release()``), ``'client_closed'`` (the client
    gave up), ``'patience'`` (the budget ran out and the sidecar aborted the connection),
    ``'cancelled'`` (the client cancelled it: ``answer_after_cancel``), ``'teardown'`` (the sidecar
    stopped); both ``None`` while it is held."""

    at: float
    outcome: HoldOutcome | None = None
    waited: float | None = None


@dataclass(frozen=True)
class UpstreamLeg:
    """A proxying sidecar (``Sidecar(upstream=...)``) forwarded the request
    (:attr:`RequestRecord.upstream`): at ``sent_at``; the upstream's status line and headers came at
    ``answered_at`` and its body ended (or it failed) at ``ended_at``; ``status`` is its HTTP status,
    ``bytes`` the body bytes it sent (what the client got is the record's ``status`` and
    ``bytes_sent``), and ``failure`` why it gave no complete answer (``'refused'``, ``'timed_out'``,
    ``'reset'``, ``'error'``)."""

    sent_at: float
    answered_at: float | None = None
    ended_at: float | None = None
    status: int | None = None
    bytes: int = 0
    failure: UpstreamFailure | None = None

    @property
    def time(self) -> float | None:
        """Seconds from forwarding the request to the end of the upstream's answer (or its failure);
        ``None`` while it has not ended."""
        return None if self.ended_at is None else self.ended_at - self.sent_at


@dataclass(frozen=True)
class AuthSeen:
    """What the ``auth=`` layer (docs/auth.md) saw of the request (:attr:`RequestRecord.auth`):
    ``token`` names the bearer token an MCP request carried (``'t1'``, ``'t2'`` ... as the sidecar
    issued them, ``'static1'`` ... as ``auth=`` lists them, ``'unknown'``; ``None``: no token),
    ``error`` the ``error`` of the challenge it was refused with (``'invalid_token'``,
    ``'insufficient_scope'``; ``'missing'``: no token was sent); a token request records its ``grant``
    (``grant_type``: ``'authorization_code'``, ``'client_credentials'``, ``'refresh_token'``) and the
    token it ``issued``; a request to the authorization server by a client registered at its
    registration endpoint names it in ``client`` (``'c1'``, ``'c2'`` ... in the order they registered:
    the registration itself, its authorization requests, its token requests)."""

    token: str | None = None
    error: str | None = None
    client: str | None = None
    grant: str | None = None
    issued: str | None = None


@dataclass(frozen=True)
class CancelSeen:
    """A cancellation naming the request arrived while it was in flight (:attr:`RequestRecord.cancel`;
    the cancellation itself: :class:`CancellationRecord`): at ``at``, and ``outcome`` is what the
    sidecar did then: ``'stopped'`` (its tool stopped, no JSON-RPC response sent), ``'ignored'``
    (``ignore_cancel``: it ran on and was answered in full), ``'answered'`` (``answer_after_cancel``:
    released and answered in full); ``None`` when the cancel came too late to change the answer (it
    was being sent)."""

    at: float
    outcome: CancelOutcome | None = None


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request as the sidecar saw it. Times are seconds since the sidecar started.

    What every request has is flat; what only some have is a group, ``None`` until written:
    :attr:`held` (:class:`Held`: a fault held it), :attr:`upstream` (:class:`UpstreamLeg`: a proxying
    sidecar forwarded it), :attr:`auth` (:class:`AuthSeen`: the ``auth=`` layer saw a token, refused
    it, or it was a token request) and :attr:`cancel` (:class:`CancelSeen`: the client cancelled it in
    flight). ``if r.held:`` reads as it says.

    ``user_agent`` and ``protocol_version`` are the request's ``User-Agent`` and
    ``MCP-Protocol-Version`` headers (``None`` when absent): what the sidecar knows of the client;
    ``body_bytes`` the announced ``Content-Length`` of a response held while its body was streamed.
    ``tool``, ``prompt`` and ``resource`` are what a ``tools/call``, a ``prompts/get`` and a
    ``resources/read`` / ``subscribe`` / ``unsubscribe`` named (the tool's and prompt's names, the URI).
    ``rpc_id`` is the JSON-RPC id of an MCP request (``None`` for a notification or a non-MCP request).
    ``last_event_id`` is the request's ``Last-Event-ID`` header (a client resuming a stream:
    :class:`StreamRecord`).
    ``idle_before``: seconds its connection had been idle when it came (since the connection opened or
    its previous request ended: a pooled keep-alive connection reused after a quiet spell shows it;
    ``None`` for a transport without connections of its own).

    ``ran_on``: the call was stopped (cancelled, past ``tool_timeout``, at teardown) while its sync
    tool handler ran on a worker thread, which the sidecar cannot stop: the handler ran on, and what
    it returned was not sent; ``ran_until`` is when it ended (``None`` while it still runs).

    ``error`` says what went wrong and ``error_by`` whose it was: ``'client'`` (a mistake in the
    request, answered with the protocol's own error; never a sidecar error), ``'tool'`` (the tool's
    handler raised or ran past ``tool_timeout``: re-raised in the test), ``'upstream'`` (a proxying
    sidecar's upstream was refused, timed out or reset: see ``upstream.failure``; not re-raised, the
    client got what a gateway answers) or ``'sidecar'`` (a bug of the sidecar: 500, re-raised in the
    test); both ``None`` when nothing went wrong.
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
    rpc_id: str | int | float | None = None
    status: int | None = None
    bytes_sent: int = 0
    body_bytes: int | None = None
    fault: str | None = None
    fault_kind: str | None = None
    client_closed: bool = False
    client_closed_at: float | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    error: str | None = None
    error_by: ErrorBy | None = None
    user_agent: str | None = None
    protocol_version: str | None = None
    last_event_id: str | None = None
    idle_before: float | None = None
    ran_on: bool = False
    ran_until: float | None = None
    held: Held | None = None
    upstream: UpstreamLeg | None = None
    auth: AuthSeen | None = None
    cancel: CancelSeen | None = None

    @property
    def forwarded(self) -> bool:
        """Whether the request was forwarded to the upstream (proxy mode): ``upstream`` is set. Kept
        (documented before the groups, and ``if r.forwarded:`` says why one reads ``r.upstream``)."""
        return self.upstream is not None

    @property
    def hold(self) -> HoldOutcome | None:
        """How its hold ended (``held.outcome``); ``None`` while held or never held. Kept beside
        :attr:`held` because ``r.hold == 'client_closed'`` is how the docs assert on a hold, and it
        reads the same on a request never held (``r.held.outcome`` would raise there)."""
        return self.held.outcome if self.held is not None else None

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


#: The groups of a :class:`RequestRecord` (field name -> its class), from its annotations.
GROUPS: dict[str, type] = {
    name: hint.__args__[0]
    for name, hint in typing.get_type_hints(RequestRecord).items()
    if dataclasses.is_dataclass(getattr(hint, "__args__", (None,))[0])
}


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
    (an idle keep-alive connection, or one sending its headers too slowly); ``silent_at``: when a
    ``blackhole`` made it silent (no FIN, no RST: nothing more read from it or written to it until
    the hold ended; ``None``: never)."""

    id: int
    peer: str
    opened_at: float
    closed_at: float | None = None
    closed_by: ClosedBy | None = None
    requests: int = 0
    timed_out: bool = False
    silent_at: float | None = None

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


_R = TypeVar("_R", RequestRecord, ConnectionRecord, ServerMessageRecord)
_T = TypeVar("_T")
_FIELDS: dict[type, frozenset[str]] = {
    cls: frozenset(f.name for f in dataclasses.fields(cls))
    for cls in (RequestRecord, ConnectionRecord, ServerMessageRecord)
}


def drop_oldest(store: dict[int, _R], limit: int, done: Callable[[_R], bool]) -> int:
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


def replace_record(record: _R, fields: Mapping[str, Any]) -> _R:
    """``dataclasses.replace`` for the journal's records, without re-running ``__init__`` (a journal
    write happens several times per request, on the sidecar's hot path). Unknown fields still raise."""
    unknown = fields.keys() - _FIELDS[type(record)]
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field(s) {sorted(unknown)}")
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(fields)
    return new


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
            self.dropped += drop_oldest(self._records, self.limit, lambda m: m.outcome is not None)

    def update_server_message(self, seq: int, **fields: Any) -> ServerMessageRecord | None:
        """Update record ``seq`` (``None``: it was dropped from a bounded journal)."""
        with self._cond:
            old = self._records.get(seq)
            if old is None:
                return None
            rec = self._records[seq] = replace_record(old, fields)
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
