"""The patience hints that name a client's API are measured against that client (issue 36): the held
``DELETE /mcp`` of the mcp 1.x SDK (its read timeout bounds it, 300 s by default, not
``streamablehttp_client``'s ``timeout=``) and the held ``server/discover`` probe of the mcp 2.x
``Client`` (10 s of its own, not ``read_timeout_seconds``). Each test runs the real client against a
held request, reads from the journal whether and when the client gave up, and checks the hint the
verdict gives for that request says what was measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from mcp import Client

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import Hang
from pytest_mcpfaults.verdicts.clients import patience_hint

#: The budget the held requests wait out: longer than each client timeout the tests set (0.5 s), so a
#: client bounded by it gives up first, and short enough for the suite.
BUDGET = 2.0

MCP1_DELETE = """
import asyncio, json, sys, time
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client, streamablehttp_client
from mcp.shared._httpx_utils import create_mcp_http_client

async def session_and_exit(transport):
    async with transport as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
        started = time.monotonic()  # the DELETE is sent as the transport exits
    return time.monotonic() - started

async def main(read_bounded_url, timeout_url):
    client = httpx.AsyncClient(timeout=httpx.Timeout(30, read=0.5))
    bounded = await session_and_exit(streamable_http_client(read_bounded_url, http_client=client))
    deprecated = await session_and_exit(streamablehttp_client(timeout_url, timeout=0.5))
    print(json.dumps({"bounded": bounded, "deprecated": deprecated,
                      "default_read": create_mcp_http_client().timeout.read}))

asyncio.run(main(*sys.argv[1:]))
"""


def test_mcp1_delete_is_bounded_by_the_http_clients_read_timeout_not_timeout(mcp1_path: str) -> None:
    """One child Python (one import of the SDK) runs both clients, each against a sidecar of its own:
    ``streamable_http_client`` with an httpx client whose read timeout is 0.5 s, and the deprecated
    ``streamablehttp_client(timeout=0.5)``."""
    held = dict(era="session", patience=BUDGET, faults=[Hang(when="DELETE /mcp")], expect_hang=True)
    with Sidecar(**held) as bounded, Sidecar(**held) as deprecated:  # type: ignore[arg-type]
        env = {**os.environ, "PYTHONPATH": mcp1_path, "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run(
            [sys.executable, "-c", MCP1_DELETE, bounded.mcp_url, deprecated.mcp_url],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        [delete] = [r for r in bounded.requests if r.method == "DELETE"]
        assert delete.hold == "client_closed", bounded.journal.format()
        assert delete.held is not None and delete.held.waited is not None
        assert delete.held.waited < BUDGET - 0.5  # given up at its read timeout
        assert seen["bounded"] < BUDGET - 0.5
        assert seen["default_read"] == 300.0  # the SDK's default read timeout
        [held_on] = [r for r in deprecated.requests if r.method == "DELETE"]
        assert held_on.hold == "patience", deprecated.journal.format()  # timeout=0.5 did not bound it
        assert seen["deprecated"] >= BUDGET - 0.1
        hint = patience_hint(held_on, mcp_path=deprecated.mcp_path, budget=BUDGET)
    assert "300 s by default" in hint and "not its timeout=" in hint
    assert "http_client=httpx.AsyncClient(timeout=httpx.Timeout(30, read=" in hint


async def test_mcp2_discover_probe_is_not_bounded_by_read_timeout_seconds() -> None:
    import mcp.client.session

    with Sidecar(patience=BUDGET, faults=[Hang(when="server/discover")], expect_hang=True) as sc:
        # the client waits for the probe past its 0.5 s until the sidecar's patience aborts the hold,
        # and the aborted connection fails its connect
        with pytest.raises(Exception) as raised:  # noqa: PT011 (the SDK's group of a transport error)
            async with Client(sc.mcp_url, read_timeout_seconds=0.5):
                pass
        assert "ReadError" in repr(
            raised.value.exceptions if hasattr(raised.value, "exceptions") else raised.value
        )
        [probe] = [r for r in sc.requests if r.mcp_method == "server/discover"]
        assert probe.hold == "patience", sc.journal.format()  # not given up at 0.5 s: the whole budget
        hint = patience_hint(probe, mcp_path=sc.mcp_path, budget=BUDGET)
    assert mcp.client.session.DISCOVER_TIMEOUT_SECONDS == 10.0  # the probe's own bound, the hint's "10 s"
    assert "waits up to 10 s for it" in hint and "read_timeout_seconds=...) does not bound it" in hint
    assert "mode='legacy'" in hint
