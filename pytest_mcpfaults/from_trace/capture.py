"""A run, captured where it ran: its recorded spans and its sidecars' journals as explore's ``detail``
form (``{"spans": [...], "journal": [...]}``, one clock: seconds since the epoch), which explore's page
draws and ``python -m pytest_mcpfaults from-trace --clean FILE`` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_mcpfaults.spans.records import RecordedSpan


def _sec(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e9


def clean_run_detail(spans: Sequence[RecordedSpan], servers: Sequence[Any]) -> dict[str, Any]:
    """``spans`` and the journals of ``servers`` (in the order the test made them) as the ``detail`` form."""
    out: list[dict[str, Any]] = []
    for number, server in enumerate(servers, 1):
        journal = getattr(server, "journal", None)
        if journal is None or getattr(journal, "t0", None) is None:
            continue
        epoch = journal.epoch()
        for r in journal.requests:
            out.append(
                {
                    "id": r.id,
                    "conn": r.conn_id,
                    "server": number if len(servers) > 1 else 0,  # as the footprint's steps name it
                    "label": r.label,
                    "status": r.status,
                    "fault": r.fault,
                    "error": r.error,
                    "start": epoch + r.started_at,
                    "end": None if r.ended_at is None else epoch + r.ended_at,
                }
            )
    spans_out = [
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
    return {"spans": spans_out, "journal": out}
