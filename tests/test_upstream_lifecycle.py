"""Proxy mode with the server under test's lifecycle (``upstream_serve=``, ``Sidecar.upstream_server``):
the sidecar runs the HTTP upstream, the test stops it (gracefully or not) and starts it again while
streams are relayed, and each relayed answer is journaled by how it ended as an HTTP message.

The upstream is tests/shutdown_upstream.py (stdlib only: cheap to start), whose graceful stop ends its
event streams completely, cuts them, or hangs holding them. The real servers (the mcp SDK's under
uvicorn, with the affected and the fixed sse-starlette) are docs/examples/frameworks/
mcp_shutdown_test.py's, in the tox env ``fw-mcp-shutdown``.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.proxy.lifecycle import UpstreamShutdownHang

UPSTREAM = str(Path(__file__).with_name("shutdown_upstream.py"))


def serve(mode: str) -> list[str]:
    return [sys.executable, "-S", UPSTREAM, mode, "{port}"]


def open_get(sidecar: Sidecar) -> socket.socket:
    """A client's GET event stream through the sidecar, its head and first event read."""
    sock = socket.create_connection(("127.0.0.1", sidecar.port), timeout=5)
    sock.sendall(
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{sidecar.port}\r\nAccept: text/event-stream\r\n"
        "Mcp-Session-Id: s1\r\n\r\n".encode()
    )
    got = b""
    while b": priming" not in got:
        got += sock.recv(4096)
    assert got.startswith(b"HTTP/1.1 200 ")
    return sock


def rest(sock: socket.socket) -> bytes:
    """What else the client gets: to the body's end (the connection is kept alive then), or to the
    connection's end (``<reset>`` when reset)."""
    got = b""
    try:
        while not got.endswith(b"0\r\n\r\n") and (chunk := sock.recv(4096)):
            got += chunk
    except ConnectionResetError:
        got += b"<reset>"
    sock.close()
    return got


def test_a_graceful_stop_that_ends_the_stream_is_complete_and_the_server_starts_again():
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serve("complete")) as sc:
        server = sc.upstream_server
        assert sc.upstream.endswith("/mcp") and f":{server.port}/" in sc.upstream and server.port != 0
        first = server.pid
        assert httpx.post(sc.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 200
        client = open_get(sc)
        get = server.wait_for_stream("GET")
        assert get.session == "s1" and get.framing == "chunked" and get.open
        (ended,) = server.stop(graceful=True, timeout=5)
        assert (ended.seq, ended.end, ended.detail) == (get.seq, "complete", "")
        assert rest(client).endswith(b"0\r\n\r\n")  # relayed to the client as it ended: complete
        assert server.returncode == 0 and server.pid is None
        server.assert_streams_complete()
        server.start()  # again, on the same port
        assert server.pid not in (None, first)
        assert httpx.post(sc.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 200
        pid = server.pid
        assert [(s.method, s.end) for s in server.streams] == [
            ("POST", "complete"), ("GET", "complete"), ("POST", "complete")
        ]  # fmt: skip
    assert not server.running and pid is not None  # the sidecar's stop stopped it too
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_stream_the_server_cuts_at_shutdown_fails_the_assertion_naming_it():
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serve("cut")) as sc:
        client = open_get(sc)
        sc.upstream_server.wait_for_stream("GET")
        (ended,) = sc.upstream_server.stop(timeout=5)
        assert ended.end == "cut"
        assert rest(client).endswith(b"<reset>")  # the client's connection is reset, as a gateway does
        with pytest.raises(AssertionError) as caught:
            sc.upstream_server.assert_streams_complete()
    message = str(caught.value)
    assert "1 of the 1 answer(s) relayed from the upstream http://127.0.0.1:" in message
    cut = r"GET /mcp \(session s1, from 127\.0\.0\.1:\d+\): 200 text/event-stream, chunked: cut: "
    assert re.search(
        cut + r"the connection ended without the chunked body's last chunk \(0 CRLF CRLF\)", message
    )


def test_a_graceful_stop_held_up_by_a_stream_is_a_bounded_verdict_naming_it():
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serve("hang")) as sc:
        server = sc.upstream_server
        client = open_get(sc)
        server.wait_for_stream("GET")
        pid = server.pid
        began = time.monotonic()
        with pytest.raises(UpstreamShutdownHang) as caught:
            server.stop(graceful=True, timeout=0.5)
        took = time.monotonic() - began
        assert not server.running and server.returncode == -9  # killed
        client.close()
    assert 0.5 <= took < 0.5 + 2.0, took
    message = str(caught.value)
    print(message)
    assert message.startswith(
        f"Sidecar.upstream_server.stop(graceful=True, timeout=0.5): the upstream '{sys.executable} -S "
        f"{UPSTREAM} hang {server.port}' (pid {pid}) was still running 0.5 s after SIGTERM; it was killed"
    )
    held = (
        r"The 1 relayed stream\(s\) it still held open:\n  GET /mcp \(session s1, from 127\.0\.0\.1:\d+\): "
    )
    assert re.search(held + r"200 text/event-stream, chunked: still open after ", message), message
    assert f"What it did since SIGTERM: stopped accepting new connections on 127.0.0.1:{server.port}, " \
        "sent 0 body byte(s) on those streams and did not end them." in message  # fmt: skip
    assert "Where it is blocked: its graceful shutdown waits for the connections of these streams" in message
    assert message.endswith("    | Shutting down\n    | Waiting for connections to close.")


