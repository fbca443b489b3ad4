"""Parents of received spans (``span_records.link_received``), resolved from the spans alone: the same
tree whatever order the spans arrived in, per source, by time containment among repeated ids."""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from pytest_mcpfaults import SpanRecorder
from pytest_mcpfaults.spans.records import UIDS, Received, RecordedSpan, link_received

EMPTY = MappingProxyType({})


def span(name: str, sid: int, parent: int | None, start: int, end: int, trace: int = 7) -> RecordedSpan:
    return RecordedSpan(name, trace, sid, parent, "UNSET", None, EMPTY, (), start, end, next(UIDS))


def test_any_arrival_order_gives_the_same_tree() -> None:
    spans = [
        span("Agent.Session", 1, None, 0, 100),
        span("Agent.Run", 2, 1, 10, 20),
        span("MCP.DeleteSession", 3, 1, 30, 40),
        span("MCP send", 4, 3, 31, 39),
    ]
    trees = set()
    for order in itertools.permutations(spans):
        rec = SpanRecorder()
        for s in order:
            rec.add_received([s], source="a")
        trees.add(rec.tree())
    assert trees == {
        "Agent.Session [UNSET]\n"
        "├── Agent.Run [UNSET]\n"
        "└── MCP.DeleteSession [UNSET]\n"
        "    └── MCP send [UNSET]"
    }


def test_repeated_ids_in_one_source_go_to_the_session_that_contains_them() -> None:
    first = [span("Agent.Session", 1, None, 0, 100), span("MCP.DeleteSession", 3, 1, 50, 60)]
    second = [span("Agent.Session", 1, None, 200, 300), span("MCP.DeleteSession", 3, 1, 250, 260)]
    rec = SpanRecorder()
    rec.add_received([first[1], second[1]], source="a")  # both children before either parent
    rec.add_received([second[0], first[0]], source="a")
    sessions = rec.find("Agent.Session")
    assert [s.start_time for s in sessions] == [0, 200]
    assert [[c.start_time for c in rec.children(s)] for s in sessions] == [[50], [250]]


def test_sources_never_mix_and_a_propagated_parent_is_found_in_process() -> None:
    rec = SpanRecorder()
    from opentelemetry.sdk.trace import TracerProvider

    tracer = rec.attach(TracerProvider()).get_tracer("test")
    with tracer.start_as_current_span("Test.Root") as root:
        ctx = root.get_span_context()
        child = span("Child.Work", 9, ctx.span_id, 1, 2, trace=ctx.trace_id)
        rec.add_received([span("Agent.Session", 1, None, 0, 100)], source="a")
        rec.add_received([span("MCP.DeleteSession", 3, 1, 50, 60)], source="b")  # its parent is in "a"
        rec.add_received([child], source="b")
    assert [c.name for c in rec.children(rec.one("Test.Root"))] == ["Child.Work"]
    assert rec.parent(rec.one("MCP.DeleteSession")) is None
    assert "MCP.DeleteSession [UNSET]  (parent 0000000000000001 not recorded)" in rec.tree()


def test_ids_crafted_into_a_loop_cannot_hide_spans_or_hang_a_walk() -> None:
    a, b = span("A", 1, 2, 0, 10), span("B", 2, 1, 0, 10)
    linked = link_received([Received(a, "s", 0), Received(b, "s", 1)], {})
    parents = {linked[u].name: linked[u].parent_uid for u in linked}
    assert list(parents.values()).count(None) == 1  # one link dropped, the other kept
    rec = SpanRecorder()
    rec.add_received([a, b], source="s")
    [root] = rec.roots()
    assert len(rec.descendants(root)) == 1  # both spans in the tree, once each
    tree = rec.tree()
    assert tree.count("A [UNSET]") == 1 and tree.count("B [UNSET]") == 1
    assert isinstance(rec.check(session=["A", "B"], cleanup="B"), list)  # the invariants end


def test_wait_for_span_counts_and_refuses_bad_arguments() -> None:
    rec = SpanRecorder()
    rec.add_received([span("Agent.Session", 1, None, 0, 1), span("Agent.Session", 2, None, 2, 3)], "a")
    assert len(rec.wait_for_span("Agent.*", timeout=0, count=2)) == 2
    with pytest.raises(ValueError, match="count must be >= 1"):
        rec.wait_for_span("Agent.Session", count=0)
    with pytest.raises(ValueError, match="non-blank"):
        rec.wait_for_span(" ")
