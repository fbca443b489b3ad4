"""The guardian: one small process per test process that kills the children the test process can no
longer kill itself: stdio children (``StdioServer``) and stdio upstreams (``upstream_command=``).

A child that can run exits as soon as its control channel closes. A child stopped by SIGSTOP (a
``freeze``) cannot notice, so when the test process dies abruptly (``os._exit``, pytest-timeout's
thread method, SIGKILL) it would stay stopped forever. The guardian, spawned by the test process with
a pipe on its stdin, holds a pidfd of every child it is told about; when its stdin reaches end of file
(the test process exited, however it exited) it sends SIGKILL through each pidfd still open (pidfds
cannot hit a reused pid) and exits. A normal exit of the test process closes its end and reaps it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading

#: Run by ``python -c``: read ``+pid`` / ``*pid`` (the process and its process group) / ``-pid`` lines;
#: at EOF kill every pid still watched (the group of a ``*pid`` first, while its leader is alive: a
#: living leader's group id cannot have been reused).
_CODE = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
fds, groups = {}, set()
try:
    for line in sys.stdin.buffer:
        op, pid = line[:1], int(line[1:])
        if op in (b"+", b"*") and pid not in fds:
            try:
                fds[pid] = os.pidfd_open(pid)
            except OSError:
                continue
            if op == b"*":
                groups.add(pid)
        elif op == b"-" and pid in fds:
            os.close(fds.pop(pid))
            groups.discard(pid)
except OSError:
    pass
for pid, fd in fds.items():
    try:
        if pid in groups:
            signal.pidfd_send_signal(fd, 0)  # raises once the leader is gone
            os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
"""

_lock = threading.Lock()
_proc: subprocess.Popen[bytes] | None = None
_pid: int | None = None  # the test process that spawned it (a fork gets its own)


def _guardian() -> subprocess.Popen[bytes] | None:
    global _proc, _pid
    if not hasattr(os, "pidfd_open"):
        return None  # not Linux 5.3+: a stopped child outliving a crashed test process is not covered
    if _proc is None or _pid != os.getpid() or _proc.poll() is not None:
        _proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # terminal signals to the test run do not reach it
            close_fds=True,
        )
        _pid = os.getpid()
        atexit.register(_close, _proc)
    return _proc


def _close(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(2.0)


def _tell(op: str, pid: int) -> None:
    with _lock:
        proc = _guardian()
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(f"{op}{pid}\n".encode())
            proc.stdin.flush()


def ensure() -> None:
    """Start the guardian now (from the test's thread), not on the first child's hello."""
    with _lock:
        _guardian()


def watch(pid: int, *, group: bool = False) -> None:
    """Kill ``pid`` if this process exits while it is still alive; with ``group``, its process group
    too (``pid`` leads it: an ``upstream_command`` child, started in a session of its own)."""
    _tell("*" if group else "+", pid)


def forget(pid: int) -> None:
    """``pid`` exited (or was killed by us): stop watching it."""
    _tell("-", pid)


def close() -> None:
    """End the guardian now, as if this process had exited: it kills every child still watched. The
    next :func:`watch` starts a new one."""
    global _proc
    with _lock:
        proc, _proc = _proc, None
    if proc is not None:
        _close(proc)
