"""The sidecars' options' defaults and checks: a ``ValueError`` naming the argument, the value and what
would be valid, before a backend builds anything. Every option is type-checked when options are built, so
every backend, the marker and the factory accept and refuse the same values: no truthy string for a bool,
no bare string for a list of strings, no ``inf``/``nan`` for a number."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, get_args
from urllib.parse import urlsplit

from pytest_mcpfaults.mcp.endpoint import Era
from pytest_mcpfaults.options.validation import is_loopback_host

DEFAULT_PATIENCE = 5.0
DEFAULT_TOOL_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_OTLP_PATH = "/v1/traces"
#: Seconds an upstream may take to connect and send its status line and headers, and then between two
#: chunks of a POST's body (``Sidecar(upstream_timeout=)``).
DEFAULT_UPSTREAM_TIMEOUT = 30.0
ReplyMode = Literal["json", "sse"]
"""How a sidecar frames its replies by default: one JSON body, or an SSE stream."""
REPLY_MODES: tuple[ReplyMode, ...] = get_args(ReplyMode)
TransportName = Literal["streamable_http", "sse", "both"]
"""Which MCP transports a socket sidecar serves (``Sidecar(transport=)``)."""
TRANSPORTS: tuple[TransportName, ...] = get_args(TransportName)
#: Who names a backend's options in its refusals (``SidecarOptions.backend``).
WHO = {"socket": "Sidecar", "in-process": "mock_sidecar", "stdio": "StdioServer"}
# An HTTP path as a route: a leading '/', then path characters only (no query, fragment, space or control).
_PATH_RE = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*")


def check_path_option(who: str, name: str, value: object, note: str = "") -> None:
    """Refuse a ``value`` of option ``name`` that is not a route path (:func:`check_path`)."""
    why = check_path(value)
    if why is not None:
        raise ValueError(f"{who}: {name} {why}{note}, got {value!r}")


def check_command(name: str, command: object, example: str) -> list[str]:
    if isinstance(command, (str, bytes)) or not isinstance(command, Sequence):
        raise ValueError(
            f"Sidecar: {name} must be a list of strings, the program and its arguments ({example}), "
            f"got {command!r}"
        )
    if not command or any(not isinstance(c, str) or not c or "\0" in c for c in command):
        raise ValueError(
            f"Sidecar: {name} must be a non-empty list of non-empty strings without a NUL (the program "
            f"and its arguments), got {command!r}"
        )
    return list(command)


def check_origins(who: str, origins: object) -> None:
    """Origins as a client sends them: ``'a.example'`` or ``'http://a.example/'`` would never match
    (origins compare with case and a default port left out, core.security_problem)."""
    what = "allowed_origins must be a list of Origin values such as 'http://a.example'"
    if isinstance(origins, (str, bytes)) or not isinstance(origins, Iterable):
        raise ValueError(f"{who}: {what}, got {origins!r}; for one, write [{origins!r}]")
    bad = [v for v in origins if not isinstance(v, str) or not v]
    if bad:
        raise ValueError(f"{who}: {what} (non-empty strings), got {bad[0]!r} in it")
    for origin in origins:
        scheme, _, rest = origin.partition("://")
        if origin != "null" and (not scheme or not rest or any(c in rest for c in "/?#")):
            raise ValueError(
                f"{who}: allowed_origins takes origins as a client sends them, scheme://host[:port] "
                f"with no path (e.g. 'http://a.example'), got {origin!r}"
            )


def check_tools(who: str, tools: object) -> None:
    """A list of tools, each name once (a second would silently replace the first)."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ValueError(f"{who}: tools must be a list of pytest_mcpfaults.Tool, got {tools!r}")
    names = [getattr(tool, "name", None) for tool in tools] if isinstance(tools, Sequence) else []
    twice = next((n for i, n in enumerate(names) if n is not None and n in names[:i]), None)
    if twice is not None:
        raise ValueError(f"{who}: tools has two tools named {twice!r}; give each a name of its own")


def check_upstream_url(url: object, allow_remote: object, *, any_port: bool = False) -> str | None:
    """Why ``url`` cannot be an upstream (``None`` when it can): an ``http://`` or ``https://`` URL with
    a host, no user name or password, query or fragment, whose host is loopback unless
    ``allow_remote`` is ``True``; port 0 only with ``any_port`` (``upstream_serve`` picks one)."""
    if not isinstance(url, str) or not url:
        return "must be an http:// URL string such as 'http://127.0.0.1:9000/mcp'"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host, such as 'http://127.0.0.1:9000/mcp'"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password (send Authorization headers from the client)"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "must not carry a query or a fragment"
    if port == 0 and not any_port:
        return "must name the upstream's port (not 0; port 0, a free one, needs upstream_serve=)"
    if not is_loopback_host(parts.hostname) and allow_remote is not True:
        return (
            f"names host {parts.hostname!r}, which is not a loopback address; the sidecar forwards to "
            "loopback only, or pass allow_remote_upstream=True to forward elsewhere on purpose"
        )
    return None


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def check_upstream_headers(headers: object, upstream: object) -> None:
    """``upstream_headers``: a mapping of header names to a value (sent instead of the client's) or
    ``None`` (not forwarded); only with an upstream. Hop-by-hop headers cannot be set."""
    if headers is None:
        return
    if not isinstance(headers, Mapping):
        raise ValueError(
            "Sidecar: upstream_headers must be a dict of header names to a value or None (dropped), "
            f"e.g. {{'Authorization': None}}, got {headers!r}"
        )
    if upstream is None:
        raise ValueError("Sidecar: upstream_headers needs an upstream (upstream='http://...')")
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"Sidecar: upstream_headers: {name!r} is not a header name")
        if name.lower() in NOT_FORWARDED:
            raise ValueError(
                f"Sidecar: upstream_headers: {name!r} is a hop-by-hop or framing header (one the sidecar "
                "never forwards, or sets itself); it cannot be rewritten"
            )
        if value is not None and (not isinstance(value, str) or _CONTROL.search(value)):
            raise ValueError(
                f"Sidecar: upstream_headers[{name!r}] must be a string without CR/LF/NUL or other control "
                f"characters (tab is allowed), or None, got {value!r}"
            )


