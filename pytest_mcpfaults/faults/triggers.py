"""Triggers: which requests a fault applies to, counted over matching requests (never wall-clock time)."""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults.options.validation import check_count, is_probability

MCP_METHODS: tuple[str, ...] = (
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
)
"""MCP methods a trigger may name directly. Any other method: ``method:<name>``."""
_HTTP_METHODS = ("GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS")
_TARGET_HELP = (
    "'*', 'health', 'mcp', an MCP method (e.g. 'tools/call'), 'tool:<name>', 'prompt:<name>', "
    "'resource:<uri>', "
    "'<HTTP method> <path>' (e.g. 'DELETE /mcp'), '/<path>', or 'method:<any MCP method>'"
)


TargetKind = Literal["any", "endpoint", "path", "request", "tool", "prompt", "resource", "method"]
"""What a trigger target names (:attr:`Target.kind`)."""
#: The ``prefix:`` targets and the kind each names (the rest of the target is its value).
_NAMED: dict[str, TargetKind] = {k: k for k in ("tool", "prompt", "resource", "method")}


@dataclass(frozen=True)
class Target:
    """A trigger target, parsed once: ``kind`` says what ``value`` is (the endpoint ``'health'`` or
    ``'mcp'``, a path, a tool name, a prompt name, a resource URI, an MCP method; with ``verb`` for
    ``'<HTTP method> <path>'``)."""

    kind: TargetKind
    value: str = ""
    verb: str | None = None


@functools.lru_cache(maxsize=512)
def parse_target(target: str) -> Target:
    """Parse a trigger target (the grammar in :class:`Trigger`); ``ValueError`` naming it otherwise."""
    if target == "*":
        return Target("any")
    if target in ("health", "mcp"):
        return Target("endpoint", target)
    if target in MCP_METHODS:
        return Target("method", target)
    if target.startswith("/"):
        return Target("path", target)
    prefix, _, rest = target.partition(":")
    if prefix in _NAMED and rest.strip():
        return Target(_NAMED[prefix], rest)
    verb, _, path = target.partition(" ")
    if verb in _HTTP_METHODS and path.startswith("/"):
        return Target("request", path, verb)
    raise ValueError(f"Trigger: target {target!r} is unknown; valid targets: {_TARGET_HELP}")


def check_target(target: object) -> str:
    """Validate a trigger target and return it; raise ``ValueError`` naming the bad value otherwise."""
    if not isinstance(target, str) or not target.strip():
        raise ValueError(f"Trigger: target must be a non-empty string ({_TARGET_HELP}), got {target!r}")
    if target != target.strip():  # kept as written, it would match nothing
        raise ValueError(
            f"Trigger: target {target!r} has blanks at its ends (the text form strips them): "
            f"write {target.strip()!r}"
        )
    parse_target(target)
    options = _TEXT_OPTIONS.search(target)
    if options is not None and (options[2] or not options[1].strip()):  # "tool:x[times=1]", "tool:x[]"
        key = options[1].strip() if options[1].strip() in _KEYS else "times"
        raise ValueError(
            f"Trigger: target {target!r} ends in {options.group(0)!r}, the text form's trigger options: "
            f"write Trigger({target[: options.start()]!r}, {key}=...) or the whole fault as "
            f"text (parse_fault('kind@{target}'), a marker's faults=['kind@{target}'])"
        )
    return target


#: A last ``[...]`` of a target; holding ``=`` (or blank) it is what the text form reads as its trigger
#: options (``kind@target[nth=1, times=2]``), so a target cannot end in it.
_TEXT_OPTIONS = re.compile(r"\[([^\[\]=]*)(=[^\[\]]*)?\]$")
_KEYS = ("nth", "after", "times", "probability", "seed")


@dataclass(frozen=True)
class Trigger:
    """Which requests a fault applies to. All counts are over requests matching ``target``.

    * ``target``: ``'*'`` (any request), ``'health'``, ``'mcp'`` (the MCP endpoint), an MCP method
      (``'tools/call'``), ``'tool:delete_session'``, ``'prompt:NAME'`` (a ``prompts/get`` of that
      prompt), ``'resource:URI'`` (a ``resources/read``, ``resources/subscribe`` or
      ``resources/unsubscribe`` of that URI), ``'DELETE /mcp'``, ``'/any/path'``, ``'method:x/y'``.
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
        check_count("Trigger", "nth", self.nth, minimum=1, optional=True)
        check_count("Trigger", "after", self.after)
        check_count("Trigger", "times", self.times, optional=True)
        p = self.probability
        if not is_probability(p):
            raise ValueError(f"Trigger: probability must be a number in [0, 1], got {p!r}")
        check_count("Trigger", "seed", self.seed)

    @functools.cached_property
    def selector(self) -> Target:
        """The target, parsed (what the sidecar matches requests against)."""
        return parse_target(self.target)

    def describe(self) -> str:
        """The trigger in the text form's bracket syntax (without the target), '' when all default."""
        parts = [
            f"{'p' if f.name == 'probability' else f.name}={getattr(self, f.name)}"
            for f in dataclasses.fields(self)
            if f.name != "target" and getattr(self, f.name) != f.default
        ]
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
