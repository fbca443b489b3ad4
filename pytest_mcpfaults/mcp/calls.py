"""A ``tools/call`` on the fake MCP endpoint: checked against its tool's input schema, its handler run
with its ``ctx``, the input rounds of a stateless-era call, and the handler's outcome as the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.core.timeouts import within
from pytest_mcpfaults.mcp.jsonrpc import (
    INVALID_PARAMS,
    ErrorBy,
    McpRequest,
    Reply,
    client_error,
    ok,
    rpc_error,
    tool_result,
)
from pytest_mcpfaults.mcp.outbound import (
    ClientRequestError,
    Link,
    NotInThisEra,
    ServerMessages,
    ToolContext,
)
from pytest_mcpfaults.mcp.rounds import InputRounds, LostRound
from pytest_mcpfaults.mcp.sessions import Sessions
from pytest_mcpfaults.mcp.tools import CONTEXT, BuiltinTool, Tool, ToolResultError
from pytest_mcpfaults.mcp.worker_calls import SyncToolContext, on_worker


class ToolTimeoutError(TimeoutError):
    """A tool handler ran past the sidecar's ``tool_timeout`` (re-raised in the test, naming the tool)."""


@dataclass(eq=False)
class ToolCalls:
    """The tool calls of one endpoint. Loop thread only.

    ``run_sync``: how to run a user's sync handler off the loop (``None``: inline); ``run_async``: how
    to await an async one; ``on_ran_on(rid, ended)``: told when call ``rid`` is stopped while its sync
    handler runs on (``False``), then when it ends (``True``); ``replay``: a replaying sidecar's answer,
    given in place of running a handler."""

    tools: Mapping[str, Tool]
    sessions: Sessions
    on_error: Callable[[str, BaseException], None]
    tool_timeout: float | None
    run_sync: Callable[[Callable[[], Any]], Awaitable[Any]] | None
    run_async: Callable[[Awaitable[Any]], Awaitable[Any]] | None
    messages: ServerMessages
    on_ran_on: Callable[[int, bool], None]
    replay: Callable[[McpRequest, int], Reply] | None = None
    rounds: InputRounds = field(default_factory=InputRounds)

    async def call(self, req: McpRequest, link: Link | None = None, rid: int = -1) -> Reply:
        """Check the call against the tool's input schema, then run the handler. A client's mistake is
        answered without calling it as the mcp SDK answers (an unknown tool or arguments that are not
        an object: -32602; arguments that do not fit the schema: a tool execution error)."""
        params = req.message.get("params") or {}
        status = 400 if req.era == "stateless" else 200  # the mcp SDK's status for -32602, per era
        tool = self.tools.get(req.tool or "")
        if tool is None:
            return client_error(INVALID_PARAMS, f"Unknown tool: {params.get('name')}", req.id, status)
        if req.era == "stateless" and params.get("requestState") is not None:
            return await self._resume(req, tool, params, link, rid)
        arguments = {} if params.get("arguments") is None else params["arguments"]
        if not isinstance(arguments, dict):
            return client_error(
                INVALID_PARAMS,
                f"Invalid params: arguments of tool {tool.name} must be an object, got "
                f"{type(arguments).__name__}",
                req.id,
                status,
            )
        problem = tool.check_arguments(arguments)
        if problem is not None:
            return _failed(req, tool, problem, f"invalid arguments for tool {tool.name}: {problem}", "client")
        if self.replay is not None:  # the recorded server's answer, no handler runs
            return self.replay(req, rid)
        kwargs, ignored = tool.keywords(arguments)
        ctx: ToolContext | None = None
        if tool.wants_context and not tool.is_async:  # a sync handler: its call's cancelled event
            kwargs[CONTEXT] = SyncToolContext(tool.name)
        elif tool.wants_context:
            made = self._context(req, tool, link, rid)
            if isinstance(made, Reply):
                return made
            ctx = kwargs[CONTEXT] = made
        if ctx is not None and ctx.stateless:
            assert link is not None
            reply = await self._round(
                req, tool, ctx, asyncio.ensure_future(self._run_handler(tool, kwargs, rid)), link
            )
        else:
            reply = await self._outcome(req, tool, ctx, self._run_handler(tool, kwargs, rid))
        if ignored and reply.error_by is None:
            names = ", ".join(map(repr, ignored))
            reply.error = f"ignored argument(s) {names}: not in the input schema of tool {tool.name}"
            reply.error_by = "client"
        return reply

    async def _round(
        self, req: McpRequest, tool: Tool, ctx: ToolContext, task: asyncio.Future[Any], link: Link
    ) -> Reply:
        try:
            asked = await self.rounds.next(task, ctx, link, req.principal)
        except Exception as exc:  # the transport cannot keep a round (in-process)
            task.cancel()
            self.on_error(f"tool {tool.name}", exc)
            return _failed(req, tool, str(exc), f"{type(exc).__name__}: {exc}", "tool")
        if asked is not None:
            return ok(req, asked)
        return await self._outcome(req, tool, ctx, task)

    async def _resume(
        self, req: McpRequest, tool: Tool, params: Mapping[str, Any], link: Link | None, rid: int
    ) -> Reply:
        if link is None:
            return client_error(
                INVALID_PARAMS, "Invalid params: requestState names no input round", req.id, 400
            )
        retry = self._context(req, tool, link, rid)
        assert isinstance(retry, ToolContext)  # a link is there
        resumed = self.rounds.resume(params, self.messages, retry, req.principal)
        if isinstance(resumed, LostRound):  # a server that lost the round's state (a fault's)
            return rpc_error(INVALID_PARAMS, f"Invalid params: {resumed.why}", req.id, 400)
        if isinstance(resumed, str):
            return client_error(INVALID_PARAMS, f"Invalid params: {resumed}", req.id, 400)
        task, ctx = resumed
        return await self._round(req, tool, ctx, task, link)

    async def _outcome(
        self, req: McpRequest, tool: Tool, ctx: ToolContext | None, run: Awaitable[Any]
    ) -> Reply:
        try:
            value = await run
        except (ToolResultError, ClientRequestError, NotInThisEra) as exc:
            reply = ok(req, tool_result(str(exc), is_error=True))
            if isinstance(exc, ClientRequestError):  # the client refused the tool's request
                reply.error, reply.error_by = str(exc), "client"
            return reply
        except Dropped:
            raise
        except asyncio.TimeoutError:
            return self._timed_out(req, tool, ctx.awaiting if ctx is not None else None)
        except Exception as exc:  # a bug in the tool handler: answer like a real server, re-raise in the test
            self.on_error(f"tool {tool.name}", exc)
            return _failed(req, tool, str(exc), f"{type(exc).__name__}: {exc}", "tool")
        return ok(req, tool_result(value))

    def _timed_out(self, req: McpRequest, tool: Tool, awaiting: str | None) -> Reply:
        """A handler ran past ``tool_timeout``: the tool's bug, unless its duration is the client's."""
        paced = (isinstance(tool, BuiltinTool) and tool.client_paced) or awaiting is not None
        text = f"tool {tool.name!r} did not finish within tool_timeout={self.tool_timeout:g} s"
        if awaiting is not None:
            text += f" (it was awaiting the client's answer to `{awaiting}`)"
        if not paced:  # a handler that blocks or hangs: name it in the test
            self.on_error(f"tool {tool.name}", ToolTimeoutError(f"{text}; raise Sidecar(tool_timeout=)"))
        return _failed(req, tool, text, text, "client" if paced else "tool")

    def _context(self, req: McpRequest, tool: Tool, link: Link | None, rid: int) -> ToolContext | Reply:
        if link is None:
            text = (
                f"tool {tool.name} takes ctx (it sends the client messages of its own), which needs "
                "the Streamable HTTP transport of the socket sidecar"
            )
            self.on_error(f"tool {tool.name}", ValueError(text))  # the test's set-up: name it in the test
            return _failed(req, tool, text, text, "tool")
        return ToolContext(self.messages, link, req, rid, self.sessions.log_levels)

    async def _run_handler(self, tool: Tool, kwargs: dict[str, Any], rid: int = -1) -> Any:
        if not tool.is_async and (self.run_sync is None or isinstance(tool, BuiltinTool)):
            return tool.handler(**kwargs)
        pending: Awaitable[Any]
        if tool.is_async:
            pending = tool.handler(**kwargs)
            if self.run_async is not None:
                pending = self.run_async(pending)
        else:
            handler, told, ctx = tool.handler, self.on_ran_on, kwargs.get(CONTEXT)
            assert self.run_sync is not None
            pending = on_worker(
                self.run_sync,
                lambda: handler(**kwargs),
                cancelled=ctx.cancelled if isinstance(ctx, SyncToolContext) else None,
                ran_on=(lambda ended: told(rid, ended)) if rid >= 0 else None,
            )
        return await (pending if self.tool_timeout is None else within(pending, self.tool_timeout))


def _failed(req: McpRequest, tool: Tool, text: str, error: str, by: ErrorBy) -> Reply:
    reply = ok(req, tool_result(f"Error executing tool {tool.name}: {text}", is_error=True))
    reply.error, reply.error_by = error, by
    return reply
