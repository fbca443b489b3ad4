"""Your stdio MCP server (here the mcp SDK's own ``MCPServer``, run over stdio): the upstream that
docs/examples/proxy_stdio_test.py has the sidecar spawn. Run as ``python proxy_stdio_server.py``."""

import json

from mcp.server.mcpserver import MCPServer

# --8<-- [start:server]
server = MCPServer("tickets")
tickets: dict[int, str] = {}


@server.tool()
def open_ticket(title: str) -> str:
    """Open a ticket."""
    tickets[len(tickets) + 1] = title
    return json.dumps({"id": len(tickets), "title": title})


@server.tool()
def count_tickets() -> int:
    """How many tickets are open."""
    return len(tickets)


if __name__ == "__main__":
    server.run("stdio")  # one JSON-RPC message per line on stdin and stdout
# --8<-- [end:server]
