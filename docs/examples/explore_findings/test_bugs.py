"""One clean test of the four-bug harness, explored: each bug is one finding (docs/explore.md)."""

import pytest
from bug_harness import fetch, finish, list_items, start


@pytest.mark.mcp_explore(kinds=["hang", "status", "jsonrpc_error"])
@pytest.mark.mcp_sidecar(era="stateless", patience=1.0)
def test_flow(mcp_sidecar):
    client = start()
    list_items(client, mcp_sidecar)
    fetch(client, mcp_sidecar)
    finish(client, mcp_sidecar)
