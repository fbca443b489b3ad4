"""Hostile input next door: one sidecar's ``/health`` RTT while another sidecar of the same process (the
same loop) is fed each hostile input of issue 25, against the same RTT idle, rows interleaved round by
round in one run.

The attacked sidecar is what ``serve`` runs (``transport='both'``, the control endpoint mounted, the
default span limit, ``idle_timeout=2``); each attack runs in a child process of its own (so its client
work does not compete for this process's GIL), and starts before the measured phase begins:

* span flood: 2,000-span protobuf exports to the OTLP port, back to back;
* /check over many spans: ``GET /_mcpfaults/check`` over 50,000 received spans, back to back;
* gzip bomb: 512 MiB of zeros in 0.5 MB (``Content-Encoding: gzip``) to the OTLP port, again and again;
* slowloris on the OTLP port: 200 connections sending a header a byte at a time;
* huge control body: ``POST /_mcpfaults/faults`` announcing 10 GB (1 KB sent) and 50 MB bodies;
* many wait_for: 40 ``GET /_mcpfaults/check?wait_for=Never`` (32 pending, the rest refused), and
  ``POST /release`` meanwhile;
* legacy SSE unread: 20 KB echo replies posted to a stream that is never read;
* resource template URIs: ``resources/read`` of dotted URIs no ``file:///{dir}/{name}.{ext}`` can match
  (what made a backtracking regular expression take seconds), at ``MAX_URI_CHARS`` and one character
  past it (refused unmatched); a 1 MB body of any method costs its JSON decoding, as any body does.

A second anchor row is a child process that only spins on a core: on a shared two-core machine an
attacker's own client work slows this process's round trips too, whatever the sidecar does. A third is
ordinary traffic: ``resources/read`` of a short URI, back to back, what any request costs the loop.

Target: every row within 2x of idle. Run: ``.venv/bin/python benchmarks/hostile_rtt.py``
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import _bench
import httpx

from pytest_mcpfaults import ResourceTemplate, Sidecar
from pytest_mcpfaults.cli import DEFAULT_SPAN_LIMIT
from pytest_mcpfaults.mcp.uri_template import MAX_URI_CHARS
from pytest_mcpfaults.transports.control import Control

ROUNDS = 3
CALLS = 150  # /health round trips per row and round
TOKEN = "b" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TARGET = 2.0


def _export(n: int, first: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "flood"
    spans = rs.scope_spans.add().spans
    for i in range(n):
        sp = spans.add()
        sp.trace_id, sp.span_id, sp.name = b"\x01" * 16, (first + i + 1).to_bytes(8, "big"), f"Work.{i % 7}"
        sp.start_time_unix_nano, sp.end_time_unix_nano = i + 1, i + 2
        a = sp.attributes.add()
        a.key, a.value.string_value = "a", "x" * 20
    return req.SerializeToString()


# -- the attacks (each in a child process, until `stop` is set) ------------------------------------------


def _span_flood(info: dict[str, Any], stop: Any) -> None:
    bodies = [_export(2000, k * 2000) for k in range(4)]
    with httpx.Client(timeout=30) as c:
        k = 0
        while not stop.is_set():
            c.post(
                info["otlp_url"], content=bodies[k % 4], headers={"Content-Type": "application/x-protobuf"}
            )
            k += 1


def _check_many(info: dict[str, Any], stop: Any) -> None:
    with httpx.Client(timeout=60) as c:
        while not stop.is_set():
            c.get(info["control_url"] + "/check", headers=AUTH)


def _gzip_bomb(info: dict[str, Any], stop: Any) -> None:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(comp.compress(bytes(1 << 20)) for _ in range(512)) + comp.flush()
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n"
    ).encode()
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", info["otlp_port"]), timeout=10) as s:
                s.sendall(head + bomb)
                while s.recv(65536):
                    pass
        except OSError:
            pass


def _slowloris(info: dict[str, Any], stop: Any) -> None:
    socks: list[socket.socket] = []
    while not stop.is_set():
        while len(socks) < 200:
            s = socket.create_connection(("127.0.0.1", info["otlp_port"]))
            s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-a: ")
            socks.append(s)
        for s in list(socks):
            try:
                s.send(b"a")
            except OSError:  # closed by the idle bound: open another
                socks.remove(s)
                s.close()
        stop.wait(0.1)
    for s in socks:
        s.close()


def _huge_control_body(info: dict[str, Any], stop: Any) -> None:
    head = f"POST /_mcpfaults/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
    big = b'{"faults": ["' + b"a" * (50 << 20) + b'"]}'
    bodies = [
        (head + "Content-Length: 10000000000\r\n\r\n").encode() + b"{" * 1000,
        (head + f"Content-Length: {len(big)}\r\n\r\n").encode() + big,
    ]
    k = 0
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", info["port"]), timeout=10) as s:
                s.sendall(bodies[k % 2])
                while s.recv(65536):
                    pass
        except OSError:
            pass
        k += 1


def _many_waits(info: dict[str, Any], stop: Any) -> None:
    params = {"wait_for": "Never", "timeout": "10"}

    def wait() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    r = c.get(info["control_url"] + "/check", params=params, headers=AUTH)
                    if r.status_code == 503:  # 32 pending already: as Retry-After says
                        stop.wait(float(r.headers["Retry-After"]))

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(40)]
    for t in threads:
        t.start()
    with httpx.Client(timeout=30) as c:
        while not stop.is_set():
            c.post(info["control_url"] + "/release", headers=AUTH)
            stop.wait(0.05)


def _sse_unread(info: dict[str, Any], stop: Any) -> None:
    s = socket.create_connection(("127.0.0.1", info["port"]))
    s.sendall(b"GET /sse HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    head = b""
    while b"session_id=" not in head or b"\n\n" not in head.split(b"session_id=", 1)[1]:
        head += s.recv(4096)
    sid = head.split(b"session_id=", 1)[1].split(b"\n", 1)[0].strip().decode()
    url = f"{info['url']}/messages?session_id={sid}"
    params = {
        "protocolVersion": "2024-11-05",
        "capabilities": {},
        "clientInfo": {"name": "b", "version": "0"},
    }
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    with httpx.Client(timeout=30) as c:
        c.post(url, json=init)
        i = 0
        while not stop.is_set():
            i += 1
            call = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "e" * 20_000}}}  # fmt: skip
            r = c.post(url, json=call)
            if r.status_code == 503:  # the outbox is over its bound: as Retry-After says
                stop.wait(float(r.headers["Retry-After"]))
    s.close()


def _reads(info: dict[str, Any], stop: Any, uris: list[str]) -> None:
    headers = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=30) as c:
        k = 0
        while not stop.is_set():
            body = {"jsonrpc": "2.0", "id": k, "method": "resources/read", "params": {"uri": uris[k % 2]}}
            c.post(info["url"] + "/mcp", json=body, headers=headers)
            k += 1


def _template_uris(info: dict[str, Any], stop: Any) -> None:
    head = "file:///d/"
    at_bound = head + ("a." * MAX_URI_CHARS)[: MAX_URI_CHARS - len(head) - 1] + "/"
    _reads(info, stop, [at_bound, at_bound + "x"])


def _plain_reads(info: dict[str, Any], stop: Any) -> None:
    _reads(info, stop, ["file:///d/report.txt", "file:///d/notes.md"])


def _busy(info: dict[str, Any], stop: Any) -> None:
    """No traffic: a child spinning on a core, as each attacker's own client work does."""
    n = 0
    while not stop.is_set():
        for _ in range(100_000):
            n += 1


