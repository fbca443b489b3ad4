"""mcp 1.x recipe: run with mcp<2 installed (tox -e mcp1); skipped where mcp 2.x is installed."""

import pytest

streamable_http = pytest.importorskip("mcp.client.streamable_http")
if not hasattr(streamable_http, "streamablehttp_client"):
    pytest.skip("needs mcp 1.x (tox -e mcp1)", allow_module_level=True)


# --8<-- [start:mcp1]
async def test_mcp1_session_era(mcp_sidecar):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with (
        streamablehttp_client(mcp_sidecar.mcp_url) as (read, write, _),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        result = await s.call_tool("echo", {"text": "from 1.x"})
    assert result.content[0].text == "from 1.x"
    mcp_sidecar.wait_idle(timeout=5)
    assert mcp_sidecar.journal.sequence()[0] == "POST initialize"
    assert mcp_sidecar.journal.sequence()[-1] == "DELETE /mcp"


# --8<-- [end:mcp1]
