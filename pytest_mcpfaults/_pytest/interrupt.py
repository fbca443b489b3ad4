"""Interrupting a test that is still blocked after a verdict.

Two findings start the watcher's steps. A *patience violation*: when a held request outlives its
budget the sidecar resets the connection, and most clients return at once; some do not (the mcp 1.x
``ClientSession.call_tool`` only logs the failed reply and waits on; code that swallows the error and
blocks elsewhere), and the verdict, raised after the test body, would wait for an outside timeout.
A *stall*: a fault fired, the sidecar holds nothing, and nothing has reached it for the patience
budget since (``verdicts.stalls``): the client wedged itself on what it saw. So during the call phase
of a test that uses a sidecar, a watcher thread polls ``check()``; ``grace`` seconds after a patience
violation (at once for a stall: the budget was its grace), if the test body has not returned, it
records where the main thread is (``blocked.blocked_at``) and interrupts it with a signal (``SIGUSR2``,
delivered with ``signal.pthread_kill``: a blocking socket read, lock wait, ``sleep`` or selector wakes
with ``EINTR`` and runs the handler), in this order, one step per ``grace``:

1. the main thread is waiting in an asyncio loop's selector (an async test, ``asyncio.run``/``anyio.run``
   or a private loop's ``run_until_complete`` in a sync test): every task of that loop is cancelled, so
   the test unwinds through its ``async with`` blocks;
2. otherwise, or if it is still blocked one ``grace`` later: :class:`PatienceInterrupt` is raised where
   the main thread is. It is a ``KeyboardInterrupt``: ``except Exception`` does not swallow it, and
   asyncio re-raises it out of ``run_until_complete`` from whatever task or callback it lands in (a
   client busy-spinning its loop is interrupted inside one of the loop's own tasks);
3. once more, one ``grace`` later; then, if it is still blocked one ``grace`` later, the watcher gives
   up and says so on the terminal (an outside timeout is still needed).

At teardown (``in_teardown``: the finalizers of the fixtures torn down before the sidecar's own, the
harness's fixtures that depend on it) there are the same three steps, one per ``grace``, but each raises
:class:`PatienceTeardownInterrupt`, an ``Exception``: pytest's ``SetupState.teardown_exact`` catches
only ``Exception`` (and its outcomes) per finalizer, so a ``KeyboardInterrupt`` would skip the remaining
finalizers (the sidecar's own stop among them) and end the session, and so would the cancellation of
step 1 (pytest-asyncio's ``Runner.run`` lets the ``CancelledError``, a ``BaseException``, out of an async
fixture's finalizer). An ``Exception`` is recorded for that finalizer, the others run, and the plugin
turns it into the verdict as a teardown error. Raised in an event loop's selector it leaves
``run_until_complete`` like any exception from a signal handler.

The handler acts only while the test function itself runs (``in_body``) or at teardown (``in_teardown``).
It is installed once, from the main thread, only if ``SIGUSR2`` has no handler yet, and stays installed
(a no-op between tests) until the session ends, so a late signal never hits the default action.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Protocol

from pytest_mcpfaults._pytest.blocked import blocked_at

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


class Finding(Protocol):
    """What the watcher's ``check()`` found: ``immediate`` findings (a stall) start the steps at once,
    the others (a patience violation) one ``grace`` later."""

    @property
    def immediate(self) -> bool: ...


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
    """Restore the default handler (at the end of the session, main thread)."""
    main = threading.current_thread() is threading.main_thread()
    if _SIGNAL is not None and main and signal.getsignal(_SIGNAL) is _on_signal:
        signal.signal(_SIGNAL, signal.SIG_DFL)


def _cancel_all(watch: Watch, loop: asyncio.AbstractEventLoop) -> None:
    if watch.in_body:
        for task in asyncio.all_tasks(loop):
            task.cancel(_CANCEL_MSG)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    watch = _state["active"]
    if watch is None or not watch.active or not watch.pending:
        return
    watch.pending = False
    watch.steps_taken += 1
    if watch.in_teardown:
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
    """The watcher of one test's call phase or teardown (see the module). ``check()`` returns a
    :class:`Finding` (an unexpected patience violation, a stall) or ``None``; ``finding`` is the first
    one, ``blocked`` where the main thread was when the first step was sent, ``fired`` whether the test
    was interrupted, ``gave_up`` whether it was still blocked one ``grace`` after the last step (then
    where it was is written to the file descriptor ``say``)."""

    def __init__(self, grace: float, check: Callable[[], Finding | None], say: int | None = None) -> None:
        self.grace = grace
        self._check = check
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcpfaults-patience-watch", daemon=True)
        self._say = say  # a copy of stderr taken before capturing: where giving up is said
        self.in_body = False
        self.in_teardown = False
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
        """Whether the watcher may act now: the test body or the harness's teardown is running."""
        return self.in_body or self.in_teardown

    def start(self) -> None:
        """Start watching; makes this the active watch of the signal handler."""
        _state["active"] = self
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (bounded: the thread wakes within ``_POLL``)."""
        self.in_body = self.in_teardown = False
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
            self.found_at = now - (self.grace if finding.immediate else 0.0)
        return True

    def _run(self) -> None:
        while not self._stop.wait(_POLL):
            now = time.monotonic()
            if self.steps_sent == 0 and not self._look(now):
                continue
            assert self.found_at is not None
            due = now - self.found_at >= self.grace * (self.steps_sent + 1) and self.active
            if self.steps_sent >= _STEPS:
                if due:  # still blocked one grace after the last step: only an outside timeout ends it
                    self._give_up()
                    return
                continue
            if due:
                if self.steps_sent == 0:
                    self.blocked = blocked_at(self._main)
                self.steps_sent += 1
                self.pending = True
                assert _SIGNAL is not None
                assert self._main is not None
                signal.pthread_kill(self._main, _SIGNAL)

    def _give_up(self) -> None:
        self.gave_up = True
        if self._say is not None:
            phase = "teardown" if self.in_teardown else "test body"
            text = (
                f"mcpfaults: gave up interrupting the blocked {phase} after {_STEPS} attempts (each was "
                f"caught or did not return); only an outside timeout ends it now. It is blocked at:\n"
                f"{blocked_at(self._main)}"
            )
            with contextlib.suppress(OSError):
                os.write(self._say, f"\n{text}\n".encode(errors="replace"))
