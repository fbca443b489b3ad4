"""One benchmark session as the incident's runner runs it, over one mcp 2.x ``Client``: used by the
flip tests over HTTP and stdio (``test_flip_real_client.py``, ``test_stdio_flip.py``)."""

from __future__ import annotations

import json
from typing import Any

from mcp.client import Client
from opentelemetry.trace import Status, StatusCode, Tracer


async def one_session(
    tracer: Tracer, target: Any, *, copy_cleanup_error: bool, agent_call: bool = True
) -> list[str]:
    """Create a session, call ``echo`` once in ``Agent.Call`` (``agent_call``), delete the session in
    ``MCP.DeleteSession``, all inside ``Agent.Session``; ``target`` is a URL or stdio parameters.
    ``copy_cleanup_error``: the unhardened runner, which copies what escaped the cleanup onto the
    session; else the hardened one, which keeps it on the cleanup span. Returns what escaped, by type
    name: out of the delete, then out of the client's context (if anything)."""
    escaped: list[str] = []
    with tracer.start_as_current_span("Agent.Session") as session:
        try:
            async with Client(target, mode="legacy", read_timeout_seconds=5) as client:
                created = await client.call_tool("create_session", {"task_id": "task-1"})
                sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
                if agent_call:
                    with tracer.start_as_current_span("Agent.Call"):
                        await client.call_tool("echo", {"text": "answer"})
                try:
                    with tracer.start_as_current_span("MCP.DeleteSession") as delete:
                        try:
                            await client.call_tool("delete_session", {"session_id": sid})
                        except BaseException as exc:
                            if not copy_cleanup_error:  # hardened: the failure stays on the cleanup span
                                delete.record_exception(exc)
                                delete.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                            raise
                except BaseException as exc:
                    escaped.append(type(exc).__name__)
                    if copy_cleanup_error:  # the unhardened runner's handler
                        session.record_exception(exc)
                        session.set_status(Status(StatusCode.ERROR, f"Session failed: {exc}"))
                    raise
        except BaseException as exc:  # leaving the client after the server died: an ExceptionGroup
            escaped.append(type(exc).__name__)
    return escaped
