"""The case run by agent_framework_session_test.py, in a pytest of its own (not collected here: the
name has no ``_test``): Microsoft Agent Framework's ``MCPStreamableHTTPTool`` calls a tool twice on a
session the sidecar loses at the first call. No LLM.

agent-framework-core 1.7.0 turns the ``404`` into a ``ToolExecutionException("Session terminated")``
and keeps the dead session id, so the second call goes out on it (the session hygiene verdict at
teardown); 1.8.0 reconnects (a new ``initialize``) and retries, so both calls answer.
"""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest
from agent_framework import MCPStreamableHTTPTool

from pytest_mcpfaults import SessionExpired, Trigger

BUDGET = 2.0


# --8<-- [start:case]
async def call(tool: MCPStreamableHTTPTool) -> str:
    """One ``echo`` call: its text, or the framework's error."""
    try:
        result = await tool.call_tool("echo", text="hi")
    except Exception as exc:  # the framework's ToolExecutionException
        return f"raised {exc.args[0] if exc.args else exc}"
    return "".join(getattr(c, "text", "") or "" for c in result) if isinstance(result, list) else result


@pytest.mark.mcp_sidecar(
    era="session", patience=BUDGET, faults=[SessionExpired(when=Trigger("tools/call", nth=1))]
)
def test_two_calls_across_a_lost_session(mcp_sidecar):
    async def run() -> list[str]:
        async with MCPStreamableHTTPTool(name="sidecar", url=mcp_sidecar.mcp_url) as tool:
            return [await call(tool), await call(tool)]

    first, second = asyncio.run(run())
    version = importlib.metadata.version("agent-framework-core")
    initializes = mcp_sidecar.journal.sequence().count("POST initialize")
    deletes = [r.status for r in mcp_sidecar.journal.requests if r.method == "DELETE"]
    calls = f"{first!r}, {second!r}"
    print(f"agent-framework-core {version}: {calls}; {initializes} initialize(s), DELETEs {deletes}")


# --8<-- [end:case]
