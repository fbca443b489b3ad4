"""The case run by fastmcp_poison_test.py, in a pytest of its own (not collected here: the name has
no ``_test``): one fastmcp ``Client``, three ``echo`` calls, the first answered ``503`` by the
sidecar (a ``status`` fault). A runner that logs a failed call and goes on. No LLM.

fastmcp 3.4.11 on mcp 1.30.0: the ``503`` ends the client's transport (the mcp 1.x streamable HTTP
client raises ``HTTPStatusError`` in its writer task), and every later call raises ``RuntimeError:
Client is not connected`` without a request: one failed call poisons the client. fastmcp 4.2.3 on
mcp 2.3.0: the ``503`` fails its own call (``MCPError``) and the next calls go out and are answered.
fastmcp records a ``CLIENT`` span per call with OpenTelemetry's MCP attributes, which session hygiene
reads (``mcp_spans`` records them).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata

import pytest

VERSIONS = f"fastmcp {importlib.metadata.version('fastmcp')} on mcp {importlib.metadata.version('mcp')}"


# --8<-- [start:case]
async def three_calls(url: str) -> list[str]:
    from fastmcp import Client

    outcomes = []
    with contextlib.suppress(Exception):  # the runner logs a failed call and goes on
        async with Client(url) as client:
            for text in ("one", "two", "three"):
                try:
                    await client.call_tool("echo", {"text": text})
                    outcomes.append("answered")
                except Exception as exc:
                    outcomes.append(f"{type(exc).__name__}: {str(exc)[:40]}")
    return outcomes


@pytest.mark.mcp_sidecar(era="session", faults=["status(code=503)@tool:echo[times=1]"], patience=2.0)
def test_three_calls_across_a_503(mcp_sidecar, mcp_spans):
    print(f"\n{VERSIONS}: {asyncio.run(three_calls(mcp_sidecar.mcp_url))}")
    calls = [r.status for r in mcp_sidecar.journal.requests if r.tool == "echo"]
    print(f"{VERSIONS}: the sidecar answered echo with {calls}")


# --8<-- [end:case]


@pytest.mark.mcp_sidecar(era="session", faults=["reset@tool:echo[times=1]"], patience=2.0)
def test_three_calls_across_a_reset(mcp_sidecar, mcp_spans):
    print(f"\n{VERSIONS} (reset): {asyncio.run(three_calls(mcp_sidecar.mcp_url))}")
    calls = [r.fault or r.status for r in mcp_sidecar.journal.requests if r.tool == "echo"]
    print(f"{VERSIONS} (reset): the sidecar saw echo {calls}")
