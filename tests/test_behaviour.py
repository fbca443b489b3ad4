"""Each phase's behaviour lives in one module and is chosen by the fault's class: the body shaper's
steps (sans-IO), the connection effects, the child's pipe writes, and a check that every kind has
the behaviour its declared phase says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import PLAIN, BodyShaper, Cut, Hold, Sleep, Step, Write, shape_of
from pytest_mcpfaults.behaviour.child import pipe_writes
from pytest_mcpfaults.behaviour.connection import Dying, Holding, Pausing, effect_of
from pytest_mcpfaults.behaviour.server_requests import Outbound, outbound_effect
from pytest_mcpfaults.core.routing import RequestInfo, answer_reply
from pytest_mcpfaults.faults import unregister_fault_kind
from pytest_mcpfaults.faults.kinds import PHASES
from pytest_mcpfaults.mcp.jsonrpc import McpRequest


def _run(fault: F.Fault, chunks: list[bytes]) -> list[Step]:
    shaper = BodyShaper(shape_of(fault))
    steps = shaper.start()
    for chunk in chunks:
        steps += shaper.feed(chunk)
        if steps and isinstance(steps[-1], Cut):
            return steps
    return steps + shaper.end()


@pytest.mark.parametrize(
    ("fault", "chunks", "steps"),
    [
        (F.Stall(after_bytes=3), [b"ab", b"cdef"], [Write(b"ab"), Write(b"c"), Hold(), Write(b"def")]),
        (F.Stall(), [b"ab"], [Write(b""), Hold(), Write(b"ab")]),  # held before the body comes
        (F.Stall(after_bytes=9), [b"ab"], [Write(b"ab"), Hold()]),  # past the end: held at the end
        (F.Stall(after_bytes=9), [], [Write(b""), Hold()]),  # the headers go out first
        (F.Truncate(after_bytes=2), [b"abc", b"d"], [Write(b"ab"), Cut("fin")]),
        (F.Truncate(after_bytes=0), [b"abc"], [Write(b""), Cut("fin")]),
        (F.Reset(after_bytes=5), [b"abc"], [Write(b"abc"), Cut("rst")]),
        (F.EndlessSse(), [b"event"], [Write(b"event"), Hold()]),
        (F.Drip(chunk_bytes=2, interval=0.5), [b"abc", b"d"],
         [Write(b"ab"), Sleep(0.5), Write(b"c"), Sleep(0.5), Write(b"d")]),
        (F.MalformedJson(), [b"abcd"], [Write(b"abcd")]),  # halved by the adapter, before the shaper
        (F.Status(503), [b"ab", b"c"], [Write(b"ab"), Write(b"c")]),  # another phase: written as it is
    ],
)  # fmt: skip
def test_the_body_shaper_steps(fault: F.Fault, chunks: list[bytes], steps: list[Step]) -> None:
    assert _run(fault, chunks) == steps


def test_a_reset_after_no_bytes_resets_before_the_status_line() -> None:
    assert shape_of(F.Reset()).resets_at_once and not shape_of(F.Reset(after_bytes=1)).resets_at_once
    assert shape_of(F.MalformedJson()).halves and not shape_of(F.MalformedJson()).streams
    assert shape_of(None) is PLAIN and shape_of(F.Hang()) is PLAIN


def test_the_connection_effects() -> None:
    assert effect_of(F.Die(restart=True)) == Dying(restart=True)
    assert effect_of(F.Freeze()) == Holding(freezes=True)
    assert effect_of(F.Hang()) == Holding()
    assert effect_of(F.Delay(0.2, after=True)) == Pausing(0.2, after=True)
    jittered = {effect_of(F.Delay(0.1, jitter=0.5, seed=3), fired) for fired in (1, 2)}
    assert len(jittered) == 2  # the nth firing draws the nth jitter
    assert effect_of(F.Status()) is None


def test_the_server_request_effects() -> None:
    assert outbound_effect(F.MalformedServerRequest("no_id")) == Outbound(
        "malformed_server_request(form=no_id)", malformed="no_id"
    )
    assert outbound_effect(F.DuplicateServerRequest(copies=3)) == Outbound(
        "duplicate_server_request(copies=3)", copies=3
    )
    assert outbound_effect(F.DropClientAnswer(500)) == Outbound(
        "drop_client_answer(status=500)", drop_status=500
    )
    assert outbound_effect(F.Hang()) is None


def test_the_child_pipe_writes() -> None:
    assert pipe_writes(F.StdoutNoise(text="hi", lines=2)) == ({"t": "out", "d": "hi\nhi\n"},)
    assert pipe_writes(F.StderrFlood(bytes=10)) == ({"t": "err", "n": 10},)
    assert pipe_writes(F.Hang()) == () and pipe_writes(None) == ()


_TOOL_CALL = RequestInfo(
    "POST", "/mcp", "mcp", McpRequest({"id": 1, "params": {"name": "echo"}}, "tools/call", 1, None, "session")
)


@pytest.mark.parametrize("kind", list(F.fault_kinds()))
def test_every_kind_has_the_behaviour_of_its_phase(kind: str) -> None:
    """A kind that declares a phase but has no behaviour there is caught here, not in a real run."""
    cls = F.fault_kinds()[kind]
    fault = cls()
    has = {
        "answer": answer_reply(fault, _TOOL_CALL, None, "http://127.0.0.1:1") is not None,  # type: ignore[arg-type]
        "connection": effect_of(fault) is not None,
        "server_request": outbound_effect(fault) is not None,
        "body": shape_of(fault) != PLAIN,
        "cancel": fault.on_cancel != "stop",
        "child": bool(pipe_writes(fault)) or bool(fault.event),
    }
    # the declared phase is the first the kind acts in (a slow 502 pauses, then answers)
    assert [phase for phase in PHASES if has[phase]][:1] == [cls.phase]


def test_a_subclass_acts_as_its_base() -> None:
    @dataclass(frozen=True)
    class Nap(F.Hang):
        kind: ClassVar[str] = "nap_made_up"

    try:
        assert effect_of(Nap()) == Holding() and Nap.phase == "connection"
    finally:
        unregister_fault_kind("nap_made_up")
