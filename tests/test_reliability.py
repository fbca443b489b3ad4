"""Reliability: whatever the plan and whatever the client does, ``stop()`` is bounded and leaves
nothing open (sockets checked at the OS level, threads checked by enumeration); the sidecar binds
to loopback only unless told otherwise; oversized request bodies are refused, not buffered."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import Fault, fault_kinds, format_plan
from pytest_mcpfaults.strategies import fault_plans

TOOLS_CALL = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}'
)
STATELESS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


# -- OS-level views of this process ------------------------------------------------------------------
def _socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes


def process_tcp_sockets(port: int) -> dict[str, list[str]]:
    """This process's own TCP sockets (held by one of its file descriptors) whose local or remote
    port is ``port``, from /proc/net/tcp{,6}: ``{'local': [state, ...], 'remote': [...]}``."""
    mine = _socket_inodes()
    found: dict[str, list[str]] = {"local": [], "remote": []}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
                if inode not in mine:
                    continue
                if int(local.rsplit(":", 1)[1], 16) == port:
                    found["local"].append(state)
                if int(remote.rsplit(":", 1)[1], 16) == port:
                    found["remote"].append(state)
    return found


def other_threads(before: set[threading.Thread]) -> set[str]:
    """Threads alive now that were not before, the sidecar's single loop thread excepted."""
    return {t.name for t in set(threading.enumerate()) - before if t.name != "mcpfaults-sidecar-loop"}


# -- client behaviours -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Behaviour:
    """What one client does with one request."""

    client: str  # "httpx" or "raw"
    request: str  # "health" or "tools/call"
    read_body: bool
    close: bool
    timeout: float | None  # the client's own read timeout (None: none; the sidecar's patience bounds it)


behaviours = st.builds(
    Behaviour,
    client=st.sampled_from(("httpx", "raw")),
    request=st.sampled_from(("health", "tools/call")),
    read_body=st.booleans(),
    close=st.booleans(),
    timeout=st.sampled_from((None, 0.05)),
)


