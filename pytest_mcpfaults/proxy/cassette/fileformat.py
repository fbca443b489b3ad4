"""The cassette file: one recorded MCP conversation in JSON Lines, the header first, then one
:class:`Exchange` a line, keys sorted, so a re-recorded cassette diffs exchange by exchange.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

#: The cassette format this version of pytest-mcpfaults writes and reads (and every older one).
FORMAT = 1
#: The header's ``cassette`` value.
MAGIC = "pytest-mcpfaults"
#: How deep one line's JSON may nest (the exchange's own object is level 1): a deeper line is refused
#: naming it, before anything walks it.
MAX_DEPTH = 128


class CassetteError(ValueError):
    """A cassette that cannot be read (its path and line named), or a request it has no answer for."""


@dataclass
class Exchange:
    """One request the client made and the answer the upstream gave, as recorded.

    ``http``: ``POST`` or ``DELETE``; ``method``: the JSON-RPC method (``None`` for a ``DELETE`` or a
    client's response); ``tool``: the tool of a ``tools/call``; ``params``: the request's params
    (arguments included); ``id``: the request's JSON-RPC id as the client sent it (``None`` for a
    notification); ``era``: ``session`` or ``stateless``; ``version``: the ``MCP-Protocol-Version``
    header; ``session``: the label of its transport session; ``status`` and ``content_type`` of the
    answer; ``response``: the JSON-RPC response to the request (``None``: none came, a 202 or a
    ``DELETE``); ``events``: an SSE answer's events in order, each ``{"at": seconds since the request
    was sent, "data": the JSON message (or the raw text), "event": its name, "id": its id}``;
    ``headers_at`` / ``took``: seconds from sending to the upstream's headers / to its answer's end;
    ``request_headers`` / ``response_headers``: the end-to-end headers, redacted; ``cut``: what of a
    long answer was not kept (``{"events": N, "bytes": M}``, :mod:`.recorder`), ``None`` when all was;
    ``line``: where it was read from (0: not read from a file)."""

    http: str
    method: str | None
    status: int
    tool: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    id: Any = None
    era: str = "session"
    version: str | None = None
    session: str | None = None
    content_type: str | None = None
    response: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    headers_at: float = 0.0
    took: float = 0.0
    request_headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)
    cut: dict[str, int] | None = None
    line: int = 0

    @property
    def arguments(self) -> dict[str, Any]:
        args = self.params.get("arguments")
        return args if isinstance(args, dict) else {}

    @property
    def is_request(self) -> bool:
        """A JSON-RPC request (it has an id and a method): what replay answers from."""
        return self.http == "POST" and self.method is not None and self.id is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"http": self.http, "method": self.method, "status": self.status}
        out["era"], out["headers_at"], out["took"] = self.era, round(self.headers_at, 6), round(self.took, 6)
        for name in ("tool", "id", "version", "session", "content_type", "response", "cut"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        for name in ("params", "events", "request_headers", "response_headers"):  # left out when empty
            if value := getattr(self, name):
                out[name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str, line: int = 0) -> Exchange:
        """An exchange from its line's object; :class:`CassetteError` naming ``where`` if it is not one."""
        http, method, status = data.get("http"), data.get("method"), data.get("status")
        if http not in ("POST", "DELETE") or not (method is None or isinstance(method, str)):
            raise CassetteError(
                f"{where}: not an exchange: 'http' must be POST or DELETE and 'method' a "
                f"string or null, got http={http!r} method={method!r}"
            )
        if not isinstance(status, int) or isinstance(status, bool):
            raise CassetteError(f"{where}: not an exchange: 'status' must be an integer, got {status!r}")
        given = {}
        for name, value in data.items():
            kind = _KINDS.get(name)
            if kind is None or value is None:
                continue
            if kind is not object and not isinstance(value, kind):
                raise CassetteError(f"{where}: {name!r} has the wrong type: {value!r}")
            given[name] = value
        return cls(http=http, method=method, status=status, line=line, **given)


#: An exchange's keys (besides ``http``, ``method``, ``status``, ``line``) and their types, read from its
#: fields' annotations (``float``: a JSON number, ``Any``: anything).
_TYPES: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "dict": dict,
    "list": list,
    "float": (int, float),
    "Any": object,
}
_KINDS = {
    f.name: _TYPES[str(f.type).split("[")[0].split(" ")[0]]
    for f in fields(Exchange)
    if f.name not in ("http", "method", "status", "line")
}


