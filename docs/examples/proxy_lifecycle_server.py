"""Your MCP server as its own process: the mcp SDK's ``MCPServer`` under uvicorn, on the port given as
its first argument (the sidecar runs it with ``upstream_serve=``; SIGTERM is its graceful stop)."""

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

# --8<-- [start:server]
server = MCPServer("tickets")


@server.tool()
def open_ticket(title: str) -> str:
    """Open a ticket."""
    return f"opened: {title}"


if __name__ == "__main__":
    app = server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="info")
# --8<-- [end:server]