#: Headers that concern one connection only (RFC 9110 7.6.1, plus the de-facto ``Proxy-Connection``).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
#: Headers of the client's request never sent to an upstream: hop-by-hop, and those the sidecar frames
#: itself (``Expect``: the sidecar has read the whole body already, its own server answered any
#: 100-continue). ``upstream_headers`` cannot set them either.
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
#: Characters a header value cannot carry (RFC 9110 5.5: controls other than HTAB, and DEL).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_path(value: object) -> str | None:
    """Why ``value`` is not a route path (``'/mcp'``, ``'/v1/health'``), or ``None`` when it is one. A
    query (``?``), a fragment (``#``), spaces and other characters a path cannot hold are refused."""
    if not isinstance(value, str) or not value.startswith("/"):
        return "must be a path starting with '/'"
    if _PATH_RE.fullmatch(value) is None:
        return "must be a plain path: no query ('?'), fragment ('#'), spaces or control characters"
    return None


def check_transport(
    transport: object,
    sse_path: object,
    messages_path: object,
    mcp_path: str,
    health_path: str | None,
    era: Era,
    reply: ReplyMode,
    get_stream: bool,
    upstream: object = None,
) -> TransportName:
    """Refuse a bad ``transport`` / ``sse_path`` / ``messages_path`` (``ValueError`` naming the
    argument and what would be valid), and the arguments the chosen transport would ignore or cannot
    serve; return ``transport``, narrowed."""
    if transport not in TRANSPORTS:
        raise ValueError(
            f"Sidecar: transport must be one of {', '.join(map(repr, TRANSPORTS))}, got {transport!r}"
        )
    taken: dict[str, object] = {"mcp_path": mcp_path, "health_path": health_path}
    for name, path in (("sse_path", sse_path), ("messages_path", messages_path)):
        check_path_option("Sidecar", name, path)
        other = next((n for n, p in taken.items() if p == path), None)
        if other is not None:
            raise ValueError(f"Sidecar: {name} and {other} must differ, both are {path!r}")
        taken[name] = path
    narrowed: TransportName = transport
    if narrowed != "streamable_http" and era == "stateless":
        raise ValueError(
            f"Sidecar: transport={narrowed!r} serves the legacy HTTP+SSE transport, whose clients open a "
            "session with initialize; era='stateless' refuses it (use era='auto' or 'session')"
        )
    if narrowed != "streamable_http" and upstream is not None:
        raise ValueError(
            f"Sidecar: transport={narrowed!r} serves the legacy HTTP+SSE transport from the sidecar's own "
            "tools, which proxy mode (upstream=) does not relay; use transport='streamable_http' with "
            "upstream="
        )
    if narrowed == "sse":
        given = (("reply", reply, "json"), ("get_stream", get_stream, False))
        ignored = [f"{n}={v!r}" for n, v, default in given if v != default]
        if ignored:
            raise ValueError(
                f"Sidecar: {ignored[0]} shapes Streamable HTTP answers, which transport='sse' does not "
                "serve; use transport='both' to serve both, or leave it out"
            )
    return narrowed


def check_upstream_serve(command: object, upstream: object) -> list[str] | None:
    """Refuse a bad ``upstream_serve`` (``ValueError`` naming it and what would be valid); return it
    as a list. It serves ``upstream=``, which it needs; port 0 there needs ``{port}`` in it."""
    if command is None:
        return None
    command = check_command("upstream_serve", command, "['python', 'server.py', '{port}']")
    if upstream is None:
        raise ValueError(
            f"Sidecar: upstream_serve={command!r} serves the HTTP upstream, which upstream= names "
            "(upstream='http://127.0.0.1:0/mcp' with '{port}' in the command: a free port); give upstream="
        )
    try:
        port = urlsplit(upstream).port if isinstance(upstream, str) else None
    except ValueError:
        port = None  # check_upstream names what is wrong with the URL
    if port == 0 and not any("{port}" in c for c in command):
        raise ValueError(
            f"Sidecar: upstream={upstream!r} asks for a free port, which the server must be told: put "
            f"'{{port}}' in upstream_serve (got {command!r})"
        )
    return command
