"""Proxy mode with the server under test's lifecycle: the sidecar runs your HTTP MCP server
(docs/examples/proxy_lifecycle_server.py) with ``upstream_serve=``, the test stops it gracefully while
a client's streams are relayed, and asserts each stream ended as a complete HTTP response."""

import sys
from pathlib import Path

import pytest
from mcp.client import Client

# --8<-- [start:command]
SERVE = [sys.executable, str(Path(__file__).with_name("proxy_lifecycle_server.py")), "{port}"]
# --8<-- [end:command]


# --8<-- [start:graceful]
@pytest.mark.mcp_sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=SERVE)
async def test_a_graceful_stop_ends_every_stream(mcp_sidecar):
    server = mcp_sidecar.upstream_server  # started with the sidecar, accepting connections
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        result = await client.call_tool("open_ticket", {"title": "disk full"})
        assert result.content[0].text == "opened: disk full"
        get = server.wait_for_stream("GET")  # the client's event stream, open on your server
        ended = server.stop(graceful=True, timeout=3)  # SIGTERM; a hang past 3 s fails here
        (stream,) = [s for s in ended if s.seq == get.seq]  # (a POST's answer may be ending too)
        assert stream.end == "complete"
    server.assert_streams_complete()  # every answer relayed ended as a complete HTTP response


# --8<-- [end:graceful]
