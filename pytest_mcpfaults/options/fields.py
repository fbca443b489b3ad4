"""The sidecars' options: :class:`SidecarOptions`, one frozen dataclass validated once, built by every
backend (:func:`build_options`) and read by the core where it uses them.

Each field's :class:`Option` (help, ``serve`` flag and its parser, backends) is what the constructor's
signature and ``Args``, the marker, the factory, ``serve``'s flags and the docs tables (docs/hooks.py)
are read from: adding an option is its field here (with its check in
:meth:`SidecarOptions.__post_init__` when its type does not say what is valid), its use, and its test.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.auth.server import check_auth, check_auth_plan
from pytest_mcpfaults.behaviour.server_requests import check_outbound_plan
from pytest_mcpfaults.mcp.builtin import tool_sets_help
from pytest_mcpfaults.mcp.endpoint import ERAS, Era
from pytest_mcpfaults.mcp.surface import Prompt, Resource, ResourceTemplate, check_surface
from pytest_mcpfaults.mcp.tools import DEFAULT_TOOL_SETS, TOOL_SETS, Tool
from pytest_mcpfaults.options.checks import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_OTLP_PATH,
    DEFAULT_PATIENCE,
    DEFAULT_TOOL_TIMEOUT,
    DEFAULT_UPSTREAM_TIMEOUT,
    REPLY_MODES,
    TRANSPORTS,
    WHO,
    ReplyMode,
    check_command,
    check_origins,
    check_path_option,
    check_tools,
    check_transport,
    check_upstream_headers,
    check_upstream_serve,
    check_upstream_url,
)
from pytest_mcpfaults.options.text import (
    auth_text,
    command_text,
    fault_text,
    path_text,
    port_text,
    seconds_text,
    tool_sets_text,
    upstream_headers_text,
)
from pytest_mcpfaults.options.validation import check_bool, is_count, is_loopback_host, is_positive_seconds
from pytest_mcpfaults.proxy.cassette.checks import RECORD_MODES, check_cassette_options
from pytest_mcpfaults.stdio.wire import MAX_LINE

if TYPE_CHECKING:
    from pytest_mcpfaults.proxy.cassette.redact import Redactor
    from pytest_mcpfaults.spans.recorder import SpanRecorder

#: The backends an option can apply to: the socket ``Sidecar``, the in-process ``mock_sidecar`` and
#: ``StdioServer``; each builds its :class:`SidecarOptions` with :func:`build_options`.
BACKENDS = ("socket", "in-process", "stdio")
#: What a backend serves in place of an option it does not take, or its own default: a stdio child has
#: one endpoint, no health path, one JSON-RPC message per line, and serves the session era by default.
BACKEND_DEFAULTS: dict[str, dict[str, Any]] = {
    "stdio": {"era": "session", "health_path": None, "max_body_bytes": MAX_LINE},
    # in process a handler runs in the caller's thread or on the sidecar loop, with no shared loop to
    # protect: no tool_timeout (an async call is bounded at 60 s), no connections to time out
    "in-process": {"tool_timeout": None, "idle_timeout": None},
}


@dataclass(frozen=True)
class Option:
    """What one field of :class:`SidecarOptions` says about itself."""

    #: One or two sentences for the docstring and the docs table (Markdown backticks allowed).
    help: str
    #: ``serve``'s flag (``'--mcp-path'``), or ``None``: not on the command line.
    flag: str | None = None
    #: ``serve --help``'s text (defaults to :attr:`help`).
    cli_help: str | None = None
    #: argparse ``type=``: the flag's text to the value.
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: Sequence[str] | None = None
    #: A repeatable flag whose values (a list) ``collect`` turns into the option's value.
    repeat: bool = False
    collect: Callable[[list[Any]], Any] | None = None
    #: A flag of its own that sets the option to ``None`` (``'--no-health'``) and its help.
    none_flag: tuple[str, str] | None = None
    #: Flags of options sharing this name are mutually exclusive on the command line.
    exclusive: str | None = None
    #: The backends taking it (:data:`BACKENDS`).
    backends: tuple[str, ...] = ("socket",)

    @property
    def switch(self) -> bool:
        """A flag without a value (``--allow-remote``): ``store_true``."""
        return self.parse is None and self.choices is None and not self.repeat and self.metavar is None


def option(default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A field of :class:`SidecarOptions` with its :class:`Option` (``help=``, ``flag=``, ...)."""
    return field(default=default, metadata={"option": Option(**meta)})


