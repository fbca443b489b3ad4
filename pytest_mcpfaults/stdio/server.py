"""``StdioServer``: a fault-injected MCP server that the harness spawns as a child process (stdio).

The harness runs ``server.command`` with ``server.args`` and ``server.env`` (``python -m
pytest_mcpfaults stdio`` plus the address of a control listener on ``127.0.0.1``). The child
(:mod:`pytest_mcpfaults.stdio.child`) relays every stdin line here; this side, in the test process,
owns the plan, the trigger states, the journal and the patience budget, decides each answer with the
sidecar's MCP endpoint and faults, and tells the child what to write and when to exit. So assertions
read like the HTTP sidecar's, and the test process owns every child: whatever the harness did, a
child still alive when the server stops is killed (SIGKILL), and a guardian process kills it should
the test process die abruptly (:mod:`pytest_mcpfaults.stdio.guardian`).
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.connection import Dying, effect_of
from pytest_mcpfaults.core.core import SidecarCore
from pytest_mcpfaults.options.fields import build_options, with_options
from pytest_mcpfaults.options.validation import check_timeout
from pytest_mcpfaults.stdio import guardian
from pytest_mcpfaults.stdio.child_link import StdioChannel
from pytest_mcpfaults.stdio.procfs import wait_stopped
from pytest_mcpfaults.stdio.records import ChildRecord, StdioViolation
from pytest_mcpfaults.stdio.wire import CONTROL_ENV, TOKEN_ENV
from pytest_mcpfaults.transports import loop as _loop
from pytest_mcpfaults.verdicts.violation import numbered_verdict
from pytest_mcpfaults.verdicts.waits import JournalWaits

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


#: The signals ``kill()`` refuses, and the method that does what each does.
_NOT_KILL = {
    signal.SIGSTOP: "stops the child: use freeze() (and release() to continue)",
    signal.SIGTSTP: "stops the child: use freeze() (and release() to continue)",
    signal.SIGCONT: "continues the child: use release()",
}


def _signal_name(sig: object) -> str:
    """The name of ``kill()``'s ``sig``, refusing a non-signal and a signal that stops or continues the
    child (``freeze()``'s and ``release()``'s: a child stopped behind their back stays stopped)."""
    try:
        signum = signal.Signals(sig)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise ValueError(
            "StdioServer.kill(): sig must be a signal number (signal.SIGKILL, signal.SIGTERM ...), "
            f"got {sig!r}"
        ) from None
    if signum in _NOT_KILL:
        raise ValueError(f"StdioServer.kill(): {signum.name} {_NOT_KILL[signum]}")
    return signum.name


class StdioServer(JournalWaits):
    """A fault-injected MCP server over stdio, spawned by the harness under test.

    Hand the harness :attr:`command`, :attr:`args` and :attr:`env` (e.g. the mcp SDK's
    ``StdioServerParameters(command=server.command, args=server.args, env=server.env)``); the child
    connects back to this object, which keeps the plan, the journal and the runtime control; the
    journal waits (``wait_for``, ``wait_held``) and ``cancellations`` are the socket sidecar's.

    Its keyword arguments are the options the ``'stdio'`` backend takes (fields of
    :class:`~pytest_mcpfaults.options.fields.SidecarOptions`, as for :class:`~pytest_mcpfaults.Sidecar`;
    docs/stdio.md); ``options`` holds them. ``era`` defaults to ``'session'``. ``patience``: seconds a
    client may wait on the child (a held request, a child kept alive after stdin closed or a signal, a
    frozen child with input waiting) before the test process kills the child and records a
    :class:`~pytest_mcpfaults.stdio.records.StdioViolation` (``None``: no budget); with ``expect_hang``,
    violations are reported but do not fail the test.
    """

    @with_options("stdio")
    def __init__(self, **options: Any) -> None:
        opts = self.options = build_options(options, "stdio")
        self.era, self.patience, self.expect_hang = opts.era, opts.patience, opts.expect_hang
        self._checked(opts.faults, "faults=")  # the stdio checks; the core's plan is the options' own
        self._pool = _loop.WorkerPool("mcpfaults-stdio-tool-handler")
        self.core = SidecarCore(
            opts,
            service_url=lambda: opts.service_url or self.url,
            run_sync=self._pool.submit,
        )
        self._channel = StdioChannel(self.core, secrets.token_urlsafe(24))

    # -- plan ----------------------------------------------------------------------------------------
    def _checked(self, faults: Sequence[F.Fault | str], where: str) -> tuple[F.Fault, ...]:
        plan = F.as_plan(faults, argname=where.rstrip("="))
        F.check_transport(plan, "stdio", f"StdioServer {where}")
        for f in plan:
            if effect_of(f) == Dying(restart=True):
                raise ValueError(
                    f"StdioServer {where}: {str(f)!r}: a stdio child cannot restart itself (the harness "
                    "spawns it); use die without restart= (the child exits with status 1)"
                )
        return plan

    # -- lifecycle -----------------------------------------------------------------------------------
    #: Whether a guardian process kills the children should this process die abruptly.
    guarded = True

    def start(self) -> StdioServer:
        """Listen for children on ``127.0.0.1`` (an ephemeral port); returns ``self``."""
        if self.core.state != "new":
            raise RuntimeError(f"StdioServer.start(): already {self.core.state}; a server starts once")
        if self.guarded:
            guardian.ensure()
        _loop.run(self._channel.start(self.guarded))
        self.core.state = "running"
        return self

    def stop(self) -> None:
        """Kill every child still alive (SIGKILL; a stopped one too), wait for each to go (bounded),
        end every hold and stop listening. Idempotent."""
        if self.core.state in ("new", "stopped"):
            self.core.state = "stopped"
            return
        self.core.state = "stopped"
        _loop.run(self._channel.stop(), timeout=10.0)
        self._pool.close()

    # -- what the harness is given -------------------------------------------------------------------
    @property
    def command(self) -> str:
        """The executable the harness runs: this Python interpreter."""
        return sys.executable

    @property
    def args(self) -> list[str]:
        """The arguments: ``['-m', 'pytest_mcpfaults', 'stdio']``."""
        return ["-m", "pytest_mcpfaults", "stdio"]

    @property
    def env(self) -> dict[str, str]:
        """The environment the child needs (merge it over the harness's own): the control address and
        token, and ``PYTHONPATH`` naming this package's directory."""
        if self.core.state == "new":
            raise RuntimeError("StdioServer.env: the server is not started yet (call start() first)")
        path = os.environ.get("PYTHONPATH")
        return {
            CONTROL_ENV: self._channel.address,
            TOKEN_ENV: self._channel.token,
            "PYTHONPATH": _PACKAGE_ROOT + (os.pathsep + path if path else ""),
        }

    @property
    def url(self) -> str:
        """Where the server is, for messages and reports: ``stdio:`` and its command line."""
        return "stdio:" + " ".join(["python", *self.args])

    @property
    def mcp_url(self) -> str:
        raise RuntimeError(
            "StdioServer.mcp_url: a stdio server has no URL; give the harness command/args/env"
        )

    # -- what was observed ---------------------------------------------------------------------------
    @property
    def children(self) -> tuple[ChildRecord, ...]:
        """Every child that connected, in order (snapshots)."""
        with self._channel.cond:
            return tuple(self._channel.records)

    @property
    def child(self) -> ChildRecord:
        """The latest child (an error before any child connected)."""
        with self._channel.cond:
            if not self._channel.records:
                raise RuntimeError(
                    "StdioServer.child: no child has connected yet (has the harness spawned it?)"
                )
            return self._channel.records[-1]

    @property
    def patience_violations(self) -> tuple[StdioViolation, ...]:
        with self._channel.cond:
            return tuple(self._channel.violations)

    def wait_child(self, timeout: float = 10.0) -> ChildRecord:
        """Wait until a child has connected; return it."""
        check_timeout("wait_child", timeout)
        self._wait(lambda: bool(self._channel.records), timeout, "a stdio child to connect")
        return self.child

    def wait_exit(self, timeout: float = 10.0) -> ChildRecord:
        """Wait until the latest child has exited; return it."""
        check_timeout("wait_exit", timeout)
        self.wait_child(timeout)
        self._wait(lambda: not self._channel.records[-1].alive, timeout, "the stdio child to exit")
        return self.child

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        with self._channel.cond:
            if not self._channel.cond.wait_for(predicate, timeout):
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    # -- runtime control -----------------------------------------------------------------------------
    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL by default: the server crashes) to the latest live child."""
        name = _signal_name(sig)
        child = self._channel.live_child("kill")
        _loop.run(_loop.call(lambda: child.signal(sig, name)))
        if sig == signal.SIGKILL:
            self.journal.add_fired("die", what="kill()")

    def freeze(self) -> None:
        """Stop the latest live child (SIGSTOP): nothing is read or written until :meth:`revive` or
        :meth:`release`. Input the client sends meanwhile waits in the pipe; a client that waits on it
        past the patience budget gets a violation (the child is then killed)."""
        child = self._channel.live_child("freeze")
        _loop.run(_loop.call(child.freeze))
        wait_stopped(child.pid)  # stopped for real before the test goes on (a line could slip in otherwise)
        self.journal.add_fired("freeze", what="freeze()")

    def release(self) -> None:
        """Let every held request go (stalled lines finish, hung requests are answered) and continue a
        stopped child (SIGCONT)."""
        if self.running:
            _loop.run(_loop.call(self._channel.release))

    revive = release  # continuing a stopped child (SIGCONT) releases what it held

    # -- verdicts -------------------------------------------------------------------------------------
    def patience_verdict(self, violations: Sequence[StdioViolation]) -> str:
        """The failure message for patience violations of this server (see ``docs/stdio.md``): per
        violation, the headline, what the test process did, the child's record and journal; then how
        to bound the client or declare the wait expected."""
        n = len(violations)
        head = f"{n} wait{'s' if n != 1 else ''} on a stdio child outlived the patience budget ({self.url})"
        entries = []
        for v in violations:
            expected = " (expected by the test)" if v.expected else ""
            related = [r for r in self.journal.requests if r.conn_id == v.child.id][-12:]
            child = f"child when the budget ran out: {v.child.describe()}"  # killed since: a snapshot
            entry = [v.describe(), v.details() + expected, child]
            entry.append(f"journal of the child (pid {v.child.pid}):")
            entries.append(entry + ["  " + line for line in self.journal.format(related).splitlines()])
        if all(v.moved_on for v in violations):
            fix = (
                "The client gave up on the request but kept using the child, which still held it: "
                "after a timed-out call on a stdio server, end the child (close stdin, then SIGTERM, then "
                "SIGKILL, each after a short wait) and start a new one"
            )
        else:
            fix = (
                "Bound the client: end the child yourself when it does not exit (close stdin, then "
                "SIGTERM, then SIGKILL, each after a short wait), put a timeout on the request"
            )
        return numbered_verdict(
            head,
            entries,
            f"{fix}; or, if the test expects the wait, say so: @pytest.mark.mcp_expect_hang, "
            "@pytest.mark.mcp_stdio(expect_hang=True) or StdioServer(expect_hang=True).",
        )

    def assert_no_patience_violations(self) -> None:
        from pytest_mcpfaults.verdicts.patience import PatienceError

        v = self.patience_violations
        if v:
            raise PatienceError(self.patience_verdict(v))
