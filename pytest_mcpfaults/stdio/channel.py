"""The control channel of a :class:`~pytest_mcpfaults.stdio.server.StdioServer`: the loopback listener
its children connect back to, each child's link (:class:`~pytest_mcpfaults.stdio.child_link.ChildLink`:
its messages, requests, holds and signals) and the patience verdicts
(:class:`~pytest_mcpfaults.stdio.verdict.StdioVerdicts`). ``StdioServer`` (the public face: plan,
lifecycle, what the harness is given, runtime control) composes one :class:`StdioChannel`; every method
of it runs on the loop thread.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import signal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.core import SidecarCore
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.stdio.child_link import ChildLink, Children
from pytest_mcpfaults.stdio.procfs import wait_exited
from pytest_mcpfaults.stdio.records import ChildRecord
from pytest_mcpfaults.stdio.wire import MAX_MESSAGE

__all__ = ["MCP_PATH", "StdioChannel"]

#: The path a stdio request is answered as (the core's MCP endpoint).
MCP_PATH = "/mcp"
_HELLO_TIMEOUT = 5.0


class StdioChannel(Children):
    """The test-process side of every child of one stdio server (see the module docstring)."""

    def __init__(
        self,
        sidecar_core: SidecarCore,
        events: list[tuple[F.Fault, F.TriggerState]],
        token: str,
        *,
        patience: float | None,
        expect_hang: bool,
        guarded: bool,
    ) -> None:
        super().__init__(sidecar_core, events, patience=patience, expect_hang=expect_hang, guarded=guarded)
        self.token = token
        self.listener: asyncio.Server | None = None
        self.address = ""

    async def start(self) -> None:
        self.listener = await asyncio.start_server(self.on_connection, "127.0.0.1", 0, limit=MAX_MESSAGE)
        host, port = self.listener.sockets[0].getsockname()[:2]
        self.address = f"{host}:{port}"

    async def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
        killed = []
        for child in list(self.live.values()):
            child.holds.end("teardown")
            child.kill("teardown")
            killed.append(child.pid)
        gone = [c.gone for c in self.live.values() if not c.gone.done()]
        if gone:
            await asyncio.wait(gone, timeout=3.0)
        await wait_exited(killed, timeout=2.0)  # when stop() returns, no child of the test runs
        for child in list(self.live.values()):  # not seen to go: record it as ended anyway
            child.writer.close()
            child.ended()
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    def live_child(self, what: str) -> ChildLink:
        children = list(self.live.values())
        if not children:
            raise RuntimeError(f"StdioServer.{what}(): no live child (has the harness spawned it?)")
        return children[-1]

    def release(self) -> None:
        for child in list(self.live.values()):
            child.holds.end("released")
            if child.record.stopped:
                child.signal(signal.SIGCONT, "SIGCONT")
                child.update(stopped=False)
        self.core.thaw()

    async def on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), _HELLO_TIMEOUT)
            hello = json.loads(line)
            token = str(hello.get("token", ""))
            if hello.get("t") != "hello" or not hmac.compare_digest(token, self.token):
                raise ValueError("not a hello with this server's token")
            pid = int(hello["pid"])
        except (asyncio.TimeoutError, ValueError, KeyError, TypeError, AttributeError):
            writer.close()
            return
        if self.core.state == "stopped":
            writer.close()
            return
        if self.core.state == "dead":
            self.core.state = "running"  # the harness spawned a new child after a die
        cid = self.journal.add_connection(f"stdio child pid {pid}")
        record = ChildRecord(id=cid, pid=pid, started_at=self.journal.now())
        child = ChildLink(self, pid, writer, record)
        with self.cond:
            self.records.append(record)
            self.cond.notify_all()
        self.live[cid] = child
        if self.guarded:
            guardian.watch(pid)
        try:
            while True:
                raw = await reader.readline()
                if not raw:
                    break
                child.on_message(json.loads(raw))
        except ConnectionError:
            pass
        except Exception as exc:  # a message we cannot read: a bug of ours, surfaced in the test
            self.core.record_error(f"stdio control channel of child pid {pid}", exc)
            child.kill("control channel lost")
        finally:
            await child.reap()
