"""What explore observes of one run once it is over, and the items it makes during a run.

The spans and the sidecars' journals as the HTML page draws them (one clock: seconds since the epoch),
the footprint a run's servers saw, and a campaign item made from its test's clean item (so an item
inserted during the run is collected like the clean one was).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest.records import EXPLORE_PARAM, MAKERS, SERVERS

if TYPE_CHECKING:
    from pytest_mcpfaults.explore import Run, Step

__all__ = ["journal_dicts", "make_item", "observed", "span_dicts"]


def span_dicts() -> list[dict[str, Any]]:
    """The recorded spans, as the HTML page draws them (times in seconds since the epoch)."""
    from pytest_mcpfaults.spans import global_recorder

    def sec(ns: int | None) -> float | None:
        return None if ns is None else ns / 1e9

    return [
        {
            "id": s.uid if s.uid is not None else s.span_id,
            "parent": s.parent_uid if s.parent_uid is not None else s.parent_id,
            "name": s.name,
            "status": s.status_code,
            "description": s.status_description,
            "start": sec(s.start_time),
            "end": sec(s.end_time),
        }
        for s in global_recorder().spans()
    ]


def journal_dicts(item: pytest.Item) -> list[dict[str, Any]]:
    """The sidecars' journals, as the HTML page lists them (times on the spans' clock)."""
    out: list[dict[str, Any]] = []
    servers = item.stash.get(SERVERS, [])
    for number, server in enumerate(servers, 1):
        journal = getattr(server, "journal", None)
        t0 = getattr(journal, "t0", None)
        if journal is None or t0 is None:
            continue
        epoch = time.time() - (time.monotonic() - t0)  # the journal's t0 on the wall clock
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
    return out


def observed(item: pytest.Item) -> tuple[list[Step], list[str], int]:
    """The footprint of the item's servers (each step naming its server when there are several), their
    journals' labels, and how often planned faults fired."""
    from pytest_mcpfaults.explore import MAKER_TRANSPORTS, footprint

    steps: list[Step] = []
    labels: list[str] = []
    fired = 0
    servers = item.stash.get(SERVERS, [])
    makers: list[str] = item.stash.get(MAKERS, [])
    for number, (server, maker) in enumerate(zip(servers, makers, strict=True), 1):
        journal = getattr(server, "journal", None)
        if journal is None:
            continue
        requests = journal.requests
        health = getattr(server, "health_path", None)
        mcp_path = getattr(server, "mcp_path", "/mcp")
        # with several servers, each step names its own (numbered in the order the test made them),
        # and its transport, which decides the kinds that apply to it
        steps += footprint(
            requests,
            mcp_path=mcp_path,
            health_path=health,
            server=number if len(servers) > 1 else 0,
            transport=MAKER_TRANSPORTS.get(maker, "http"),
        )
        labels += [r.label for r in requests]
        fired += sum(getattr(server, "fired", {}).values())
    return steps, labels, fired


def make_item(clean: pytest.Function, run: Run) -> pytest.Function:
    """A campaign item made from its test's clean item (its other parameters kept), during the run.

    pytest has no public way to add an item once collection is over, so this builds one as
    collection did: the clean item's call spec with explore's parameter and id replaced (pytest
    builds the node id from the call spec's private id list) and the clean item's fixture closure
    (``_fixtureinfo``, which holds the pseudo-fixtures of the test's direct parametrizations: a
    fixture info computed afresh would not know them). See docs/architecture.md."""
    from pytest_mcpfaults.explore import CLEAN

    callspec = clean.callspec
    params = {**callspec.params, EXPLORE_PARAM: run}
    idlist = [run.id if i == CLEAN.id else i for i in callspec._idlist]
    spec = dataclasses.replace(callspec, params=params, _idlist=idlist)
    cls = type(clean)  # an async plugin's own item class (pytest-asyncio's), as collected
    item = cls.from_parent(
        clean.parent,
        name=f"{clean.originalname}[{'-'.join(idlist)}]",
        callspec=spec,
        fixtureinfo=clean._fixtureinfo,
        originalname=clean.originalname,
    )
    clean.config.hook.pytest_itemcollected(item=item)
    # markers plugins added to the collected item (pytest-asyncio's auto mode adds 'asyncio'; a
    # conftest's pytest_itemcollected may add an mcp_sidecar marker)
    item.own_markers.extend([m for m in clean.own_markers if m not in item.own_markers])
    return item
