"""A pytest plugin (``-p proxied_upstream``, with ``tests/`` on ``sys.path``) that runs a suite's
``mcp_sidecar`` sidecars in proxy mode: it serves the mcp SDK's own ``MCPServer`` (``sdk_upstream``,
with the benchmark-session tools) for the whole run and adds ``@pytest.mark.mcp_sidecar(upstream=URL)``
to every test, beneath the test's own markers. The example harness's suite runs unchanged against it.
"""

from __future__ import annotations

import contextlib

import pytest
from sdk_upstream import serve

_STACK = contextlib.ExitStack()
_URL: list[str] = []
_CALLS: list[list[str]] = []  # the upstream's log of the tools it ran


def pytest_configure(config: pytest.Config) -> None:
    upstream = _STACK.enter_context(serve())
    _URL.append(upstream.url)
    _CALLS.append(upstream.calls)


def pytest_unconfigure(config: pytest.Config) -> None:
    _STACK.close()


def pytest_report_header(config: pytest.Config) -> str:
    return f"proxied upstream: the mcp SDK's MCPServer at {_URL[0]}"


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.mcp_sidecar(upstream=_URL[0]), append=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    calls = _CALLS[0] if _CALLS else []
    counts = {tool: calls.count(tool) for tool in dict.fromkeys(calls)}
    terminalreporter.write_line(
        "proxied upstream served: " + ", ".join(f"{tool} x{n}" for tool, n in counts.items())
    )
