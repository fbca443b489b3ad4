"""``StdioServer``'s constructor arguments, checked before anything is built: ``ValueError`` naming the
argument, the value and what would be valid (the ``mcp_stdio`` marker is checked at collection by
constructing a ``StdioServer``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_mcpfaults.sidecar.config import check_endpoints
from pytest_mcpfaults.sidecar.mcp import Era
from pytest_mcpfaults.validation import is_positive_seconds

__all__ = ["check_kwargs"]


def check_kwargs(
    faults: object, era: str, tools: object, tool_sets: Sequence[str], patience: float | None,
    expect_hang: object, service_url: object, tool_timeout: float | None, *, mcp_path: str,
) -> Era:  # fmt: skip
    """Refuse a bad argument; return ``era``, narrowed."""
    era_, _ = check_endpoints("StdioServer", mcp_path, None, era, "json", tool_sets)
    if patience is not None and not is_positive_seconds(patience):
        raise ValueError(
            f"StdioServer: patience must be a positive number of seconds or None, got {patience!r}"
        )
    if not isinstance(expect_hang, bool):
        raise ValueError(f"StdioServer: expect_hang must be True or False, got {expect_hang!r}")
    if tool_timeout is not None and not is_positive_seconds(tool_timeout):
        raise ValueError(
            f"StdioServer: tool_timeout must be a positive number of seconds or None, got {tool_timeout!r}"
        )
    if service_url is not None and (not isinstance(service_url, str) or not service_url):
        raise ValueError(f"StdioServer: service_url must be a URL string or None, got {service_url!r}")
    if isinstance(faults, (str, bytes)):
        raise ValueError(
            f"StdioServer: faults must be a list of faults (or fault specs), got {faults!r}; "
            f"for one, write [{faults!r}]"
        )
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ValueError(f"StdioServer: tools must be a list of pytest_mcpfaults.Tool, got {tools!r}")
    return era_