_BOTH = ("socket", "in-process")
_ALL, _STDIO = BACKENDS, ("socket", "stdio")


@dataclass(frozen=True, kw_only=True)
class SidecarOptions:
    """A sidecar's options, checked once when built: a bad value raises ``ValueError``
    naming the argument, the value and what would be valid (docs/sidecar.md, "Argument checks")."""

    #: The backend the options are for (:data:`BACKENDS`): who its refusals name, which plan checks
    #: apply here (the in-process and stdio backends check their plans themselves, ``inject()`` too).
    backend: str = field(default="socket", repr=False)
    host: str = option(
        "127.0.0.1", help="bind address; loopback only unless `allow_remote=True`.", flag="--host",
        cli_help="bind address; loopback only unless --allow-remote", metavar="HOST",
    )  # fmt: skip
    port: int = option(
        0, help="TCP port, 0 for any free port.", flag="--port", parse=port_text, metavar="PORT",
        cli_help="TCP port; 0 (default): any free port",
    )  # fmt: skip
    mcp_path: str = option(
        "/mcp", help="the MCP Streamable HTTP endpoint (POST, GET, DELETE).", flag="--mcp-path",
        parse=path_text, metavar="PATH", cli_help="MCP endpoint path (default /mcp)", backends=_BOTH,
    )  # fmt: skip
    health_path: str | None = option(
        "/health", help='the health endpoint answering `{"status": "ok"}`; `None`: absent (404).',
        flag="--health-path", parse=path_text, metavar="PATH", cli_help="health path (default /health)",
        none_flag=("--no-health", "no health endpoint: it answers 404, like real exgentic sidecars"),
        backends=_BOTH,
    )  # fmt: skip
    era: str = option(
        "auto", help="`'auto'` (both eras, as real dual servers), `'stateless'` (2026-07-28 only) or "
        "`'session'` (initialize / `Mcp-Session-Id` only; `server/discover` gets 400).", flag="--era",
        choices=ERAS, cli_help="MCP protocol era(s) served (default %(default)s)", backends=_ALL,
    )  # fmt: skip
    reply: str = option(
        "json", help="`'json'` or `'sse'`: how replies to requests are framed.", flag="--reply",
        choices=REPLY_MODES, cli_help="reply framing (default json)", backends=_BOTH,
    )  # fmt: skip
    get_stream: bool = option(
        False, help="answer `GET` on the MCP endpoint with an open SSE stream instead of 405 (where "
        "`list_changed` and `resources/updated` notifications go).", flag="--get-stream",
        cli_help="answer GET on the MCP endpoint with an open SSE stream (list_changed notifications)",
    )  # fmt: skip
    tools: Iterable[Tool] = option(
        (), help="extra tools (`Tool`) served beside the built-in sets.", backends=_ALL
    )
    tool_sets: Sequence[str] = option(
        DEFAULT_TOOL_SETS, help=f"built-in tool sets: {tool_sets_help()}.", flag="--tool-sets",
        parse=tool_sets_text, metavar="SETS", backends=_ALL,
        cli_help=f"comma-separated built-in tool sets (default {','.join(DEFAULT_TOOL_SETS)}; "
        "'conformance': the MCP conformance suite's fixtures)",
    )  # fmt: skip
    resources: Iterable[Resource | ResourceTemplate] = option(
        (), help="resources (`Resource`) and resource templates (`ResourceTemplate`) served beside "
        "the built-in sets' (docs/surface.md).", backends=_BOTH,
    )  # fmt: skip
    prompts: Iterable[Prompt] = option(
        (), help="prompts (`Prompt`) served beside the built-in sets' (docs/surface.md).", backends=_BOTH,
    )  # fmt: skip
    faults: Sequence[F.Fault | str] = option(
        (), help="the fault plan: faults (or their text forms) applied in order, first match wins.",
        flag="--fault", parse=fault_text, metavar="SPEC", repeat=True, collect=list, backends=_ALL,
        cli_help="a fault in text form, e.g. 'hang@tools/call' or 'die@tool:delete_session' (repeatable; "
        "first match wins; docs/faults.md: the kinds of each transport)",
    )  # fmt: skip
    patience: float | None = option(
        DEFAULT_PATIENCE, help="seconds a held request may wait before the sidecar aborts its connection "
        "and records a patience violation; `None`: hold until release or teardown.", flag="--patience",
        parse=seconds_text, metavar="SECONDS|none", backends=_STDIO,
        cli_help="seconds a held request waits before the sidecar aborts it (stdio: the server exits; "
        "default %(default)s; 'none': hold until released)",
    )  # fmt: skip
    expect_hang: bool = option(
        False, help="the test expects clients to wait out held requests: violations are reported but "
        "do not fail the test.", backends=_STDIO,
    )  # fmt: skip
    allow_remote: bool = option(
        False, help="allow a non-loopback `host`.", flag="--allow-remote",
        cli_help="allow a non-loopback --host",
    )  # fmt: skip
    allowed_origins: Sequence[str] = option(
        (), help="`Origin` values accepted besides loopback ones (DNS-rebinding check).", backends=_BOTH
    )
    max_body_bytes: int = option(
        1 << 20, help="request bodies above this are refused with 413.", backends=_BOTH
    )
    service_url: str | None = option(
        None, help="the backend URL named in `BackendGone` payloads.", backends=_ALL
    )
    tool_timeout: float | None = option(
        DEFAULT_TOOL_TIMEOUT, help="seconds one tool handler call may take (but the built-in `sleep`); "
        "past it the client gets a tool error naming the tool, the test a `SidecarError`. `None`: "
        "unbounded.", flag="--tool-timeout", parse=seconds_text, metavar="SECONDS|none", backends=_STDIO,
        cli_help=f"seconds a tool call may run before it is answered as an error (default "
        f"{DEFAULT_TOOL_TIMEOUT:g}; 'none': unbounded)",
    )  # fmt: skip
    idle_timeout: float | None = option(
        DEFAULT_IDLE_TIMEOUT, help="seconds a connection may go without a complete request (idle, or "
        "sending its headers slowly) before the sidecar closes it (`ConnectionRecord.timed_out`). "
        "`None`: never.", flag="--idle-timeout", parse=seconds_text, metavar="SECONDS|none",
        cli_help=f"seconds a connection may stay without a complete request (default "
        f"{DEFAULT_IDLE_TIMEOUT:g}; 'none': unbounded)",
    )  # fmt: skip
    otlp_path: str | None = option(
        DEFAULT_OTLP_PATH, help="the OTLP/HTTP trace receiver (`POST`, protobuf or JSON): spans other "
        "processes export join `span_recorder`. No fault applies to it. `None`: off (404).",
        flag="--otlp-path", parse=path_text, metavar="PATH",
        cli_help=f"path of the OTLP/HTTP trace receiver (default {DEFAULT_OTLP_PATH}); spans a harness "
        "exports there are checked by /_mcpfaults/check",
        none_flag=("--no-otlp", "no OTLP trace receiver"),
    )  # fmt: skip
    span_recorder: SpanRecorder | None = option(  # noqa: RUF009 (ruff cannot see the annotation's type)
        None, help="the recorder received spans join; `None`: the sidecar's own (the pytest fixtures "
        "pass the test's recorder when the test records spans)."
    )  # fmt: skip
    transport: str = option(
        "streamable_http", help="which MCP transports to serve: `'streamable_http'` (on `mcp_path`), "
        "`'sse'` (the legacy 2024-11-05 HTTP+SSE transport on `sse_path` and `messages_path`; "
        "`mcp_path` then answers 404) or `'both'`.", flag="--transport", choices=TRANSPORTS,
        cli_help="MCP transports served: Streamable HTTP on --mcp-path (default), the legacy 2024-11-05 "
        "HTTP+SSE transport on --sse-path/--messages-path (sse), or both",
    )  # fmt: skip
    sse_path: str = option(
        "/sse", help="the legacy transport's event stream (`GET`): its first event names the message URL.",
        flag="--sse-path", parse=path_text, metavar="PATH", cli_help="legacy SSE stream path (default /sse)",
    )  # fmt: skip
    messages_path: str = option(
        "/messages", help="the legacy transport's message endpoint (`POST ...?session_id=<hex>`).",
        flag="--messages-path", parse=path_text, metavar="PATH",
        cli_help="legacy SSE message path (default /messages)",
    )  # fmt: skip
    upstream: str | None = option(
        None, help="proxy mode: a real MCP server's URL (`'http://127.0.0.1:9000/mcp'`) answering every "
        "request the plan does not, in place of the fake's. Loopback only unless `allow_remote_upstream`.",
        flag="--upstream", metavar="URL", exclusive="upstream",
        cli_help="proxy mode: forward every request the faults do not answer to this real MCP server "
        "(e.g. http://127.0.0.1:9000/mcp) instead of serving the fake's tools; loopback only unless "
        "--allow-remote-upstream",
    )  # fmt: skip
    upstream_health: str | None = option(
        None, help="proxy mode: the upstream's own health path (`'/health'`) to forward the sidecar's "
        "health requests to; `None`: the sidecar answers them itself.", flag="--upstream-health",
        parse=path_text, metavar="PATH",
        cli_help="proxy mode: forward the health path to this path of the upstream (default: the sidecar "
        "answers it itself)",
    )  # fmt: skip
    upstream_timeout: float | None = option(
        DEFAULT_UPSTREAM_TIMEOUT, help="proxy mode: seconds the upstream may take to send its headers, "
        "then between two chunks of a POST's body; past it the client gets 504 (or a reset, once the "
        "status line was relayed). A `GET`'s or `subscriptions/listen`'s event stream is not bounded. "
        "`None`: unbounded.", flag="--upstream-timeout", parse=seconds_text, metavar="SECONDS|none",
        cli_help=f"proxy mode: seconds the upstream may take to send its headers, and then between two "
        f"chunks of a POST's body (default {DEFAULT_UPSTREAM_TIMEOUT:g}; 'none': unbounded); past it: 504",
    )  # fmt: skip
    allow_remote_upstream: bool = option(
        False, help="allow an `upstream` whose host is not loopback.", flag="--allow-remote-upstream",
        cli_help="allow an --upstream that is not loopback",
    )  # fmt: skip
    upstream_command: Sequence[str] | None = option(
        None, help="proxy mode with a stdio MCP server: the program and its arguments (`['python', "
        "'server.py']`), spawned and killed with the sidecar, which keeps the HTTP sessions. Not with "
        "`upstream`.", flag="--upstream-command", parse=command_text, metavar="'CMD ARGS'",
        exclusive="upstream",
        cli_help="proxy mode with a stdio MCP server: spawn this command (split as a shell would, e.g. "
        "'python server.py --flag'), forward to it over its stdin/stdout, kill it at exit",
    )  # fmt: skip
    upstream_serve: Sequence[str] | None = option(
        None, help="proxy mode (`upstream=`): the command serving the upstream (`['python', 'server.py', "
        "'{port}']`; `{port}` is the port of `upstream=`, 0 there picks a free one), started (until it "
        "accepts connections) and killed with the sidecar, stopped and started in between with "
        "`Sidecar.upstream_server` (docs/proxy.md).",
    )  # fmt: skip
    upstream_headers: Mapping[str, str | None] | None = option(
        None, help="proxy mode (`upstream=`): headers rewritten on every forwarded request, a value sent "
        "in place of the client's, `None` not forwarded (`{'Authorization': None}`); the others pass as "
        "sent.", flag="--upstream-header", metavar="'NAME: VALUE'|NAME", repeat=True,
        collect=upstream_headers_text,
        cli_help="proxy mode: send this header to the upstream in place of the client's ('NAME: VALUE'), "
        "or do not forward it (NAME alone); repeatable",
    )  # fmt: skip

    auth: str | Sequence[str] | None = option(
        None, help="the sidecar as an OAuth-protected resource (docs/auth.md): `'oauth'` (bearer tokens "
        "the sidecar issues, described by its `/.well-known/` metadata; clients may register and sign in "
        "with the authorization code grant and PKCE, approved at once) or a list of the tokens it accepts; "
        "a request without one is answered 401. The auth fault kinds need it. `None`: no authorization.",
        flag="--auth", parse=auth_text, metavar="oauth|TOKEN,...",
        cli_help="require bearer tokens on the MCP endpoint: 'oauth' (the sidecar issues them: "
        "authorization_code with PKCE, client_credentials and refresh_token grants) or comma-separated "
        "accepted tokens",
    )  # fmt: skip
    record: str | None = option(
        None, help="proxy mode (`upstream=` or `upstream_command=`): record every exchange with the upstream "
        "into this cassette file, written when the sidecar stops (docs/cassettes.md). Secrets are redacted.",
        flag="--record", metavar="PATH",
        cli_help="proxy mode: record the upstream's answers into this cassette file (written at exit); "
        "replay it later with --cassette",
    )  # fmt: skip
    record_mode: str = option(
        "all", help="how `record=` writes: `'all'` (this run's exchanges, in place of the file's) or "
        "`'new_episodes'` (the file's, then this run's that match none of them).", flag="--record-mode",
        choices=RECORD_MODES, cli_help="with --record: all (overwrite, default) or new_episodes (add the "
        "new exchanges to the cassette)",
    )  # fmt: skip
    record_redact: Redactor | None = option(  # noqa: RUF009 (ruff cannot see the annotation's type)
        None, help="with `record=`: called with each exchange (its JSON object, already redacted of "
        "secrets) before it is written; returns it changed, or `None` to leave it out."
    )  # fmt: skip
    cassette: str | None = option(
        None, help="replay this cassette file offline: its recorded tools are the sidecar's, its recorded "
        "answers answer matching requests, with every fault on top (docs/cassettes.md). Not with "
        "`upstream`.", flag="--cassette", metavar="PATH",
        cli_help="replay this cassette (recorded with --record) instead of the fake's tools, offline",
    )  # fmt: skip
    cassette_ignore: Sequence[str] = option(
        (), help="with `cassette=`: argument (or param) names not compared when matching a request to a "
        "recorded one.", flag="--cassette-ignore", metavar="NAME", repeat=True, collect=tuple,
        cli_help="with --cassette: an argument name not compared when matching (repeatable)",
    )  # fmt: skip
    cassette_order: bool = option(
        False, help="with `cassette=`: answer in recorded order: a request must match the first recorded "
        "exchange of its method and tool not yet played.", flag="--cassette-order",
        cli_help="with --cassette: match requests in recorded order",
    )  # fmt: skip
    cassette_once: bool = option(
        False, help="with `cassette=`: give each recorded answer once (by default, once every match was "
        "played, the last one answers again).", flag="--cassette-once",
        cli_help="with --cassette: each recorded answer is given once; a repeat is unmatched",
    )  # fmt: skip

    def __post_init__(self) -> None:
        """Every check, in the order the arguments depend on each other; then the values narrowed
        (``era``, ``reply``, ``transport``), the plan parsed, the command and headers copied. A one-shot
        iterator (a generator) is read into a tuple first: its check must not be the read that empties it."""
        for f in dataclasses.fields(self):
            if isinstance(value := getattr(self, f.name), Iterator):
                object.__setattr__(self, f.name, tuple(value))
        command = _check_upstream_command(self)
        era, reply = check_options(self)
        transport = check_transport(
            self.transport, self.sse_path, self.messages_path, self.mcp_path, self.health_path, era, reply,
            self.get_stream, self.upstream if self.upstream is not None else command,
        )  # fmt: skip
        check_upstream_headers(self.upstream_headers, self.upstream)
        serve = check_upstream_serve(self.upstream_serve, self.upstream)
        auth, proxied = check_auth(self.auth), self.upstream is not None or command is not None
        if auth is not None and (proxied or transport != "streamable_http"):
            raise ValueError(
                f"Sidecar: auth={self.auth!r} is for the fake's own Streamable HTTP endpoint: not with "
                "upstream= / upstream_command= (proxy mode) nor with transport='sse' or 'both'"
            )
        cassettes = check_cassette_options(vars(self), command, transport)
        resources, prompts = check_surface(WHO[self.backend], self.resources, self.prompts)
        if (resources or prompts) and proxied:
            raise ValueError(
                "Sidecar: resources= and prompts= are served by the fake; with an upstream they are the "
                f"upstream's own (got {len(resources)} resource(s), {len(prompts)} prompt(s) and an upstream)"
            )
        plan = F.as_plan(self.faults)
        if self.backend == "socket":
            F.check_transport(plan, "http", "Sidecar faults=")
            check_auth_plan(plan, auth, "Sidecar faults=")
            check_outbound_plan(plan, proxied, "Sidecar faults=")
        for name, value in (
            ("era", era), ("reply", reply), ("transport", transport), ("upstream_command", command),
            ("upstream_serve", serve), ("faults", plan), ("auth", auth), *cassettes.items(),
            ("upstream_headers", None if (h := self.upstream_headers) is None else dict(h)),
            ("resources", tuple(resources)), ("prompts", tuple(prompts)),
            ("allowed_origins", tuple(self.allowed_origins)),
        ):  # fmt: skip
            object.__setattr__(self, name, value)


