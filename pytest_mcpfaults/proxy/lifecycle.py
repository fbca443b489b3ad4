"""The server under test's lifecycle in proxy mode: ``Sidecar(upstream=URL, upstream_serve=[...])``
(``Sidecar.upstream_server``, docs/proxy.md). Everything here runs in the test's thread; the stream
journal is written on the loop thread and read as snapshots.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO
from urllib.parse import urlsplit

from aiohttp.hdrs import METH_ALL

from pytest_mcpfaults.options.validation import is_positive_seconds
from pytest_mcpfaults.proxy.streams import RelayedStream, StreamLog
from pytest_mcpfaults.stdio import guardian

#: The last bytes of the server's output (stdout and stderr) kept for messages.
OUTPUT_TAIL = 8192
#: Seconds :meth:`UpstreamServer.start` waits for the server to accept connections, by default.
START_TIMEOUT = 15.0
#: Seconds a ``SIGKILL`` is given to take effect (and a killed server's streams to be read to their end).
KILL_BOUND = 1.0
#: How often the process and the port are looked at while waiting.
_POLL = 0.01


class UpstreamShutdownHang(AssertionError):
    """A graceful stop of the upstream did not end within its timeout (the server was killed)."""


def free_port(host: str) -> int:
    """A TCP port free on ``host`` now (the kernel's pick for port 0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group ``pid`` leads (the processes it started too), if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _check_seconds(method: str, timeout: object) -> None:
    if not is_positive_seconds(timeout):
        raise ValueError(
            f"Sidecar.upstream_server.{method}(): timeout must be a positive, finite number of seconds, "
            f"got {timeout!r}"
        )


class _Output:
    def __init__(self, pipe: IO[bytes]) -> None:
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._read, args=(pipe,), name="mcpfaults-upstream-output", daemon=True
        )
        self._thread.start()

    def _read(self, pipe: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), 4096):  # what has come, as it comes
                with self._lock:
                    self._buf += chunk
                    del self._buf[:-OUTPUT_TAIL]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def tail(self, lines: int = 6) -> str:
        with self._lock:
            text = self._buf.decode("utf-8", errors="replace")
        kept = [line.rstrip() for line in text.splitlines() if line.strip()]
        return "\n".join(f"    | {line}" for line in kept[-lines:]) or "    (no output)"