@dataclass
class Cassette:
    """A cassette: its header's facts (``upstream``, the URL or command it was recorded from) and its
    exchanges in the order they were made. ``path``: where it was read from."""

    exchanges: list[Exchange] = field(default_factory=list)
    upstream: str | None = None
    path: str = ""
    format: int = FORMAT

    def header(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cassette": MAGIC, "format": FORMAT}
        if self.upstream is not None:
            out["upstream"] = self.upstream
        return out


def _line(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def write_cassette(path: str | os.PathLike[str], cassette: Cassette) -> None:
    """Write ``cassette`` to ``path`` atomically (a reader never sees half a file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    lines: Iterable[str] = [_line(cassette.header()), *(_line(e.to_json()) for e in cassette.exchanges)]
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_kept: tuple[tuple[int, ...], Cassette] | None = None  # a cassette checked, for the replay to take


def _identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_cassette(path: str) -> None:
    """Read the cassette at ``path`` (refused as :func:`read_cassette` refuses it) and keep it for the
    next :func:`take_cassette` of the same unchanged file: a sidecar's options are checked, then its
    replay built, and a large cassette is read once, not twice."""
    global _kept
    _kept = None
    cassette = read_cassette(path)
    identity = _identity(path)
    if identity is not None:
        _kept = (identity, cassette)


def take_cassette(path: str) -> Cassette:
    """The cassette :func:`check_cassette` kept for ``path`` if the file is unchanged (handed out
    once), else the file read again."""
    global _kept
    kept, _kept = _kept, None
    if kept is not None and kept[1].path == path and kept[0] == _identity(path):
        return kept[1]
    return read_cassette(path)


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """The cassette at ``path``. Raises :class:`CassetteError` naming the path (and the line) for a file
    that is missing, not a cassette, of a newer format, or corrupt."""
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CassetteError(
            f"cassette {name}: no such file (record it first: Sidecar(upstream=..., record={name!r}), "
            "or --mcpfaults-record=once with an upstream)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cassette {name}: cannot be read: {exc}") from exc
    lines = text.splitlines()
    cassette = Cassette(path=name)
    for number, raw in enumerate(lines, 1):
        where = f"cassette {name}, line {number}"
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise CassetteError(f"{where}: not JSON: {exc}") from None
        except RecursionError:  # the decoder's own bound, far past MAX_DEPTH
            raise CassetteError(f"{where}: nests deeper than {MAX_DEPTH} levels") from None
        if raw.count("[") + raw.count("{") > MAX_DEPTH and (at := nests_deeper(data, MAX_DEPTH)):
            raise CassetteError(
                f"{where}: nests deeper than {MAX_DEPTH} levels (at {at}{_tool_at(data, at)})"
            )
        if not isinstance(data, dict):
            raise CassetteError(f"{where}: not a JSON object: {raw[:80]!r}")
        if number == 1:
            _check_header(data, where)
            upstream = data.get("upstream")
            cassette.upstream = upstream if isinstance(upstream, str) else None
            cassette.format = data["format"]
            continue
        cassette.exchanges.append(Exchange.from_json(data, where, number))
    if not lines:
        raise CassetteError(f"cassette {name}: empty file (not a cassette: its first line is the header)")
    return cassette


def nests_deeper(value: Any, limit: int) -> str | None:
    """Where JSON ``value`` nests deeper than ``limit`` levels (a scalar is level 0, an object or array
    level 1 ...), as a path (``response.result.tools[3].inputSchema...``), or ``None``: found without
    recursion."""
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]  # (value, its depth, (its key, parent's))
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, list):
            pairs = enumerate(item)
        else:
            continue
        if depth + 1 > limit:
            return _path(where)
        stack.extend((v, depth + 1, (k, where)) for k, v in pairs if isinstance(v, (dict, list)))
    return None


def _tool_at(data: Mapping[str, Any], at: str) -> str:
    found = re.match(r"response\.result\.tools\[(\d+)\]", at)
    tools = ((data.get("response") or {}).get("result") or {}).get("tools") if found else None
    if not found or not isinstance(tools, list) or int(found.group(1)) >= len(tools):
        return ""
    name = tools[int(found.group(1))].get("name") if isinstance(tools[int(found.group(1))], dict) else None
    return f", in recorded tool {name[:80]!r}" if isinstance(name, str) else ""


def _path(where: Any) -> str:
    keys = []
    while where is not None:
        key, where = where
        keys.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    text = "".join(reversed(keys)).lstrip(".")
    return text if len(text) <= 120 else text[:117] + "..."


def _check_header(data: Mapping[str, Any], where: str) -> None:
    if data.get("cassette") != MAGIC or "format" not in data:
        raise CassetteError(
            f'{where}: not a pytest-mcpfaults cassette (its first line must be {{"cassette": "{MAGIC}", '
            f'"format": {FORMAT}, ...}})'
        )
    version = data["format"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CassetteError(f"{where}: 'format' must be a positive integer, got {version!r}")
    if version > FORMAT:
        raise CassetteError(
            f"{where}: cassette format {version} is newer than this pytest-mcpfaults reads (format "
            f"{FORMAT}); upgrade pytest-mcpfaults, or record the cassette again"
        )