def check_options(opts: SidecarOptions) -> tuple[Era, ReplyMode]:
    """Refuse a bad option (``ValueError`` naming the backend, the option and the value); return ``era``
    and ``reply``, narrowed."""
    who = WHO[opts.backend]
    if not isinstance(opts.host, str) or not opts.host:
        raise ValueError(f"{who}: host must be a host name or IP address, got {opts.host!r}")
    check_bool(who, "allow_remote", opts.allow_remote)
    if not is_loopback_host(opts.host) and opts.allow_remote is not True:
        raise ValueError(
            f"{who}: host {opts.host!r} is not a loopback address; the sidecar binds to loopback only "
            "(use '127.0.0.1'), or pass allow_remote=True to bind it on purpose"
        )
    if not (is_count(opts.port) and opts.port <= 65535):
        raise ValueError(f"{who}: port must be an integer in 0..65535 (0: any free port), got {opts.port!r}")
    check_path_option(who, "mcp_path", opts.mcp_path)
    if opts.health_path is not None:
        check_path_option(who, "health_path", opts.health_path)
    if opts.health_path == opts.mcp_path:
        raise ValueError(f"{who}: health_path and mcp_path must differ, both are {opts.mcp_path!r}")
    era, reply, sets = opts.era, opts.reply, opts.tool_sets
    if era not in ERAS:
        raise ValueError(f"{who}: era must be one of {', '.join(map(repr, ERAS))}, got {era!r}")
    if reply not in REPLY_MODES:
        raise ValueError(f"{who}: reply must be 'json' or 'sse', got {reply!r}")
    if isinstance(sets, str) or not isinstance(sets, Iterable) or any(s not in TOOL_SETS for s in sets):
        raise ValueError(f"{who}: tool_sets must be a list drawn from {list(TOOL_SETS)}, got {sets!r}")
    if opts.patience is not None and not is_positive_seconds(opts.patience):
        raise ValueError(
            f"{who}: patience must be a positive number of seconds or None, got {opts.patience!r}"
        )
    if not is_count(opts.max_body_bytes, minimum=1):
        raise ValueError(f"{who}: max_body_bytes must be a positive integer, got {opts.max_body_bytes!r}")
    check_bool(who, "get_stream", opts.get_stream)
    check_bool(who, "expect_hang", opts.expect_hang)
    check_origins(who, opts.allowed_origins)
    if opts.service_url is not None and (not isinstance(opts.service_url, str) or not opts.service_url):
        raise ValueError(f"{who}: service_url must be a URL string or None, got {opts.service_url!r}")
    check_tools(who, opts.tools)
    if isinstance(opts.faults, (str, bytes)):
        raise ValueError(
            f"{who}: faults must be a list of faults (or fault specs), got {opts.faults!r}; "
            f"for one, write [{opts.faults!r}]"
        )
    _check_upstream(opts)
    for name in ("tool_timeout", "idle_timeout", "upstream_timeout"):
        value = getattr(opts, name)
        if value is not None and not is_positive_seconds(value):
            raise ValueError(
                f"{who}: {name} must be a positive, finite number of seconds or None (unbounded), "
                f"got {value!r}"
            )
    _check_otlp(opts)
    return era, reply  # narrowed by the two `in` checks above


