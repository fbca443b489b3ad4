"""The harness's MCP client: the benchmark-session tools of an exgentic-style sidecar.

Like real benchmark harnesses it opens one MCP connection per operation with the official ``mcp`` SDK
(``Client``, session era by default: ``initialize`` … ``DELETE /mcp`` at exit), with a short read
timeout and an overall bound per operation. Results are JSON in ``content[0].text``.

Deleting a benchmark session is where the two variants differ: both treat an "already gone" answer as
a no-op, but the unhardened client knows fewer markers and matches them case-sensitively, so the
"no longer alive" and "Connection refused" variants slip through as errors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

__all__ = ["GONE_MARKERS", "UNHARDENED_GONE_MARKERS", "McpCallError", "McpTools", "SessionDeletionError"]

log = logging.getLogger(__name__)

#: Answers that mean "the session is already gone": deleting it again is a clean no-op.
GONE_MARKERS = ("no session found", "session not found", "no longer alive", "connection refused")
#: What the unhardened client knew before the incident (matched case-sensitively).
UNHARDENED_GONE_MARKERS = ("No session found", "connection refused")


class McpCallError(RuntimeError):
    """An MCP operation failed at the transport or protocol level (no tool result came back)."""


class SessionDeletionError(RuntimeError):
    """``delete_session`` failed and the failure was not recognised as "already gone"."""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, as the mcp SDK raises them."""
    while inner := getattr(exc, "exceptions", None):
        exc = inner[0]
    return exc


def _root(exc: BaseException) -> BaseException:
    seen = {id(exc)}
    while (nxt := exc.__cause__ or exc.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        exc = nxt
    return exc


def describe_error(exc: BaseException) -> str:
    """``'ConnectError: All connection attempts failed (ConnectionRefusedError: Connection refused)'``."""
    leaf = _leaf(exc)
    text = f"{type(leaf).__name__}: {leaf}".rstrip(": ")
    root = _root(leaf)
    if root is not leaf:
        errno = getattr(root, "errno", None)
        why = os.strerror(errno) if isinstance(root, OSError) and errno else str(root)
        text += f" ({type(root).__name__}: {why})"
    return text


class McpTools:
    """Calls the sidecar's benchmark-session tools, one MCP connection per call."""

    def __init__(
        self,
        mcp_url: str | StdioServerParameters,
        *,
        mode: str = "legacy",
        read_timeout: float = 5.0,
        call_timeout: float = 15.0,
        hardened: bool = True,
    ) -> None:
        self.mcp_url, self.mode, self.hardened = mcp_url, mode, hardened
        self.read_timeout, self.call_timeout = read_timeout, call_timeout

    async def _call(self, tool: str, arguments: dict[str, Any]) -> Any:
        async with Client(self.mcp_url, mode=self.mode, read_timeout_seconds=self.read_timeout) as client:
            result = await client.call_tool(tool, arguments)
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        if result.is_error:
            raise McpCallError(f"{tool}: tool error: {text}")
        try:
            return json.loads(text)
        except ValueError:
            return text

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call ``tool``; its JSON result, or :class:`McpCallError` describing what went wrong."""
        try:
            return await asyncio.wait_for(self._call(tool, arguments), self.call_timeout)
        except McpCallError:
            raise
        except asyncio.TimeoutError as exc:
            raise McpCallError(f"{tool}: no answer within {self.call_timeout} s") from exc
        except Exception as exc:  # the SDK raises exception groups of transport errors
            raise McpCallError(f"{tool}: {describe_error(exc)}") from exc

    async def list_tasks(self) -> list[str]:
        return list((await self.call("list_tasks", {}))["tasks"])

    async def create_session(self, task_id: str) -> dict[str, Any]:
        created = await self.call("create_session", {"task_id": task_id})
        if not isinstance(created, dict) or created.get("status") != "success":
            raise McpCallError(f"create_session: {created!r}")
        return created

    async def evaluate_session(self, session_id: str) -> dict[str, Any]:
        result = await self.call("evaluate_session", {"session_id": session_id})
        if not isinstance(result, dict) or result.get("status") != "success":
            raise McpCallError(f"evaluate_session: {result!r}")
        return result

    def already_gone(self, message: str) -> bool:
        """Whether a delete failure means the session (or its sidecar) is already gone."""
        if self.hardened:
            return any(marker in message.lower() for marker in GONE_MARKERS)
        return any(marker in message for marker in UNHARDENED_GONE_MARKERS)

    async def delete_session(self, session_id: str) -> str:
        """Delete a benchmark session: ``'deleted'``, or ``'already_gone'`` for a recognised no-op.

        Raises :class:`SessionDeletionError` for any other failure.
        """
        try:
            response = await self.call("delete_session", {"session_id": session_id})
        except McpCallError as exc:
            if self.already_gone(str(exc)):
                log.warning("session %s already cleaned up: %s", session_id, exc)
                return "already_gone"
            raise SessionDeletionError(f"Session deletion failed: {exc}") from exc
        if isinstance(response, dict) and response.get("status") == "success":
            log.info("session %s deleted", session_id)
            return "deleted"
        if isinstance(response, dict) and self.already_gone(str(response.get("error", ""))):
            log.warning("session %s already cleaned up: %s", session_id, response["error"])
            return "already_gone"
        raise SessionDeletionError(f"Session deletion failed: {response}")
