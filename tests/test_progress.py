"""Progress and logging notifications from tools, with the mcp 2.x client in both eras: the built-in
``progress`` tool reports on a schedule when the call carries a ``progressToken`` (and sends nothing
when it does not); ``log`` sends only at or above the level the client asked for
(``logging/setLevel`` in the session era, ``_meta`` in the stateless one); the mcp 2.x client does not
reset its read timeout on progress.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import Sidecar

CLIENT_SETS = ("basic", "client")
ERAS = [("session", "legacy"), ("stateless", "auto")]


def _text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(("era", "mode"), ERAS, ids=[e for e, _ in ERAS])
async def test_progress_on_a_schedule_reaches_the_clients_progress_callback(era: str, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with Sidecar(era=era, tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url, mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool(
                "progress", {"steps": 3, "interval": 0.05}, progress_callback=on_progress
            )
        sc.wait_idle(5)
    assert _text(result) == "done after 3 steps"
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]
    sent = sc.journal.server_messages.records
    call = next(r for r in sc.requests if r.tool == "progress")
    assert [m.method for m in sent] == ["notifications/progress"] * 3
    assert all(m.outcome == "sent" and m.request_id == call.id and not m.is_request for m in sent)
    token = sent[0].params["progressToken"]
    assert [m.params for m in sent] == [
        {"progressToken": token, "progress": i, "total": 3, "message": f"step {i} of 3"} for i in (1, 2, 3)
    ]
    gaps = [b.sent_at - a.sent_at for a, b in itertools.pairwise(sent)]
    assert all(g >= 0.045 for g in gaps), gaps  # the schedule's interval, not sent at once
    assert call.era == era and call.status == 200


async def test_no_progress_token_no_progress_and_the_answer_is_plain_json() -> None:
    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url) as client:
            result = await client.call_tool("progress", {"steps": 2})
        sc.wait_idle(5)
    assert _text(result) == "done after 2 steps"
    assert sc.journal.server_messages.records == ()
    call = next(r for r in sc.requests if r.tool == "progress")
    assert call.status == 200 and call.body_bytes is None  # answered in one piece, as any tool


async def test_mcp2_does_not_reset_its_read_timeout_on_progress() -> None:
    """Progress every 0.1 s, a 0.35 s read timeout, a 1 s call: the client times out all the same."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url) as client:
            with pytest.raises(MCPError, match="Request 'tools/call' timed out"):
                await client.call_tool(
                    "progress",
                    {"steps": 10, "interval": 0.1},
                    read_timeout_seconds=0.35,
                    progress_callback=on_progress,
                )
        sc.wait_idle(5)
    assert 2 <= len(seen) <= 4  # progress kept coming until the timeout, and did not extend it


LEVELS = [
    ("warning", "info", False),
    ("warning", "warning", True),
    ("warning", "error", True),
    ("debug", "debug", True),
]


@pytest.mark.parametrize(("asked", "level", "sent"), LEVELS)
async def test_logs_are_sent_at_or_above_the_level_set_with_logging_set_level(
    asked: str, level: str, sent: bool
) -> None:
    got: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)

    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url, logging_callback=on_log) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # logging/setLevel is deprecated as of 2026-07-28
                await client.set_logging_level(asked)  # type: ignore[arg-type]
            result = await client.call_tool("log", {"level": level, "message": "m"})
        sc.wait_idle(5)
    assert sc.journal.sequence()[4] == "POST logging/setLevel"
    if sent:
        assert _text(result) == f"logged at {level}"
        assert [(p.level, p.data, p.logger) for p in got] == [(level, "m", "mcpfaults")]
        (msg,) = sc.journal.server_messages
        assert msg.method == "notifications/message" and msg.params == {
            "level": level,
            "data": "m",
            "logger": "mcpfaults",
        }
    else:
        assert _text(result) == f"not sent: the client asked for {asked}"
        assert got == [] and sc.journal.server_messages.records == ()


async def test_no_level_asked_no_logs() -> None:
    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url) as client:
            result = await client.call_tool("log", {"level": "emergency", "message": "m"})
    assert _text(result) == "not sent: the client asked for no logs"


async def test_the_stateless_era_takes_the_level_from_the_requests_meta() -> None:
    got: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params.level)

    with Sidecar(tool_sets=CLIENT_SETS) as sc:
        async with Client(sc.mcp_url, logging_callback=on_log, log_level="error") as client:
            quiet = await client.call_tool("log", {"level": "warning", "message": "m"})
            loud = await client.call_tool("log", {"level": "critical", "message": "m"})
    assert (_text(quiet), _text(loud)) == ("not sent: the client asked for error", "logged at critical")
    assert got == ["critical"]
    assert {r.era for r in sc.requests if r.tool == "log"} == {"stateless"}


def test_a_level_that_is_not_one_is_invalid_params_naming_the_levels() -> None:
    with Sidecar(era="session") as sc:
        headers = {"Accept": "application/json, text/event-stream"}
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25"},
        }
        first = httpx.post(sc.mcp_url, json=init, headers=headers)
        assert first.json()["result"]["capabilities"]["logging"] == {}
        headers["Mcp-Session-Id"] = first.headers["Mcp-Session-Id"]
        bad: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "logging/setLevel",
            "params": {"level": "loud"},
        }
        resp = httpx.post(sc.mcp_url, json=bad, headers=headers)
    err = resp.json()["error"]
    assert err["code"] == -32602
    assert err["message"] == (
        "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, "
        "emergency, got 'loud'"
    )
    assert sc.requests[-1].error_by == "client" and sc.errors == []
