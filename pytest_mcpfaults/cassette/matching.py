"""Which recorded exchange answers a request: matching rules, and the nearest miss when none does.

By default a request matches a recorded one with the same JSON-RPC method, the same tool (for
``tools/call``) and the same arguments (for other methods, the same params); ``_meta`` is never
compared (it carries the client's progress tokens and the stateless era's protocol version), and a
recorded :data:`~pytest_mcpfaults.cassette.redact.REDACTED` value matches any value. :class:`Rules`:

* ``ignore``: argument (or param) names never compared, as for a timestamp or a random nonce;
* ``order``: recorded exchanges answer in the order they were recorded: only the first one not yet
  played with the same method and tool is a candidate (the request must then match it);
* ``repeats``: once every exchange a request matches was played, the last of them answers again
  (``False``: the request is unmatched: each recorded answer is given once, as vcrpy does).

An unmatched request is a :class:`~pytest_mcpfaults.cassette.fileformat.CassetteError` naming the
request, the nearest recorded exchange (its line) and how they differ.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mcpfaults.cassette.fileformat import CassetteError, Exchange
from pytest_mcpfaults.cassette.redact import REDACTED

__all__ = ["Matcher", "Rules", "differences", "same_request"]

_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxdict, _short.maxlevel = 60, 60, 6, 3


@dataclass(frozen=True)
class Rules:
    """How requests are matched to recorded exchanges (see the module docstring)."""

    ignore: frozenset[str] = frozenset()
    order: bool = False
    repeats: bool = True


def _compared(method: str | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """What of a request's params is compared: a tool call's arguments, other methods' params, never
    ``_meta``."""
    if method == "tools/call":
        args = params.get("arguments")
        return dict(args) if isinstance(args, Mapping) else {}
    return {k: v for k, v in params.items() if k != "_meta"}


def _tool(method: str | None, params: Mapping[str, Any]) -> str | None:
    name = params.get("name") if method == "tools/call" else None
    return name if isinstance(name, str) else None


def _equal(recorded: Any, given: Any) -> bool:
    if recorded == REDACTED:
        return True
    if isinstance(recorded, dict) and isinstance(given, dict):
        return recorded.keys() == given.keys() and all(_equal(recorded[k], given[k]) for k in recorded)
    if isinstance(recorded, list) and isinstance(given, list):
        return len(recorded) == len(given) and all(map(_equal, recorded, given))
    return bool(recorded == given and type(recorded) is type(given))


def differences(exchange: Exchange, method: str | None, params: Mapping[str, Any], rules: Rules) -> list[str]:
    """How a request differs from a recorded exchange, one phrase per difference (empty: it matches)."""
    if exchange.method != method:
        return [f"method {exchange.method!r} recorded, {method!r} asked"]
    tool = _tool(method, params)
    if exchange.tool != tool:
        return [f"tool {exchange.tool!r} recorded, {tool!r} called"]
    what = "argument" if method == "tools/call" else "param"
    recorded, given = _compared(exchange.method, exchange.params), _compared(method, params)
    out = []
    for key in sorted(set(recorded) | set(given)):
        if key in rules.ignore:
            continue
        if key not in given:
            out.append(f"{what} {key!r} recorded ({_short.repr(recorded[key])}) but not sent")
        elif key not in recorded:
            out.append(f"{what} {key!r} sent ({_short.repr(given[key])}) but not recorded")
        elif not _equal(recorded[key], given[key]):
            was, sent = _short.repr(recorded[key]), _short.repr(given[key])
            out.append(f"{what} {key!r} differs: recorded {was}, sent {sent}")
    return out


def same_request(a: Exchange, b: Exchange, rules: Rules) -> bool:
    """Whether two recorded exchanges are the same request under ``rules`` (``new_episodes``)."""
    if a.http != b.http or a.is_request != b.is_request:
        return False
    return a.http == "DELETE" or not differences(a, b.method, b.params, rules)


def describe(method: str | None, params: Mapping[str, Any]) -> str:
    """``tools/call delete_session {"session_id": "abc"}``: a request as the messages name it."""
    tool = _tool(method, params)
    compared = _compared(method, params)
    text = json.dumps(compared, sort_keys=True, default=repr)
    if len(text) > 200:
        text = text[:197] + "..."
    return " ".join(p for p in (method or "(no method)", tool, text if compared else "") if p)


class Matcher:
    """The recorded requests of a cassette and which were played. Loop thread only."""

    def __init__(self, exchanges: Sequence[Exchange], rules: Rules, where: str) -> None:
        self.exchanges = [e for e in exchanges if e.is_request and e.response is not None]
        self.rules, self.where = rules, where
        self.played: dict[int, int] = {}  # index -> times played

    def match(self, method: str | None, params: Mapping[str, Any]) -> Exchange:
        """The exchange answering this request (now played); :class:`CassetteError` when none does."""
        tool = _tool(method, params)
        same = [i for i, e in enumerate(self.exchanges) if e.method == method and e.tool == tool]
        candidates: Iterable[int] = same
        if self.rules.order:
            fresh = [i for i in same if i not in self.played]
            candidates = fresh[:1] or ([same[-1]] if same and self.rules.repeats else [])
        matching = [i for i in candidates if not differences(self.exchanges[i], method, params, self.rules)]
        chosen = next((i for i in matching if i not in self.played), None)
        if chosen is None and matching and self.rules.repeats:
            chosen = matching[-1]
        if chosen is None:
            raise CassetteError(self._miss(method, params, same, matching))
        self.played[chosen] = self.played.get(chosen, 0) + 1
        return self.exchanges[chosen]

    def _miss(
        self, method: str | None, params: Mapping[str, Any], same: list[int], matching: list[int]
    ) -> str:
        asked = describe(method, params)
        head = f"{self.where} has no recorded answer for {asked}"
        if matching:  # it matched, but every match was played
            e = self.exchanges[matching[-1]]
            return (
                f"{head}: line {e.line} recorded it, already played {self.played[matching[-1]]} time(s), "
                "and repeats are off (cassette_repeats=False)"
            )
        by_method = [i for i, e in enumerate(self.exchanges) if e.method == method]
        pool: Sequence[int] = same or by_method or range(len(self.exchanges))
        if not pool:
            return f"{head}: the cassette records no request at all"
        if self.rules.order and same:
            fresh = [i for i in same if i not in self.played]
            pool = fresh[:1] or same[-1:]
        best = min(pool, key=lambda i: (len(differences(self.exchanges[i], method, params, self.rules)), i))
        e = self.exchanges[best]
        how = "; ".join(differences(e, method, params, self.rules))
        order = " (cassette_order=True: the next one recorded)" if self.rules.order and same else ""
        return f"{head}; nearest: line {e.line}{order}, {describe(e.method, e.params)}: {how}"
