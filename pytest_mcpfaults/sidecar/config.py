"""The socket sidecar's constructor arguments: defaults and the checks that reject bad ones early.

:func:`_check_kwargs` raises ``ValueError`` naming the argument and the value before
:class:`~pytest_mcpfaults.sidecar.server.Sidecar` builds anything.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence

from pytest_mcpfaults.sidecar.mcp import ERAS
from pytest_mcpfaults.sidecar.tools import TOOL_SETS

__all__ = ["DEFAULT_IDLE_TIMEOUT", "DEFAULT_PATIENCE", "DEFAULT_TOOL_TIMEOUT", "check_endpoints"]

DEFAULT_PATIENCE = 5.0
DEFAULT_TOOL_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
_REPLY_MODES = ("json", "sse")
_LOOPBACK_NAMES = ("localhost",)


def _check_kwargs(
    host: str, port: int, mcp_path: str, health_path: str | None, era: str, reply: str,
    tool_sets: Sequence[str], patience: float | None, allow_remote: bool, max_body_bytes: int,
    tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT, idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
) -> None:  # fmt: skip
    if not isinstance(host, str) or not host:
        raise ValueError(f"Sidecar: host must be a host name or IP address, got {host!r}")
    try:
        loopback = host in _LOOPBACK_NAMES or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and allow_remote is not True:
        raise ValueError(
            f"Sidecar: host {host!r} is not a loopback address; the sidecar binds to loopback only "
            "(use '127.0.0.1'), or pass allow_remote=True to bind it on purpose"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"Sidecar: port must be an integer in 0..65535 (0: any free port), got {port!r}")
    check_endpoints("Sidecar", mcp_path, health_path, era, reply, tool_sets)
    if patience is not None and (
        isinstance(patience, bool) or not isinstance(patience, (int, float)) or not patience > 0
    ):
        raise ValueError(f"Sidecar: patience must be a positive number of seconds or None, got {patience!r}")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"Sidecar: max_body_bytes must be a positive integer, got {max_body_bytes!r}")
    for name, value in (("tool_timeout", tool_timeout), ("idle_timeout", idle_timeout)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf
        ):
            raise ValueError(
                f"Sidecar: {name} must be a positive, finite number of seconds or None (unbounded), "
                f"got {value!r}"
            )


def check_endpoints(
    who: str, mcp_path: str, health_path: str | None, era: str, reply: str, tool_sets: Sequence[str]
) -> None:
    """The arguments both backends take (the socket ``Sidecar`` and ``mock_sidecar``): ``ValueError``
    naming the argument and the value, prefixed with ``who``."""
    for name, path in (("mcp_path", mcp_path), ("health_path", health_path)):
        if path is None and name == "health_path":
            continue
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"{who}: {name} must be a path starting with '/', got {path!r}")
    if health_path == mcp_path:
        raise ValueError(f"{who}: health_path and mcp_path must differ, both are {mcp_path!r}")
    if era not in ERAS:
        raise ValueError(f"{who}: era must be one of {', '.join(map(repr, ERAS))}, got {era!r}")
    if reply not in _REPLY_MODES:
        raise ValueError(f"{who}: reply must be 'json' or 'sse', got {reply!r}")
    if isinstance(tool_sets, str) or any(s not in TOOL_SETS for s in tool_sets):
        raise ValueError(f"{who}: tool_sets must be a list drawn from {list(TOOL_SETS)}, got {tool_sets!r}")
