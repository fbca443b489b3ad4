"""Which recorded exchange answers a request (docs/cassettes.md, "Matching"): the same method, tool and
params, ``_meta`` never compared, a recorded :data:`~pytest_mcpfaults.proxy.cassette.redact.REDACTED`
matching any value. A miss is a :class:`~pytest_mcpfaults.proxy.cassette.fileformat.CassetteError`
naming the request, the nearest recorded exchange (its line) and how they differ.
"""

from __future__ import annotations

import functools
import json
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mcpfaults.proxy.cassette.fileformat import CassetteError, Exchange
from pytest_mcpfaults.proxy.cassette.redact import REDACTED

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
    if isinstance(recorded, str) and isinstance(given, str) and REDACTED in recorded:
        return _redacted_text(recorded).fullmatch(given) is not None  # a secret redacted inside a text
    return bool(recorded == given and type(recorded) is type(given))


@functools.lru_cache(maxsize=1024)
def _redacted_text(recorded: str) -> re.Pattern[str]:
    """A recorded text with secrets redacted inside it (``https://x/?token=[REDACTED]``) as a pattern:
    each :data:`REDACTED` stands for any text, the rest for itself."""
    return re.compile(".+?".join(re.escape(part) for part in recorded.split(REDACTED)), re.S)


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


#: A miss's nearest recorded exchange is looked for among at most this many of them (of the request's
#: method and tool, else of its method, else any), so a miss costs the loop no more than a hit does
#: on a cassette of any size.
MISS_SCAN = 200