def _check_otlp(opts: SidecarOptions) -> None:  # the OTLP receiver's path, and the recorder it feeds
    if opts.otlp_path is not None:
        check_path_option("Sidecar", "otlp_path", opts.otlp_path, " (or None: no OTLP receiver)")
        if opts.otlp_path in (opts.mcp_path, opts.health_path):
            raise ValueError(
                "Sidecar: otlp_path must differ from mcp_path and health_path, got "
                f"{opts.otlp_path!r} for both"
            )
    if opts.span_recorder is not None:
        from pytest_mcpfaults.spans.recorder import SpanRecorder

        if not isinstance(opts.span_recorder, SpanRecorder):
            raise ValueError(
                "Sidecar: span_recorder must be a pytest_mcpfaults.SpanRecorder or None, "
                f"got {opts.span_recorder!r}"
            )


def _check_upstream_command(opts: SidecarOptions) -> list[str] | None:
    """Refuse a bad ``upstream_command`` (``ValueError`` naming it and what would be valid), and the
    arguments it makes meaningless; return it as a list."""
    if opts.upstream_command is None:
        return None
    command = check_command("upstream_command", opts.upstream_command, "['python', 'server.py']")
    if opts.upstream is not None:
        raise ValueError(
            f"Sidecar: upstream={opts.upstream!r} and upstream_command={command!r} both name the upstream; "
            "give one: upstream= for an HTTP server, upstream_command= for a stdio server the sidecar spawns"
        )
    if opts.upstream_health is not None:
        raise ValueError(
            f"Sidecar: upstream_health={opts.upstream_health!r} forwards health requests to an HTTP "
            "upstream; a stdio upstream (upstream_command=) has no health path: leave upstream_health out"
        )
    if opts.era == "stateless":
        raise ValueError(
            "Sidecar: era='stateless' with upstream_command=: a stdio upstream is served in the session era "
            "(initialize, Mcp-Session-Id); use era='auto' or 'session'"
        )
    if opts.get_stream:
        raise ValueError("Sidecar: get_stream=True is the fake's own GET stream; a stdio upstream has none")
    if isinstance(opts.tools, Sequence) and opts.tools:
        raise ValueError(
            f"Sidecar: tools= are served by the fake; with upstream_command= the tools are the child's own "
            f"(got {len(opts.tools)} tool(s))"
        )
    return command


