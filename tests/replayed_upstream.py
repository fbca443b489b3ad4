"""A pytest plugin (``-p replayed_upstream``, with ``tests/`` on ``sys.path``) that runs a suite's
``mcp_sidecar`` sidecars as replays of a cassette: at start it serves the mcp SDK's own ``MCPServer``
(``sdk_upstream``), records one benchmark session of the example harness's runner through proxy mode,
stops the server, and adds ``@pytest.mark.mcp_sidecar(cassette=PATH)`` to every test, beneath the
test's own markers. The example harness's suite then runs offline against the recorded server.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from sdk_upstream import serve

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.proxy.cassette import read_cassette

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
_CASSETTE: list[Path] = []


def _record(path: Path) -> None:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    from harness import Runner, RunnerConfig

    with serve() as up, Sidecar(upstream=up.url, record=str(path), era="session") as sc:
        config = RunnerConfig(mcp_url=sc.mcp_url, health_url=sc.health_url, health_interval=0.05)
        [result] = asyncio.run(Runner(config, hardened=True).run(["task-1"]))
        assert result.outcome == "completed", result
        assert up.calls == ["create_session", "echo", "evaluate_session", "delete_session"], up.calls


def pytest_configure(config: pytest.Config) -> None:
    path = Path(tempfile.mkdtemp(prefix="mcpfaults-replayed-")) / "sdk-upstream.jsonl"
    _record(path)
    _CASSETTE.append(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _CASSETTE:
        shutil.rmtree(path.parent, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    cassette = read_cassette(_CASSETTE[0])
    tools = [e.tool for e in cassette.exchanges if e.tool]
    return (
        f"replayed cassette: {len(cassette.exchanges)} exchanges of the mcp SDK's MCPServer (stopped), "
        f"tools/call {', '.join(tools)}"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.mcp_sidecar(cassette=str(_CASSETTE[0])), append=True)
