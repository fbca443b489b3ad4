"""The fault kinds: frozen dataclasses saying how a request is answered, and their catalogue.

Each kind has a ``kind`` name, its parameters (checked at construction) and a ``when=`` trigger;
``str(fault)`` writes the text form that :mod:`pytest_mcpfaults.faults.text` reads back. Re-exported by
:mod:`pytest_mcpfaults.faults`.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal, get_args, get_type_hints

from pytest_mcpfaults.faults.triggers import Trigger
from pytest_mcpfaults.faults.values import format_value
from pytest_mcpfaults.options.validation import check_bool, check_count, check_seconds, is_integer

#: What ``from pytest_mcpfaults.faults.kinds import *`` gives, and so what ``pytest_mcpfaults`` and
#: :mod:`pytest_mcpfaults.faults` export from here: the fault kinds, their base and the registry (a
#: new kind's class name goes here, next to the class; nothing else lists the kinds). The module's
#: other public names (``Draw``, ``KIND_NAME``, ``check_transport`` ...) are exported by ``faults``.
__all__ = [
    "Absent",
    "AnswerAfterCancel",
    "BackendGone",
    "Blackhole",
    "CloseStream",
    "Delay",
    "Die",
    "Drip",
    "DropClientAnswer",
    "DuplicateServerRequest",
    "EndlessSse",
    "ErrorPayload",
    "Fault",
    "Flap",
    "Freeze",
    "Hang",
    "IgnoreCancel",
    "IgnoreEof",
    "IgnoreSigterm",
    "InsufficientScope",
    "JsonRpcError",
    "MalformedJson",
    "MalformedServerRequest",
    "NotificationFlood",
    "ProgressThenStall",
    "Reset",
    "SessionExpired",
    "Stall",
    "Status",
    "StderrFlood",
    "StdoutNoise",
    "Terminating",
    "TokenExpired",
    "ToolError",
    "Truncate",
    "Unauthorized",
    "fault_kinds",
]


#: How the strategies draw one parameter: a ``range`` of integers or a tuple of values; either way
#: the first value is the one it shrinks toward.
Draw = range | tuple[Any, ...]

#: The grammar of a fault kind's name (a regular expression): lower-case ASCII letters, digits and
#: underscores, starting with a letter (``slow_5xx``). The class registry accepts exactly these names,
#: and the text form (:func:`~pytest_mcpfaults.faults.parse_fault`) and the CI report read a kind with it.
KIND_NAME = r"[a-z][a-z0-9_]*"

#: Where a fault kind acts (:attr:`Fault.phase`).
Phase = Literal["connection", "answer", "server_request", "body", "cancel", "child"]
#: Every :data:`Phase`, in the order a request meets them.
PHASES: tuple[Phase, ...] = get_args(Phase)
#: What a client's cancellation does to the request a fault fired on (:attr:`Fault.on_cancel`).
CancelEffect = Literal["stop", "ignore", "answer"]

#: Every fault kind by name, in the order the classes were defined (the catalogue order).
_REGISTRY: dict[str, type[Fault]] = {}

#: HTTP error statuses the strategies draw for the status kinds, the most common failure first.
_STATUS_CODES = (503, 500, 502, 429, 404, 400)

#: Each kind's bool parameters, read once from its annotations: (name, whether ``None`` is valid too).
_BOOL_PARAMS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _bool_params(cls: type) -> tuple[tuple[str, bool], ...]:
    """The parameters of ``cls`` annotated ``bool`` (or ``bool | None``, ``Optional[bool]``), whatever
    the kind: a kind of one's own gets its quoted booleans (``"false"``) refused too."""
    found = _BOOL_PARAMS.get(cls)
    if found is None:
        try:
            hints = get_type_hints(cls)
        except Exception:  # an annotation naming something not importable: read as written
            hints = {}
        kinds = {f.name: _bool_kind(hints.get(f.name, f.type)) for f in dataclasses.fields(cls)}
        found = _BOOL_PARAMS[cls] = tuple((n, k) for n, k in kinds.items() if k is not None)
    return found


def _bool_kind(annotation: object) -> bool | None:
    """``False`` for ``bool``, ``True`` for ``bool`` or ``None``, ``None`` for anything else."""
    if annotation in (bool, "bool"):
        return False
    if annotation in ("bool | None", "None | bool", "Optional[bool]"):
        return True
    return True if set(get_args(annotation)) == {bool, type(None)} else None


#: A check of one parameter (or, named ``when``, of the trigger): ``check(owner, name, value)``
#: raises a ``ValueError`` naming the kind's class, the parameter and the value when it is not valid.
Check = Callable[[str, str, Any], None]
_POSITIVE = partial(check_count, minimum=1)


def _http_status(*also: int) -> Check:
    valid = "".join(f"{code} or " for code in also) + "an HTTP error status in 400..599"

    def check(owner: str, name: str, value: object) -> None:
        if not is_integer(value) or not (value in also or 400 <= value <= 599):
            raise ValueError(f"{owner}: {name} must be {valid}, got {value!r}")

    return check


def _integer(owner: str, name: str, value: object) -> None:
    if not is_integer(value):
        raise ValueError(f"{owner}: {name} must be an integer, got {value!r}")


def _one_of(values: Sequence[str]) -> Check:
    def check(owner: str, name: str, value: object) -> None:
        if value not in values:
            raise ValueError(f"{owner}: {name} must be one of {', '.join(values)}, got {value!r}")

    return check


def _text(owner: str, name: str, value: object, *, optional: bool = False) -> None:
    if not isinstance(value, str) and not (optional and value is None):
        raise ValueError(
            f"{owner}: {name} must be a string{' or None' if optional else ''} "
            f'(in the text form, quote it: {name}="..."), got {value!r}'
        )


def _one_line(owner: str, name: str, value: object) -> None:
    if not isinstance(value, str) or "\n" in value or "\r" in value:
        raise ValueError(f"{owner}: {name} must be a string without line breaks, got {value!r}")


def _tool_target(owner: str, name: str, when: Trigger) -> None:
    target = when.target
    if target in ("*", "mcp", "tools/call") or target.startswith(("tool:", "POST ")):
        return
    raise ValueError(
        f"{owner}: answers tools/call only, so when= must be 'tools/call', 'tool:<name>', "
        f"'mcp', '*' or 'POST <path>', got {target!r}"
    )


def _request_target(owner: str, name: str, when: Trigger) -> None:
    target = when.target
    if target in ("health", "initialize") or target.startswith(("notifications/", "GET ", "DELETE ")):
        raise ValueError(
            f"{owner}: acts on a JSON-RPC request with an id (not initialize), so when= "
            f"must name one, e.g. 'tools/call', 'tool:<name>', 'mcp' or '*', got {target!r}"
        )


@dataclass(frozen=True)
class Seen:
    """What clients see of a kind, as the tests of the modules in ``proved`` measured it: one row of
    the catalogue in docs/faults.md (Markdown cells: its docs hook renders them, in registry order).
    ``variant`` names a variant of the kind given a row of its own (``Die(restart=True)``)."""

    #: Trigger examples, each a Python expression in backticks.
    examples: str
    #: What httpx sees; what the mcp 2.x ``Client`` sees; what mcp 1.x's ``ClientSession`` sees.
    httpx: str
    mcp2: str
    mcp1: str
    #: The test modules (``tests/``) that measured the row; one of them measures the mcp 1.x cell.
    proved: tuple[str, ...]
    variant: str = ""