def _check_upstream(opts: SidecarOptions) -> None:
    """The proxy-mode arguments, and the fake-only ones that make no sense with an upstream (its tools
    and its GET stream are the upstream's own)."""
    upstream, health, allow = opts.upstream, opts.upstream_health, opts.allow_remote_upstream
    check_bool("Sidecar", "allow_remote_upstream", allow)
    if upstream is None:
        if health is not None:
            raise ValueError(
                f"Sidecar: upstream_health={health!r} needs an upstream (upstream='http://...'); "
                "without one the sidecar serves /health itself"
            )
        if allow:
            raise ValueError("Sidecar: allow_remote_upstream=True needs an upstream (upstream='http://...')")
        return
    why = check_upstream_url(upstream, allow, any_port=opts.upstream_serve is not None)
    if why is not None:
        raise ValueError(f"Sidecar: upstream {why}, got {upstream!r}")
    if health is not None:
        check_path_option("Sidecar", "upstream_health", health, " (the upstream's health path) or None")
        if opts.health_path is None:
            raise ValueError(
                f"Sidecar: upstream_health={health!r} forwards the sidecar's health path, but "
                "health_path is None (absent); give health_path too, or leave upstream_health out"
            )
    if opts.get_stream is True:
        raise ValueError(
            "Sidecar: get_stream=True is the fake's own GET stream; with an upstream, GET on the MCP "
            "endpoint is forwarded and answered by the upstream"
        )
    tools = opts.tools
    if not isinstance(tools, (str, bytes)) and isinstance(tools, Sequence) and tools:
        raise ValueError(
            "Sidecar: tools= are served by the fake; with an upstream the tools are the upstream's own "
            f"(got {len(tools)} tool(s) and upstream={upstream!r})"
        )


