"""``SidecarFactory``: start any number of sidecars; stop them all at once.

The ``mcp_sidecar_factory`` fixture hands one out. It is also handy without pytest. Each call returns
a started :class:`Sidecar` that is its own context manager, so a Hypothesis ``@given`` body can take a
fresh sidecar per example::

    with mcp_sidecar_factory(faults=plan) as sidecar:
        run_harness(sidecar.mcp_url)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pytest_mcpfaults.options.fields import SidecarOptions, takes_options
from pytest_mcpfaults.transports.server import Sidecar


class SidecarFactory:
    """Calls build and start a :class:`Sidecar`; :meth:`stop_all` stops every one still running.

    ``defaults`` are keyword arguments applied to every sidecar unless the call overrides them.
    ``on_start`` is told of every sidecar started (the pytest plugin uses it to attach sidecars to
    the running test).
    """

    def __init__(self, on_start: Callable[[Sidecar], None] | None = None, **defaults: Any) -> None:
        self._defaults = defaults
        self._on_start = on_start
        self._lock = threading.Lock()
        self._sidecars: list[Sidecar] = []

    @takes_options(SidecarOptions)
    def __call__(self, **kwargs: Any) -> Sidecar:
        """A started :class:`Sidecar` with the factory's defaults and these options."""
        sidecar = Sidecar(**{**self._defaults, **kwargs})
        sidecar.start()
        with self._lock:
            self._sidecars.append(sidecar)
        if self._on_start is not None:
            self._on_start(sidecar)
        return sidecar

    @property
    def sidecars(self) -> list[Sidecar]:
        """Every sidecar this factory started (running or not) since the last :meth:`stop_all`."""
        with self._lock:
            return list(self._sidecars)

    def stop_all(self) -> list[Sidecar]:
        """Stop every sidecar and forget them; returns them (for their journals and errors)."""
        with self._lock:
            sidecars, self._sidecars = self._sidecars, []
        for s in sidecars:
            s.stop()
        return sidecars

    def __enter__(self) -> SidecarFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