def _key(compared: Mapping[str, Any], leave_out: frozenset[str]) -> str | None:
    """The index key of compared params: their JSON with sorted keys, the names in ``leave_out``
    (ignored, or recorded as :data:`REDACTED`) left out. Equal params have equal keys; a key's
    exchanges are still checked with :func:`differences`."""
    kept = {k: v for k, v in compared.items() if k not in leave_out}
    try:
        text = json.dumps(kept, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None
    return text.replace("-0.0", "0.0")  # 0.0 == -0.0: one key for both


_Slot = tuple[frozenset[str], str]  # (the names recorded as REDACTED, the key of the rest)


@dataclass
class _Group:
    all: list[int]
    slots: dict[_Slot, list[int]]
    shapes: set[frozenset[str]]  # the sets of names recorded as REDACTED, among the slots
    wild: list[int]  # those with a REDACTED value nested deeper: tried with every request
    cursor: int = 0  # all[:cursor] are played (cassette_order)


class Matcher:
    """The recorded requests of a cassette and which were played, indexed by method, tool and a key of
    their compared params (top-level arguments recorded as :data:`REDACTED` left out of it): a hit
    costs the same on a cassette of 10 or 100,000 exchanges. Loop thread only."""

    def __init__(self, exchanges: Sequence[Exchange], rules: Rules, where: str) -> None:
        self.exchanges = [e for e in exchanges if e.is_request and e.response is not None]
        self.rules, self.where = rules, where
        self.played: dict[int, int] = {}  # index -> times played
        self._groups: dict[tuple[str | None, str | None], _Group] = {}
        self._by_method: dict[str | None, list[int]] = {}
        self._cursors: dict[tuple[int, _Slot], int] = {}  # a slot's first entries are played
        for i, e in enumerate(self.exchanges):
            group = self._groups.setdefault((e.method, e.tool), _Group([], {}, set(), []))
            group.all.append(i)
            self._by_method.setdefault(e.method, []).append(i)
            compared = _compared(e.method, e.params)
            redacted = frozenset(k for k, v in compared.items() if _redacted(v) and k not in rules.ignore)
            rest = [v for k, v in compared.items() if k not in redacted and k not in rules.ignore]
            key = None if _holds_redacted(rest) else _key(compared, rules.ignore | redacted)
            if key is None:
                group.wild.append(i)
            else:
                group.slots.setdefault((redacted, key), []).append(i)
                group.shapes.add(redacted)

    def _matches(self, i: int, method: str | None, params: Mapping[str, Any]) -> bool:
        return not differences(self.exchanges[i], method, params, self.rules)

    def _lists(
        self, group: _Group, method: str | None, params: Mapping[str, Any]
    ) -> list[tuple[Any, list[int]]]:
        compared = _compared(method, params)
        out: list[tuple[Any, list[int]]] = []
        for redacted in group.shapes:
            if not redacted <= compared.keys():
                continue
            key = _key(compared, self.rules.ignore | redacted)
            if key is not None and (redacted, key) in group.slots:
                out.append(((redacted, key), group.slots[(redacted, key)]))
        if group.wild:
            out.append((None, group.wild))
        return out

    def match(self, method: str | None, params: Mapping[str, Any]) -> Exchange:
        """The exchange answering this request (now played); :class:`CassetteError` when none does."""
        tool = _tool(method, params)
        group = self._groups.get((method, tool))
        chosen = None if group is None else self._choose(group, method, params)
        if chosen is None:
            raise CassetteError(self._miss(method, params, group))
        self.played[chosen] = self.played.get(chosen, 0) + 1
        return self.exchanges[chosen]

    def _choose(self, group: _Group, method: str | None, params: Mapping[str, Any]) -> int | None:
        """The first matching exchange not yet played, else (repeats on) the last matching one."""
        if self.rules.order:
            while group.cursor < len(group.all) and group.all[group.cursor] in self.played:
                group.cursor += 1
            fresh = group.all[group.cursor] if group.cursor < len(group.all) else None
            candidate = fresh if fresh is not None else (group.all[-1] if self.rules.repeats else None)
            return candidate if candidate is not None and self._matches(candidate, method, params) else None
        lists = self._lists(group, method, params)
        firsts = []
        for slot, indices in lists:
            start = self._cursors.get((id(group), slot), 0) if slot is not None else 0
            while start < len(indices) and indices[start] in self.played:
                start += 1
            if slot is not None:
                self._cursors[(id(group), slot)] = start
            unplayed = (indices[j] for j in range(start, len(indices)) if indices[j] not in self.played)
            first = next((i for i in unplayed if self._matches(i, method, params)), None)
            if first is not None:
                firsts.append(first)
        if firsts:
            return min(firsts)
        return self._last(lists, method, params) if self.rules.repeats else None

    def _last(
        self, lists: list[tuple[Any, list[int]]], method: str | None, params: Mapping[str, Any]
    ) -> int | None:
        lasts = [next((i for i in reversed(ix) if self._matches(i, method, params)), None) for _, ix in lists]
        found = [i for i in lasts if i is not None]
        return max(found) if found else None

    def _miss(self, method: str | None, params: Mapping[str, Any], group: _Group | None) -> str:
        asked = describe(method, params)
        head = f"{self.where} has no recorded answer for {asked}"
        same = group.all if group is not None else []
        if group is not None and not self.rules.order:  # it matched, but every match was played
            last = self._last(self._lists(group, method, params), method, params)
            if last is not None:
                return (
                    f"{head}: line {self.exchanges[last].line} recorded it, already played "
                    f"{self.played[last]} time(s), and repeats are off (cassette_repeats=False)"
                )
        pool: Sequence[int] = same or self._by_method.get(method) or range(len(self.exchanges))
        if not pool:
            return f"{head}: the cassette records no request at all"
        if self.rules.order and group is not None:
            fresh = group.all[group.cursor : group.cursor + 1]
            pool = fresh or same[-1:]
        scanned = pool[:MISS_SCAN]
        best = min(
            scanned, key=lambda i: (len(differences(self.exchanges[i], method, params, self.rules)), i)
        )
        e = self.exchanges[best]
        how = "; ".join(differences(e, method, params, self.rules))
        order = " (cassette_order=True: the next one recorded)" if self.rules.order and same else ""
        return f"{head}; nearest: line {e.line}{order}, {describe(e.method, e.params)}: {how}"


def _redacted(value: Any) -> bool:
    return isinstance(value, str) and REDACTED in value


def _holds_redacted(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if _redacted(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