def build_options(given: Mapping[str, Any], backend: str = "socket") -> SidecarOptions:
    """:class:`SidecarOptions` of ``backend`` from keyword arguments, over the backend's defaults
    (:data:`BACKEND_DEFAULTS`). An argument that is no option of the backend is a ``TypeError`` naming
    it and what the backend takes, prefixed with who it is (:data:`WHO`)."""
    who, backends = WHO[backend], {f.name: opt.backends for f, opt in option_fields()}
    takes = ", ".join(name for name, on in backends.items() if backend in on)
    unknown = sorted(given - backends.keys())
    if unknown and backend == "socket":
        raise TypeError(f"{who}: unknown argument {unknown[0]!r}; valid arguments: {', '.join(backends)}")
    if unknown:
        raise TypeError(f"{who}: {unknown[0]!r} is not an option; the {backend} backend takes {takes}")
    other = next((name for name in sorted(given) if backend not in backends[name]), None)
    if other is not None:
        owners = " and ".join(WHO[b] for b in backends[other])
        raise TypeError(
            f"{who}: {other!r} is an option of {owners.replace('Sidecar', 'the socket Sidecar', 1)} only; "
            f"the {backend} backend takes {takes}"
        )
    return SidecarOptions(**{**BACKEND_DEFAULTS.get(backend, {}), **given}, backend=backend)


