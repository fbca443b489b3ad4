"""The text forms of the socket sidecar's options, as ``serve`` reads them from its command line: each
a parser for :mod:`argparse` (``type=``) that raises ``ArgumentTypeError`` naming what is valid. The
options (:mod:`pytest_mcpfaults.options.fields`) name them; ``cli.py`` reuses them for ``stdio``."""

from __future__ import annotations

import argparse
import shlex

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.mcp.tools import TOOL_SETS
from pytest_mcpfaults.options.checks import check_path
from pytest_mcpfaults.options.validation import is_count, parse_seconds


def auth_text(text: str) -> str | list[str]:
    """``oauth`` (the sidecar issues tokens) or a comma-separated list of accepted bearer tokens."""
    if text == "oauth":
        return text
    tokens = text.split(",")
    if not text or any(not t or any(c.isspace() for c in t) for t in tokens):
        raise argparse.ArgumentTypeError(
            f"must be 'oauth' (the sidecar issues tokens) or comma-separated bearer tokens without spaces, "
            f"got {text!r}"
        )
    return tokens


def port_text(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not (is_count(port) and port <= 65535):
        raise argparse.ArgumentTypeError(f"must be an integer in 0..65535 (0: any free port), got {text!r}")
    return port


def path_text(text: str) -> str:
    why = check_path(text)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{why}, got {text!r}")
    return text


def fault_text(text: str) -> F.Fault:
    try:
        return F.parse_fault(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tool_sets_text(text: str) -> tuple[str, ...]:
    sets = tuple(s.strip() for s in text.split(","))
    bad = [s for s in sets if s not in TOOL_SETS]
    if bad:
        what = f"unknown tool set {bad[0]!r}" if bad[0] else "an empty tool set name"
        raise argparse.ArgumentTypeError(
            f"{what} in {text!r}; valid: {', '.join(TOOL_SETS)} (one or more, comma-separated)"
        )
    return sets


def seconds_text(text: str, off: str | None = "none") -> float | None:
    try:
        return parse_seconds(text, off=off)
    except ValueError:
        valid = f"a positive number of seconds or {off!r}" if off else "a number of seconds > 0"
        raise argparse.ArgumentTypeError(f"must be {valid}, got {text!r}") from None


def command_text(text: str) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot split {text!r} into a command: {exc}") from exc
    if not words:
        raise argparse.ArgumentTypeError("must name a program, e.g. 'python server.py'")
    return words


def upstream_headers_text(specs: list[str]) -> dict[str, str | None] | None:
    """``--upstream-header`` values: ``'NAME: VALUE'`` sets, ``NAME`` alone drops; ``None`` for none."""
    out: dict[str, str | None] = {}
    for spec in specs:
        name, sep, value = spec.partition(":")
        out[name.strip()] = value.strip() if sep else None
    return out or None
