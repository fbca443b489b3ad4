"""Faults and triggers as data: frozen, comparable, printable, serialisable; no I/O.

A *fault* says how a request is answered; its *trigger* (``when=``) says which requests. Faults are
plain frozen dataclasses, so plans compare, hash and print, and the CI report and the command line
read and write them in one text form (:func:`parse_fault` is the inverse of ``str(fault)``)::

    Stall(after_bytes=0, when="tools/call")           # str: stall(after_bytes=0)@tools/call
    Status(502, when=Trigger("health", times=3))      # str: status(code=502)@health[times=3]
    BackendGone()                                     # str: backend_gone@tool:delete_session

Triggers count requests, never wall-clock time, so a run is reproducible.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "MCP_METHODS",
    "Absent",
    "BackendGone",
    "Delay",
    "Die",
    "Drip",
    "EndlessSse",
    "Fault",
    "Flap",
    "Freeze",
    "Hang",
    "JsonRpcError",
    "MalformedJson",
    "Reset",
    "SessionExpired",
    "Stall",
    "Status",
    "Terminating",
    "ToolError",
    "Trigger",
    "Truncate",
    "fault_from_dict",
    "fault_kinds",
    "format_plan",
    "parse_fault",
    "parse_plan",
]

#: MCP methods a trigger may name directly. Any other method: ``method:<name>``.
MCP_METHODS: tuple[str, ...] = (
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
)
_HTTP_METHODS = ("GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS")
_TARGET_HELP = (
    "'*', 'health', 'mcp', an MCP method (e.g. 'tools/call'), 'tool:<name>', "
    "'<HTTP method> <path>' (e.g. 'DELETE /mcp'), '/<path>', or 'method:<any MCP method>'"
)


def _check_count(owner: str, name: str, value: object, *, minimum: int = 0, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        want = "a positive integer" if minimum == 1 else "a non-negative integer"
        if optional:
            want += " or None"
        raise ValueError(f"{owner}: {name} must be {want}, got {value!r}")


def _check_seconds(
    owner: str, name: str, value: object, *, optional: bool = False, positive: bool = False
) -> None:
    if value is None and optional:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    if ok and (value > 0 if positive else value >= 0):  # type: ignore[operator]
        return
    want = "a positive number of seconds" if positive else "a non-negative number of seconds"
    raise ValueError(f"{owner}: {name} must be {want}{' or None' if optional else ''}, got {value!r}")


def check_target(target: object) -> str:
    """Validate a trigger target and return it; raise ``ValueError`` naming the bad value otherwise."""
    if not isinstance(target, str) or not target.strip():
        raise ValueError(f"Trigger: target must be a non-empty string ({_TARGET_HELP}), got {target!r}")
    if target in ("*", "health", "mcp") or target in MCP_METHODS:
        return target
    if target.startswith("/"):
        return target
    prefix, _, rest = target.partition(":")
    if prefix in ("tool", "method") and rest.strip():
        return target
    verb, _, path = target.partition(" ")
    if verb in _HTTP_METHODS and path.startswith("/"):
        return target
    raise ValueError(f"Trigger: target {target!r} is unknown; valid targets: {_TARGET_HELP}")


@dataclass(frozen=True)
class Trigger:
    """Which requests a fault applies to. All counts are over requests matching ``target``.

    * ``target``: ``'*'`` (any request), ``'health'``, ``'mcp'`` (the MCP endpoint), an MCP method
      (``'tools/call'``), ``'tool:delete_session'``, ``'DELETE /mcp'``, ``'/any/path'``, ``'method:x/y'``.
    * ``nth``: fire only on the nth matching request (1-based).
    * ``after``: let the first ``after`` matching requests through untouched.
    * ``times``: fire at most this many times (``None``: every eligible request).
    * ``probability`` with ``seed``: fire on each eligible request with this probability, drawn from
      a generator seeded with ``seed`` (deterministic: the same requests fire on every run).
    """

    target: str = "*"
    nth: int | None = None
    after: int = 0
    times: int | None = None
    probability: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_target(self.target)
        _check_count("Trigger", "nth", self.nth, minimum=1, optional=True)
        _check_count("Trigger", "after", self.after)
        _check_count("Trigger", "times", self.times, optional=True)
        p = self.probability
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Trigger: probability must be a number in [0, 1], got {p!r}")
        _check_count("Trigger", "seed", self.seed)

    def describe(self) -> str:
        """The trigger in the text form's bracket syntax (without the target), '' when all default."""
        parts = []
        for f in dataclasses.fields(self):
            if f.name == "target":
                continue
            value = getattr(self, f.name)
            if value != f.default:
                parts.append(f"{'p' if f.name == 'probability' else f.name}={value}")
        return f"[{','.join(parts)}]" if parts else ""