@functools.cache
def option_fields() -> tuple[tuple[dataclasses.Field[Any], Option], ...]:
    """Every field of :class:`SidecarOptions` with its :class:`Option`, in order."""
    fields = dataclasses.fields(SidecarOptions)
    return tuple((f, f.metadata["option"]) for f in fields if "option" in f.metadata)


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def with_options(backend: str) -> Callable[[T], T]:
    """Give a method taking ``**options`` the signature of ``backend``'s options: its own named
    parameters, then each option the backend takes with the backend's default
    (``inspect.signature``: the marker's valid arguments)."""

    def wrap(method: T) -> T:
        own = inspect.signature(method)  # type: ignore[arg-type]
        params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        defaults, fields = BACKEND_DEFAULTS.get(backend, {}), inspect.signature(SidecarOptions).parameters
        for f, opt in option_fields():
            if backend in opt.backends:
                params.append(fields[f.name].replace(default=defaults.get(f.name, f.default)))
        method.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        return method

    return wrap


def takes_options(
    cls: Callable[P, SidecarOptions],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, P], R]]:
    """Give a method taking ``**options`` the keywords of ``cls`` (:class:`SidecarOptions`): its
    signature (:func:`with_options`), the types mypy checks a call against, and an ``Args`` section in
    its docstring."""

    def wrap(method: Callable[..., R]) -> Callable[Concatenate[Any, P], R]:
        args = "".join(f"        {f.name}: {o.help.replace('`', '``')}\n" for f, o in option_fields())
        method.__doc__ = (method.__doc__ or "") + "\n    Args:\n" + args
        return with_options("socket")(method)

    return wrap


