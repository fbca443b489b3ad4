"""The text form and the dict form of faults and plans, each read back into what wrote it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_mcpfaults.faults.kinds import KIND_NAME, Fault, fault_kinds
from pytest_mcpfaults.faults.triggers import Trigger
from pytest_mcpfaults.faults.values import parse_value

# -- text form and dicts -------------------------------------------------------------------------

# Unrolled loops (``[^q\\]*(?:\\.[^q\\]*)*``): one way to match each string, so time linear in its length.
_QUOTED = r"\"[^\"\\]*(?:\\.[^\"\\]*)*\"|'[^'\\]*(?:\\.[^'\\]*)*'"
_SPEC = re.compile(
    rf"^\s*(?P<kind>{KIND_NAME})\s*(?:\((?P<params>[^)\"']*(?:(?:{_QUOTED})[^)\"']*)*)\))?\s*"
    # The trigger options are a last ``[...]`` holding ``=`` (or blank): a target may hold brackets
    # (``tool:a[b]``); one ending in what reads as options is refused by the Trigger (check_target).
    # Matched on the stripped spec: no ``\s*$`` retried at each end of a lazy target (quadratic).
    r"(?:@(?P<target>.+?))?(?:\[(?P<trig>\s*|[^\[\]]*=[^\[\]]*)\])?$"
)
_TRIGGER_KEYS = {f.name: f.name for f in dataclasses.fields(Trigger) if f.name != "target"}
_TRIGGER_KEYS["p"] = "probability"
#: Quoted strings (closed or running to the end) and a separator of the text form (``,`` between
#: parameters, ``;`` between faults): what :func:`_split_outside_quotes` steps through.
_TO_QUOTE_END = "|".join(rf"{q}[^{q}\\]*(?:\\(?:.|\Z)[^{q}\\]*)*(?:{q}|\Z)" for q in "\"'")
_SEPARATORS = {sep: re.compile(f"{_TO_QUOTE_END}|{re.escape(sep)}", re.S) for sep in ",;"}


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    """Split ``text`` on ``sep`` where it is not inside a quoted string (backslash escapes honoured; an
    unterminated quote runs to the end). One regular expression: no Python loop per character."""
    parts, start = [], 0
    for m in _SEPARATORS[sep].finditer(text):
        if m.group() == sep:
            parts.append(text[start : m.start()])
            start = m.end()
    parts.append(text[start:])
    return parts


def _split_pairs(text: str, where: str, spec: str) -> dict[str, object]:
    pairs: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in _split_outside_quotes(text, ","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"fault spec {spec!r}: {where} entry {part!r} is not name=value")
        pairs[key.strip()] = parse_value(value)
    return pairs


#: The longest fault spec :func:`parse_fault` reads (characters). Parsing is linear in the length
#: (about 10 ms per MB); the bound keeps one spec from occupying a loop for long.
MAX_SPEC_CHARS = 1 << 16
#: How much of a spec an error message quotes.
_SHOWN_CHARS = 200


def _cut(spec: str) -> str:
    return spec if len(spec) <= _SHOWN_CHARS else f"{spec[:_SHOWN_CHARS]}…"


def parse_fault(spec: str) -> Fault:
    """Read the text form: ``KIND[(name=value,...)][@TARGET][[nth=N,after=N,times=N,p=P,seed=S]]``.

    Examples: ``hang@health``, ``status(code=503)@health[times=3]``, ``stall(after_bytes=10)@tools/call``,
    ``die@tools/call[nth=2]``, ``backend_gone``, ``delay(seconds=0.5,jitter=0.1,seed=7)``.
    """
    if isinstance(spec, str) and len(spec) > MAX_SPEC_CHARS:
        raise ValueError(
            f"fault spec {_cut(spec)!r} is {len(spec)} characters long, over the limit of "
            f"{MAX_SPEC_CHARS} (max_spec_chars)"
        )
    match = _SPEC.match(spec.strip()) if isinstance(spec, str) else None
    text, spec = spec, _cut(spec) if isinstance(spec, str) else spec  # as error messages show it
    if match is None:
        raise ValueError(
            f"fault spec {spec!r} is not KIND[(name=value,...)][@TARGET][[nth=,after=,times=,p=,seed=]]"
        )
    kind = match["kind"]
    kinds = fault_kinds()
    cls = kinds.get(kind)
    if cls is None:
        raise ValueError(f"fault spec {spec!r}: unknown kind {kind!r}; valid kinds: {', '.join(kinds)}")
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
    if ";" in target and len(plan := _as_plan_text(text)) > 1:  # not one fault on a tool "a; hang@health"
        raise ValueError(
            f"fault spec {spec!r} reads as a plan of {len(plan)} faults ({format_plan(plan)}): ';' separates "
            f"a plan's faults; give each as a spec of its own (parse_plan reads a plan), or a target holding "
            f"';' as Trigger({target!r})"
        )
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
    kinds = fault_kinds()
    cls = kinds.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"fault dict: unknown kind {kind!r}; valid kinds: {', '.join(kinds)}")
    when = data.pop("when", None) or {"target": cls.default_target}
    return _build(cls, data, when, f"fault dict {kind!r}")


def format_plan(plan: Iterable[Fault]) -> str:
    """A plan (sequence of faults) as text: the faults' text forms joined by ``'; '``."""
    return "; ".join(str(f) for f in plan)


def parse_plan(text: str) -> tuple[Fault, ...]:
    """Inverse of :func:`format_plan`; an empty string is the empty plan."""
    return tuple(parse_fault(part) for part in _split_outside_quotes(text, ";") if part.strip())


def _as_plan_text(text: str) -> tuple[Fault, ...]:
    try:
        return parse_plan(text)
    except ValueError:  # a part is not a fault: the ';' is the target's own ("tool:a;b")
        return ()


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
