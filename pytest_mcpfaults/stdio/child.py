"""The stdio child: ``python -m pytest_mcpfaults stdio``, spawned by the harness under test.

A relay, standard library only (it starts as fast as a bare ``python -c``): each line read from stdin
goes to the test process over the control channel (:mod:`pytest_mcpfaults.stdio.wire`), which decides
the answer with the sidecar core and tells the child what to write, when to exit, and whether to keep
running after stdin closes or a signal arrives. Without a control channel in its environment it first
starts that test-process side in itself (standalone: a fault-injecting stdio MCP server for any harness).

Threads: the main thread reads stdin (and runs the signal handlers); one thread reads the control
channel; one writes stdout and stderr in order, so a stderr write blocked on a full pipe stalls the
replies behind it, as it would in a real server, without stopping the control channel.
"""

from __future__ import annotations

import base64
import os
import queue
import signal
import socket
import sys
import threading
from types import FrameType
from typing import Any

from pytest_mcpfaults.stdio.wire import MAX_LINE, TEXT_LINE, Channel

#: The signals the child reports (and may be told to ignore).
_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
#: How long the child waits for the test process to answer an ``eof`` or ``sig`` before it acts as a
#: plain server would (exit).
_ASK_TIMEOUT = 5.0
_FLOOD_LINE = b"mcpfaults stdio child: stderr flood, a log line padded to one hundred bytes .............\n"


class _Relay:
    def __init__(self, chan: Channel) -> None:
        self.chan = chan
        self.send_lock = threading.RLock()  # a signal handler may send while the main thread sends
        self.answers: dict[int, bool] = {}
        self.answered = threading.Condition()
        self.asks = 0
        self.writes: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

    def send(self, **message: Any) -> None:
        with self.send_lock:
            try:
                self.chan.send(**message)
            except OSError:
                os._exit(0)  # the test process is gone: a child never outlives its owner

    def ask(self, **message: Any) -> bool:
        """Send an ``eof``/``sig`` and wait for the answer: whether to keep running."""
        with self.answered:
            self.asks += 1
            n = self.asks
        self.send(n=n, **message)
        with self.answered:
            self.answered.wait_for(lambda: n in self.answers, _ASK_TIMEOUT)
            return self.answers.pop(n, False)

    # -- the control channel ----------------------------------------------------------------
    def control(self) -> None:
        while True:
            message = self.chan.recv()
            if message is None:
                os._exit(0)  # channel closed: the owner is gone or tore the child down
            t = message.get("t")
            if t == "out":
                self.writes.put(("out", str(message["d"]).encode()))
            elif t == "err":
                self.writes.put(("err", int(message["n"])))
            elif t == "exit":
                os._exit(int(message.get("code", 1)))
            elif t == "ans":
                with self.answered:
                    self.answers[int(message["n"])] = bool(message.get("keep"))
                    self.answered.notify_all()

    def flush(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until every write asked for so far is done."""
        done = threading.Event()
        self.writes.put(("flush", done))
        done.wait(timeout)

    def writer(self) -> None:
        out, err = sys.stdout.buffer, sys.stderr.buffer
        while True:
            what, data = self.writes.get()
            try:
                if what == "flush":
                    data.set()
                elif what == "out":
                    out.write(data)
                    out.flush()
                else:
                    n = int(data)
                    lines, rest = divmod(n, len(_FLOOD_LINE))
                    for _ in range(lines):
                        err.write(_FLOOD_LINE)
                    err.write(_FLOOD_LINE[:rest])
                    err.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.send(
                    t="bye", how=f"{'stdout' if what == 'out' else 'stderr'} closed by the client", code=1
                )
                os._exit(1)

    # -- signals and stdin ------------------------------------------------------------------
    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.ask(t="sig", name=name):
            return  # told to ignore it
        self.send(t="bye", how=f"signal {name}", code=-signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die of it, as a server without a handler does

    def read_stdin(self) -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline(MAX_LINE + 2)  # the line, its \r\n, or one byte too many
            if not line:
                break
            body = line.rstrip(b"\r\n")
            if len(body) > MAX_LINE:
                self.send(t="in", over=len(body) + _skip_line(stdin, line))
                continue
            if not body.strip():
                continue
            if len(body) <= TEXT_LINE:
                try:
                    self.send(t="in", line=body.decode())
                    continue
                except UnicodeDecodeError:
                    pass
            self.send(t="in", b64=base64.b64encode(body).decode())
        if not self.ask(t="eof"):
            self.flush()
            self.send(t="bye", how="stdin closed", code=0)
            os._exit(0)
        threading.Event().wait()  # ignore_eof: keep running until killed or the owner goes


def _skip_line(stdin: Any, head: bytes) -> int:
    """Read and drop the rest of an over-long line (bounded reads); how many bytes were dropped."""
    skipped = 0
    while not head.endswith(b"\n"):
        head = stdin.readline(MAX_LINE)
        if not head:
            break
        skipped += len(head.rstrip(b"\r\n"))
    return skipped


def relay(address: str, token: str) -> None:
    """Connect to the test process at ``address`` (``host:port``) and relay until told to exit."""
    host, _, port = address.rpartition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=10.0)
    except (OSError, ValueError) as exc:
        print(f"mcpfaults stdio: cannot reach the test process at {address!r}: {exc}", file=sys.stderr)
        os._exit(3)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    chan = Channel(sock)
    chan.send(t="hello", token=token, pid=os.getpid(), ppid=os.getppid())
    r = _Relay(chan)
    for name in _SIGNALS:
        signal.signal(getattr(signal, name), r.on_signal)
    threading.Thread(target=r.control, name="mcpfaults-stdio-control", daemon=True).start()
    threading.Thread(target=r.writer, name="mcpfaults-stdio-writer", daemon=True).start()
    r.read_stdin()
