"""The journal's records (frozen snapshots) of what a sidecar saw, and the logs holding some of them;
the store is :class:`~.journal.Journal`."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pytest_mcpfaults.mcp.jsonrpc import ErrorBy, RequestEra

HoldOutcome = Literal["released", "client_closed", "patience", "teardown", "cancelled"]
BudgetSource = Literal["fault", "sidecar"]
"""Where a patience budget came from: the fault's own ``patience=``, or the server's."""
CancelOutcome = Literal["stopped", "ignored", "answered"]
CancelHow = Literal["notification", "closed"]
ClosedBy = Literal["client", "sidecar"]
UpstreamFailure = Literal["refused", "timed_out", "reset", "error"]
ServerMessageOutcome = Literal["sent", "answered", "error", "unanswered", "dropped", "duplicate", "malformed"]


@dataclass(frozen=True)
class Held:
    """A fault held the request (:attr:`RequestRecord.held`) from ``at`` until, ``waited`` seconds
    later, it ended with ``outcome``: ``'released'`` (``release()``), ``'client_closed'``,
    ``'patience'`` (the budget ran out: the sidecar aborted the connection), ``'cancelled'``
    (``answer_after_cancel``) or ``'teardown'``; both ``None`` while held."""

    at: float
    outcome: HoldOutcome | None = None
    waited: float | None = None


@dataclass(frozen=True)
class UpstreamLeg:
    """A proxying sidecar forwarded the request (:attr:`RequestRecord.upstream`) at ``sent_at``; the
    upstream's headers came at ``answered_at``, its body ended (or it failed) at ``ended_at``, with HTTP
    ``status`` and ``bytes`` of body (the client's are the record's ``status`` and ``bytes_sent``).
    ``failure``: why no complete answer came: ``'refused'`` (no connection), ``'timed_out'`` (past
    ``upstream_timeout``), ``'reset'`` (closed before the answer was complete), ``'error'`` (anything
    else, e.g. not HTTP)."""

    sent_at: float
    answered_at: float | None = None
    ended_at: float | None = None
    status: int | None = None
    bytes: int = 0
    failure: UpstreamFailure | None = None

    @property
    def time(self) -> float | None:
        """Seconds from forwarding to the end of the answer (or its failure); ``None`` until then."""
        return None if self.ended_at is None else self.ended_at - self.sent_at


@dataclass(frozen=True)
class AuthSeen:
    """What the ``auth=`` layer (docs/auth.md) saw of the request (:attr:`RequestRecord.auth`):
    ``token``, the bearer token an MCP request carried (``'t1'`` ... as issued, ``'static1'`` ... as
    ``auth=`` lists them, ``'unknown'``; ``None``: none); ``error``, the refusing challenge's
    (``'invalid_token'``, ``'insufficient_scope'``, ``'missing'``); a token request's ``grant``
    (its ``grant_type``) and the token it ``issued``; ``client``, the registered client (``'c1'`` ...,
    in registration order) a request to the authorization server came from."""

    token: str | None = None
    error: str | None = None
    client: str | None = None
    grant: str | None = None
    issued: str | None = None


@dataclass(frozen=True)
class CancelSeen:
    """A cancellation (:class:`CancellationRecord`) named the request in flight, at ``at``
    (:attr:`RequestRecord.cancel`). ``outcome``: ``'stopped'`` (no JSON-RPC response sent),
    ``'ignored'`` (``ignore_cancel``: answered in full), ``'answered'`` (``answer_after_cancel``:
    released, answered in full); ``None``: too late to change the answer (it was being sent)."""

    at: float
    outcome: CancelOutcome | None = None


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request as the sidecar saw it; times are seconds since the sidecar started. What only
    some requests have is a group, ``None`` until written (``if r.held:`` reads as it says):
    :attr:`held`, :attr:`upstream`, :attr:`auth`, :attr:`cancel`.

    ``user_agent`` and ``protocol_version``: its ``User-Agent`` and ``MCP-Protocol-Version`` headers;
    ``body_bytes``: the announced ``Content-Length`` of a response held while its body streamed;
    ``tool``, ``prompt``, ``resource``: what a ``tools/call``, ``prompts/get`` or ``resources/*``
    named; ``rpc_id``: an MCP request's JSON-RPC id (``None`` for a notification);
    ``last_event_id``: its ``Last-Event-ID`` (:class:`StreamRecord`); ``idle_before``: seconds its
    connection had been idle when it came (a pooled connection reused after a quiet spell shows it).

    ``ran_on``: the call was stopped while its sync tool handler ran on a worker thread, which cannot
    be stopped: it ran on, its result unsent, until ``ran_until`` (``None`` while it runs).

    ``error`` and ``error_by``, whose it was: ``'client'`` (a bad request, answered with the protocol's
    error), ``'tool'`` (the handler raised or ran past ``tool_timeout``: re-raised in the test),
    ``'upstream'`` (refused, timed out or reset: ``upstream.failure``; not re-raised) or ``'sidecar'``
    (a bug: 500, re-raised).
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
        """Whether the request was forwarded to the upstream (``upstream`` is set)."""
        return self.upstream is not None

    @property
    def hold(self) -> HoldOutcome | None:
        """``held.outcome``, and ``None`` for a request never held too (where ``r.held.outcome`` raises)."""
        return self.held.outcome if self.held is not None else None

    @property
    def label(self) -> str:
        """E.g. ``'POST tools/call delete_session'``."""
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
    """A message the sidecar sent on its own on the answer stream of request ``request_id`` (a
    ``tools/call`` of ``tool``): a server-to-client request (``id``: its JSON-RPC id) or a notification
    (``id`` is ``None``). Times are seconds since the sidecar started.

    ``outcome``: ``'sent'`` (a notification), ``None`` (awaiting its answer), ``'answered'`` (a
    ``result`` came), ``'error'`` (a JSON-RPC ``error`` came) or ``'unanswered'`` (the call ended
    first); ``answered_at``: when. Written by a server-request fault (``fault``, its text):
    ``'dropped'`` (``drop_client_answer``: answered, but the answer never reached the tool),
    ``'duplicate'`` (a copy sent again with the same ``id``), ``'malformed'`` (the malformed copy sent
    first; ``id`` the one it carried, ``None`` if none could be read); an answered copy has
    ``answered_at`` and ``result`` / ``error`` too.

    ``refused``: answers carrying its ``id`` the sidecar refused (posted in another, an unknown or no
    session, or by another principal; for a stateless-era input request, anything but the call's
    retry carrying the round's ``requestState``); the POST's own record says why. A ``401`` from
    ``auth=`` does not count."""

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
        """A request (it awaits an answer), not a notification."""
        return self.id is not None

    @property
    def label(self) -> str:
        """e.g. ``elicitation/create during tools/call ask_user``."""
        return f"{self.method} during tools/call {self.tool}" if self.tool else self.method


@dataclass(frozen=True)
class ConnectionRecord:
    """One TCP connection. ``closed_by``: ``None`` while open; ``timed_out``: closed by the sidecar for
    no complete request within ``idle_timeout``; ``silent_at``: when a ``blackhole`` silenced it (no
    FIN, no RST, nothing read or written until the hold ended)."""

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
    """A fault that fired: its kind, when, the request it fired on (``None`` for a runtime call such
    as ``kill()``), ``what`` fired it (the fault's text, or ``'kill()'``), ``next_request`` (the next
    request's id: those since have ids from there on) and the fault's ``expect_hang``."""

    at: float
    kind: str
    request_id: int | None = None
    what: str | None = None
    next_request: int = 0
    expect_hang: bool = False


@dataclass(frozen=True)
class CancellationRecord:
    """The client cancelled a request: a ``notifications/cancelled`` (``how='notification'``, whose
    record is ``notification``), or, in the 2026-07-28 era, closing an in-flight request's response
    stream (``how='closed'``). Times are seconds since the sidecar started.

    ``names`` and ``reason``: its ``params.requestId`` and ``params.reason``; ``cancels``: the journal
    id of the request named (the latest with that id in the same session and era; ``None``: none),
    ``since_sent`` seconds after it arrived, ``in_flight`` whether it was not yet answered in full.
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
    """An event stream answering request ``request_id`` that the sidecar closed (``close_stream``)
    before the reply, and whether the client resumed it; times are seconds since the sidecar started.
    It closed at ``closed_at`` after ``events_sent`` events, the last ``last_event_id`` (``None``: the
    client has no id to resume with), with ``retry: retry_ms``, ``kept`` events kept back. The first
    ``GET`` whose ``Last-Event-ID`` named one of its events is ``resumed_by``, at ``resumed_at``,
    with ``resumed_with``, replayed ``replayed`` events.
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


_T = TypeVar("_T")
_FIELDS: dict[type, frozenset[str]] = {
    cls: frozenset(f.name for f in dataclasses.fields(cls))
    for cls in (RequestRecord, ConnectionRecord, ServerMessageRecord, StreamRecord)
}


class RecordLog(Generic[_T]):
    """The journal's records of one kind by key (their arrival number, never reused), oldest first:
    written on the loop thread, read (a snapshot) from any. Shares the journal's lock, so a write wakes
    its waits. With a :attr:`limit` (:meth:`Journal.set_limit`), :meth:`trim` drops the oldest records
    beyond it that are ``settled``; one not settled never is."""

    def __init__(self, cond: threading.Condition, settled: Callable[[_T], bool] | None = None) -> None:
        self._cond, self._settled = cond, settled
        self._records: dict[int, _T] = {}
        self.next = 0
        self.limit: int | None = None

    def add(self, record: _T) -> int:
        """Append ``record``; its key."""
        return self.make(lambda key: record)

    def make(self, build: Callable[[int], _T]) -> int:
        """Append ``build(key)``; its key."""
        with self._cond:
            key = self.next
            self.next += 1
            self._records[key] = build(key)
            self._cond.notify_all()
            return key

    def trim(self) -> int:
        """Drop the oldest settled records beyond :attr:`limit`; how many were dropped."""
        if self.limit is None or self._settled is None:
            return 0
        settled = (key for key, rec in self._records.items() if self._settled(rec))  # oldest first
        drop = list(itertools.islice(settled, max(0, len(self._records) - self.limit)))
        for key in drop:
            del self._records[key]
        return len(drop)

    def update(self, key: int, fields: Mapping[str, Any]) -> _T:
        """Write ``fields`` of record ``key`` (``KeyError``: no such record, or it was dropped), without
        re-running ``__init__`` (a journal write happens several times per request, on the sidecar's hot
        path). Unknown fields still raise."""
        with self._cond:
            old = self._records[key]
            unknown = fields.keys() - _FIELDS[type(old)]
            if unknown:
                raise TypeError(f"{type(old).__name__} has no field(s) {sorted(unknown)}")
            new = self._records[key] = object.__new__(type(old))
            new.__dict__.update(old.__dict__)
            new.__dict__.update(fields)
            self._cond.notify_all()
            return new

    def since(self, key: int, limit: int | None = None) -> tuple[_T, ...]:
        """The kept records with keys ``>= key``, oldest first, at most ``limit`` of them."""
        with self._cond:
            first = next(iter(self._records), self.next)
            if key <= first and limit is None:
                return tuple(self._records.values())
            keys = range(max(key, first), self.next)
            return tuple(itertools.islice((self._records[k] for k in keys if k in self._records), limit))

    def __getitem__(self, key: int) -> _T:
        with self._cond:
            return self._records[key]

    def get(self, key: int) -> _T | None:
        with self._cond:
            return self._records.get(key)

    @property
    def records(self) -> tuple[_T, ...]:
        with self._cond:
            return tuple(self._records.values())

    def __iter__(self) -> Iterator[_T]:
        return iter(self.records)

    def __len__(self) -> int:
        with self._cond:
            return len(self._records)


class ServerMessageLog(RecordLog[ServerMessageRecord]):
    """The :class:`ServerMessageRecord` records of one journal (``journal.server_messages``), in the order
    they were sent. A bounded journal (:meth:`Journal.set_limit`) keeps at most its limit of them,
    dropping the oldest settled ones (not a request awaiting its answer) and counting them in
    :attr:`dropped`; a ``seq`` is never reused."""

    def __init__(self, cond: threading.Condition, now: Callable[[], float]) -> None:
        super().__init__(cond, lambda m: m.outcome is not None)
        self.now = now
        self.dropped = 0

    def add_server_message(self, **fields: Any) -> int:
        """A message sent now (the fields of a :class:`ServerMessageRecord`); its ``seq``."""
        with self._cond:
            seq = self.make(lambda seq: ServerMessageRecord(seq=seq, sent_at=self.now(), **fields))
            self.dropped += self.trim()
            return seq

    def update_server_message(self, seq: int, **fields: Any) -> ServerMessageRecord | None:
        """Update record ``seq`` (``None``: it was dropped from a bounded journal)."""
        with self._cond:
            return self.update(seq, fields) if seq in self._records else None

    def requests(self, method: str | None = None) -> tuple[ServerMessageRecord, ...]:
        """The server-to-client requests sent (of ``method``, if given), not the notifications."""
        return tuple(r for r in self.records if r.is_request and method in (None, r.method))