#: A second anchor: what a busy child process alone does to the RTT on this machine (2 cores shared).
BUSY = "(anchor) a child busy on CPU, no traffic"
#: A third: ordinary requests back to back (any traffic shares the loop with /health).
PLAIN = "(anchor) resources/read of short URIs, back to back"

ATTACKS: dict[str, Callable[[dict[str, Any], Any], None]] = {
    BUSY: _busy,
    PLAIN: _plain_reads,
    "span flood (2,000-span exports)": _span_flood,
    "/check over 50,000 spans": _check_many,
    "gzip bomb (512 MiB in 0.5 MB)": _gzip_bomb,
    "slowloris on the OTLP port (200 connections)": _slowloris,
    "huge control body (10 GB announced, 50 MB)": _huge_control_body,
    "many wait_for (40) and /release": _many_waits,
    "legacy SSE stream never read": _sse_unread,
    "resource template URIs (at MAX_URI_CHARS, one past)": _template_uris,
}


def _attack(name: str, info: dict[str, Any], stop: Any, started: Any) -> None:
    started.set()
    ATTACKS[name](info, stop)


def rtts(client: httpx.Client, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.get(url).raise_for_status()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ctx = mp.get_context("spawn")
    files = ResourceTemplate("file:///{dir}/{name}.{ext}", "files", lambda **_: "content")
    attacked = Sidecar(transport="both", idle_timeout=2.0, resources=[files])
    Control(attacked, TOKEN).mount()
    with attacked, Sidecar() as victim, httpx.Client(timeout=30) as client:
        attacked.span_recorder.set_received_limit(DEFAULT_SPAN_LIMIT)
        otlp_url = attacked.otlp_url
        info = {
            "url": attacked.url,
            "port": attacked.port,
            "otlp_url": otlp_url,
            "otlp_port": int(otlp_url.rsplit(":", 1)[1].split("/")[0]),
            "control_url": attacked.url + "/_mcpfaults",
        }
        with httpx.Client(timeout=30) as c:  # 50,000 spans for /check to walk
            for k in range(25):
                body = _export(2000, 10**6 + k * 2000)
                c.post(otlp_url, content=body, headers={"Content-Type": "application/x-protobuf"})
        rtts(client, victim.health_url, 50)  # warm-up
        rows: dict[str, list[float]] = {"idle": [], **{name: [] for name in ATTACKS}}
        for _ in range(ROUNDS):
            for name in ATTACKS:
                rows["idle"] += rtts(client, victim.health_url, CALLS)
                stop, started = ctx.Event(), ctx.Event()
                child = ctx.Process(target=_attack, args=(name, info, stop, started), daemon=True)
                child.start()
                started.wait(30)
                time.sleep(1.0)  # the attack under way (the child imports, connects, sends)
                rows[name] += rtts(client, victim.health_url, CALLS)
                stop.set()
                child.join(20)
                if child.is_alive():
                    child.kill()
                    child.join(5)
        errors = list(attacked.errors)
    idle = _bench.median(rows["idle"])
    out = [["idle", _bench.fmt_s(idle), "1.00x"]]
    met = []
    for name in ATTACKS:
        m = _bench.median(rows[name])
        out.append([name, _bench.fmt_s(m), f"{m / idle:.2f}x"])
        if name not in (BUSY, PLAIN):
            met.append((name, m / idle))
    _bench.table(
        f"one sidecar's /health RTT while another of the process is fed hostile input "
        f"(median of {CALLS * ROUNDS} per row, {ROUNDS} rounds interleaved; {os.cpu_count()} cores)",
        out,
        ["the other sidecar is fed", "median /health RTT", "vs idle"],
    )
    print(f"\nsidecar errors recorded on the attacked sidecar: {len(errors)}")
    for name, ratio in met:
        print(_bench.verdict(ratio <= TARGET, f"{name}: {ratio:.2f}x idle (target <= {TARGET:g}x)"))


if __name__ == "__main__":
    main()
