"""``python -m pytest_mcpfaults serve``: a standalone fault-injecting MCP sidecar for any language.

Starts a :class:`~pytest_mcpfaults.Sidecar` with the control endpoint of
:mod:`pytest_mcpfaults.transports.control`, prints where it listens and the control token on stdout
(``KEY=value`` lines, or one JSON object with ``--json``), then serves until SIGINT or SIGTERM, on
which it releases held requests, closes every connection and exits 0.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import secrets
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TextIO

from pytest_mcpfaults.options.checks import (
    check_transport,
    check_upstream_headers,
    check_upstream_url,
)
from pytest_mcpfaults.options.fields import add_serve_flags, option_fields, options_from_args
from pytest_mcpfaults.options.text import upstream_headers_text
from pytest_mcpfaults.options.validation import is_count, is_loopback_host
from pytest_mcpfaults.transports.control import CONTROL_PREFIX, Control
from pytest_mcpfaults.transports.server import Sidecar

_PROG = "python -m pytest_mcpfaults"
#: How many requests (and connections) ``serve`` keeps in its journal by default (``--journal-limit``).
DEFAULT_JOURNAL_LIMIT = 10_000
#: How many received spans ``serve`` keeps by default (``--span-limit``; about 1.3 KB each).
DEFAULT_SPAN_LIMIT = 50_000


def _limit(what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if not is_count(value, minimum=1):
            raise argparse.ArgumentTypeError(f"must be a positive integer ({what} kept), got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (``serve``, ``stdio``, ``merge-reports``, ``from-trace``)."""
    parser = argparse.ArgumentParser(prog=_PROG, description="pytest-mcpfaults command line.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = sub.add_parser(
        "serve",
        help="run a standalone fault-injecting MCP sidecar until SIGINT/SIGTERM",
        description=(
            "Run a fake MCP sidecar with fault injection, for harnesses in any language. Prints "
            "MCPFAULTS_URL=..., MCPFAULTS_CONTROL_TOKEN=... lines (or one JSON line with --json) on "
            f"stdout, then serves until SIGINT/SIGTERM. Control endpoint: {CONTROL_PREFIX}/ "
            "(Authorization: Bearer <token>)."
        ),
    )
    add_serve_flags(serve)  # one per option that has a flag (options/fields.py)
    serve.add_argument(
        "--journal-limit",
        type=_limit("requests"),
        default=DEFAULT_JOURNAL_LIMIT,
        metavar="N",
        help=f"keep the last N requests (and N connections) in the journal, counting the dropped ones "
        f"(default {DEFAULT_JOURNAL_LIMIT}); requests still in flight are never dropped",
    )
    serve.add_argument(
        "--span-limit",
        type=_limit("spans"),
        default=DEFAULT_SPAN_LIMIT,
        metavar="N",
        help=f"keep the last N spans received over OTLP, counting the dropped ones (default "
        f"{DEFAULT_SPAN_LIMIT}); {CONTROL_PREFIX}/check and /spans report how many were dropped",
    )
    serve.add_argument("--json", action="store_true", help="print the start-up info as one JSON line")
    serve.set_defaults(subparser=serve)  # post-parse checks report usage errors as `serve` ones
    add_stdio_parser(sub)
    add_merge_parser(sub)
    from pytest_mcpfaults.from_trace.driver import add_parser as add_from_trace_parser

    add_from_trace_parser(sub)
    return parser


def add_merge_parser(sub: Any) -> None:
    """The ``merge-reports`` subcommand: shards' JSON reports as one (see ``docs/ci.md``)."""
    merge = sub.add_parser(
        "merge-reports",
        help="merge the JSON reports of a run's shards into one findings report and baseline",
        description=(
            "Merge --mcpfaults-report files of a run's shards (--mcpfaults-shard=K/N, one CI job each) "
            "into OUT: one report whose explore findings are computed from every shard's runs, usable "
            "as the next run's --mcpfaults-baseline. Prints the findings; exits 1 when --baseline is "
            "given and a finding is new, 2 when an input is not a report."
        ),
    )
    merge.add_argument("out", metavar="OUT", help="the merged report to write")
    merge.add_argument("inputs", metavar="IN", nargs="+", help="the shards' reports")
    merge.add_argument(
        "--baseline", metavar="PATH", default=None, help="compare the merged findings with this report's"
    )
    merge.set_defaults(subparser=merge)


