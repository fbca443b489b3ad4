"""Interrupting a test that is still blocked after a verdict.

When a held request outlives its budget the sidecar resets the connection, and most clients return at
once; some do not (the mcp 1.x ``ClientSession.call_tool`` only logs the failed reply and waits on), and
a stall (``verdicts.stalls``) means the client wedged itself on what it saw. Either way the verdict,
raised after the test body, would wait for an outside timeout. So a watcher thread polls ``check()``
and, ``grace`` seconds after a patience violation (at once for a stall: the budget was its grace),
records where the main thread is and signals it (``SIGUSR2`` through ``signal.pthread_kill``: a blocking
read, lock wait, ``sleep`` or selector wakes with ``EINTR`` and runs the handler), one step per
``grace``:

1. the main thread waits in an asyncio loop's selector: every task of that loop is cancelled, so the
   test unwinds through its ``async with`` blocks;
2. otherwise, or still blocked: :class:`PatienceInterrupt` is raised where it is. A
   ``KeyboardInterrupt``: ``except Exception`` does not swallow it, and asyncio re-raises it out of
   ``run_until_complete`` from whatever task or callback it lands in;
3. once more; one ``grace`` later the watcher gives up and says so on the terminal.

At teardown (the finalizers of the harness's fixtures, torn down before the sidecar's own) each step
raises :class:`PatienceTeardownInterrupt`, an ``Exception``: pytest's ``SetupState.teardown_exact``
catches only ``Exception`` per finalizer, so a ``KeyboardInterrupt`` (or step 1's ``CancelledError``,
which pytest-asyncio lets out of an async fixture's finalizer) would skip the sidecar's stop and end the
session.

The handler is installed once, from the main thread, only if ``SIGUSR2`` has no handler yet, and stays
installed (a no-op outside ``in_body``/``in_teardown``) so a late signal never hits the default action.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from pytest_mcpfaults._pytest.blocked import blocked_at

if TYPE_CHECKING:
    from pytest_mcpfaults.verdicts.stalls import Idle, Stall

_SIGNAL: int | None = getattr(signal, "SIGUSR2", None)
_STEPS = 3
_POLL = 0.05
_CANCEL_MSG = "mcpfaults: a verdict interrupted the blocked test"


class PatienceInterrupt(KeyboardInterrupt):
    """Raised in a test still blocked after a verdict (see the module). A ``KeyboardInterrupt``, so
    asyncio lets it out of an event loop wherever it lands; the plugin turns it into the verdict."""


class PatienceTeardownInterrupt(Exception):
    """Raised in a fixture's teardown still blocked after a verdict (see the module). An ``Exception``,
    so pytest records it for that finalizer and runs the others (the sidecar's stop among them); the
    plugin turns it into the verdict as a teardown error."""


INTERRUPTS = (PatienceInterrupt, PatienceTeardownInterrupt)


def leaves(exc: BaseException | None) -> list[BaseException | None]:
    """``exc``, or the exceptions of an exception group (anyio, ``asyncio.TaskGroup``), flattened."""
    group = getattr(exc, "exceptions", None)
    if isinstance(group, tuple) and group:
        return [leaf for inner in group for leaf in leaves(inner)]
    return [exc]


@dataclass
class Finding:
    """What the watcher's ``check()`` found: an unexpected patience violation (``stall`` and ``idle``
    ``None``), or a stall of ``server`` or an idle hang, both ``immediate``: acted on at once, not one
    ``grace`` later."""

    server: Any
    stall: Stall | None
    idle: Idle | None = None

    @property
    def immediate(self) -> bool:
        return self.stall is not None or self.idle is not None


_state: dict[str, Watch | None] = {"active": None}


def install() -> bool:
    """Install the handler; ``False`` when a blocked test cannot be interrupted here: that needs POSIX
    ``pthread_kill`` and ``SIGUSR2``, and ``SIGUSR2`` free (no handler of its own) when the main thread
    installs it."""
    if _SIGNAL is None or not hasattr(signal, "pthread_kill"):
        return False
    if threading.current_thread() is threading.main_thread() and signal.getsignal(_SIGNAL) == signal.SIG_DFL:
        signal.signal(_SIGNAL, _on_signal)
    return signal.getsignal(_SIGNAL) is _on_signal


def uninstall() -> None:
    main = threading.current_thread() is threading.main_thread()
    if _SIGNAL is not None and main and signal.getsignal(_SIGNAL) is _on_signal:
        signal.signal(_SIGNAL, signal.SIG_DFL)


def _cancel_all(watch: Watch, loop: asyncio.AbstractEventLoop) -> None:
    if watch.phase.in_body:
        for task in asyncio.all_tasks(loop):
            task.cancel(_CANCEL_MSG)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    watch = _state["active"]
    if watch is None or not watch.active or not watch.pending:
        return
    watch.pending = False
    watch.steps_taken += 1
    if watch.phase.in_teardown:
        watch.how = "raised PatienceTeardownInterrupt where it was blocked"
        if watch.steps_taken > 1:
            watch.how += f" ({watch.steps_taken} times: the harness caught it and blocked again)"
        raise PatienceTeardownInterrupt("mcpfaults: the fixture's teardown was still blocked after a verdict")
    if watch.steps_taken == 1:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and asyncio.current_task(loop) is None:  # waiting in the loop's selector
            watch.how = "cancelled every task of its event loop"
            loop.call_soon_threadsafe(_cancel_all, watch, loop)
            return
    watch.how = "raised PatienceInterrupt where it was blocked"
    raise PatienceInterrupt("mcpfaults: the test was still blocked after a verdict")


class Watch:
    """The watcher of one test's call phase or teardown (see the module), reading its ``phase`` live
    (``grace``, ``in_body``, ``in_teardown``, ``say``: a copy of stderr where giving up is said)."""

    def __init__(self, phase: Any, check: Callable[[], Finding | None]) -> None:
        self.phase = phase
        self._check = check
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcpfaults-patience-watch", daemon=True)
        self.pending = False  # a signal was sent and not handled yet
        self.steps_sent = 0
        self.steps_taken = 0
        self.how = ""
        self.found_at: float | None = None
        self.finding: Finding | None = None
        self.blocked = ""
        self.gave_up = False

    @property
    def fired(self) -> bool:
        return self.steps_taken > 0

    @property
    def active(self) -> bool:
        return bool(self.phase.in_body or self.phase.in_teardown)

    def start(self) -> None:
        _state["active"] = self
        self._thread.start()

    def stop(self) -> None:
        self.phase.in_body = self.phase.in_teardown = False
        self._stop.set()
        self._thread.join(1.0)
        if _state["active"] is self:
            _state["active"] = None

    def _look(self, now: float) -> bool:
        """Whether there is a finding to act on. Looked at until the first step: a patience violation
        found stays found (it happened), a stall ends when the test makes progress again, and a
        patience violation found after a stall takes its place."""
        finding = self._check()
        if finding is None:
            if self.finding is not None and self.finding.immediate:
                self.finding, self.found_at = None, None
            return self.finding is not None
        if self.finding is None or (self.finding.immediate and not finding.immediate):
            self.finding = finding
            self.found_at = now - (self.phase.grace if finding.immediate else 0.0)
        return True

    def _run(self) -> None:
        while not self._stop.wait(_POLL):
            now = time.monotonic()
            if self.steps_sent == 0 and not self._look(now):
                continue
            assert self.found_at is not None
            if now - self.found_at < self.phase.grace * (self.steps_sent + 1) or not self.active:
                continue
            if self.steps_sent >= _STEPS:  # blocked a grace after the last: only an outside timeout ends it
                self._give_up()
                return
            if self.steps_sent == 0:
                self.blocked = blocked_at(self._main)
            self.steps_sent += 1
            self.pending = True
            assert _SIGNAL is not None
            assert self._main is not None
            signal.pthread_kill(self._main, _SIGNAL)

    def _give_up(self) -> None:
        self.gave_up = True
        if self.phase.say is not None:
            phase = "teardown" if self.phase.in_teardown else "test body"
            text = (
                f"mcpfaults: gave up interrupting the blocked {phase} after {_STEPS} attempts (each was "
                f"caught or did not return); only an outside timeout ends it now. It is blocked at:\n"
                f"{blocked_at(self._main)}"
            )
            with contextlib.suppress(OSError):
                os.write(self.phase.say, f"\n{text}\n".encode(errors="replace"))
