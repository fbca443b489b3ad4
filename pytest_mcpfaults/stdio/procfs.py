"""What ``/proc`` tells the test process about a stdio child it did not spawn (Linux): its exit status
while it is a zombie, and whether input waits in its stdin while it is stopped.

Both are best effort: the harness, the child's real parent, may reap it first (then the status is
unknown), and a stdin that is not a pipe cannot be probed.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import os
import select
import termios
import time


def stat(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (the state first); ``None``: gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _zombie_status(pid: int) -> tuple[bool, int | None]:
    """(still there, exit status when it is a zombie)."""
    fields = stat(pid)
    if fields is None:
        return False, None
    if fields[0] != b"Z" or len(fields) < 50:
        return True, None
    status = int(fields[49])  # field 52 of proc(5): the wait status
    return True, -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF


async def exit_status(pid: int, tries: int = 10) -> int | None:
    """The exit status of ``pid`` in ``subprocess`` terms (negative: killed by that signal), read
    while it is a zombie; ``None`` when its parent reaped it first."""
    for _ in range(tries):
        there, status = _zombie_status(pid)
        if status is not None or not there:
            return status
        await asyncio.sleep(0.005)  # exiting: the zombie state comes a moment after the pipes close
    return None


async def wait_exited(pids: list[int], timeout: float = 1.0) -> bool:
    """Wait (bounded) until each of ``pids`` has exited: a zombie, or gone; whether they all did. A
    killed child closes its pipes and sockets a moment before it becomes a zombie, so "its control
    channel closed" is not yet "it is dead"."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while not _exited(pid):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.002)
    return True


def _exited(pid: int) -> bool:
    fields = stat(pid)
    return fields is None or fields[0] in (b"Z", b"X")


def stdin_state(pid: int) -> tuple[int, bool]:
    """(bytes waiting unread in the stdin pipe of ``pid``, whether every writer closed it)."""
    try:
        fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return 0, False
    try:
        buf = array.array("i", [0])
        with contextlib.suppress(OSError):
            fcntl.ioctl(fd, termios.FIONREAD, buf, True)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        events = poller.poll(0)
        closed = any(ev & select.POLLHUP for _, ev in events)
        return int(buf[0]), closed
    finally:
        os.close(fd)


def wait_stopped(pid: int, timeout: float = 1.0) -> bool:
    """Wait until ``pid`` is actually stopped (``kill`` only queues SIGSTOP: a child blocked reading
    stdin may still take the next line before it stops); ``False`` if it did not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = stat(pid)
        if fields is None:
            return False
        if fields[0] in (b"T", b"t"):
            return True
        time.sleep(0.001)
    return False
