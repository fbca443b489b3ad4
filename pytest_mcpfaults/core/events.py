"""Process-wide listeners for what sidecars do as they do it: every journal (socket ``Sidecar`` and
``mock_sidecar``) reports here when it is made (``'sidecar'``) and each fault as it fires (``'fired'``,
with the kind), on whatever thread did it.

The pytest plugin listens to keep a running tally per test outside the test's own record (which is
filled at teardown), so that a test whose worker process dies, or a run interrupted in the middle of a
test, still shows the faults fired up to that point (see ``docs/ci.md``). Standard library only: the
listener is registered before anything imports the sidecar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

__all__ = ["Event", "Listener", "notify", "on_event"]

#: What happened: a journal was made (``'sidecar'``) or a fault fired (``'fired'``).
Event = Literal["sidecar", "fired"]
#: ``listener(event, value)``: ``('sidecar', None)`` or ``('fired', '<kind>')``.
Listener = Callable[[Event, "str | None"], None]

_LOCK = threading.Lock()
_LISTENERS: list[Listener] = []


def on_event(listener: Listener) -> Callable[[], None]:
    """Call ``listener(event, value)`` for every event from now on; returns the function that
    unregisters it. A listener must be quick and must not raise (it runs on the sidecar's loop thread)."""
    with _LOCK:
        _LISTENERS.append(listener)

    def remove() -> None:
        with _LOCK:
            if listener in _LISTENERS:
                _LISTENERS.remove(listener)

    return remove


def notify(event: Event, value: str | None = None) -> None:
    """Tell every listener (called by the journals)."""
    with _LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(event, value)
