"""Checking a ``tools/call``'s arguments against the tool's input schema, as real MCP servers do.

A subset of JSON Schema, applied to the top-level arguments object: ``required``, ``properties``
(``type``, a name or a list of names; ``enum``; ``minimum`` / ``maximum`` / ``exclusiveMinimum`` /
``exclusiveMaximum``) and ``additionalProperties: false``. Anywhere in the arguments, ``NaN`` and
``Infinity`` (which Python's ``json`` reads, but which are not JSON numbers) are refused. Keywords
outside this subset are not checked.

A problem is the client's: answered as a tool execution error (as the 2025-11-25 spec and the mcp
SDK's ``MCPServer`` do, SEP-1303).
"""

from __future__ import annotations

import math
import operator
import reprlib
from collections.abc import Callable, Mapping
from typing import Any

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int, float),  # JSON Schema: a number with a zero fractional part (1.0 is an integer)
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlevel = 3


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return name == "boolean"
    if not isinstance(value, _JSON_TYPES[name]):
        return False
    return name != "integer" or isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _any_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is float:
            if not math.isfinite(v):
                return True
        elif kind is dict:
            stack.extend(v.values())
        elif kind is list:
            stack.extend(v)
        elif isinstance(v, (float, dict, list)):  # a subclass: the slow pass judges it
            return True
    return False


def non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first ``NaN`` / ``Infinity`` in a decoded JSON value, or ``None``. Iterative:
    the value may be as deep as the decoder allowed; a first pass builds no paths (it runs on every
    ``tools/call``, and almost every value is finite)."""
    if not _any_non_finite(value):
        return None
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return where or "(the value)"
        if isinstance(v, dict):
            stack.extend((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
    return None


_BOUNDS: tuple[tuple[str, str, Callable[[float, float], bool]], ...] = (
    ("minimum", ">=", operator.ge),
    ("maximum", "<=", operator.le),
    ("exclusiveMinimum", ">", operator.gt),
    ("exclusiveMaximum", "<", operator.lt),
)


#: Checks a call's arguments: a message naming the first that does not fit, or ``None``.
ArgumentCheck = Callable[[Mapping[str, Any]], "str | None"]


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """What in ``schema`` the check would misread (a typo in a type name, ``required`` as one string
    read letter by letter), said as a sentence naming the keyword, or ``None``."""
    required, props = schema.get("required", []), schema.get("properties", {})
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"'required' must be a list of property names, got {_short.repr(required)}"
    if not isinstance(props, Mapping):
        return f"'properties' must be an object of property schemas, got {_short.repr(props)}"
    for key, spec in props.items():
        if not isinstance(spec, Mapping):
            return f"property {key!r} must be a schema (an object), got {_short.repr(spec)}"
        want = spec.get("type", [])
        names = [want] if isinstance(want, str) else want
        if not isinstance(names, list) or not all(isinstance(n, str) and n in _JSON_TYPES for n in names):
            valid = ", ".join(_JSON_TYPES)
            return f"property {key!r}: 'type' must be one of {valid} (or a list of them), got {want!r}"
        if "enum" in spec and not isinstance(spec["enum"], list):
            return f"property {key!r}: 'enum' must be a list of values, got {_short.repr(spec['enum'])}"
        for word, _, _ in _BOUNDS:
            bound = spec.get(word, 0)
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                return f"property {key!r}: {word!r} must be a number, got {bound!r}"
    return None


def argument_checker(schema: Mapping[str, Any]) -> ArgumentCheck:
    """The check of ``schema``, one :func:`schema_problem` finds nothing wrong with (every tool's but
    the built-in ones, written right)."""
    required = tuple(schema.get("required", ()))
    props = schema.get("properties", {})
    closed = schema.get("additionalProperties") is False
    specs: dict[str, tuple[list[str], list[Any] | None, list[tuple[str, Any, Any]]]] = {}
    for key, spec in props.items():
        want = spec.get("type", [])
        bounds = [(op, ok, spec[word]) for word, op, ok in _BOUNDS if word in spec]
        specs[key] = ([want] if isinstance(want, str) else want, spec.get("enum"), bounds)

    def check(arguments: Mapping[str, Any]) -> str | None:
        bad = non_finite(arguments)
        if bad is not None:
            return f"argument {bad!r} is NaN or Infinity, which is not a JSON number"
        for key in required:
            if key not in arguments:
                return f"missing required argument {key!r}"
        if closed:
            extra = sorted(k for k in arguments if k not in props)
            if extra:
                listed = ", ".join(map(repr, extra))
                return f"unexpected argument(s) {listed} (the schema allows {sorted(props)})"
        for key, value in arguments.items():
            spec = specs.get(key)
            if spec is None:
                continue
            names, enum, bounds = spec
            if names and not any(_is_type(value, n) for n in names):
                return f"argument {key!r} must be of type {'/'.join(names)}, got {_short.repr(value)}"
            if enum is not None and value not in enum:
                return f"argument {key!r} must be one of {_short.repr(enum)}, got {_short.repr(value)}"
            if bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
                for op, ok, bound in bounds:
                    if not ok(value, bound):
                        return f"argument {key!r} must be {op} {bound}, got {_short.repr(value)}"
        return None

    return check