def _read_response(s: socket.socket) -> bytes:
    """Read one HTTP/1.1 response (Content-Length or chunked; otherwise until EOF)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(h.split(b":", 1)[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")),
        None,
    )
    while True:
        if length is not None and len(body) >= length:
            return body
        if length is None and b"chunked" in head.lower() and body.endswith(b"0\r\n\r\n"):
            return body
        chunk = s.recv(65536)
        if not chunk:
            return body
        body += chunk


def _raw(sc: Sidecar, b: Behaviour, keep: list[object]) -> None:
    s = socket.create_connection(("127.0.0.1", sc.port), timeout=5)
    keep.append(s)
    if b.request == "health":
        s.sendall(f"GET {sc.health_path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    else:
        head = "".join(f"{k}: {v}\r\n" for k, v in STATELESS.items())
        start = f"POST {sc.mcp_path} HTTP/1.1\r\nHost: x\r\n{head}"
        s.sendall(f"{start}Content-Length: {len(TOOLS_CALL)}\r\n\r\n".encode() + TOOLS_CALL)
    if b.read_body:
        # The sidecar's patience (well under 1 s) bounds every hold; 3 s is a backstop.
        s.settimeout(b.timeout if b.timeout is not None else 3.0)
        with contextlib.suppress(OSError):
            _read_response(s)
    if b.close:
        s.close()


def _httpx(sc: Sidecar, b: Behaviour, keep: list[object]) -> None:
    timeout = httpx.Timeout(3.0, read=b.timeout if b.timeout is not None else 3.0)
    client = httpx.Client(timeout=timeout)
    keep.append(client)
    if b.request == "health":
        req = client.build_request("GET", sc.health_url)
    else:
        req = client.build_request("POST", sc.mcp_url, content=TOOLS_CALL, headers=STATELESS)
    try:
        resp = client.send(req, stream=True)
    except httpx.HTTPError:
        resp = None
    if resp is not None:
        keep.append(resp)
        if b.read_body:
            with contextlib.suppress(httpx.HTTPError):
                resp.read()
        if b.close:
            resp.close()
    if b.close:
        client.close()


def _close_all(keep: list[object]) -> None:
    for thing in reversed(keep):
        with contextlib.suppress(Exception):
            thing.close()  # type: ignore[attr-defined]


@contextlib.contextmanager
def held_open() -> Iterator[list[object]]:
    keep: list[object] = []
    try:
        yield keep
    finally:
        _close_all(keep)


@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(plan=fault_plans(max_faults=2, patience=0.2), clients=st.lists(behaviours, min_size=1, max_size=3))
def test_any_plan_any_client_stop_is_bounded_and_leaves_nothing_open(
    plan: list[Fault], clients: list[Behaviour]
) -> None:
    Sidecar().start().stop()  # the loop thread exists before the baseline is taken
    threads_before = set(threading.enumerate())
    sc = Sidecar(faults=plan, patience=0.2).start()
    port = sc.port
    with held_open() as keep:
        for b in clients:
            if sc.state == "dead":  # a die fault closed the listener: connections are refused
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            (_raw if b.client == "raw" else _httpx)(sc, b, keep)
        t0 = time.monotonic()
        sc.stop()
        took = time.monotonic() - t0
        assert took < 1.0, f"stop() took {took:.3f} s with plan {format_plan(plan)} and clients {clients}"
        # Nothing of the sidecar's is left: no listener, no accepted connection, in any state.
        left = process_tcp_sockets(port)
        assert left["local"] == [], f"sidecar sockets left open on port {port}: {left}\n{sc.journal.format()}"
        # The journal agrees: every connection closed, every request finished.
        assert sc.journal.open_connections() == ()
        assert all(r.done for r in sc.requests), sc.journal.format()
        assert all(r.hold is not None for r in sc.requests if r.held), sc.journal.format()
    # Once the clients close their ends, nothing to or from the port is left either.
    assert process_tcp_sockets(port) == {"local": [], "remote": []}
    assert other_threads(threads_before) == set()
    sc.check_errors()


# -- loopback only ------------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1"])
def test_non_loopback_hosts_are_refused_unless_allowed(host: str) -> None:
    with pytest.raises(ValueError, match=rf"host '{host}' is not a loopback address.*allow_remote=True"):
        Sidecar(host=host)


def test_allow_remote_binds_the_wildcard_address_on_purpose() -> None:
    with Sidecar(host="0.0.0.0", allow_remote=True) as sc:
        assert sc.url.startswith("http://")
        assert httpx.get(f"http://127.0.0.1:{sc.port}{sc.health_path}", timeout=5).json() == {"status": "ok"}
        sc.wait_idle(5)  # the client's connection closed on the sidecar's side too
        # asyncio closes the accepted socket just after the protocol's connection_lost (which the
        # journal records): until then the OS may still show it in CLOSE_WAIT (08). Bounded: 5 s.
        deadline = time.monotonic() + 5
        while (local := process_tcp_sockets(sc.port)["local"]) != ["0A"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert local == ["0A"]  # one listener (state 0A: LISTEN), the accepted socket closed
        with open("/proc/net/tcp") as f:
            listeners = [ln.split()[1] for ln in f if ln.split()[3] == "0A"]
        assert f"00000000:{sc.port:04X}" in listeners  # bound to 0.0.0.0, not 127.0.0.1


def test_default_binds_loopback_only() -> None:
    with Sidecar() as sc:
        with open("/proc/net/tcp") as f:
            listeners = [ln.split()[1] for ln in f if ln.split()[3] == "0A"]
        assert f"0100007F:{sc.port:04X}" in listeners
        assert f"00000000:{sc.port:04X}" not in listeners


# -- request body size limit --------------------------------------------------------------------------
def test_announced_oversized_body_is_refused_413_before_it_is_sent() -> None:
    with Sidecar(max_body_bytes=1000) as sc, socket.create_connection(("127.0.0.1", sc.port), timeout=5) as s:
        s.sendall(
            f"POST {sc.mcp_path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000000\r\n\r\n".encode()
            + b"{" * 1000
        )
        head = s.recv(65536)
        assert head.startswith(b"HTTP/1.1 413"), head
        sc.wait_for(lambda reqs: bool(reqs) and reqs[0].done)
        rec = sc.requests[0]
        assert rec.status == 413
        assert rec.mcp_method is None


def test_chunked_oversized_body_is_refused_413_early_and_the_connection_closed() -> None:
    # The client means to send 16 GiB: more than loopback carries in the 5 s this test allows.
    limit, chunk, intended = 64 * 1024, b"x" * 16 * 1024, 16 * 1024**3
    with (
        Sidecar(max_body_bytes=limit) as sc,
        socket.create_connection(("127.0.0.1", sc.port), timeout=5) as s,
    ):
        s.sendall(
            f"POST {sc.mcp_path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        s.setblocking(False)
        sent, answer, sent_at_answer, ended = 0, b"", None, None
        deadline = time.monotonic() + 5  # aiohttp's default 10 s drain would not fit
        # Keep streaming the body; the sidecar must answer 413 early, then close the connection.
        while sent < intended and time.monotonic() < deadline:
            try:
                data = s.recv(65536)
                if not data:
                    ended = "EOF"
                    break
                if sent_at_answer is None:
                    sent_at_answer = sent
                answer += data
            except BlockingIOError:
                pass
            except OSError as exc:
                ended = type(exc).__name__
                break
            try:
                s.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent += len(chunk)
            except BlockingIOError:
                time.sleep(0.001)
            except OSError as exc:  # the sidecar closed the connection: reset or broken pipe
                ended = type(exc).__name__
                break
        assert answer.startswith(b"HTTP/1.1 413"), answer
        assert b"Connection: close" in answer
        assert sent_at_answer is not None
        assert sent_at_answer < 64 * 1024**2, sent_at_answer  # answered within the first 64 MiB
        assert ended is not None, f"the sidecar kept draining the body: {sent} bytes sent, still open"
        assert sent < intended
        sc.wait_idle(5)
        rec = sc.requests[0]
        assert rec.status == 413
        assert rec.mcp_method is None  # refused before any parsing
        assert sc.journal.connections[0].closed_by == "sidecar"


# -- stdio: no child process or pipe left, whatever the fault ---------------------------------------------


def _pipes() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("pipe:"):
                out.add(f"{fd}:{target}")
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie runs nothing, holds no pipe
    except FileNotFoundError:
        return False


_STDIO_KINDS = [k for k, cls in fault_kinds().items() if "stdio" in cls.transports]


@pytest.mark.parametrize("kind", _STDIO_KINDS)
def test_no_stdio_child_or_pipe_is_left_after_any_fault(kind: str) -> None:
    """Every kind that applies to stdio, at its default target (event kinds: at close), through the
    mcp 2.x client with short timeouts and a short budget; then no child of the server is alive and the
    test process holds no pipe it did not hold before."""
    import asyncio

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    from pytest_mcpfaults import StdioServer
    from pytest_mcpfaults.stdio import guardian

    guardian.ensure()
    before = _pipes()
    fault = fault_kinds()[kind]()
    server = StdioServer(faults=[fault], patience=0.5, expect_hang=True).start()

    async def harness() -> None:
        params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
        with contextlib.suppress(Exception):  # whatever the fault makes the client raise
            async with Client(params, mode="legacy", read_timeout_seconds=1.0) as client:
                for _ in range(2):
                    with contextlib.suppress(Exception):
                        await client.call_tool("delete_session", {"session_id": "s"})

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(harness(), 30))
    server.stop()
    assert time.monotonic() - started < 15
    assert server.fired.get(kind, 0) >= 1 or kind == "ignore_sigterm", server.fired
    assert server.children, "the client never reached the child"
    for child in server.children:
        assert not _alive(child.pid), child
    assert _pipes() <= before
