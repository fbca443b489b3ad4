"""``python -m pytest_mcpfaults stdio``: a relay for the test that owns it, or a standalone server."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from pytest_mcpfaults.stdio.child import relay
from pytest_mcpfaults.stdio.wire import CONTROL_ENV, TOKEN_ENV

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_mcpfaults stdio [options]``: relay for the test process named in the
    environment, or (no control channel in it) a standalone server built from ``argv``."""
    address, token = os.environ.get(CONTROL_ENV), os.environ.get(TOKEN_ENV, "")
    if address is None:
        from pytest_mcpfaults.stdio.standalone import standalone

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
