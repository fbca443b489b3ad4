"""The mcp SDK's own server (``MCPServer`` under uvicorn: its Streamable HTTP ``GET`` stream is an
sse-starlette ``EventSourceResponse``) stopped gracefully (SIGTERM) while a client's event stream is
relayed, against the affected and the fixed releases of the library that ends that stream at shutdown.
Run: ``tox -e fw-mcp-shutdown``.

The bug: python-sdk issue #2150 and fastmcp issue #3025 ("Active Streamable HTTP sessions are not
terminated during shutdown": uvicorn logs ``ASGI callable returned without completing response``, the
client's stream ends without the chunked terminator), and before that sse-starlette issue #149 (3.0.4:
the shutdown signal never reaches the stream, so uvicorn's graceful shutdown waits for it for ever,
"Waiting for connections to close"). No mcp release fixed it in the SDK (#2150 is open, its pull
requests closed unmerged); sse-starlette 3.7.1 did, underneath: after the exit signal it sends the
closing body the cancelled stream never sent. With mcp 2.3.0 and uvicorn 0.55.0 (this env's pins):

* sse-starlette 3.0.4: the graceful stop hangs; the verdict names the open ``GET`` stream and the
  server's last line, ``Waiting for connections to close``, within the stop's timeout + 2 s;
* sse-starlette 3.6.0: the server exits, the stream is cut (no ``0 CRLF CRLF``):
  ``assert_streams_complete()`` fails naming it;
* sse-starlette 3.7.1 (fixed, the env's own): the stream ends as a complete response.

The env installs the fixed release; each affected one goes into a directory of its own (``pip install
--no-deps --target``) put first on the server's ``PYTHONPATH`` (``env PYTHONPATH=... python server``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import re
import sys
import time
from pathlib import Path

import pytest
from beside import install_beside
from mcp.client import Client

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.proxy.lifecycle import UpstreamShutdownHang

FIXED, CUTS, HANGS = "3.7.1", "3.6.0", "3.0.4"
BUDGET = 3.0  # the graceful stop's timeout
SERVER = Path(__file__).resolve().parent.parent / "proxy_lifecycle_server.py"


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory):
    """sse-starlette ``version`` installed on its own, for the server's ``PYTHONPATH``."""

    def install(version: str) -> Path:
        return install_beside(tmp_path_factory, f"sse-starlette=={version}")

    return install


def serving(path: Path | None) -> list[str]:
    """The server's command, with ``path`` first on its ``PYTHONPATH``."""
    command = [sys.executable, str(SERVER), "{port}"]
    return command if path is None else ["env", f"PYTHONPATH={path}", *command]


async def stop_while_streaming(sidecar: Sidecar):
    """A client's session and its event stream open on the server, then the server's graceful stop."""
    server = sidecar.upstream_server
    async with Client(sidecar.mcp_url, mode="legacy") as client:
        result = await client.call_tool("open_ticket", {"title": "disk full"})
        assert result.content[0].text == "opened: disk full"
        get = server.wait_for_stream("GET")
        began = time.monotonic()
        try:
            ended = server.stop(graceful=True, timeout=BUDGET)  # (a POST's answer may be ending too)
            return [s for s in ended if s.seq == get.seq], time.monotonic() - began
        except UpstreamShutdownHang as hang:
            return hang, time.monotonic() - began


def test_the_fixed_release_ends_the_stream_as_a_complete_response():
    assert importlib.metadata.version("sse-starlette") == FIXED
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serving(None)) as sidecar:
        (ended,), took = asyncio.run(stop_while_streaming(sidecar))
        print(f"\nsse-starlette {FIXED}: {ended.describe()} (the stop took {took:.2f} s)")
        assert ended.method == "GET" and ended.end == "complete"
        sidecar.upstream_server.assert_streams_complete()


def test_a_release_that_cuts_the_stream_fails_the_assertion(release):
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serving(release(CUTS))) as sidecar:
        (ended,), took = asyncio.run(stop_while_streaming(sidecar))
        assert ended.method == "GET" and ended.end == "cut"
        with pytest.raises(AssertionError) as caught:
            sidecar.upstream_server.assert_streams_complete()
        output = sidecar.upstream_server.output()
    print(f"\nsse-starlette {CUTS} (the stop took {took:.2f} s):\n{caught.value}\n{output}")
    assert "GET /mcp (session " in str(caught.value)
    assert "cut: the connection ended without the chunked body's last chunk (0 CRLF CRLF)" in str(
        caught.value
    )
    assert "ASGI callable returned without completing response" in output  # what uvicorn logged


def test_a_release_whose_shutdown_hangs_on_the_stream_gets_a_bounded_verdict(release):
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serving(release(HANGS))) as sidecar:
        hang, took = asyncio.run(stop_while_streaming(sidecar))
    print(f"\nsse-starlette {HANGS} (the verdict came after {took:.2f} s):\n{hang}")
    assert isinstance(hang, UpstreamShutdownHang)
    assert took < BUDGET + 2.0, took
    message = str(hang)
    assert f"was still running {BUDGET:g} s after SIGTERM; it was killed (SIGKILL)" in message
    assert "The 1 relayed stream(s) it still held open:\n  GET /mcp (session " in message
    peer = re.search(r"GET /mcp \(session \w+, from (127\.0\.0\.1:\d+)\)", message)
    assert peer is not None, message
    assert f'{peer[1]} - "GET /mcp HTTP/1.1" 200 OK' in message  # the server's own log line of that stream
    assert "stopped accepting new connections" in message
    assert "Waiting for connections to close. (CTRL+C to force quit)" in message  # where it is blocked
