"""A stdio MCP server nobody here wrote, as a stdio upstream (``Sidecar(upstream_command=...)``): the mcp
SDK's own ``MCPServer`` run over stdio. Tools: ``add``, ``echo``, ``calls`` (how many tool calls it ran),
``pid`` (its process id) and ``exit`` (the process exits at once, mid-call, with code 3)."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("stdio-child")
ran: list[str] = []


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    ran.append("add")
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    ran.append("echo")
    return text


@server.tool()
def calls() -> int:
    """How many tool calls ran before this one."""
    return len(ran)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def exit() -> str:
    """Exit the process at once (code 3), without answering."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
