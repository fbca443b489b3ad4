"""A clean run as from-trace reads it: its spans, and its MCP requests in order, each as explore names it
(``tool:delete_session#1``) and each with the innermost span open when it arrived (:func:`place_calls`).
Pure.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from pytest_mcpfaults.from_trace.read import TraceError, plugin_spans
from pytest_mcpfaults.from_trace.trace import Trace, check_trace, index_spans
from pytest_mcpfaults.spans.queries import Patterns


@dataclass(frozen=True)
class Call:
    """One request of the clean run: its step, its start (seconds since the epoch), and the id of the
    clean-run span open around it (``None``: none)."""

    step: str
    target: str
    nth: int
    label: str
    start: float | None = None
    span: int | None = None


@dataclass(frozen=True)
class CleanRun:
    """A clean run's spans and requests."""

    trace: Trace
    calls: tuple[Call, ...]


class _Request(NamedTuple):
    """A journal record as :func:`pytest_mcpfaults.explore.plan.footprint` reads it, from its label."""

    method: str
    path: str
    mcp_method: str | None
    tool: str | None
    session_id: str | None = "s"


def _request(label: str) -> _Request:
    method, _, rest = label.partition(" ")
    what, _, tool = rest.partition(" ")
    if what.startswith("/"):
        return _Request(method, what, None, None)
    return _Request(method, "/mcp", what, tool or None)


def place_calls(calls: Sequence[Call], trace: Trace) -> tuple[Call, ...]:
    """``calls`` each with the innermost span of ``trace`` open when it started (latest start wins):
    one sweep in time order, the spans started so far in a heap by start, those ended dropped as met."""
    timed = [s for s in trace.spans if s.start_time is not None]  # in start order
    out = list(calls)
    started: list[int] = []  # minus the index in ``timed`` of each span started, the latest first
    n = 0
    timed_calls = [i for i, c in enumerate(calls) if c.start is not None]
    for i in sorted(timed_calls, key=lambda i: calls[i].start or 0):
        at = int((calls[i].start or 0) * 1e9)
        while n < len(timed) and (timed[n].start_time or 0) <= at:
            heapq.heappush(started, -n)
            n += 1
        while started and (end := timed[-started[0]].end_time) and end < at:  # ended: for the later too
            heapq.heappop(started)
        out[i] = replace(calls[i], span=timed[-started[0]].span_id if started else None)
    return tuple(out)


def clean_run_from_detail(data: Any, source: str, session: Patterns) -> CleanRun:
    """A clean run from explore's ``detail`` form: ``{"spans": [...], "journal": [...]}``, as
    :mod:`~pytest_mcpfaults.from_trace.capture` writes it (or ``GET /spans`` its spans)."""
    from pytest_mcpfaults.explore.plan import footprint

    journal = data.get("journal") if isinstance(data, Mapping) else None
    if not isinstance(journal, list) or not isinstance(data.get("spans"), list):
        raise TraceError(f"{source}: a clean run is an object with spans and journal lists")
    for i, r in enumerate(journal):
        if not _request_record(r):
            raise TraceError(
                f"{source}: journal[{i}]: a request is an object with a label (a string), a server (an "
                f"integer) and its start and end (seconds since the epoch, or null), got {str(r)[:60]!r}"
            )
    spans = sorted(plugin_spans(data["spans"], source), key=lambda s: s.start_time or 0)
    trace = index_spans(0, spans)
    check_trace(trace, source, session)
    calls: list[Call] = []
    by_server: dict[int, list[Any]] = {}
    for r in journal:
        by_server.setdefault(int(r.get("server", 0)), []).append(r)
    for server in sorted(by_server):
        requests = [(r, _request(r["label"])) for r in by_server[server]]
        # a POST that was not one JSON-RPC message (``POST /mcp``) has no step: footprint leaves it out
        kept = [
            (r, q) for r, q in requests if not (q.method == "POST" and q.path == "/mcp" and not q.mcp_method)
        ]
        steps = footprint([q for _, q in kept], server=server)
        calls += [
            Call(step.id, step.target, step.nth, step.label, r.get("start"))
            for step, (r, _) in zip(steps, kept, strict=True)
        ]
    calls.sort(key=lambda c: c.start or 0.0)
    return CleanRun(trace, place_calls(calls, trace))


def _request_record(r: Any) -> bool:
    """Whether ``r`` is a journal record as a clean run holds it (``server`` optional,
    ``start`` and ``end`` optional or null)."""

    def seconds(v: Any) -> bool:
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))

    return (
        isinstance(r, Mapping)
        and isinstance(r.get("label"), str)
        and isinstance(r.get("server", 0), int)
        and not isinstance(r.get("server"), bool)
        and seconds(r.get("start"))
        and seconds(r.get("end"))
    )
