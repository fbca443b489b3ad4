"""RFC 6570 level-1 URI templates (``file:///{dir}/{name}.{ext}``) matched against URIs in linear time.
Pure: no I/O.

A variable matches one or more characters other than ``/?#``, so the URI's ``/?#`` must be the
template's literal ones: both are split at them and matched piece by piece. Within a piece the
literals are placed from the right with ``str.rfind``, so the earlier variable takes as much as it
can, as a backtracking regular expression would, but in linear time (a regular expression
backtracked quadratically on a hostile URI: 32 KB took seconds of the loop every sidecar shares).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The characters a variable never matches (a path segment's ends, the query's and fragment's starts).
DELIMITERS = "/?#"
#: The longest URI a ``resources/read``, ``resources/subscribe`` or ``resources/unsubscribe`` may
#: name, in characters: a longer one is the client's ``-32602`` (Invalid params), never matched.
MAX_URI_CHARS = 16_384
#: A variable of a level-1 template (``{name}``).
VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SPLIT = re.compile(f"([{re.escape(DELIMITERS)}])")


@dataclass(frozen=True)
class _Piece:
    """The part of a template between two delimiters: ``literals[0] {names[0]} literals[1] ...``."""

    literals: tuple[str, ...]
    names: tuple[str, ...]

    def match(self, text: str, out: dict[str, str]) -> bool:
        head, tail, k = self.literals[0], self.literals[-1], len(self.names)
        if k == 0:
            return text == head
        if len(text) < len(head) + len(tail) + k or not text.startswith(head) or not text.endswith(tail):
            return False
        start, end = len(head), len(text) - len(tail)
        for i in range(k - 1, 0, -1):  # the rightmost place of each literal that leaves its variable a char
            literal = self.literals[i]
            at = text.rfind(literal, start + 1, end - 1)
            if at < 0:
                return False
            out[self.names[i]] = text[at + len(literal) : end]
            end = at
        if end <= start:
            return False
        out[self.names[0]] = text[start:end]
        return True


class UriTemplate:
    """A level-1 URI template, parsed once (``ValueError`` without a variable or with one named twice)."""

    def __init__(self, template: str) -> None:
        self.template = template
        parts = _SPLIT.split(template)  # piece, delimiter, piece, ... (no variable holds a delimiter)
        pieces = [VARIABLE.split(piece) for piece in parts[::2]]  # literal, name, literal, ...
        self._pieces = tuple(_Piece(tuple(p[::2]), tuple(p[1::2])) for p in pieces)
        self._seps = tuple(parts[1::2])
        every = [n for p in self._pieces for n in p.names]
        if not every:
            raise ValueError("uri_template must hold at least one {variable}")
        twice = sorted({n for n in every if every.count(n) > 1})
        if twice:
            raise ValueError(f"uri_template names variable(s) {', '.join(twice)} more than once")
        self.names = tuple(every)

    def match(self, uri: str) -> dict[str, str] | None:
        if sum(map(uri.count, DELIMITERS)) != len(self._seps):
            return None  # checked first: a URI of many segments is never split
        parts = _SPLIT.split(uri)
        if tuple(parts[1::2]) != self._seps:
            return None
        out: dict[str, str] = {}
        for piece, text in zip(self._pieces, parts[::2], strict=True):
            if not piece.match(text, out):
                return None
        return {name: out[name] for name in self.names}  # in the template's order
