"""An openai-agents script whose MCP server's pooled connection goes silent between two calls: an
``MCPServerSse`` (the only HTTP transport of 0.0.12 and 0.0.13) lists the tools, idles, then calls
``echo`` on the same keep-alive connection, which the sidecar's ``blackhole(idle=...)`` silences (a NAT
that forgot it). No LLM: the server object is driven directly, as the agent's runner does.

Before 0.0.13 the ``ClientSession`` had no read timeout (openai-agents PR #580, "Prevent MCP
ClientSession hang"): the call waits for an answer that never comes, for ever, even after the
connection is reset. 0.0.13 passes ``client_session_timeout_seconds`` (5 s by default): the call raises
``McpError`` and the script cleans up and exits.

    python openai_agents_silent_harness.py http://127.0.0.1:PORT/sse IDLE_SECONDS
"""

import asyncio
import importlib.metadata
import sys

from agents.mcp import MCPServerSse


async def main(url: str, idle: float) -> None:
    print(f"openai-agents {importlib.metadata.version('openai-agents')}", flush=True)
    server = MCPServerSse(params={"url": url}, name="sidecar")
    await server.connect()
    try:
        tools = await server.list_tools()
        print("tools:", sorted(t.name for t in tools)[:3], flush=True)
        await asyncio.sleep(idle)  # the agent thinks; its pooled connection idles
        try:
            result = await server.call_tool("echo", {"text": "hi"})
            print("result:", result.content[0].text, flush=True)
        except Exception as exc:  # what the agent's runner sees, printed
            print(f"call failed: {type(exc).__name__}: {exc}", flush=True)
    finally:
        await server.cleanup()
    print("exited", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
