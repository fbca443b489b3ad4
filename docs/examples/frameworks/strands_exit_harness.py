"""A strands-agents script that never exits (strands-agents issue #1732): an ``Agent`` made in a function
with a managed ``MCPClient`` (the agent starts it and lists its tools), no LLM call. Before 1.30.0 the
agent sits in a reference cycle, so it outlives the function; the garbage collector finalizes it at
interpreter exit, and its ``__del__`` stops the client, whose ``stop()`` joins the client's background
thread without a timeout: on Python 3.13 that join never returns. 1.30.0 broke the cycle (weak
back-references, PR #1830): the agent is finalized when the function returns and the script exits.

    python strands_exit_harness.py http://127.0.0.1:PORT/mcp
"""

import importlib.metadata
import sys

from mcp.client.streamable_http import streamablehttp_client
from strands import Agent
from strands.tools.mcp import MCPClient


def main(url: str) -> None:
    client = MCPClient(lambda: streamablehttp_client(url))
    agent = Agent(tools=[client], callback_handler=None)
    print(
        f"strands-agents {importlib.metadata.version('strands-agents')}: {sorted(agent.tool_names)}",
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1])