def add_stdio_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``stdio`` subcommand: an MCP server on stdin/stdout (see ``docs/stdio.md``)."""
    stdio: argparse.ArgumentParser = sub.add_parser(
        "stdio",
        help="run a fault-injecting MCP server on stdin/stdout (spawned by the harness)",
        description=(
            "An MCP server on stdin/stdout: newline-delimited JSON-RPC, the session era, the same tools "
            "as serve. Spawned by a test's mcp_stdio_server fixture (which sets the faults: options are "
            "refused then), or standalone for a harness in any language."
        ),
    )
    add_serve_flags(stdio, "stdio", patience=None)  # standalone: a held request waits until released
    return stdio


def _check_transport(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the Sidecar would refuse in the transport flags, worded with the flags' names."""
    try:
        check_transport(
            args.transport, args.sse_path, args.messages_path, args.mcp_path,
            None if args.no_health else args.health_path, args.era, args.reply, args.get_stream,
            args.upstream,
        )  # fmt: skip
    except ValueError as exc:
        parser.error(_as_flags(str(exc), inspect.signature(check_transport).parameters, "--transport"))


def _as_flags(message: str, names: Iterable[str], fallback: str) -> str:
    """A Sidecar's (StdioServer's) check's ``message`` as a usage error: the options in ``names``
    worded as their flags are taken (an on/off flag bare, ``--get-stream``; a flag with a value with it,
    or with its metavar where the message gives none or a Python list, ``--cassette=PATH``), the
    argument the one the ``Sidecar faults=:`` prefix names, else the first named."""
    opts = {f.name: opt for f, opt in option_fields() if opt.flag and f.name in names}
    alternatives = "|".join(opts)
    prefix = re.match(r"(?:Sidecar|StdioServer)(?: (\w+)=)?: ", message)
    if prefix is None:  # not the Sidecar's wording (a cassette's error names Sidecar(...) calls): as is
        named = re.search(rf"\b({alternatives})\b", message)
        return f"argument {opts[named[1]].flag if named else fallback}: {message}"

    def flag(m: re.Match[str]) -> str:
        opt, value = opts[m[1]], m[2]
        if opt.switch or value is None:
            return str(opt.flag)
        if not value or value.startswith("["):
            value = opt.metavar or "{" + ",".join(opt.choices or ()) + "}"
        return f"{opt.flag}={value}"

    value = r"'(?:[^'\\]|\\.)*'|\[[^\]]*\]|[\w.]*"
    text = re.sub(rf"\b({alternatives})(?:=({value})|(?= and | must))", flag, message[prefix.end() :])
    first = re.search(r"--[a-z-]+", text)
    own = opts.get(prefix[1] or "")
    argument = own.flag if own else first[0] if first else fallback
    return f"argument {argument}: {text}"


def usage_error(parser: argparse.ArgumentParser, exc: ValueError) -> NoReturn:
    """Exit 2 with what a server's constructor refused, worded with the flags (``serve``, ``stdio``)."""
    parser.error(_as_flags(str(exc), {f.name for f, _ in option_fields()}, "--fault"))