def test_a_hard_stop_cuts_the_streams_and_a_server_that_cannot_start_says_why():
    with Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serve("complete")) as sc:
        open_get(sc).close()  # the client leaves: closed by the sidecar, not the server's doing
        deadline = time.monotonic() + 5
        while sc.upstream_server.streams[-1].open and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sc.upstream_server.streams[-1].end == "closed by the sidecar"
        sc.upstream_server.assert_streams_complete()  # not the upstream's: passes
        client = open_get(sc)
        sc.upstream_server.wait_for_stream("GET")
        (ended,) = sc.upstream_server.stop(graceful=False)
        assert ended.end == "cut" and sc.upstream_server.returncode == -9
        assert rest(client).endswith(b"<reset>")
    never = [sys.executable, "-S", "-c", "print('no port'); raise SystemExit(3)", "{port}"]
    broken = Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=never)
    with pytest.raises(RuntimeError, match=r"exited with status 3; its last output:\n    \| no port"):
        broken.start()
    broken.stop()


NO_PORT = r"must name the upstream's port \(not 0; port 0, a free one, needs upstream_serve=\)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"upstream_serve": ["python", "s.py"]},
            re.escape("upstream_serve=['python', 's.py'] serves the HTTP"),
        ),
        ({"upstream": "http://127.0.0.1:0/mcp"}, NO_PORT),
        (
            {"upstream": "http://127.0.0.1:0/mcp", "upstream_serve": ["python", "s.py"]},
            re.escape("put '{port}' in upstream_serve"),
        ),
        (
            {"upstream": "http://127.0.0.1:9/mcp", "upstream_serve": "python s.py"},
            "upstream_serve must be a list of strings",
        ),
    ],
)
def test_bad_upstream_serve_arguments_are_refused_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sidecar(**kwargs)


def test_upstream_server_needs_an_http_upstream_and_start_needs_the_command():
    with pytest.raises(RuntimeError, match="has no HTTP upstream; pass upstream="):
        Sidecar().upstream_server  # noqa: B018
    with pytest.raises(RuntimeError, match=r"which it did not start; pass upstream_serve="):
        Sidecar(upstream="http://127.0.0.1:9/mcp").upstream_server.stop()


def test_a_server_started_before_the_sidecar_or_after_its_stop_is_stopped_with_it():
    sc = Sidecar(upstream="http://127.0.0.1:0/mcp", upstream_serve=serve("complete"))
    first = sc.upstream_server.start().pid  # before the sidecar: its start() leaves it running
    with sc:
        assert sc.upstream_server.pid == first
    assert not sc.upstream_server.running
    sc.upstream_server.start()
    sc.stop()  # stopped already: it still stops the server
    assert not sc.upstream_server.running and sc.upstream_server.returncode is not None


def test_bad_arguments_to_the_lifecycle_are_refused_naming_them():
    server = Sidecar(upstream="http://127.0.0.1:9/mcp", upstream_serve=serve("complete")).upstream_server
    with pytest.raises(
        ValueError, match=r"stop\(\): timeout must be a positive, finite number of seconds, got -1"
    ):
        server.stop(timeout=-1)
    with pytest.raises(ValueError, match=r"stop\(\): graceful must be True or False, got 'yes'"):
        server.stop(graceful="yes")
    with pytest.raises(ValueError, match=r"start\(\): timeout must be a positive.*got 0"):
        server.start(timeout=0)
    with pytest.raises(ValueError, match=r"wait_for_stream\(\): timeout must be a positive.*got nan"):
        server.wait_for_stream(timeout=float("nan"))
    with pytest.raises(
        TimeoutError, match=r"no GET stream from the upstream was open within 0.01 s; the answers "
    ):
        server.wait_for_stream(timeout=0.01)
    # a method no stream can have waited out its whole timeout: refused at once, naming the valid ones
    valid = "CONNECT, DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT, TRACE"
    for bad, why in [("GETT", ""), ("get", " (methods are case-sensitive: 'GET')"), (None, "")]:
        with pytest.raises(ValueError, match=r"wait_for_stream\(\): method must be") as caught:
            server.wait_for_stream(bad, timeout=0.01)  # type: ignore[arg-type]
        assert str(caught.value) == (
            f"Sidecar.upstream_server.wait_for_stream(): method must be an HTTP method ({valid}), "
            f"got {bad!r}{why}"
        )