class TriggerState:
    """The counting state of one trigger inside one sidecar (not part of the value type)."""

    __slots__ = ("fired", "rng", "seen", "trigger")

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = trigger
        self.seen = 0
        self.fired = 0
        self.rng = random.Random(trigger.seed)

    def consider(self) -> bool:
        """Count one matching request and say whether the fault fires on it."""
        t = self.trigger
        self.seen += 1
        if self.seen <= t.after or (t.nth is not None and self.seen != t.nth):
            return False
        if t.times is not None and self.fired >= t.times:
            return False
        if t.probability < 1.0 and self.rng.random() >= t.probability:
            return False
        self.fired += 1
        return True


@dataclass(frozen=True)
class Fault:
    """Base class of every fault. Subclasses are frozen dataclasses with a ``kind`` name.

    ``when`` takes a :class:`Trigger` or just its target string; ``None`` means the kind's default
    target. ``str(fault)`` gives the text form that :func:`parse_fault` reads back.
    """

    kind: ClassVar[str] = ""
    #: A blocking fault holds a request until release, teardown, or its patience budget runs out.
    blocking: ClassVar[bool] = False
    default_target: ClassVar[str] = "*"

    #: As given: a :class:`Trigger`, a target string or ``None``; normalised to a ``Trigger`` at
    #: construction. Read it back typed as :attr:`trigger`.
    when: Trigger | str | None = field(default=None, kw_only=True, compare=True)

    @property
    def trigger(self) -> Trigger:
        """The fault's :class:`Trigger` (``when=`` after normalisation)."""
        assert isinstance(self.when, Trigger)  # __post_init__ normalised it
        return self.when

    def __post_init__(self) -> None:
        when: object = self.when
        if when is None:
            when = Trigger(self.default_target)
        elif isinstance(when, str):
            when = Trigger(when)
        elif not isinstance(when, Trigger):
            raise ValueError(
                f"{type(self).__name__}: when must be a Trigger or a target string, got {when!r}"
            )
        object.__setattr__(self, "when", when)
        self._validate()

    def _validate(self) -> None:
        """Subclasses check their parameters here and raise ``ValueError`` naming the bad one."""

    def params(self) -> dict[str, Any]:
        """The fault's own parameters (without ``when``), as given."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "when"}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :func:`fault_from_dict` is its inverse."""
        return {"kind": self.kind, **self.params(), "when": dataclasses.asdict(self.trigger)}

    def __str__(self) -> str:
        shown = [
            f"{f.name}={_format_value(getattr(self, f.name))}"
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

    def _validate(self) -> None:
        _check_seconds(type(self).__name__, "patience", self.patience, optional=True, positive=True)
        if not isinstance(self.expect_hang, bool):
            raise ValueError(
                f"{type(self).__name__}: expect_hang must be True or False, got {self.expect_hang!r}"
            )


# -- process level -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Die(Fault):
    """The sidecar process dies on this request: the listener closes (new connections are refused)
    and every open connection, this one included, is reset. ``restart=True`` comes back at once on
    the same port with every transport and benchmark session forgotten (a crash-looping pod)."""

    kind: ClassVar[str] = "die"
    restart: bool = False


@dataclass(frozen=True)
class Freeze(_Blocking):
    """The process stops answering (like SIGSTOP): connections are accepted, nothing is answered,
    this request and all later ones are held until ``release()``, teardown or the patience budget."""

    kind: ClassVar[str] = "freeze"


# -- answers that never come, or come late -------------------------------------------------------


@dataclass(frozen=True)
class Hang(_Blocking):
    """Hold the request without answering (no status line, no bytes)."""

    kind: ClassVar[str] = "hang"


@dataclass(frozen=True)
class Delay(Fault):
    """Answer after ``seconds`` plus a uniform jitter in ``[0, jitter]`` drawn from ``seed``."""

    kind: ClassVar[str] = "delay"
    seconds: float = 0.1
    jitter: float = 0.0
    seed: int = 0

    def _validate(self) -> None:
        _check_seconds("Delay", "seconds", self.seconds)
        _check_seconds("Delay", "jitter", self.jitter)
        _check_count("Delay", "seed", self.seed)


# -- answers with the wrong status ---------------------------------------------------------------


@dataclass(frozen=True)
class Status(Fault):
    """Answer with an HTTP status (500, 502, 503, 429 …). ``retry_after`` adds a ``Retry-After``
    header. Use the trigger's ``times`` for a sequence: ``Status(503, when=Trigger('health', times=3))``
    answers 503 three times, then the sidecar answers normally (a runner that is starting up)."""

    kind: ClassVar[str] = "status"
    code: int = 503
    retry_after: int | None = None
    body: str | None = None

    def _validate(self) -> None:
        if isinstance(self.code, bool) or not isinstance(self.code, int) or not 400 <= self.code <= 599:
            raise ValueError(f"Status: code must be an HTTP error status in 400..599, got {self.code!r}")
        _check_count("Status", "retry_after", self.retry_after, optional=True)


@dataclass(frozen=True)
class Flap(Fault):
    """Alternate between healthy and failing: ``every`` requests answered normally, then ``every``
    answered with ``code``, and so on (counted over matching requests)."""

    kind: ClassVar[str] = "flap"
    default_target: ClassVar[str] = "health"
    every: int = 1
    code: int = 503

    def _validate(self) -> None:
        _check_count("Flap", "every", self.every, minimum=1)
        if isinstance(self.code, bool) or not isinstance(self.code, int) or not 400 <= self.code <= 599:
            raise ValueError(f"Flap: code must be an HTTP error status in 400..599, got {self.code!r}")


@dataclass(frozen=True)
class Absent(Fault):
    """Answer 404 as if the route did not exist (real exgentic sidecars have no ``/health``)."""

    kind: ClassVar[str] = "absent"
    default_target: ClassVar[str] = "health"


@dataclass(frozen=True)
class Terminating(Fault):
    """A terminating pod: ``/health`` keeps saying ready while matching requests (default: every MCP
    request) are refused with ``503`` and ``Connection: close``."""

    kind: ClassVar[str] = "terminating"
    default_target: ClassVar[str] = "mcp"


# -- bodies --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stall(_Blocking):
    """Send the status line, headers and the first ``after_bytes`` bytes of the body (JSON or SSE,
    as the sidecar replies), then hold: the client has a response whose body never ends."""

    kind: ClassVar[str] = "stall"
    after_bytes: int = 0

    def _validate(self) -> None:
        super()._validate()
        _check_count("Stall", "after_bytes", self.after_bytes)


@dataclass(frozen=True)
class Drip(Fault):
    """Send the body ``chunk_bytes`` at a time with ``interval`` seconds between chunks."""

    kind: ClassVar[str] = "drip"
    chunk_bytes: int = 1
    interval: float = 0.01

    def _validate(self) -> None:
        _check_count("Drip", "chunk_bytes", self.chunk_bytes, minimum=1)
        _check_seconds("Drip", "interval", self.interval)


@dataclass(frozen=True)
class Truncate(Fault):
    """Announce the full body, send ``after_bytes`` of it, then close the connection cleanly (FIN)."""

    kind: ClassVar[str] = "truncate"
    after_bytes: int = 0

    def _validate(self) -> None:
        _check_count("Truncate", "after_bytes", self.after_bytes)


@dataclass(frozen=True)
class Reset(Fault):
    """Send ``after_bytes`` bytes of the response (0: nothing at all), then reset the connection (RST)."""

    kind: ClassVar[str] = "reset"
    after_bytes: int = 0

    def _validate(self) -> None:
        _check_count("Reset", "after_bytes", self.after_bytes)


@dataclass(frozen=True)
class MalformedJson(Fault):
    """Answer 200 with a body that is not valid JSON (the reply cut in half, length announced right)."""

    kind: ClassVar[str] = "malformed_json"


@dataclass(frozen=True)
class EndlessSse(_Blocking):
    """Answer as ``text/event-stream``: send the reply's event, then keep the stream open and never
    end it. A client that waits for the end of the stream waits until release or its own timeout."""

    kind: ClassVar[str] = "endless_sse"


# -- protocol-level answers ----------------------------------------------------------------------


@dataclass(frozen=True)
class JsonRpcError(Fault):
    """Answer a JSON-RPC error with ``code`` and ``message`` (HTTP 200) instead of the result."""

    kind: ClassVar[str] = "jsonrpc_error"
    default_target: ClassVar[str] = "mcp"
    code: int = -32603
    message: str = "Internal error"

    def _validate(self) -> None:
        if isinstance(self.code, bool) or not isinstance(self.code, int):
            raise ValueError(f"JsonRpcError: code must be an integer, got {self.code!r}")


def _check_tool_target(fault: Fault) -> None:
    target = fault.trigger.target
    if target in ("*", "mcp", "tools/call") or target.startswith(("tool:", "POST ")):
        return
    raise ValueError(
        f"{type(fault).__name__}: answers tools/call only, so when= must be 'tools/call', 'tool:<name>', "
        f"'mcp', '*' or 'POST <path>', got {target!r}"
    )


@dataclass(frozen=True)
class ToolError(Fault):
    """Answer a ``tools/call`` with a tool result carrying ``isError: true`` and ``text``."""

    kind: ClassVar[str] = "tool_error"
    default_target: ClassVar[str] = "tools/call"
    text: str = "tool failed"

    def _validate(self) -> None:
        _check_tool_target(self)


@dataclass(frozen=True)
class SessionExpired(Fault):
    """The transport session expired: the sidecar forgets it and answers 404 "Session not found"
    (and so does every later request that carries it)."""

    kind: ClassVar[str] = "session_expired"
    default_target: ClassVar[str] = "mcp"


@dataclass(frozen=True)
class BackendGone(Fault):
    """The benchmark session's backing service died: ``delete_session`` answers
    ``{"error": "Error closing session <id>: Service at <url> is no longer alive"}``, other tools
    ``{"error": "Service at <url> is no longer alive"}``. ``service_url`` defaults to the sidecar's."""

    kind: ClassVar[str] = "backend_gone"
    default_target: ClassVar[str] = "tool:delete_session"
    service_url: str | None = None

    def _validate(self) -> None:
        _check_tool_target(self)


_KINDS: dict[str, type[Fault]] = {
    cls.kind: cls
    for cls in (
        Die, Freeze, Hang, Delay, Status, Flap, Absent, Terminating, Stall, Drip, Truncate, Reset,
        MalformedJson, EndlessSse, JsonRpcError, ToolError, SessionExpired, BackendGone,
    )
}  # fmt: skip


def fault_kinds() -> dict[str, type[Fault]]:
    """Every fault kind by name, in catalogue order."""
    return dict(_KINDS)


# -- text form and dicts -------------------------------------------------------------------------

_QUOTED = r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'"
_SPEC = re.compile(
    rf"^\s*(?P<kind>[a-z_]+)\s*(?:\((?P<params>(?:[^)\"']|{_QUOTED})*)\))?\s*"
    r"(?:@(?P<target>[^\[]+))?(?:\[(?P<trig>[^\]]*)\])?\s*$"
)
_TRIGGER_KEYS = {
    "nth": "nth",
    "after": "after",
    "times": "times",
    "p": "probability",
    "probability": "probability",
    "seed": "seed",
}


def _format_value(value: object) -> str:
    if isinstance(value, str):
        plain = value and not any(c in value for c in ",()[]@=;'\" \\") and _parse_value(value) == value
        return value if plain else json.dumps(value, ensure_ascii=False)  # double-quoted, escaped
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _parse_value(text: str) -> object:
    text = text.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:  # "...": JSON string escapes (what str(fault) writes); '...': a Python literal
            value = json.loads(text) if text[0] == '"' else ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(f"badly quoted string {text}") from None
        return str(value)
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    """Split ``text`` on ``sep`` where it is not inside a quoted string (backslash escapes honoured)."""
    parts, start, quote, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _split_pairs(text: str, where: str, spec: str) -> dict[str, object]:
    pairs: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in _split_outside_quotes(text, ","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"fault spec {spec!r}: {where} entry {part!r} is not name=value")
        pairs[key.strip()] = _parse_value(value)
    return pairs


def parse_fault(spec: str) -> Fault:
    """Read the text form: ``KIND[(name=value,...)][@TARGET][[nth=N,after=N,times=N,p=P,seed=S]]``.

    Examples: ``hang@health``, ``status(code=503)@health[times=3]``, ``stall(after_bytes=10)@tools/call``,
    ``die@tools/call[nth=2]``, ``backend_gone``, ``delay(seconds=0.5,jitter=0.1,seed=7)``.
    """
    match = _SPEC.match(spec) if isinstance(spec, str) else None
    if match is None:
        raise ValueError(
            f"fault spec {spec!r} is not KIND[(name=value,...)][@TARGET][[nth=,after=,times=,p=,seed=]]"
        )
    kind = match["kind"]
    cls = _KINDS.get(kind)
    if cls is None:
        raise ValueError(f"fault spec {spec!r}: unknown kind {kind!r}; valid kinds: {', '.join(_KINDS)}")
    params = _split_pairs(match["params"] or "", "parameter", spec)
    trig_raw = _split_pairs(match["trig"] or "", "trigger", spec)
    trig: dict[str, Any] = {}
    for key, value in trig_raw.items():
        if key not in _TRIGGER_KEYS:
            raise ValueError(
                f"fault spec {spec!r}: unknown trigger key {key!r}; valid: nth, after, times, p, seed"
            )
        trig[_TRIGGER_KEYS[key]] = value
    target = (match["target"] or cls.default_target).strip()
    return _build(cls, params, {"target": target, **trig}, spec)


def _build(cls: type[Fault], params: Mapping[str, object], when: Mapping[str, object], spec: str) -> Fault:
    names = {f.name for f in dataclasses.fields(cls)} - {"when"}
    unknown = sorted(set(params) - names)
    if unknown:
        valid = ", ".join(sorted(names)) or "(none)"
        raise ValueError(f"{spec}: {cls.kind} has no parameter {unknown[0]!r}; valid: {valid}")
    try:
        return cls(**params, when=Trigger(**when))  # type: ignore[arg-type]  # params checked above
    except TypeError as exc:
        raise ValueError(f"{spec}: {exc}") from None


def fault_from_dict(data: Mapping[str, Any]) -> Fault:
    """Inverse of :meth:`Fault.to_dict`."""
    data = dict(data)
    kind = data.pop("kind", None)
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"fault dict: unknown kind {kind!r}; valid kinds: {', '.join(_KINDS)}")
    when = data.pop("when", None) or {"target": cls.default_target}
    return _build(cls, data, when, f"fault dict {kind!r}")


def format_plan(plan: Iterable[Fault]) -> str:
    """A plan (sequence of faults) as text: the faults' text forms joined by ``'; '``."""
    return "; ".join(str(f) for f in plan)


def parse_plan(text: str) -> tuple[Fault, ...]:
    """Inverse of :func:`format_plan`; an empty string is the empty plan."""
    return tuple(parse_fault(part) for part in _split_outside_quotes(text, ";") if part.strip())


def as_plan(faults: object, *, argname: str = "faults") -> tuple[Fault, ...]:
    """Normalise a ``faults=`` argument (faults or their text forms) to a tuple, or raise naming it."""
    if faults is None:
        return ()
    if isinstance(faults, (Fault, str)) or not isinstance(faults, Sequence):
        raise ValueError(f"{argname} must be a list of faults (or fault specs), got {faults!r}")
    out = []
    for i, f in enumerate(faults):
        if isinstance(f, str):
            f = parse_fault(f)
        if not isinstance(f, Fault):
            raise ValueError(f"{argname}[{i}] must be a Fault or a fault spec string, got {f!r}")
        out.append(f)
    return tuple(out)
