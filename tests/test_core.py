"""The transport-free sidecar core (core/core.py): ``SidecarCore.decide`` asked directly, with a
transport that records what the core asked of it. No sockets: this is the one layer that has none by
design; every backend's own tests drive the same core through real clients."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.core import Answer, Incoming, SidecarCore
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.core.routing import jitter
from pytest_mcpfaults.mcp.tools import Tool
from pytest_mcpfaults.options.fields import SidecarOptions

MODERN = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
          "MCP-Protocol-Version": "2026-07-28"}  # fmt: skip


class Recording:
    """A transport that records each request of the core; ``hold`` ends in a release."""

    def __init__(self, *, release: bool = True) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.release = release

    async def hold(self, fault: F.Fault) -> None:
        self.calls.append(("hold", fault))
        if not self.release:
            raise Dropped

    async def die(self, restart: bool) -> None:
        self.calls.append(("die", restart))

    async def pause(self, seconds: float) -> None:
        self.calls.append(("pause", seconds))

    async def event_stream(self, resumed: object = None, fault: object = None) -> None:
        self.calls.append(("event_stream", None))


def make(faults: list[F.Fault] | None = None, **kwargs: Any) -> SidecarCore:
    core = SidecarCore(SidecarOptions(faults=faults or [], **kwargs), service_url=lambda: "http://svc.test")
    core.state = "running"
    return core


def call(tool: str, **arguments: Any) -> Incoming:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return Incoming("POST", "/mcp", MODERN, list(MODERN.items()), json.dumps(body).encode())


def decide(core: SidecarCore, incoming: Incoming, transport: Recording) -> Answer | None:
    rid = core.journal.add_request(conn_id=1, method=incoming.method, path=incoming.path)
    return asyncio.run(core.decide(rid, incoming, transport))


def test_a_plain_call_is_answered_and_journaled_without_asking_the_transport() -> None:
    core, t = make(), Recording()
    answer = decide(core, call("echo", text="hi"), t)
    assert answer is not None
    assert answer.reply.status == 200 and answer.fault is None and answer.sse is False
    assert answer.reply.payload["result"]["content"][0]["text"] == "hi"
    assert t.calls == []
    (rec,) = core.journal.requests
    assert (rec.mcp_method, rec.tool, rec.era, rec.fault) == ("tools/call", "echo", "stateless", None)


def test_hang_asks_the_transport_to_hold_then_answers_normally_on_release() -> None:
    hang = F.Hang(when="tool:echo")
    core, t = make([hang]), Recording()
    answer = decide(core, call("echo", text="x"), t)
    assert t.calls == [("hold", hang)]
    assert answer is not None and answer.fault == hang and answer.reply.status == 200
    assert core.journal.fired == {"hang": 1}
    assert core.journal.requests[0].fault_kind == "hang"


def test_a_hold_that_is_not_released_drops_the_request() -> None:
    core, t = make([F.Hang(when="tool:echo")]), Recording(release=False)
    with pytest.raises(Dropped):
        decide(core, call("echo", text="x"), t)


def test_die_loses_the_sessions_and_the_process_before_the_transport_dies() -> None:
    core, t = make([F.Die(when="tool:delete_session")]), Recording()
    core.mcp.sessions["s1"] = "2025-11-25"
    with pytest.raises(Dropped):
        decide(core, call("delete_session", session_id="b1"), t)
    assert t.calls == [("die", False)]
    assert core.state == "dead" and core.mcp.sessions == {} and "s1" in core.mcp.sessions.ended
    restarting, t2 = make([F.Die(restart=True)]), Recording()
    with pytest.raises(Dropped):
        decide(restarting, call("echo", text="x"), t2)
    assert t2.calls == [("die", True)] and restarting.state == "running"


def test_delay_pauses_for_its_seconds_plus_the_jitter_of_that_firing() -> None:
    delay = F.Delay(0.25, jitter=0.5, seed=3)
    core, t = make([delay]), Recording()
    decide(core, call("echo", text="a"), t)
    decide(core, call("echo", text="b"), t)
    assert t.calls == [("pause", 0.25 + jitter(delay, 1)), ("pause", 0.25 + jitter(delay, 2))]
    assert t.calls[0][1] != t.calls[1][1]


def test_a_frozen_core_holds_every_request_with_its_freeze_fault_first() -> None:
    freeze = F.Freeze(when="tool:echo")
    core, t = make([freeze]), Recording()
    decide(core, call("echo", text="a"), t)  # the freeze fires: held, and the core is frozen
    assert core.state == "frozen" and t.calls == [("hold", freeze)]
    decide(core, call("list_tasks"), t)  # a later request: held by the freeze before any fault is picked
    assert t.calls == [("hold", freeze), ("hold", freeze)]
    core.thaw()
    decide(core, call("list_tasks"), t)
    assert core.state == "running" and len(t.calls) == 2


def test_a_get_stream_is_served_by_the_transport_and_decide_returns_none() -> None:
    core, t = make(get_stream=True, era="session"), Recording()
    core.mcp.sessions["s1"] = "2025-11-25"
    headers = {"Mcp-Session-Id": "s1", "Accept": "text/event-stream"}
    answer = decide(core, Incoming("GET", "/mcp", headers, list(headers.items()), b""), t)
    assert answer is None and t.calls == [("event_stream", None)]


def test_forced_replies_and_body_faults_come_back_in_the_answer() -> None:
    stall = F.Stall(after_bytes=3, when="tool:echo")
    core, t = make([F.Status(503, when="health"), stall]), Recording()
    health = decide(core, Incoming("GET", "/health", {}, [], b""), t)
    assert health is not None and health.reply.status == 503
    body = decide(core, call("echo", text="hi"), t)
    assert body is not None and body.fault == stall and body.reply.status == 200
    assert t.calls == []  # a body fault acts when the transport delivers the bytes


def test_a_body_over_the_limit_is_413_before_it_is_parsed() -> None:
    core, t = make([F.Die()], max_body_bytes=10), Recording()
    answer = decide(core, call("echo", text="a long enough body"), t)
    assert answer is not None and answer.reply.status == 413
    assert answer.reply.text == "request body over 10 bytes" and t.calls == [] and core.state == "running"


def test_a_client_mistake_is_journaled_as_the_clients() -> None:
    core, t = make(), Recording()
    answer = decide(core, Incoming("POST", "/mcp", MODERN, list(MODERN.items()), b"{not json"), t)
    assert answer is not None and answer.reply.status == 400
    assert core.journal.requests[0].error_by == "client"


def test_delay_after_pauses_once_the_answer_is_made() -> None:
    """``Delay(after=True)``: the tool runs first, then the pause; by default the pause comes first."""
    for after, expected in ((True, ["ran", "pause"]), (False, ["pause", "ran"])):
        t = Recording()

        def mark(seen: Recording = t) -> str:
            seen.calls.append(("ran", None))
            return "ok"

        core = make([F.Delay(0.5, after=after, when="tool:mark")])
        core.add_tool(Tool("mark", mark, {"type": "object"}))
        answer = decide(core, call("mark"), t)
        assert answer is not None and answer.reply.status == 200
        assert [c[0] for c in t.calls] == expected
        assert ("pause", 0.5) in t.calls
    assert str(F.Delay(0.2, after=True)) == "delay(seconds=0.2,after=true)"
    with pytest.raises(ValueError, match=r"Delay: after must be True or False, got 'yes'"):
        F.Delay(after="yes")  # type: ignore[arg-type]
