"""Process-wide listeners for what sidecars do as they do it: every journal reports when it is made
(``'sidecar'``) and each fault as it fires (``'fired'``), on whatever thread did it. The plugin keeps a
running tally per test from them, so a test whose worker dies mid-test still shows the faults fired
(docs/ci.md). Standard library only: the listener is registered before anything imports the sidecar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

#: What happened: a journal was made (``'sidecar'``) or a fault fired (``'fired'``).
Event = Literal["sidecar", "fired"]
#: ``listener(event, value)``: ``('sidecar', None)`` or ``('fired', '<kind>')``.
Listener = Callable[[Event, "str | None"], None]

_LOCK = threading.Lock()
_LISTENERS: list[Listener] = []


def on_event(listener: Listener) -> Callable[[], None]:
    """Call ``listener(event, value)`` for every event from now on (quick, never raising: it runs on the
    sidecar's loop thread); returns the function that unregisters it."""
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