class UpstreamServer:
    """The HTTP upstream's server process, started and killed with the sidecar (``upstream_serve=``;
    ``{port}`` in the command is the upstream URL's port), which the test may stop, gracefully or not,
    and start again, and the journal of the streams relayed from it."""

    def __init__(self, command: Sequence[str] | None, url: str, streams: StreamLog) -> None:
        parts = urlsplit(url)
        self.url = url
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.command = [arg.replace("{port}", str(self.port)) for arg in command] if command else None
        self._streams = streams
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: _Output | None = None
        #: The exit status of the last process that ended (``-15``: it died of the ``SIGTERM``).
        self.returncode: int | None = None

    # -- the process -----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The running server's process id, else ``None``."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _need_command(self, what: str) -> list[str]:
        if self.command is None:
            raise RuntimeError(
                f"Sidecar.upstream_server.{what}: this sidecar proxies {self.url}, which it did not start; "
                "pass upstream_serve=['python', 'server.py', '{port}'] for the sidecar to run the server"
            )
        return self.command

    def start(self, timeout: float = START_TIMEOUT) -> UpstreamServer:
        """Run the command and wait (at most ``timeout`` seconds) until the upstream accepts
        connections; returns ``self``. A server that exits first, or is not listening in time, is a
        ``RuntimeError`` naming the command, its exit status and its last output (it is killed)."""
        command = self._need_command("start()")
        _check_seconds("start", timeout)
        if self.running:
            raise RuntimeError(f"Sidecar.upstream_server.start(): already running (pid {self.pid})")
        guardian.ensure()
        try:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals the tree it started
            )  # fmt: skip
        except OSError as exc:
            raise OSError(exc.errno, f"Sidecar: upstream_serve {command!r} cannot be run: {exc}") from exc
        self._proc, self.returncode = proc, None
        guardian.watch(proc.pid, group=True)  # killed should the test process die abruptly
        assert proc.stdout is not None
        self._output = _Output(proc.stdout)
        deadline = time.monotonic() + timeout
        while not self._accepting():
            if proc.poll() is not None or time.monotonic() > deadline:
                why = (
                    f"exited with status {proc.returncode}"
                    if proc.poll() is not None
                    else f"was not accepting connections on {self.host}:{self.port} within {timeout:g} s"
                )
                self._kill()
                raise RuntimeError(
                    f"Sidecar: upstream_serve {command!r} {why}; its last output:\n{self._output.tail()}"
                )
            time.sleep(_POLL)
        return self

    def _accepting(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=0.2).close()
        except OSError:
            return False
        return True

    def stop(self, graceful: bool = True, timeout: float = 5.0) -> list[RelayedStream]:
        """Stop the server: ``SIGTERM`` to its process group and wait up to ``timeout`` seconds for it
        to exit (``graceful=False``: ``SIGKILL`` at once). Then wait (bounded) for the sidecar to read
        the end of every stream it was relaying from it; returns those streams as they ended.

        A graceful stop whose server is still running after ``timeout`` kills it and raises
        :class:`UpstreamShutdownHang`: the streams it still held open, what it did since the signal,
        its last output (where it is blocked)."""
        self._need_command("stop()")
        if not isinstance(graceful, bool):
            raise ValueError(
                f"Sidecar.upstream_server.stop(): graceful must be True or False, got {graceful!r}"
            )
        _check_seconds("stop", timeout)
        proc = self._proc
        if proc is None or proc.poll() is not None:  # never started, stopped, or ended by itself
            self._exited()
            return []
        before = {s.seq: s for s in self._streams.snapshot() if s.open}
        if not graceful:
            self._kill()
            return self._settled(before, time.monotonic() + KILL_BOUND)
        signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(_POLL)
        if proc.poll() is not None:
            self._exited()
            return self._settled(before, time.monotonic() + KILL_BOUND)
        held = [s for s in self._streams.snapshot() if s.seq in before and s.open]
        doing = "still accepted" if self._accepting() else "stopped accepting"
        output = self.output(6)
        self._kill()
        now = time.monotonic()
        since = sum(h.bytes - before[h.seq].bytes for h in held)
        lines = [
            f"Sidecar.upstream_server.stop(graceful=True, timeout={timeout:g}): the upstream "
            f"{' '.join(self.command or [])!r} (pid {proc.pid}) was still running {timeout:g} s after "
            "SIGTERM; it was killed (SIGKILL).",
        ]
        if held:
            lines.append(f"The {len(held)} relayed stream(s) it still held open:")
            lines.extend(f"  {s.describe(now)}" for s in held)
            lines.append(
                f"What it did since SIGTERM: {doing} new connections on {self.host}:{self.port}, sent "
                f"{since} body byte(s) on those streams and did not end them."
            )
            lines.append(
                "Where it is blocked: its graceful shutdown waits for the connections of these streams to "
                "close, and it does not end them itself (a server should end each active stream as a "
                "complete response when it shuts down). Its last output:"
            )
        else:
            lines.append(
                f"It held no stream relayed by the sidecar open, and {doing} new connections on "
                f"{self.host}:{self.port}. Where it is blocked, its last output:"
            )
        lines.append(output)
        raise UpstreamShutdownHang("\n".join(lines))

    def _settled(self, before: dict[int, RelayedStream], deadline: float) -> list[RelayedStream]:
        while True:
            mine = [s for s in self._streams.snapshot() if s.seq in before]
            if not any(s.open for s in mine) or time.monotonic() >= deadline:
                return mine
            time.sleep(_POLL)

    def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_BOUND)
        self._exited()

    def _exited(self) -> None:
        proc = self._proc
        if proc is None:
            return
        signal_group(proc.pid, signal.SIGKILL)  # what it started, if still there
        self.returncode = proc.poll()
        guardian.forget(proc.pid)
        if self._output is not None:
            self._output.join(KILL_BOUND / 2)

    def close(self) -> None:
        """The sidecar stops: SIGTERM, then SIGKILL after :data:`KILL_BOUND` (bounded; no verdict)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_BOUND)
        self._kill()

    def output(self, lines: int = 20) -> str:
        """The server's last output lines (stdout and stderr)."""
        return self._output.tail(lines) if self._output is not None else "    (no output)"

    # -- the streams -----------------------------------------------------------------------------
    @property
    def streams(self) -> list[RelayedStream]:
        """Every answer the sidecar relayed from the upstream (the newest last), as it ended so far."""
        return self._streams.snapshot()

    def wait_for_stream(self, method: str = "GET", timeout: float = 5.0) -> RelayedStream:
        """The first stream open now whose request used ``method``, once one is (a client's ``GET``
        stream is opened in the background); ``TimeoutError`` naming the streams relayed so far if none
        is within ``timeout`` seconds."""
        if not isinstance(method, str) or method not in METH_ALL:  # as sent: compared case-sensitively
            cased = isinstance(method, str) and method.upper() in METH_ALL
            right = f" (methods are case-sensitive: {method.upper()!r})" if cased else ""
            raise ValueError(
                "Sidecar.upstream_server.wait_for_stream(): method must be an HTTP method "
                f"({', '.join(sorted(METH_ALL))}), got {method!r}{right}"
            )
        _check_seconds("wait_for_stream", timeout)
        deadline = time.monotonic() + timeout
        while True:
            streams = self._streams.snapshot()
            found = next((s for s in streams if s.open and s.method == method), None)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                seen = "\n".join(f"  {s.describe()}" for s in streams) or "  (none)"
                raise TimeoutError(
                    f"Sidecar.upstream_server.wait_for_stream({method!r}): no {method} stream from the "
                    f"upstream was open within {timeout:g} s; the answers relayed so far:\n{seen}"
                )
            time.sleep(_POLL)

    def assert_streams_complete(self) -> None:
        """Fail (``AssertionError``) naming every relayed stream that did not end as a complete HTTP
        response: cut by the upstream, or still open. Those the sidecar closed itself (its client left,
        a fault cut it, the sidecar stopped) are not the upstream's and pass."""
        now = time.monotonic()
        streams = self._streams.snapshot()
        bad = [s for s in streams if s.end is None or s.end == "cut"]
        if bad:
            raise AssertionError(
                f"{len(bad)} of the {len(streams)} answer(s) relayed from the upstream {self.url} did not "
                "end as a complete HTTP response:\n" + "\n".join(f"  {s.describe(now)}" for s in bad)
            )
