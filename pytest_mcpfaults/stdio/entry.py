"""``python -m pytest_mcpfaults stdio``: a relay for the test that owns it, or a standalone server.

Standalone (``python -m pytest_mcpfaults stdio [options]`` without a test behind it): the test-process
side (:class:`~pytest_mcpfaults.stdio.server.StdioServer`) runs inside the child itself, on its loop
thread, and the relay connects to it over loopback, so a standalone child answers exactly as a test's
would."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pytest_mcpfaults.stdio.child import relay
from pytest_mcpfaults.stdio.wire import CONTROL_ENV, TOKEN_ENV


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_mcpfaults stdio [options]``: relay for the test process named in the
    environment, or (no control channel in it) a standalone server built from ``argv``."""
    address, token = os.environ.get(CONTROL_ENV), os.environ.get(TOKEN_ENV, "")
    if address is None:
        return standalone(argv)
    if argv:
        print(
            f"mcpfaults stdio: options {' '.join(argv)!r} were given, but this child belongs to a test "
            f"({CONTROL_ENV} is set): the test's mcp_stdio_server marker or StdioServer(...) sets the "
            "faults and options; remove them from the command line",
            file=sys.stderr,
        )
        return 2
    relay(address, token)
    return 0


def standalone(argv: Sequence[str]) -> int:
    """Parse the ``stdio`` options, start the server in this process and relay stdin/stdout to it."""
    from pytest_mcpfaults.cli import add_stdio_parser, usage_error
    from pytest_mcpfaults.stdio.server import StdioServer

    parser = argparse.ArgumentParser(prog="python -m pytest_mcpfaults")
    parser = add_stdio_parser(parser.add_subparsers())
    args = vars(parser.parse_args(list(argv)))  # each flag's dest is its option's name but --fault's
    try:
        server = StdioServer(faults=args.pop("fault"), **args)
    except ValueError as exc:  # a kind that does not apply to a pipe, die(restart=true) ...
        usage_error(parser, exc)
    server.guarded = False  # this process is the child: nothing outlives it
    server.start()
    env = server.env
    relay(env[CONTROL_ENV], env[TOKEN_ENV])
    sys.stdout.flush()
    os._exit(0)
