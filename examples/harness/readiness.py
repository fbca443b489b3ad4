"""Readiness wait: poll the sidecar's ``/health`` until it answers 200, a bounded number of times.

Modelled on a workflow runtime's snippet-runner wait (N probes, a pause between them, a timeout per
probe). Each probe is a streaming request that is closed as soon as the status line is read, so a
``/health`` whose body stalls or never ends does not keep the connection open.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

__all__ = ["SidecarNotReady", "wait_ready"]

log = logging.getLogger(__name__)


class SidecarNotReady(RuntimeError):
    """``/health`` never answered 200 within the allowed probes; ``outcomes`` has one entry per probe."""

    def __init__(self, url: str, outcomes: list[str]) -> None:
        self.url = url
        self.outcomes = list(outcomes)
        super().__init__(
            f"sidecar at {url} not ready after {len(outcomes)} probes: " + ", ".join(self.outcomes)
        )


async def _status(http: httpx.AsyncClient, url: str) -> int:
    # Read the status line and headers only: leaving the block closes the response unread, which
    # closes its connection instead of waiting for a body that may never end.
    async with http.stream("GET", url) as response:
        return response.status_code


async def probe(http: httpx.AsyncClient, url: str, timeout: float) -> str:
    """One probe: ``'200'`` when ready, else what went wrong: ``'503'``, ``'timeout'``, ``'ConnectError'``."""
    try:
        status = await asyncio.wait_for(_status(http, url), timeout)
    except asyncio.TimeoutError:
        return "timeout"
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return str(status)


async def wait_ready(url: str, *, probes: int, interval: float, timeout: float) -> int:
    """Probe ``url`` up to ``probes`` times, ``interval`` seconds apart, each probe bounded by
    ``timeout`` seconds. Returns the number of the probe that saw 200; raises :class:`SidecarNotReady`."""
    outcomes: list[str] = []
    async with httpx.AsyncClient() as http:
        for n in range(1, probes + 1):
            outcome = await probe(http, url, timeout)
            if outcome == "200":
                log.info("sidecar at %s ready after %d probe(s)", url, n)
                return n
            outcomes.append(outcome)
            log.info("sidecar at %s not ready (probe %d/%d: %s)", url, n, probes, outcome)
            if n < probes:
                await asyncio.sleep(interval)
    raise SidecarNotReady(url, outcomes)