def _check_upstream(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.upstream_command is not None:
        if args.upstream_health is not None:
            parser.error(
                "argument --upstream-health: a stdio upstream (--upstream-command) has no health path"
            )
        if args.era == "stateless":
            parser.error("argument --era: 'stateless' with --upstream-command (served in the session era)")
        if args.transport != "streamable_http":
            parser.error("argument --transport: --upstream-command proxies Streamable HTTP only")
        if args.allow_remote_upstream:
            parser.error("argument --allow-remote-upstream: needs --upstream URL")
        return
    if args.upstream is None:
        for flag in ("upstream_health", "allow_remote_upstream", "upstream_header"):
            if getattr(args, flag):
                parser.error(f"argument --{flag.replace('_', '-')}: needs --upstream URL")
        return
    why = check_upstream_url(args.upstream, args.allow_remote_upstream)
    if why is not None:
        why = why.replace("allow_remote_upstream=True", "--allow-remote-upstream")
        parser.error(f"argument --upstream: {why}, got {args.upstream!r}")
    if args.upstream_health is not None and args.no_health:
        parser.error("argument --upstream-health: not with --no-health (there is no health path to forward)")
    try:
        check_upstream_headers(upstream_headers_text(args.upstream_header) or {}, args.upstream)
    except ValueError as exc:
        parser.error(f"argument --upstream-header: {str(exc).removeprefix('Sidecar: ')}")


def _announce(sc: Sidecar, token: str, as_json: bool, out: TextIO) -> None:
    info = {
        "url": sc.url,
        "mcp_url": sc.mcp_url,
        "health_url": sc.health_url if sc.health_path is not None else None,
        "control_url": sc.url + CONTROL_PREFIX,
        "control_token": token,
        "otlp_url": sc.otlp_url if sc.otlp_path is not None else None,
        "faults": [str(f) for f in sc.plan],
    }
    env = sc.otel_env if sc.otlp_path is not None else {}
    if sc.transport != "streamable_http":
        info["sse_url"] = sc.sse_url
    if sc.upstream is not None:
        info["upstream"] = sc.upstream
    if sc.upstream_command is not None:
        info["upstream_pid"] = str(sc.upstream_pid)  # the command itself may need shell quoting
    if as_json:
        out.write(json.dumps({**info, "otel_env": env}) + "\n")
    else:
        for key, value in info.items():  # each a shell word: `. <(grep ^MCPFAULTS_ out)` loads them
            if key != "faults":  # quoted only when a path or an --upstream URL holds a `;`, `$`, `'` ...
                out.write(f"MCPFAULTS_{key.upper()}={shlex.quote(str(value)) if value else ''}\n")
        for key, value in env.items():  # the child harness's environment: `grep ^OTEL_ out`
            out.write(f"{key}={shlex.quote(value)}\n")
        out.write("MCPFAULTS_READY=1\n")
    out.flush()


def serve(args: argparse.Namespace, sc: Sidecar, out: TextIO = sys.stdout) -> int:
    """Start ``sc`` (built from ``args``), announce it on ``out``, serve until SIGINT/SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    sc.journal.set_limit(args.journal_limit)
    sc.span_recorder.set_received_limit(args.span_limit)
    token = secrets.token_urlsafe(32)
    Control(sc, token).mount()
    sc.start()
    try:
        _announce(sc, token, args.json, out)
        while not stop.wait(0.2):
            pass
    finally:
        sc.stop()
    for exc in sc.errors:
        print(f"mcpfaults: error inside the sidecar: {exc!r}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_mcpfaults``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    parser = args.subparser
    if args.command == "merge-reports":
        from pytest_mcpfaults.explore.merge import main as merge_main

        return merge_main(args.out, args.inputs, args.baseline, sys.stdout, sys.stderr)
    if args.command == "from-trace":
        from pytest_mcpfaults.from_trace.driver import main as from_trace_main

        return from_trace_main(args)
    if not is_loopback_host(args.host) and not args.allow_remote:
        parser.error(
            f"argument --host: {args.host!r} is not a loopback address; the sidecar binds to loopback only "
            "unless you pass --allow-remote"
        )
    for name in ("mcp_path", "health_path", "otlp_path", "sse_path", "messages_path"):
        path = getattr(args, name)
        if (path + "/").startswith(CONTROL_PREFIX + "/"):
            parser.error(
                f"argument --{name.replace('_', '-')}: {path!r} is reserved for the control endpoint"
            )
    _check_upstream(parser, args)
    if not args.no_health and args.health_path == args.mcp_path:
        parser.error(f"argument --health-path: must differ from --mcp-path, both are {args.mcp_path!r}")
    if not args.no_otlp and args.otlp_path in (args.mcp_path, None if args.no_health else args.health_path):
        parser.error(
            f"argument --otlp-path: must differ from --mcp-path and --health-path, got {args.otlp_path!r}"
        )
    _check_transport(parser, args)
    try:  # what the Sidecar refuses across flags (--record without an upstream, a missing --cassette ...)
        sc = Sidecar(**options_from_args(args))
    except ValueError as exc:
        usage_error(parser, exc)
    try:
        return serve(args, sc)
    except OSError as exc:  # e.g. the port is taken
        if sc.upstream_command is not None and sc.upstream_pid is None:  # spawned before the bind: not run
            why = exc.__cause__ or exc
            parser.error(f"argument --upstream-command: cannot start {sc.upstream_command[0]!r}: {why}")
        print(f"{_PROG} serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
