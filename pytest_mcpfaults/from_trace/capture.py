"""A clean run, captured where it ran: its recorded spans and its sidecars' journals as explore's
``detail`` form (``{"spans": [...], "journal": [...]}``, one clock: seconds since the epoch), which
:func:`~pytest_mcpfaults.from_trace.footprint.clean_run_from_detail` reads and
``python -m pytest_mcpfaults from-trace --clean FILE`` takes.

The same conversion as explore's own (``span_dicts``, ``journal_dicts`` in
``pytest_mcpfaults._pytest.explore_observe``), without pytest: from a recorder's spans and the servers a
test made, numbered in that order when there are several.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pytest_mcpfaults.spans.records import RecordedSpan

__all__ = ["clean_run_detail"]


def _sec(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e9


def clean_run_detail(spans: Sequence[RecordedSpan], servers: Sequence[Any]) -> dict[str, Any]:
    """``spans`` (a recorder's) and the journals of ``servers`` (sidecars, in the order the test made
    them) as explore's ``detail`` form."""
    out_spans = [
        {
            "id": s.uid if s.uid is not None else s.span_id,
            "parent": s.parent_uid if s.uid is not None else s.parent_id,
            "name": s.name,
            "status": s.status_code,
            "description": s.status_description,
            "start": _sec(s.start_time),
            "end": _sec(s.end_time),
        }
        for s in spans
    ]
    journal: list[dict[str, Any]] = []
    for number, server in enumerate(servers, 1):
        j = server.journal
        epoch = time.time() - (time.monotonic() - j.t0)  # the journal's t0 on the wall clock
        for r in j.requests:
            journal.append(
                {
                    "id": r.id,
                    "server": number if len(servers) > 1 else 0,
                    "label": r.label,
                    "status": r.status,
                    "start": epoch + r.started_at,
                    "end": None if r.ended_at is None else epoch + r.ended_at,
                }
            )
    return {"spans": out_spans, "journal": journal}
