"""The control channel between a stdio child and the test process that owns its plan and journal.

Standard library only: the child imports this and nothing heavier, so it starts like a bare
``python -c``. Both directions carry newline-delimited JSON objects, each with a type ``t``.

child → test process

* ``hello``: ``token``, ``pid``, ``ppid`` (first message; a wrong token closes the channel)
* ``in``: one stdin line (``line``: text, or ``b64``: base64 when it is not UTF-8 or is long), or,
  for a line over :data:`MAX_LINE` bytes, ``over``: its length (the line itself is read and dropped)
* ``eof``: stdin reached end of file; the child waits for an ``ans`` (exit or keep running)
* ``sig``: a signal arrived (``name``); the child waits for an ``ans`` (ignore it or die of it)
* ``bye``: the child is about to exit on its own (``how``, ``code``)

test process → child

* ``out``: write ``d`` (text) to stdout and flush; ``err``: write ``n`` bytes of log lines to stderr
* ``exit``: exit at once with status ``code`` (a ``die`` fault)
* ``ans``: the answer to an ``eof`` or ``sig`` (``keep``: true to keep running)

The child exits when the channel closes (the test process is gone), so it never outlives its
owner while it can run; a stopped child is killed by the owner's guardian (see ``guardian``).
"""

from __future__ import annotations

import json
import socket
from typing import Any

#: The environment variables the fixture hands the harness for the child.
CONTROL_ENV = "MCPFAULTS_STDIO_CONTROL"  # host:port of the control listener
TOKEN_ENV = "MCPFAULTS_STDIO_TOKEN"  # proves the child was started for this server

#: The longest stdin line (bytes, without its newline) a child relays; a longer one is answered with
#: a JSON-RPC error (``stdio_max_line`` in docs/stdio.md).
MAX_LINE = 1 << 20
#: Lines longer than this travel base64-encoded (at most 4/3 of their size, whatever they contain).
TEXT_LINE = 1 << 16
#: The longest control message the test process reads from a child (a ``MAX_LINE`` line in base64
#: and its envelope fit with room to spare).
MAX_MESSAGE = 2 * MAX_LINE


class Channel:
    """One end of the control connection: send a message, read the next one (blocking)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = b""

    def send(self, **message: Any) -> None:
        self.sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def recv(self) -> dict[str, Any] | None:
        """The next message, or ``None`` once the other end closed the channel."""
        while b"\n" not in self._buf:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return None
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        message = json.loads(line)
        return message if isinstance(message, dict) else None