def add_serve_flags(parser: argparse.ArgumentParser, backend: str = "socket", **defaults: Any) -> None:
    """The flag of every option of ``backend`` that has one, in the options' order, with the backend's
    defaults (:data:`BACKEND_DEFAULTS`) and then ``defaults``; each flag's ``dest`` is argparse's own
    (``--upstream-header`` -> ``upstream_header``)."""
    groups: dict[str | None, Any] = {None: parser}
    defaults = {**BACKEND_DEFAULTS.get(backend, {}), **defaults}
    for f, opt in option_fields():
        if opt.flag is None or backend not in opt.backends:
            continue
        group = opt.exclusive or (opt.flag if opt.none_flag is not None else None)
        if group not in groups:
            groups[group] = parser.add_mutually_exclusive_group()
        text = opt.cli_help or opt.help
        if opt.switch:
            groups[group].add_argument(opt.flag, action="store_true", help=text)
            continue
        default = defaults.get(f.name, f.default)
        if default is None:  # as the flag takes it ('none'), not Python's None
            text = text.replace("%(default)s", "none")
        kwargs: dict[str, Any] = {"help": text, "type": opt.parse, "default": default}
        if opt.choices is not None:
            kwargs["choices"] = opt.choices
        else:
            kwargs["metavar"] = opt.metavar
        if opt.repeat:
            kwargs.update(action="append", default=[])
        groups[group].add_argument(opt.flag, **kwargs)
        if opt.none_flag is not None:
            groups[group].add_argument(opt.none_flag[0], action="store_true", help=opt.none_flag[1])


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``Sidecar`` keywords ``serve``'s parsed flags give (options without a flag keep their
    defaults)."""
    out: dict[str, Any] = {}
    for f, opt in option_fields():
        if opt.flag is None:
            continue
        value = getattr(args, _dest(opt.flag))
        if opt.none_flag is not None and getattr(args, _dest(opt.none_flag[0])):
            value = None
        out[f.name] = value if opt.collect is None else opt.collect(value)
    return out