@dataclass(frozen=True)
class Fault:
    """Base class of every fault. Subclasses are frozen dataclasses with a ``kind`` name.

    ``when`` takes a :class:`Trigger` or just its target string; ``None`` means the kind's default
    target. ``str(fault)`` gives the text form that :func:`parse_fault` reads back.

    A kind describes itself once, in the class attributes below; the strategies, the in-process
    backend, the matrix catalogue, the text form and the docs tables read them. Defining a subclass
    with a new ``kind`` registers it (:func:`fault_kinds`); :func:`unregister_fault_kind` forgets it.
    """

    #: The kind's name (:data:`KIND_NAME`); a built-in kind's is its class name in snake case
    #: (``BackendGone``: ``backend_gone``) unless it sets one, a private base (``_Blocking``) has none.
    kind: ClassVar[str] = ""
    #: Where the kind acts (one of :data:`PHASES`): ``'connection'`` (holds, delays or kills the request
    #: or the process before its answer), ``'answer'`` (forces the reply), ``'server_request'`` (acts on
    #: the requests the call's tool sends the client, and their answers), ``'body'`` (shapes the reply's
    #: bytes), ``'cancel'`` (decides what a client's cancellation of the request does: :attr:`on_cancel`)
    #: or ``'child'`` (acts on a stdio child or its pipes). Each other phase's behaviour lives in one
    #: module that dispatches on the class; a kind that subclasses a built-in one inherits both.
    phase: ClassVar[Phase] = "answer"
    #: The child event the kind reacts to instead of a request (``'eof'``: stdin closed; a signal
    #: name); ``''``: it acts on requests.
    event: ClassVar[str] = ""
    #: A blocking fault holds a request until release, teardown, or its patience budget runs out.
    blocking: ClassVar[bool] = False
    default_target: ClassVar[str] = "*"
    #: Where the kind stands among the kinds that draw as many parameters, in the order the strategies
    #: shrink toward (lower: simpler; ties keep definition order): ``strategies.kind_order()`` puts
    #: kinds drawing fewer parameters first whatever their rank, as Hypothesis shrinks.
    shrink_rank: ClassVar[int] = 1000
    #: How the strategies draw the kind's own parameters (name -> :data:`Draw`); parameters not
    #: named keep their defaults. Blocking kinds' ``patience``/``expect_hang`` are drawn for every one.
    draws: ClassVar[Mapping[str, Draw]] = {}
    #: Whether the strategies draw the kind when no ``kinds=`` is given (``False``: only when named:
    #: the cancel and resumption kinds, which act only on a client that cancels or resumes, and
    #: otherwise do nothing or hold as ``hang`` does).
    drawn_by_default: ClassVar[bool] = True
    #: Why the in-process backend cannot apply this kind honestly (``None``: it can).
    needs_sockets: ClassVar[str | None] = None
    #: The parameters of this kind's entry in the standard matrix catalogue, which aims it at the
    #: session's cleanup call unless its default target is ``health``; ``None``: not in the catalogue.
    catalogue_params: ClassVar[Mapping[str, Any] | None] = {}
    #: Why the kind is not in the standard catalogue; giving a reason leaves it out
    #: (:attr:`catalogue_params` becomes ``None``).
    not_in_catalogue: ClassVar[str] = ""
    #: The cells explore plans for this kind at each step it applies to, by name (name -> parameters):
    #: one run each, named ``<kind>.<name>`` in its id. Empty: the catalogue cell alone
    #: (:attr:`catalogue_params`), named by the kind.
    explore_cells: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: The transports the kind applies to: ``'http'`` (the socket sidecar; the in-process backend too
    #: unless :attr:`needs_sockets`) and ``'stdio'`` (a stdio child, :class:`~pytest_mcpfaults.StdioServer`).
    #: A backend refuses a kind that does not name its transport, saying which transports it has.
    transports: ClassVar[tuple[str, ...]] = ("http",)
    #: How a patience verdict names a request this kind held, ``{request}`` standing for the request
    #: (e.g. ``a hung {request}``); ``None``: named by what the client had received when the budget ran
    #: out (``a held {request}`` when nothing, ``the response to {request}`` otherwise).
    held_wording: ClassVar[str | None] = None
    #: The verdict's headline for a request this kind held, from ``{what}`` (the request, worded as
    #: above), ``{bytes_sent}`` and ``{idle}`` (how long its connection had been idle when it came,
    #: e.g. ``2.0 s``); ``None``: from what the client had received.
    held_headline: ClassVar[str | None] = None
    #: The kind acts on the bearer tokens of a sidecar that is an OAuth-protected resource (its
    #: ``auth=`` option, docs/auth.md): a sidecar without ``auth`` refuses it, naming the option.
    needs_auth: ClassVar[bool] = False
    #: The kind ends the transport session of the request it answers (on legacy SSE, its stream).
    ends_session: ClassVar[bool] = False
    #: What clients see of the kind (:class:`Seen`): its catalogue row, or a tuple of rows (its own,
    #: then a row per variant).
    seen: ClassVar[Seen | tuple[Seen, ...]] = ()
    #: How the kind acts on the legacy HTTP+SSE transport (Markdown; ``''``: not an HTTP kind).
    legacy_sse: ClassVar[str] = ""
    #: What a client's cancellation does to the request the kind fired on: ``'stop'`` (the answer being
    #: made is abandoned and the request gets no JSON-RPC response), ``'ignore'`` (it runs on and is
    #: answered in full) or ``'answer'`` (its hold ends and it is answered in full).
    on_cancel: ClassVar[CancelEffect] = "stop"
    #: With an upstream, the kind's forced reply rewrites the upstream's answer (the request is
    #: forwarded all the same) rather than answering in its place.
    rewrites_upstream: ClassVar[bool] = False
    #: The checks of the kind's own parameters at construction (name -> :data:`Check`; ``when``: of its
    #: trigger), run after its bases' and before :meth:`_validate`; a ``bool`` parameter needs none.
    checks: ClassVar[Mapping[str, Check]] = {}
    #: Once it fired, a request the client sends may go unread (the sidecar is down, frozen, or the
    #: connection went silent): session hygiene then holds no call that never reached the sidecar
    #: against the client (docs/sessions.md).
    stops_reading: ClassVar[bool] = False

    @property
    def revokes_token(self) -> bool:
        """Whether, with ``auth=``, the token of the request the fault answers is refused from then on."""
        return False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is None and cls.__module__ == __name__ and not cls.__name__.startswith("_"):
            kind = cls.kind = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
        if cls.phase not in PHASES:
            raise TypeError(
                f"{cls.__qualname__}: phase must be one of {', '.join(PHASES)}, got {cls.phase!r}"
            )
        if cls.__dict__.get("not_in_catalogue"):  # a kind that says why it is left out is left out
            cls.catalogue_params = None
        if not kind:
            return  # an abstract base (no kind of its own)
        if not isinstance(kind, str) or re.fullmatch(KIND_NAME, kind) is None:
            raise TypeError(
                f"{cls.__qualname__}: kind must be a name of lower-case ASCII letters, digits and "
                f"underscores starting with a letter ({KIND_NAME}), got {kind!r}"
            )
        known = _REGISTRY.get(kind)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise TypeError(
                f"{cls.__qualname__}: fault kind {kind!r} is already defined by {known.__module__}."
                f"{known.__qualname__}"
            )
        _REGISTRY[kind] = cls

    #: As given: a :class:`Trigger`, a target string or ``None``; normalised to a ``Trigger`` at
    #: construction. Read it back typed as :attr:`trigger`.
    when: Trigger | str | None = field(default=None, kw_only=True, compare=True)

    @property
    def trigger(self) -> Trigger:
        """The fault's :class:`Trigger` (``when=`` after normalisation)."""
        assert isinstance(self.when, Trigger)  # __post_init__ normalised it
        return self.when

    def __post_init__(self) -> None:
        when: object = self.default_target if self.when is None else self.when
        if isinstance(when, str):
            when = Trigger(when)
        elif not isinstance(when, Trigger):
            raise ValueError(
                f"{type(self).__name__}: when must be a Trigger or a target string, got {when!r}"
            )
        object.__setattr__(self, "when", when)
        owner = type(self).__name__
        for name, optional in _bool_params(type(self)):  # every bool parameter, whatever the kind
            check_bool(owner, name, getattr(self, name), optional=optional)
        for cls in reversed(type(self).__mro__):
            for name, check in vars(cls).get("checks", {}).items():
                check(owner, name, getattr(self, name))
        self._validate()

    def _validate(self) -> None:
        """What :attr:`checks` cannot say (a parameter that depends on another): raise ``ValueError``
        naming the bad one."""

    def params(self) -> dict[str, Any]:
        """The fault's own parameters (without ``when``), as given."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "when"}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :func:`fault_from_dict` is its inverse."""
        return {"kind": self.kind, **self.params(), "when": dataclasses.asdict(self.trigger)}

    def __str__(self) -> str:
        shown = [
            f"{f.name}={format_value(getattr(self, f.name))}"
            for f in dataclasses.fields(self)
            if f.name != "when" and (f.default is dataclasses.MISSING or getattr(self, f.name) != f.default)
        ]
        text = self.kind + (f"({','.join(shown)})" if shown else "")
        if self.trigger.target != self.default_target or self.trigger.describe():
            text += f"@{self.trigger.target}"
        return text + self.trigger.describe()


@dataclass(frozen=True)
class _Blocking(Fault):
    """A fault that holds a request. ``patience`` overrides the sidecar's budget for this fault;
    ``expect_hang=True`` says the test expects the client to wait it out (reported, not failed)."""

    blocking: ClassVar[bool] = True
    patience: float | None = field(default=None, kw_only=True)
    expect_hang: bool = field(default=False, kw_only=True)

    checks: ClassVar[Mapping[str, Check]] = {"patience": partial(check_seconds, optional=True, positive=True)}


# -- process level -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Die(Fault):
    """The sidecar process dies on this request: the listener closes (new connections are refused)
    and every open connection, this one included, is reset. ``restart=True`` comes back at once on
    the same port with every transport and benchmark session forgotten (a crash-looping pod)."""

    phase: ClassVar[Phase] = "connection"
    stops_reading: ClassVar[bool] = True
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 110
    draws: ClassVar[Mapping[str, Draw]] = {"restart": (False, True)}
    seen: ClassVar[Seen | tuple[Seen, ...]] = (
        Seen(
            examples='`when=Trigger("tools/call", nth=2)`',
            httpx="open request: `ReadError` (RST); next request: `ConnectError`",
            mcp2=(
                "the call is cancelled (`CancelledError`); leaving `async with` raises "
                "`ExceptionGroup[httpx2.ReadError]`; DELETE never arrives"
            ),
            mcp1=(
                "the call is cancelled; leaving `async with` raises `ExceptionGroup[httpx.ReadError]`; "
                "DELETE never arrives. Kept session: **hangs without a read timeout**"
            ),
            proved=("test_faults_process.py", "test_faults_mcp1.py"),
        ),
        Seen(
            variant="Die(restart=True)",
            examples='`"tools/call"`',
            httpx=(
                "open request: `ReadError`; the next request is answered (new connection), but its "
                "session is gone: 404"
            ),
            mcp2="the call in flight fails as for `Die`",
            mcp1="the call in flight fails as for `Die` (kept session: **hangs without a read timeout**)",
            proved=("test_faults_process.py", "test_faults_mcp1.py"),
        ),
    )
    legacy_sse: ClassVar[str] = (
        "on a message: its 202, then the process dies (the stream is reset); on the stream: as on any request"
    )
    restart: bool = False


@dataclass(frozen=True)
class Freeze(_Blocking):
    """The process stops answering (like SIGSTOP): connections are accepted, nothing is answered,
    this request and all later ones are held until ``release()``, teardown or the patience budget."""

    phase: ClassVar[Phase] = "connection"
    stops_reading: ClassVar[bool] = True
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 160
    held_wording: ClassVar[str | None] = "a frozen {request}"
    needs_sockets: ClassVar[str | None] = "it holds every request on an open connection until released"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`when=Trigger("tools/call", times=1)`',
        httpx="`ReadTimeout` at its own timeout; every later request held too",
        mcp2=(
            "stateless: `MCPError(\"Request 'tools/call' timed out\")`, the POST is closed. Session "
            "era: same `MCPError`, but **the POST stays open** until patience aborts it; then exit "
            "raises `ExceptionGroup[ReadError]`; `notifications/cancelled` and `DELETE` are frozen "
            "too"
        ),
        mcp1=(
            "no read timeout: held until patience aborts the POST, then as for `Die`. With "
            '`read_timeout_seconds`: `McpError("Timed out …")`, but **the POST stays open** until '
            "patience aborts it; exit raises `ExceptionGroup[httpx.ReadError]`; `DELETE` is frozen "
            "too"
        ),
        proved=("test_faults_process.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the matched POST or GET is held, and every later request"


# -- answers that never come, or come late -------------------------------------------------------


@dataclass(frozen=True)
class Hang(_Blocking):
    """Hold the request without answering (no status line, no bytes)."""

    phase: ClassVar[Phase] = "connection"
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 140
    held_wording: ClassVar[str | None] = "a hung {request}"
    needs_sockets: ClassVar[str | None] = "it holds a request on an open connection that never answers"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`"health"`, `"DELETE /mcp"`',
        httpx="`ReadTimeout` (no status line, no byte)",
        mcp2="`MCPError … timed out` with `read_timeout_seconds`",
        mcp1=(
            "no read timeout: held until patience aborts it, then as for `Die`; with "
            '`read_timeout_seconds`: `McpError("Timed out …")`, the POST is closed, a clean exit '
            "(`DELETE`)"
        ),
        proved=("test_faults_health.py", "test_incidents.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the matched POST (no 202) or GET (no status line) is held"


@dataclass(frozen=True)
class Blackhole(_Blocking):
    """The connection goes silent under the request (an idle keep-alive connection a NAT or load
    balancer dropped: no FIN, no RST): the request is never answered, and nothing more is read from
    the connection or written to it (the bytes the client sends are dropped; its close is still seen).
    ``idle``: only a request that comes on a connection idle at least that many seconds (since it
    opened or its previous request ended): a pooled connection reused after a quiet spell, while a
    fresh one, or one reused sooner, is answered (``None``: any request). Toxiproxy's ``timeout`` toxic
    with no timeout. Held until release (the path comes back: the request is answered), the client's close,
    teardown or patience (reset)."""

    phase: ClassVar[Phase] = "connection"
    stops_reading: ClassVar[bool] = True
    shrink_rank: ClassVar[int] = 145
    drawn_by_default: ClassVar[bool] = False
    draws: ClassVar[Mapping[str, Draw]] = {"idle": (None, 0.0)}
    not_in_catalogue: ClassVar[str] = (
        "at the cleanup call a client cannot tell it from `hang`; its own case is a pooled connection "
        "reused after `idle` seconds (see docs/hangs.md)"
    )
    held_wording: ClassVar[str | None] = "a blackholed {request}"
    held_headline: ClassVar[str | None] = (
        "{what}, never answered: its connection, idle {idle} before it, went silent as it came (no FIN, "
        "no RST: nothing more was read from it or written to it, as when a NAT or load balancer drops an "
        "idle connection), and the client never closed it"
    )
    needs_sockets: ClassVar[str | None] = "it silences a live TCP connection (no FIN, no RST)"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples=(
            '`Blackhole(idle=30, when="tools/call")` (a pooled connection reused after 30 s idle), '
            '`Blackhole(when="health")`'
        ),
        httpx=(
            "no status line, no byte: `ReadTimeout`; what it sends on the connection meanwhile is never "
            'read, its close is seen (`hold="client_closed"`); with `idle`, a fresh connection, or '
            "one reused sooner, is answered"
        ),
        mcp2=(
            "`MCPError … timed out` with `read_timeout_seconds`, the POST is closed and the next call "
            "(a new connection) is answered; without: held until patience resets it, then exit raises "
            "`ExceptionGroup[httpx2.ReadError]`"
        ),
        mcp1=(
            "no read timeout: held until patience resets it, then as for `Die`; with "
            '`read_timeout_seconds`: `McpError("Timed out …")`, a clean exit'
        ),
        proved=("test_faults_blackhole.py",),
    )
    legacy_sse: ClassVar[str] = (
        "the matched POST (no 202) or GET (no status line) is held, its connection silent"
    )
    idle: float | None = None

    checks: ClassVar[Mapping[str, Check]] = {"idle": partial(check_seconds, optional=True)}


@dataclass(frozen=True)
class Delay(Fault):
    """Answer after ``seconds`` plus a uniform jitter in ``[0, jitter]`` drawn from ``seed``.

    ``after=False`` (the default) waits before the request is handled: a proxy forwards it late, a tool
    runs late. ``after=True`` waits once the answer is made, before it is sent: the tool has run, a
    proxied upstream has answered (its status and headers are in), and the client hears of it late."""

    phase: ClassVar[Phase] = "connection"
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 100
    draws: ClassVar[Mapping[str, Draw]] = {"seconds": (0.0, 0.001, 0.005, 0.02, 0.05)}
    catalogue_params: ClassVar[Mapping[str, Any] | None] = {"seconds": 0.2}
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples=(
            '`Delay(0.5, jitter=0.1, seed=7, when="tools/call")`, `Delay(0.5, after=True)` (the tool '
            "runs, or a proxied upstream answers, then the wait)"
        ),
        httpx="the answer, late; `ReadTimeout` if its timeout is shorter (not a hold: no patience)",
        mcp2="`MCPError … timed out` when `read_timeout_seconds` < delay",
        mcp1='the answer, late; `McpError("Timed out …")` when `read_timeout_seconds` < delay',
        proved=("test_faults_health.py", "test_faults_answers.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "the matched POST (its 202 and reply) or GET is late; `after=True`: the 202 at once, the reply "
        "event late (the tool runs, then the wait)"
    )
    seconds: float = 0.1
    jitter: float = 0.0
    seed: int = 0
    after: bool = False

    checks: ClassVar[Mapping[str, Check]] = {
        "seconds": check_seconds,
        "jitter": check_seconds,
        "seed": check_count,
    }


# -- answers with the wrong status ---------------------------------------------------------------


@dataclass(frozen=True)
class Status(Fault):
    """Answer with an HTTP status (500, 502, 503, 429 …). ``retry_after`` adds a ``Retry-After``
    header. Use the trigger's ``times`` for a sequence: ``Status(503, when=Trigger('health', times=3))``
    answers 503 three times, then the sidecar answers normally (a runner that is starting up)."""

    shrink_rank: ClassVar[int] = 90
    draws: ClassVar[Mapping[str, Draw]] = {"code": _STATUS_CODES}
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`when=Trigger("health", times=3)`',
        httpx='that status, `{"error": "injected HTTP 503"}` (or `body`), `Retry-After` if set',
        mcp2='`MCPError("Server returned an error response")` (500/502/503/429 alike; no retry)',
        mcp1=(
            "no `McpError`: the call is cancelled; exit raises "
            "`ExceptionGroup[httpx.HTTPStatusError(\"Server error '503 …'\")]` (429/500/503 alike; no "
            "retry); kept session: **hangs without a read timeout**"
        ),
        proved=("test_faults_health.py", "test_faults_answers.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the matched POST's or GET's own answer"
    code: int = 503
    retry_after: int | None = None
    body: str | None = None

    checks: ClassVar[Mapping[str, Check]] = {
        "code": _http_status(),
        "retry_after": partial(check_count, optional=True),
    }


@dataclass(frozen=True)
class Flap(Fault):
    """Alternate between healthy and failing: ``every`` requests answered normally, then ``every``
    answered with ``code``, and so on (counted over matching requests)."""

    shrink_rank: ClassVar[int] = 170
    draws: ClassVar[Mapping[str, Draw]] = {"every": range(1, 4), "code": _STATUS_CODES}
    default_target: ClassVar[str] = "health"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`Flap(every=2)`",
        httpx="`every` answers OK, then `every` answers `code`, … (healthy first)",
        mcp2="—",
        mcp1="—",
        proved=("test_faults_health.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the matched POST's or GET's own answer"
    every: int = 1
    code: int = 503

    checks: ClassVar[Mapping[str, Check]] = {"every": _POSITIVE, "code": _http_status()}


@dataclass(frozen=True)
class Absent(Fault):
    """Answer 404 as if the route did not exist (real exgentic sidecars have no ``/health``)."""

    shrink_rank: ClassVar[int] = 40
    default_target: ClassVar[str] = "health"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`Absent()`, `Absent(when="mcp")`',
        httpx='404 `{"error": "Not Found"}`, byte-identical to a sidecar with `health_path=None`',
        mcp2="—",
        mcp1="—",
        proved=("test_faults_health.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "404 for the matched POST or GET"


@dataclass(frozen=True)
class Terminating(Fault):
    """A terminating pod: ``/health`` keeps saying ready while matching requests (default: every MCP
    request) are refused with ``503`` and ``Connection: close``."""

    shrink_rank: ClassVar[int] = 50
    default_target: ClassVar[str] = "mcp"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`Terminating()`",
        httpx=(
            "`/health` still 200; MCP 503 JSON-RPC error `-32000` with `Connection: close` (journal: "
            '`closed_by="sidecar"`)'
        ),
        mcp2=(
            "`auto`: `server/discover` 503 → falls back to `initialize` → 503 → "
            '`ExceptionGroup[MCPError("Service Unavailable: the server is terminating")]`'
        ),
        mcp1=(
            "no fallback (mcp 1.x speaks the session era only): `initialize` gets 503 and entering "
            "`async with` raises `ExceptionGroup[httpx.HTTPStatusError(\"… '503 Service Unavailable' "
            '…")]`'
        ),
        proved=("test_faults_health.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "503 JSON-RPC error as the POST's own answer, `Connection: close`"


# -- bodies --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stall(_Blocking):
    """Send the status line, headers and the first ``after_bytes`` bytes of the body (JSON or SSE,
    as the sidecar replies), then hold: the client has a response whose body never ends."""

    phase: ClassVar[Phase] = "body"
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 190
    draws: ClassVar[Mapping[str, Draw]] = {"after_bytes": range(33)}
    needs_sockets: ClassVar[str | None] = "it keeps a connection checked out with a body that never ends"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`Stall(after_bytes=10, when="tools/call")`',
        httpx="status + headers + `after_bytes` of the body (JSON or SSE), then `ReadTimeout`",
        mcp2=("`MCPError … timed out`, the POST is closed (both eras); after `release()` the call completes"),
        mcp1=(
            "**hangs without a read timeout**: when patience cuts the response the client logs ERROR "
            "`Error parsing JSON response` and the call never returns; with `read_timeout_seconds`: "
            '`McpError("Timed out …")`, the POST is closed, a clean exit'
        ),
        proved=("test_faults_bodies.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "at a message: `after_bytes` of its reply event, then the stream holds; at the stream: "
        "`after_bytes` of the stream (0: no endpoint event)"
    )
    after_bytes: int = 0

    checks: ClassVar[Mapping[str, Check]] = {"after_bytes": check_count}


@dataclass(frozen=True)
class Drip(Fault):
    """Send the body ``chunk_bytes`` at a time with ``interval`` seconds between chunks."""

    phase: ClassVar[Phase] = "body"
    shrink_rank: ClassVar[int] = 180
    draws: ClassVar[Mapping[str, Draw]] = {"chunk_bytes": (64, 16, 4), "interval": (0.0, 0.001)}
    needs_sockets: ClassVar[str | None] = "it paces a body's bytes over a live connection"
    catalogue_params: ClassVar[Mapping[str, Any] | None] = {"chunk_bytes": 16, "interval": 0.01}
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`Drip(chunk_bytes=8, interval=0.01)`",
        httpx="the whole body, slowly",
        mcp2="the result, slowly",
        mcp1="the result, slowly",
        proved=("test_faults_bodies.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the reply event slowly; at the stream: every event"
    chunk_bytes: int = 1
    interval: float = 0.01

    checks: ClassVar[Mapping[str, Check]] = {"chunk_bytes": _POSITIVE, "interval": check_seconds}


@dataclass(frozen=True)
class Truncate(Fault):
    """Announce the full body, send ``after_bytes`` of it, then close the connection cleanly (FIN)."""

    phase: ClassVar[Phase] = "body"
    shrink_rank: ClassVar[int] = 120
    draws: ClassVar[Mapping[str, Draw]] = {"after_bytes": range(33)}
    needs_sockets: ClassVar[str | None] = "it closes a live connection in the middle of a body"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`Truncate(after_bytes=10)`",
        httpx=(
            'announced length, `after_bytes` sent, FIN: `RemoteProtocolError("… received 10 bytes '
            '…")` (SSE: "incomplete chunked read")'
        ),
        mcp2="call cancelled; exit raises `ExceptionGroup[httpx2.RemoteProtocolError]`",
        mcp1=(
            "**hangs without a read timeout**: logs ERROR `Error parsing JSON response`, the call "
            'never returns; with `read_timeout_seconds`: `McpError("Timed out …")`'
        ),
        proved=("test_faults_bodies.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the stream ends (FIN) `after_bytes` into the reply event, or into the stream"
    after_bytes: int = 0

    checks: ClassVar[Mapping[str, Check]] = {"after_bytes": check_count}


@dataclass(frozen=True)
class Reset(Fault):
    """Send ``after_bytes`` bytes of the response (0: nothing at all), then reset the connection (RST)."""

    phase: ClassVar[Phase] = "body"
    shrink_rank: ClassVar[int] = 130
    draws: ClassVar[Mapping[str, Draw]] = {"after_bytes": range(33)}
    needs_sockets: ClassVar[str | None] = "it resets a live TCP connection"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`Reset()`, `Reset(after_bytes=10)`",
        httpx=(
            "`after_bytes=0`: RST before the status line: `ReadError`; otherwise status 200, then "
            "`ReadError` while reading the body"
        ),
        mcp2="call cancelled; exit raises `ExceptionGroup[httpx2.ReadError]`",
        mcp1=(
            "`after_bytes=0`: as for `Die` (kept session: **hangs without a read timeout**); "
            "otherwise as for `Truncate`: **hangs without a read timeout**"
        ),
        proved=("test_faults_bodies.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "RST `after_bytes` into the reply event, or into the stream (0 at the stream: before the status line)"
    )
    after_bytes: int = 0

    checks: ClassVar[Mapping[str, Check]] = {"after_bytes": check_count}


@dataclass(frozen=True)
class MalformedJson(Fault):
    """Answer 200 with a body that is not valid JSON (the reply cut in half, length announced right)."""

    phase: ClassVar[Phase] = "body"
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 60
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`MalformedJson(when="tools/call")`',
        httpx="200 with half the body and a matching `Content-Length`",
        mcp2='`MCPError("Failed to parse JSON response …")`, the client logs an ERROR and goes on',
        mcp1=(
            "**hangs without a read timeout**: logs ERROR `Error parsing JSON response`, the call "
            'never returns; with `read_timeout_seconds`: `McpError("Timed out …")`'
        ),
        proved=("test_faults_bodies.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "the reply event's JSON halved (framing kept); at the stream: every message event"
    )


@dataclass(frozen=True)
class EndlessSse(_Blocking):
    """Answer as ``text/event-stream``: send the reply's event, then keep the stream open and never
    end it. A client that waits for the end of the stream waits until release or its own timeout."""

    phase: ClassVar[Phase] = "body"
    shrink_rank: ClassVar[int] = 150
    held_wording: ClassVar[str | None] = "the never-ending SSE stream answering {request}"
    held_headline: ClassVar[str | None] = "{what} ({bytes_sent} bytes sent) and never closed the connection"
    needs_sockets: ClassVar[str | None] = (
        "it keeps a connection checked out with an event stream that never ends"
    )
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`EndlessSse(when="tools/call")`',
        httpx="`text/event-stream`: the reply's event, then the stream never ends: `ReadTimeout`",
        mcp2=(
            "**harmless**: the result is returned and the client closes the stream (journal: "
            '`hold="client_closed"`)'
        ),
        mcp1="as for mcp 2.x",
        proved=("test_faults_bodies.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "the reply event, then the stream holds; at the stream: after the endpoint event"
    )


# -- messages of the sidecar's own, before the answer ------------------------------------------------

_NOT_CLEANUP = (
    "it sends notifications on a request's answer stream: aimed at a tools/call (with a progressToken), "
    "not at the session's cleanup call, where it is a hang or a plain answer"
)


@dataclass(frozen=True)
class ProgressThenStall(_Blocking):
    """Answer a request as an SSE stream, report progress ``count`` times (``notifications/progress``
    with the request's ``progressToken``, ``interval`` seconds apart; none when it carries no token),
    then hold: the work seems to be going on, and the answer never comes. A client that resets its
    timeout on progress still gives up (or waits for ever); patience bounds it."""

    phase: ClassVar[Phase] = "connection"
    default_target: ClassVar[str] = "tools/call"
    shrink_rank: ClassVar[int] = 195
    draws: ClassVar[Mapping[str, Draw]] = {"count": range(4), "interval": (0.0, 0.01)}
    needs_sockets: ClassVar[str | None] = "it keeps an answer stream open after its progress notifications"
    not_in_catalogue: ClassVar[str] = _NOT_CLEANUP
    held_wording: ClassVar[str | None] = "the answer to {request}"
    held_headline: ClassVar[str | None] = (
        "{what}, which reported progress and then went quiet ({bytes_sent} bytes sent: the status line "
        "and the progress notifications, never the result), and never closed the connection"
    )
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`ProgressThenStall(count=5, interval=0.1, when="tool:echo")`',
        httpx=(
            "`text/event-stream`: `count` `notifications/progress` events (with the request's "
            "`progressToken`; none without one), then nothing: `ReadTimeout`"
        ),
        mcp2=(
            "the `progress_callback` gets each, then the call waits: `MCPError(\"Request 'tools/call' "
            'timed out")` at `read_timeout_seconds` (**progress does not reset it**), else held '
            "until patience cuts it (exit raises `ExceptionGroup`); after `release()` the tool's "
            "result on the same stream"
        ),
        mcp1=(
            "the `progress_callback` gets each; no read timeout: **hangs** (patience cuts the "
            'stream, the call never returns); with `read_timeout_seconds`: `McpError("Timed out …")`'
        ),
        proved=("test_faults_notifications.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "no notification (the POST gets no 202): the matched POST is held"
    count: int = 3
    interval: float = 0.0

    checks: ClassVar[Mapping[str, Check]] = {"count": check_count, "interval": check_seconds}


@dataclass(frozen=True)
class NotificationFlood(Fault):
    """Answer a request as an SSE stream whose ``count`` notifications come first, as fast as the
    connection takes them (``notifications/progress`` when the request carries a ``progressToken``,
    else ``notifications/message`` at ``info``, whatever level the client asked for), then the normal
    answer: a client that handles each on its read path, or logs each, falls behind."""

    phase: ClassVar[Phase] = "connection"
    default_target: ClassVar[str] = "tools/call"
    shrink_rank: ClassVar[int] = 185
    draws: ClassVar[Mapping[str, Draw]] = {"count": (1, 10, 100)}
    needs_sockets: ClassVar[str | None] = "it streams notifications on a live answer stream"
    not_in_catalogue: ClassVar[str] = _NOT_CLEANUP
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`NotificationFlood(count=10_000, when="tool:echo")`',
        httpx="`text/event-stream`: `count` notification events, then the reply's event",
        mcp2=(
            "the result, after `count` calls of the `logging_callback` (no `progressToken`) or the "
            "`progress_callback` (with one); 300 take well under a second"
        ),
        mcp1="as for mcp 2.x",
        proved=("test_faults_notifications.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "no notification: the POST gets 202 and its reply on the stream, as without the fault"
    )
    count: int = 1000

    checks: ClassVar[Mapping[str, Check]] = {"count": _POSITIVE}


# -- the server's own requests to the client, sent by the call's tool (docs/server-requests.md) ------

#: How :class:`MalformedServerRequest` breaks its message.
MALFORMED_FORMS = ("bad_json", "no_id", "no_method")


@dataclass(frozen=True)
class _ServerRequestFault(Fault):
    """A fault on the requests the call's tool sends the client, drawn only when named."""

    phase: ClassVar[Phase] = "server_request"
    default_target: ClassVar[str] = "tools/call"
    drawn_by_default: ClassVar[bool] = False
    needs_sockets: ClassVar[str | None] = (
        "it acts on a tool's requests to the client, which only the socket sidecar sends"
    )
    not_in_catalogue: ClassVar[str] = (
        "it acts on the requests a tool sends the client during its call (ctx.elicit, ctx.sample ...: "
        "docs/server-requests.md), not on the session's cleanup call"
    )


@dataclass(frozen=True)
class MalformedServerRequest(_ServerRequestFault):
    """A buggy server (or a proxy mangling its stream): each request the call's tool sends the client
    is preceded, on the call's answer stream, by a malformed copy of it: ``form='bad_json'`` (the
    event's data is the message cut in half, not JSON), ``'no_id'`` (no ``id``: to JSON-RPC a
    notification of an unknown method) or ``'no_method'`` (an ``id`` of its own and no ``method``:
    neither a request nor a response). The request itself follows, well formed: a client that skips
    what it cannot read answers it and the call ends normally; one that fails on it, or closes the
    stream, loses the call. In the stateless era the ``input_required`` result's ``inputRequests``
    carries the malformed copy first, under ``<key>-malformed`` (``bad_json``: a string, half the
    request's JSON text, where an object belongs; ``no_id`` does not fire there: the keys are the
    ids)."""

    shrink_rank: ClassVar[int] = 230
    draws: ClassVar[Mapping[str, Draw]] = {"form": MALFORMED_FORMS}
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples=(
            '`MalformedServerRequest(when="tool:ask_user")`, `MalformedServerRequest("no_method")` '
            "(forms: `bad_json`, `no_id`, `no_method`)"
        ),
        httpx=(
            "session era: on the call's `text/event-stream`, the malformed copy's event (half a JSON "
            "text; the message without `id`; an `id` of its own without `method`), then the request "
            "itself, then (answered) the result; stateless: the `input_required` result's "
            "`inputRequests` has the copy first, under `<key>-malformed` (`no_id` does not fire)"
        ),
        mcp2=(
            '`bad_json`, `no_method`: **the call fails**: `MCPError(-32700, "Failed to parse SSE '
            'message: …")`, the request is never answered; the session goes on (the next call '
            "returns, a clean exit). `no_id`: skipped (an unknown notification), the call returns. "
            "Stateless: the call raises pydantic's `ValidationError` (not an `MCPError`) and never "
            "retries; the next call returns"
        ),
        mcp1=(
            "each form is skipped (it logs `Error parsing SSE message` / `Failed to validate "
            "notification`), the request is answered and the call returns"
        ),
        proved=("test_faults_server_requests.py",),
    )
    legacy_sse: ClassVar[str] = (
        "no: a tool's requests to the client are not sent on legacy SSE (the call answers `isError`)"
    )
    form: str = "bad_json"

    checks: ClassVar[Mapping[str, Check]] = {"form": _one_of(MALFORMED_FORMS), "when": _tool_target}


@dataclass(frozen=True)
class DuplicateServerRequest(_ServerRequestFault):
    """Each request the call's tool sends the client goes out ``copies`` times on the call's answer
    stream, with the same JSON-RPC id (a server that retries, a proxy that replays an event). The
    first answer goes to the tool; the journal keeps each copy and the answers to the others. Session
    era only."""

    shrink_rank: ClassVar[int] = 240
    draws: ClassVar[Mapping[str, Draw]] = {"copies": (2, 3)}
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`DuplicateServerRequest(copies=3, when="tool:ask_user")`',
        httpx="session era: the same request event `copies` times, one id",
        mcp2=(
            'answers each copy (journal: the copies `outcome="duplicate"` with their answers, each '
            "POST 202); the call returns"
        ),
        mcp1="as for mcp 2.x",
        proved=("test_faults_server_requests.py",),
    )
    legacy_sse: ClassVar[str] = "no: as for `malformed_server_request`"
    copies: int = 2

    checks: ClassVar[Mapping[str, Check]] = {"copies": partial(check_count, minimum=2), "when": _tool_target}


@dataclass(frozen=True)
class DropClientAnswer(_ServerRequestFault):
    """A lossy proxy: the client's answer to the first request the call's tool sends it is lost. In the
    session era its ``POST`` is answered ``status`` (``202``: accepted, as usual; an error status: the
    proxy failed) and never handed to the tool, which waits until the patience budget ends the call
    (the verdict's headline says the sidecar dropped the client's answer). In the stateless era the
    retry carrying the answer is answered ``-32602`` (HTTP 400) as by a server that lost the round's
    ``requestState``, and the tool's handler is cancelled."""

    shrink_rank: ClassVar[int] = 250
    draws: ClassVar[Mapping[str, Draw]] = {"status": (202, 500)}
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`DropClientAnswer(when="tool:ask_user")`, `DropClientAnswer(500)`',
        httpx=(
            "session era: its answer POST gets `status`, the call's stream stays open until patience "
            "resets it; stateless: the retry gets `-32602` (HTTP 400)"
        ),
        mcp2=(
            "session era: waits (a 500 on its answer POST is ignored) until patience cuts the "
            'stream: `MCPError("SSE stream ended without a response")`, exit raises '
            '`ExceptionGroup`; the headline: "the sidecar dropped the client\'s answer to …". '
            'Stateless: `MCPError(-32602, "Invalid params: requestState … names no input round …")` '
            "at once"
        ),
        mcp1=(
            "`status=202`: **hangs without a read timeout** (patience cuts the stream, the call "
            "never returns); `status=500`: its answer POST raises `HTTPStatusError` inside the "
            'transport and the call fails at once with `McpError("Connection closed")`'
        ),
        proved=("test_faults_server_requests.py",),
    )
    legacy_sse: ClassVar[str] = "no: as for `malformed_server_request`"
    status: int = 202

    checks: ClassVar[Mapping[str, Check]] = {"status": _http_status(202), "when": _tool_target}


# -- protocol-level answers ----------------------------------------------------------------------


@dataclass(frozen=True)
class JsonRpcError(Fault):
    """Answer a JSON-RPC error with ``code`` and ``message`` (HTTP 200) instead of the result."""

    kind: ClassVar[str] = "jsonrpc_error"
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 80
    draws: ClassVar[Mapping[str, Draw]] = {"code": (-32603, -32000, -32601)}
    default_target: ClassVar[str] = "mcp"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`JsonRpcError(-32001, "backend exploded", when="tools/call")`',
        httpx="200 with a JSON-RPC `error`",
        mcp2="`MCPError` with that `.code` and `.message`",
        mcp1="`McpError` with that `.error.code` and message",
        proved=("test_faults_answers.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "on the stream, the POST gets 202"
    code: int = -32603
    message: str = "Internal error"

    checks: ClassVar[Mapping[str, Check]] = {"code": _integer}


@dataclass(frozen=True)
class ToolError(Fault):
    """Answer a ``tools/call`` with a tool result carrying ``isError: true`` and ``text``."""

    rewrites_upstream: ClassVar[bool] = True
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 20
    default_target: ClassVar[str] = "tools/call"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`ToolError(text="disk full", when="tool:echo")`',
        httpx="200, result with `isError: true`",
        mcp2="no exception: `result.is_error` is true",
        mcp1="no exception: `result.isError` is true",
        proved=("test_faults_answers.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "on the stream, the POST gets 202"
    text: str = "tool failed"

    checks: ClassVar[Mapping[str, Check]] = {"when": _tool_target}


@dataclass(frozen=True)
class SessionExpired(Fault):
    """The transport session expired: the sidecar forgets it and answers 404 "Session not found"
    (and so does every later request that carries it)."""

    ends_session: ClassVar[bool] = True
    shrink_rank: ClassVar[int] = 30
    default_target: ClassVar[str] = "mcp"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`when=Trigger("tools/call", nth=2)`',
        httpx="404 `Session not found`; the session is forgotten, later requests with it get 404 too",
        mcp2=(
            '`MCPError("Session not found")`, no re-initialise; exit\'s DELETE gets 404: WARNING '
            '"Session termination failed: 404", swallowed'
        ),
        mcp1=(
            "`McpError(\"Session terminated\")` (the SDK's text, not the sidecar's), no re-initialise; "
            'exit\'s DELETE gets 404: WARNING "Session termination failed: 404", swallowed'
        ),
        proved=("test_faults_answers.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "the POST gets 404 `Could not find session`, the stream ends (FIN)"


@dataclass(frozen=True)
class BackendGone(Fault):
    """The benchmark session's backing service died: ``delete_session`` answers
    ``{"error": "Error closing session <id>: Service at <url> is no longer alive"}``, other tools
    ``{"error": "Service at <url> is no longer alive"}``. ``service_url`` defaults to the sidecar's."""

    rewrites_upstream: ClassVar[bool] = True
    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 10
    default_target: ClassVar[str] = "tool:delete_session"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`BackendGone()`, `BackendGone(when="tool:evaluate_session")`',
        httpx="200, a successful tool result whose text is the error payload",
        mcp2=(
            '`delete_session` → `{"error": "Error closing session <id>: Service at '
            'http://127.0.0.1:<port> is no longer alive"}`; other tools: `{"error": "Service at … is '
            'no longer alive"}`'
        ),
        mcp1="as for mcp 2.x (`result.isError` false)",
        proved=("test_incidents.py", "test_faults_answers.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "on the stream, the POST gets 202"
    service_url: str | None = None

    checks: ClassVar[Mapping[str, Check]] = {"when": _tool_target}


_DEFAULT_REASON = "backend timed out"
_DELETE_MESSAGE = "Error closing session {session_id}: {reason}"
_PLACEHOLDERS = "{reason}, {tool}, {service_url} or a tool argument such as {session_id}"
#: The incident's error text (a benchmark sidecar whose backing service died), as ``backend_gone``
#: words it, with the sidecar's own URL.
_GONE = "Service at {service_url} is no longer alive"


def _template_names(owner: str, name: str, template: str) -> tuple[str, ...]:
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(
            f"{owner}: {name} is not a valid template ({exc}; write {{{{ and }}}} for literal braces), "
            f"got {template!r}"
        ) from None
    names: list[str] = []
    for _, field_name, spec, conversion in fields:
        if field_name is None:
            continue
        if not field_name.isidentifier() or spec or conversion:
            shown = "{" + field_name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise ValueError(
                f"{owner}: {name} placeholders must be plain names ({_PLACEHOLDERS}), "
                f"got {shown + '}'!r} in {template!r}"
            )
        names.append(field_name)
    return tuple(names)


class _KeepMissing(dict[str, str]):
    """Template values; a placeholder without a value stays in the text as written."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class ErrorPayload(Fault):
    """Answer a ``tools/call`` with a successful tool result (no ``isError``) whose text is the JSON
    ``{"error": <message>}``: how an exgentic-style benchmark sidecar reports a failed call. By
    default a failed ``delete_session`` with a given ``reason``:
    ``{"error": "Error closing session <id>: backend timed out"}``. The tool itself does not run (a
    benchmark session whose delete failed stays live).

    ``message`` is a template with the placeholders ``{reason}``, ``{tool}`` (the tool's name),
    ``{service_url}`` (the sidecar's URL, ``http://127.0.0.1:<port>``) and ``{<argument>}`` (an
    argument of the call, e.g. ``{session_id}``; ``reason``, ``tool`` and ``service_url`` win over
    arguments of those names); ``{{`` and ``}}`` are literal braces, and a placeholder the call has no
    argument for stays as written. ``None`` (the default) is ``"Error closing session {session_id}:
    {reason}"`` for a ``delete_session`` call with a ``session_id`` and ``"{reason}"`` for any other
    call. A ``reason`` that ``message`` does not use is refused (it would be silently dropped).
    """

    transports: ClassVar[tuple[str, ...]] = ("http", "stdio")
    shrink_rank: ClassVar[int] = 70
    #: none is "already gone", so a harness that treats "already gone" as a clean no-op still fails
    draws: ClassVar[Mapping[str, Draw]] = {
        "reason": ("backend timed out", "connection reset by peer", "internal error")
    }
    not_in_catalogue: ClassVar[str] = (
        "at the delete it is the failed delete backend_gone already stages, with another reason"
    )
    #: Explore answers each tool call with each of these error texts in turn: a harness that matches
    #: error text (rather than the call's outcome) is found with no fault written. The incident's text
    #: with the sidecar's own URL, the same in capitals, a missing session, a generic failure.
    explore_cells: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "gone": {"message": _GONE},
        "gone_upper": {"message": "SERVICE AT {service_url} IS NO LONGER ALIVE"},
        "not_found": {"message": "session not found"},
        "failed": {"message": "{tool} failed: internal error"},
    }
    default_target: ClassVar[str] = "tool:delete_session"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples=(
            '`when=Trigger("tool:delete_session", times=1)`, `ErrorPayload("quota exceeded", "Cannot '
            'create {task_id}: {reason}", when="tool:create_session")`'
        ),
        httpx=('200, a successful tool result whose text is `{"error": <message>}`; the tool does not run'),
        mcp2=(
            '`delete_session` → `{"error": "Error closing session <id>: backend timed out"}`, '
            '`result.is_error` false; other tools: `{"error": "<reason>"}`'
        ),
        mcp1="as for mcp 2.x (`result.isError` false)",
        proved=("test_faults_answers.py", "test_incidents.py", "test_cli.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = "on the stream, the POST gets 202"
    reason: str = _DEFAULT_REASON
    message: str | None = None

    checks: ClassVar[Mapping[str, Check]] = {
        "when": _tool_target,
        "reason": _text,
        "message": partial(_text, optional=True),
    }

    def _validate(self) -> None:
        if self.message is None:
            return
        names = _template_names("ErrorPayload", "message", self.message)
        if "reason" not in names and self.reason != _DEFAULT_REASON:
            raise ValueError(
                f"ErrorPayload: reason={self.reason!r} would be dropped: message={self.message!r} has no "
                "{reason} placeholder"
            )

    def error_message(self, tool: str | None, arguments: Mapping[str, Any], service_url: str = "") -> str:
        """The ``"error"`` text this fault answers to a call of ``tool`` with ``arguments``, on the
        sidecar at ``service_url`` (``{service_url}`` stays as written without one)."""
        template = self.message
        if template is None:
            deleting = tool == "delete_session" and "session_id" in arguments
            template = _DELETE_MESSAGE if deleting else "{reason}"
        values = _KeepMissing({str(k): str(v) for k, v in arguments.items()})
        values.update(reason=self.reason, tool=tool or "")
        if service_url:
            values["service_url"] = service_url
        return template.format_map(values)


# -- authorization (a sidecar with auth=, docs/auth.md) ------------------------------------------


@dataclass(frozen=True)
class _AuthFault(Fault):
    needs_auth: ClassVar[bool] = True
    needs_sockets: ClassVar[str | None] = (
        "it answers a bearer token, which only a sidecar with auth= (an authorization server) checks"
    )
    not_in_catalogue: ClassVar[str] = "it needs a sidecar with auth="
    legacy_sse: ClassVar[str] = "no (`auth=` serves Streamable HTTP only)"


@dataclass(frozen=True)
class Unauthorized(_AuthFault):
    """401 mid-session: the sidecar answers ``401`` with ``WWW-Authenticate: Bearer
    error="invalid_token", resource_metadata="<its protected resource metadata>"`` and, with
    ``revoke=True``, revokes the token the request carried, so a retry with the same token is refused
    too and only a new token (refreshed or granted again) gets through."""

    shrink_rank: ClassVar[int] = 200
    default_target: ClassVar[str] = "mcp"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples=(
            '`Unauthorized(when=Trigger("tool:delete_session", times=1))` (a 401 mid-session), '
            "`Unauthorized(revoke=False)`"
        ),
        httpx=(
            '`401`, `WWW-Authenticate: Bearer error="invalid_token", '
            'resource_metadata="<sidecar>/.well-known/oauth-protected-resource/mcp", '
            'error_description="…"`; the token is revoked (`revoke=True`): a retry with it gets 401 '
            "too"
        ),
        mcp2=(
            "with the SDK's OAuth provider "
            "(`httpx2.AsyncClient(auth=ClientCredentialsOAuthProvider(…))`): it rediscovers, gets a "
            "new token (`client_credentials`), retries once: the call returns. With a static token: "
            '`MCPError("Server returned an error response")`; exit\'s DELETE gets 401: WARNING '
            '"Session termination failed: 401", swallowed'
        ),
        mcp1=(
            "with mcp 1.x's `ClientCredentialsOAuthProvider` as `auth=`: a new token, the call "
            "returns. With a static token in `headers=`: the call is cancelled; exit raises "
            "`ExceptionGroup[httpx.HTTPStatusError(\"Client error '401 Unauthorized' …\")]`; DELETE "
            "never arrives"
        ),
        proved=("test_auth.py", "test_faults_mcp1.py"),
    )
    revoke: bool = True

    @property
    def revokes_token(self) -> bool:
        return self.revoke


@dataclass(frozen=True)
class TokenExpired(_AuthFault):
    """A token stops working after ``calls`` MCP requests: each later request carrying it is answered
    ``401`` with ``WWW-Authenticate: Bearer error="invalid_token", error_description="The access
    token expired", resource_metadata="..."``. Counted per token, so a refreshed token gets ``calls``
    requests of its own."""

    shrink_rank: ClassVar[int] = 210
    draws: ClassVar[Mapping[str, Draw]] = {"calls": range(0, 4)}
    default_target: ClassVar[str] = "mcp"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`TokenExpired(calls=3)`",
        httpx=(
            'each token works for `calls` MCP requests, then `401` with `error="invalid_token", '
            'error_description="The access token expired"`, counted per token'
        ),
        mcp2=(
            "the OAuth provider gets a new token at every expiry, each call returns (the default "
            "`OAuthClientProvider` signs in again with a new authorization code); a static token: "
            '`MCPError("Server returned an error response")` once its calls are spent'
        ),
        mcp1="the OAuth provider: as for mcp 2.x; a static token: as for `Unauthorized`",
        proved=("test_auth.py", "test_faults_mcp1.py"),
    )
    calls: int = 1

    checks: ClassVar[Mapping[str, Check]] = {"calls": check_count}


@dataclass(frozen=True)
class InsufficientScope(_AuthFault):
    """A step-up: a request whose token lacks ``scope`` is answered ``403`` with ``WWW-Authenticate:
    Bearer error="insufficient_scope", scope="<scope>", resource_metadata="..."``; once the client
    holds a token granted ``scope`` (it asked the token endpoint for it) the request goes through."""

    shrink_rank: ClassVar[int] = 220
    default_target: ClassVar[str] = "tools/call"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`InsufficientScope("tasks:write")`',
        httpx=(
            '`403`, `WWW-Authenticate: Bearer error="insufficient_scope", scope="tasks:write", '
            'resource_metadata="…", error_description="…"` until the token was granted the scope'
        ),
        mcp2=(
            "the OAuth provider steps up (asks for the union of its scopes and `scope`, no "
            'rediscovery) and retries: the call returns. A static token: `MCPError("Server returned '
            'an error response")`'
        ),
        mcp1=(
            "the OAuth provider steps up as mcp 2.x's; a static token: as for `Unauthorized`, with "
            "`403 Forbidden`"
        ),
        proved=("test_auth.py", "test_faults_mcp1.py"),
    )
    scope: str = "mcp:write"

    def _validate(self) -> None:
        if not isinstance(self.scope, str) or not re.fullmatch(r"[!#-\[\]-~]+( [!#-\[\]-~]+)*", self.scope):
            raise ValueError(
                "InsufficientScope: scope must be space-separated OAuth scope tokens (printable ASCII "
                f"without quotes or backslashes, RFC 6749 3.3), got {self.scope!r}"
            )


# -- cancellation: what a client's notifications/cancelled does ------------------------------------

_NOT_AT_CLEANUP = "it acts only when the client cancels the call it fires on (see docs/cancellation.md)"


@dataclass(frozen=True)
class IgnoreCancel(Fault):
    """A server that does not implement cancellation: a ``notifications/cancelled`` naming the request
    this fault fired on changes nothing. Its tool runs to the end and its result is sent as if the
    client had never cancelled (without the fault the sidecar stops the tool and sends no response: an
    event stream that ends without an event)."""

    phase: ClassVar[Phase] = "cancel"
    on_cancel: ClassVar[CancelEffect] = "ignore"
    drawn_by_default: ClassVar[bool] = False
    shrink_rank: ClassVar[int] = 200
    needs_sockets: ClassVar[str | None] = (
        "a cancel reaches a call only while the call runs; the in-process backend answers one request "
        "at a time, so a cancel is answered after the call it names"
    )
    default_target: ClassVar[str] = "tools/call"
    not_in_catalogue: ClassVar[str] = _NOT_AT_CLEANUP
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`IgnoreCancel(when="tool:sleep")`',
        httpx=(
            "a `notifications/cancelled` naming the call changes nothing: the tool runs to its end "
            "and its result is sent (without the fault the tool is stopped and no JSON-RPC response "
            "is sent)"
        ),
        mcp2=(
            "`MCPError(\"Request 'tools/call' timed out\")` at its read timeout, as without the fault; "
            "it cancels and closes the POST, so the late result is not read (journal: "
            '`cancel.outcome="ignored"`)'
        ),
        mcp1=(
            "never cancelled (mcp 1.x sends no `notifications/cancelled` at its read timeout), so as "
            'without the fault: `McpError("Timed out …")`'
        ),
        proved=("test_cancellation.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "yes: the cancelled message's call runs on and its reply event is sent in full"
    )

    checks: ClassVar[Mapping[str, Check]] = {"when": _request_target}


@dataclass(frozen=True)
class AnswerAfterCancel(_Blocking):
    """Hold the request (nothing is sent) until the client cancels it, then answer it in full anyway:
    the result of a call the client has given up on arrives after its ``notifications/cancelled``
    (the race the spec says a client must tolerate: it ignores the late response). A client that
    never cancels waits until release, teardown or the patience budget."""

    phase: ClassVar[Phase] = "connection"
    on_cancel: ClassVar[CancelEffect] = "answer"
    drawn_by_default: ClassVar[bool] = False
    shrink_rank: ClassVar[int] = 210
    default_target: ClassVar[str] = "tools/call"
    not_in_catalogue: ClassVar[str] = _NOT_AT_CLEANUP
    held_wording: ClassVar[str | None] = "{request}, held until the client cancels it"
    needs_sockets: ClassVar[str | None] = "it holds a request on an open connection until it is cancelled"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`AnswerAfterCancel(when="tool:echo")`',
        httpx=(
            "nothing (the result is made and held) until it sends `notifications/cancelled` naming "
            "the call; then the whole result"
        ),
        mcp2=(
            "`MCPError … timed out` at its read timeout; its cancel releases the result, sent after "
            'it (journal: `hold="cancelled"`); leaving `async with` sometimes raises '
            "`ExceptionGroup[BrokenResourceError]` (the late result lands while the client closes)"
        ),
        mcp1=(
            'never cancelled, so held as for `Hang`: `McpError("Timed out …")` at the read timeout, '
            "the POST is closed, a clean exit"
        ),
        proved=("test_cancellation.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "yes: the POST gets 202, the reply is made and held (on the stream's connection) until the "
        "cancel, then sent on the stream"
    )

    checks: ClassVar[Mapping[str, Check]] = {"when": _request_target}


# -- resumption: an event stream closed gracefully, resumed with Last-Event-ID ---------------------


@dataclass(frozen=True)
class CloseStream(Fault):
    """Answer as an event stream whose events carry ids (a priming event, empty, then the reply), and
    close it gracefully after ``after_events`` of them with a ``retry: <retry_ms>`` field (SEP-1699,
    2025-11-25): the rest is replayed to a ``GET`` of the MCP endpoint whose ``Last-Event-ID`` names
    an event of this stream (in its session). A client that does not come back, or comes back without
    ``Last-Event-ID``, never gets the reply. Session era only (resumption needs a session)."""

    phase: ClassVar[Phase] = "body"
    drawn_by_default: ClassVar[bool] = False
    shrink_rank: ClassVar[int] = 220
    default_target: ClassVar[str] = "tools/call"
    draws: ClassVar[Mapping[str, Draw]] = {"after_events": (1, 0)}
    not_in_catalogue: ClassVar[str] = "it asks the client to resume a stream (see docs/resumption.md)"
    needs_sockets: ClassVar[str | None] = "the client resumes its stream with a GET on a live connection"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`CloseStream(retry_ms=500, when="tool:echo")`',
        httpx=(
            "`text/event-stream` whose events carry ids: the priming event (`id: <n>-0`, empty "
            "data), then `retry: 200`, and the response ends without the reply; a `GET` with "
            "`Last-Event-ID: <n>-0` gets the reply's event (a `GET` without it: 405, the reply is "
            "never sent)"
        ),
        mcp2=(
            "resumes: after the retry, a `GET` with `Last-Event-ID`; the call returns its result "
            "(journal: `closed_streams[0].resumed_with`)"
        ),
        mcp1="resumes as mcp 2.x does (1.30.0): the call returns its result",
        proved=("test_resumption.py", "test_faults_mcp1.py"),
    )
    legacy_sse: ClassVar[str] = (
        "not measured: resumption is a Streamable HTTP mechanism (the legacy stream has no "
        "`Last-Event-ID` replay)"
    )
    after_events: int = 1
    retry_ms: int = 200

    checks: ClassVar[Mapping[str, Check]] = {
        "after_events": check_count,
        "retry_ms": check_count,
        "when": _request_target,
    }


# -- stdio only: the child process and its pipes ----------------------------------------------------

_STDIO_ONLY = "a stdio-only kind (it acts on a stdio child process or its pipes, not on HTTP)"


@dataclass(frozen=True)
class _StdioFault(Fault):
    phase: ClassVar[Phase] = "child"
    transports: ClassVar[tuple[str, ...]] = ("stdio",)
    not_in_catalogue: ClassVar[str] = _STDIO_ONLY
    needs_sockets: ClassVar[str | None] = _STDIO_ONLY


@dataclass(frozen=True)
class _ProcessFault(_StdioFault):
    """A stdio fault that answers no request: it decides what the child does when an event arrives
    (stdin closing, a signal). Its trigger counts those events (``nth=2``: the second one)."""

    def _validate(self) -> None:
        if self.trigger.target != "*":
            raise ValueError(
                f"{type(self).__name__}: counts {self.event} events, not requests, so when= takes no target "
                f"(only '*', with nth/after/times/probability), got {self.trigger.target!r}"
            )


@dataclass(frozen=True)
class IgnoreEof(_ProcessFault):
    """The stdio child keeps running after its stdin closes (a server that never reads EOF as "exit"):
    a client that closes stdin and waits for the exit waits until it signals the child, or forever."""

    shrink_rank: ClassVar[int] = 300
    event: ClassVar[str] = "eof"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`IgnoreEof()`; its trigger counts stdin closings",
        httpx="— (stdio only)",
        mcp2="stdio: `stdio_client` closes stdin, waits 2 s, SIGTERMs (the child dies of it)",
        mcp1="stdio: as for mcp 2.x (closes stdin, waits 2 s, SIGTERMs)",
        proved=("test_stdio.py", "test_stdio_interop.py", "test_faults_mcp1.py"),
    )


@dataclass(frozen=True)
class IgnoreSigterm(_ProcessFault):
    """The stdio child ignores SIGTERM (and SIGINT, SIGHUP): only SIGKILL ends it. The trigger counts
    the signals: ``IgnoreSigterm(when=Trigger(times=1))`` ignores the first and dies of the next."""

    shrink_rank: ClassVar[int] = 310
    event: ClassVar[str] = "SIGTERM"
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples="`IgnoreSigterm(when=Trigger(times=1))`: the first signal only",
        httpx="— (stdio only)",
        mcp2=(
            "stdio, with `IgnoreEof`: close takes 4 s (SIGKILL 2 s after SIGTERM); with a budget, a "
            "verdict at the budget"
        ),
        mcp1="stdio, with `IgnoreEof`: as for mcp 2.x, close takes 4 s",
        proved=("test_stdio.py", "test_stdio_interop.py", "test_faults_mcp1.py"),
    )


#: The most a stdio fault writes on one of the child's pipes: 256 pipe buffers (64 KiB on Linux), past
#: which a flood only slows the run; ``stdout_noise``'s lines are built in the sidecar's memory first.
MAX_PIPE_BYTES = 1 << 24


def _pipe_bytes(fault: Fault, name: str, total: int) -> None:
    if total > MAX_PIPE_BYTES:
        raise ValueError(
            f"{type(fault).__name__}: {name} must be at most {MAX_PIPE_BYTES} bytes (16 MiB: 256 pipe "
            f"buffers), got {total}"
        )


@dataclass(frozen=True)
class StderrFlood(_StdioFault):
    """Before answering the matching request the stdio child writes ``bytes`` of log lines to stderr.
    A client that never reads the child's stderr pipe (64 KiB on Linux) leaves the child blocked in
    that write: the answer, and every later one, never comes."""

    shrink_rank: ClassVar[int] = 320
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`StderrFlood(when="tools/call")`',
        httpx="— (stdio only)",
        mcp2=("stdio: with stderr a pipe nobody reads the child blocks in the write: `MCPError … timed out`"),
        mcp1=('stdio: the child blocks in the write: `McpError("Timed out …")` with `read_timeout_seconds`'),
        proved=("test_stdio.py", "test_faults_mcp1.py"),
    )
    bytes: int = 1 << 20

    checks: ClassVar[Mapping[str, Check]] = {"bytes": _POSITIVE}

    def _validate(self) -> None:
        _pipe_bytes(self, "bytes", self.bytes)


@dataclass(frozen=True)
class StdoutNoise(_StdioFault):
    """Before answering the matching request the stdio child writes ``lines`` lines of ``text`` on
    stdout: not JSON-RPC (a stray ``print``, a banner, a library's log line on the wrong stream)."""

    shrink_rank: ClassVar[int] = 330
    seen: ClassVar[Seen | tuple[Seen, ...]] = Seen(
        examples='`StdoutNoise(lines=3, when="tools/call")`',
        httpx="— (stdio only)",
        mcp2="stdio: the SDK logs a parse error per line and returns the result",
        mcp1="stdio: the SDK logs a parse error per line and returns the result",
        proved=("test_stdio.py", "test_faults_mcp1.py"),
    )
    text: str = "mcpfaults: this line is not JSON-RPC"
    lines: int = 1

    checks: ClassVar[Mapping[str, Check]] = {"text": _one_line, "lines": _POSITIVE}

    def _validate(self) -> None:
        _pipe_bytes(self, "lines × (len(text) + 1)", self.lines * (len(self.text) + 1))


def check_transport(plan: Sequence[Fault], transport: str, who: str) -> None:
    """Refuse a fault whose kind does not apply to ``transport`` (``'http'`` or ``'stdio'``), naming it,
    the transports it has, and the kinds that do apply."""
    for fault in plan:
        if transport not in fault.transports:
            valid = [k for k, cls in _REGISTRY.items() if transport in cls.transports]
            raise ValueError(
                f"{who}: fault {str(fault)!r} is {'/'.join(fault.transports)}-only: {fault.kind!r} does not "
                f"apply to {transport}; the {transport} kinds: {', '.join(valid)}"
            )


def catalogue_rows() -> list[tuple[type[Fault], Seen]]:
    """The rows of the catalogue of what clients see (docs/faults.md): each kind's :attr:`Fault.seen`,
    in registry order (a kind's variants after its own row); the docs hook writes the table, adding
    each kind's parameters and default target from the class."""
    rows = [(cls, cls.seen if isinstance(cls.seen, tuple) else (cls.seen,)) for cls in _REGISTRY.values()]
    return [(cls, seen) for cls, seen_rows in rows for seen in seen_rows]


def fault_kinds() -> dict[str, type[Fault]]:
    """Every fault kind by name, in catalogue order (the built-in kinds, then kinds defined later)."""
    return dict(_REGISTRY)


def check_kind_names(
    argname: str, kinds: object, valid: Sequence[str], *, left_out: Mapping[str, str] | None = None
) -> list[str]:
    """The fault kind names ``kinds`` gives (names or :class:`Fault` classes, in its order), each one
    of ``valid``; a ``ValueError`` naming ``argname``, the bad value and the valid kinds otherwise. A
    kind in ``left_out`` (name -> why) is refused with its reason (the matrix catalogue's exclusions)."""
    listed = ", ".join(valid)
    if isinstance(kinds, (str, bytes, type)) or not isinstance(kinds, Iterable):
        raise ValueError(
            f"{argname} must be a list of fault kind names or Fault classes, got {kinds!r}; "
            f"valid kinds: {listed}"
        )
    names: list[str] = []
    for k in kinds:
        name = k.kind if isinstance(k, type) and issubclass(k, Fault) else k
        if left_out and isinstance(name, str) and name in left_out:
            raise ValueError(
                f"{argname}: fault kind {name!r} is not in the standard catalogue ({left_out[name]});"
                f" give it as faults=[...] instead; catalogue kinds: {listed}"
            )
        if not isinstance(name, str) or name not in valid:
            raise ValueError(f"{argname}: unknown fault kind {k!r}; valid kinds: {listed}")
        names.append(name)
    return names


def unregister_fault_kind(kind: str) -> None:
    """Forget a kind registered by defining a ``Fault`` subclass (a test's made-up kind, say), so
    nothing that lists the kinds shows it any more. Built-in kinds cannot be unregistered."""
    cls = _REGISTRY.get(kind)
    if cls is None:
        raise ValueError(f"unregister_fault_kind: unknown fault kind {kind!r}; known: {', '.join(_REGISTRY)}")
    if cls.__module__ == __name__:
        raise ValueError(f"unregister_fault_kind: {kind!r} is a built-in fault kind")
    del _REGISTRY[kind]
