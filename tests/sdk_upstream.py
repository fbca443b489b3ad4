"""A real MCP server nobody here wrote, as a proxying sidecar's upstream: the mcp SDK's own ``MCPServer``
(mcp 2.x; ``FastMCP`` of mcp 1.x renamed) served by uvicorn on a thread, on ``127.0.0.1`` port 0.

Its streamable HTTP app serves both protocol eras (the 2026-07-28 stateless one for ``server/discover``
and the session era for ``initialize``), and answers requests as SSE unless ``json_response=True``.
Its tools: ``add``, ``echo``, ``big`` (a long text), ``pause`` (a slow one), ``report`` (progress
and log notifications on its answer) and the benchmark-session
tools of an exgentic-style sidecar (``list_tasks``, ``create_session``, ``evaluate_session``,
``delete_session``), so the example harness can run against it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

__all__ = ["SdkUpstream", "sdk_server", "serve"]


@dataclass
class SdkUpstream:
    """A running upstream: its MCP URL, its server object, and the benchmark sessions it holds."""

    url: str
    port: int
    server: MCPServer
    sessions: dict[str, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # tools called, in order (what really ran)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def sdk_server() -> tuple[MCPServer, dict[str, str], list[str]]:
    """The SDK server with this module's tools; its benchmark sessions and call log."""
    mcp = MCPServer("sdk-upstream")
    sessions: dict[str, str] = {}
    calls: list[str] = []

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append("add")
        return a + b

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text."""
        calls.append("echo")
        return text

    @mcp.tool()
    def big(size: int) -> str:
        """A text of ``size`` characters."""
        calls.append("big")
        return "x" * size

    @mcp.tool()
    async def pause(seconds: float) -> str:
        """Wait ``seconds``, then log the call (it is in ``calls`` only once it has finished)."""
        await asyncio.sleep(seconds)
        calls.append("pause")
        return "paused"

    @mcp.tool()
    async def report(steps: int, ctx: Context) -> str:
        """Report ``steps`` progress notifications and one log message each, then answer."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps)
            await ctx.info(f"step {i} of {steps}")
        calls.append("report")
        return "reported"

    @mcp.tool()
    def list_tasks() -> str:
        """The benchmark's tasks."""
        calls.append("list_tasks")
        return json.dumps({"tasks": ["task-1", "task-2"]})

    @mcp.tool()
    def create_session(task_id: str) -> str:
        """Create a benchmark session for a task."""
        calls.append("create_session")
        sid = uuid.uuid4().hex[:12]
        sessions[sid] = task_id
        return json.dumps(
            {"status": "success", "session_id": sid, "task_id": task_id, "task": "do it", "context": {}}
        )

    @mcp.tool()
    def evaluate_session(session_id: str) -> str:
        """Score a session."""
        calls.append("evaluate_session")
        if session_id not in sessions:
            return json.dumps({"error": f"No session found with session_id {session_id}"})
        return json.dumps({"status": "success", "success": True, "score": 1.0, "is_finished": True})

    @mcp.tool()
    def delete_session(session_id: str) -> str:
        """Delete a session."""
        calls.append("delete_session")
        if sessions.pop(session_id, None) is None:
            return json.dumps({"error": f"No session found with session_id {session_id}"})
        return json.dumps({"status": "success"})

    return mcp, sessions, calls


@contextlib.contextmanager
def serve(*, json_response: bool = False) -> Iterator[SdkUpstream]:
    """Serve the SDK server on ``127.0.0.1`` (a free port) until the block ends (stop bounded: 5 s)."""
    mcp, sessions, calls = sdk_server()
    app = mcp.streamable_http_app(json_response=json_response)
    # IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only then; without it every answer
    # uvicorn writes in two parts waits out the client's delayed ACK, about 40 ms (benchmarks/rtt.py)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the SDK upstream did not start within 10 s")
        time.sleep(0.005)
    try:
        yield SdkUpstream(f"http://127.0.0.1:{port}/mcp", port, mcp, sessions, calls)
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()
