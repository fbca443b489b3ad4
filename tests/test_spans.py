"""SpanRecorder, snapshots, queries and the span tree, against the real OpenTelemetry SDK.

Every test builds its own SDK ``TracerProvider`` and attaches a recorder, so nothing here touches the
process-wide provider; the global wiring is tested in a subprocess (tests/test_spans_gate.py and the
``install_recorder`` tests below).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode, Tracer

from pytest_mcpfaults.spans import (
    RecordedSpan,
    SpanLookupError,
    SpanRecorder,
    ancestors,
    children,
    descendants,
    find_spans,
    format_tree,
    matches,
    one_span,
    parent_of,
    roots,
)


@pytest.fixture
def provider(recorder: SpanRecorder) -> Iterator[TracerProvider]:
    p = recorder.attach(TracerProvider(shutdown_on_exit=False))
    yield p
    p.shutdown()


@pytest.fixture
def tracer(provider: TracerProvider) -> Tracer:
    return provider.get_tracer("tests")


# --- the OpenTelemetry facts the invariants rely on -------------------------------------------------


def test_set_status_on_an_ended_span_is_ignored(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as span:
        pass
    span.set_status(Status(StatusCode.ERROR, "too late"))
    assert recorder.one("Agent.Session").status_code == "UNSET"


def test_once_ok_later_statuses_are_ignored(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as span:
        span.set_status(Status(StatusCode.OK, "done"))
        span.set_status(Status(StatusCode.ERROR, "cleanup failed"))
    got = recorder.one("Agent.Session")
    assert (got.status_code, got.status_description) == ("OK", None)  # OK carries no description


def test_exception_escaping_start_as_current_span_sets_error(recorder: SpanRecorder, tracer: Tracer) -> None:
    with pytest.raises(RuntimeError), tracer.start_as_current_span("MCP.DeleteSession"):
        raise RuntimeError("Service is no longer alive")
    got = recorder.one("MCP.DeleteSession")
    assert got.status_code == "ERROR"
    assert got.status_description == "RuntimeError: Service is no longer alive"
    assert got.exceptions == (("RuntimeError", "Service is no longer alive"),)


def test_a_later_error_status_replaces_an_earlier_error(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as span:
        span.set_status(Status(StatusCode.ERROR, "agent timed out"))
        span.set_status(Status(StatusCode.ERROR, "cleanup failed"))
    assert recorder.one("Agent.Session").status_description == "cleanup failed"


# --- recording -----------------------------------------------------------------------------------------


def test_open_spans_are_visible_and_marked(recorder: SpanRecorder, tracer: Tracer) -> None:
    span = tracer.start_span("Agent.Session")
    got = recorder.one("Agent.Session")
    assert not got.ended
    assert got.end_time is None
    assert recorder.open_spans() == [got]
    span.end()
    assert recorder.one("Agent.Session").ended
    assert recorder.open_spans() == []


def test_snapshots_are_immutable_copies(recorder: SpanRecorder, tracer: Tracer) -> None:
    span = tracer.start_span("Agent.Session", attributes={"session.id": "s1"})
    before = recorder.one("Agent.Session")
    span.set_attribute("session.id", "s2")
    span.set_status(Status(StatusCode.ERROR, "boom"))
    span.add_event("retry", {"n": 1})
    span.end()
    assert before.attributes == {"session.id": "s1"}
    assert before.status_code == "UNSET"
    assert before.events == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        before.attributes["session.id"] = "x"  # type: ignore[index]
    after = recorder.one("Agent.Session")
    assert after.attributes == {"session.id": "s2"}
    assert after.events[0] == ("retry", {"n": 1})
    name, attrs = after.events[0]
    assert (name, dict(attrs)) == ("retry", {"n": 1})


def test_ids_and_parent(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as outer, tracer.start_as_current_span("Agent.Run"):
        pass
    sess, run = recorder.one("Agent.Session"), recorder.one("Agent.Run")
    ctx = outer.get_span_context()
    assert (sess.trace_id, sess.span_id, sess.parent_id) == (ctx.trace_id, ctx.span_id, None)
    assert run.parent_id == sess.span_id
    assert run.trace_id == sess.trace_id
    assert sess.trace_id_hex == f"{ctx.trace_id:032x}"
    assert len(sess.span_id_hex) == 16
    assert sess.start_time is not None
    assert sess.end_time is not None
    assert sess.end_time >= sess.start_time
    assert {sess, run} == {run, sess}  # hashable


def test_clear_forgets_and_ignores_spans_started_before(recorder: SpanRecorder, tracer: Tracer) -> None:
    old = tracer.start_span("Previous.Test")
    with tracer.start_as_current_span("Gone"):
        pass
    recorder.clear()
    assert recorder.spans() == []
    old.end()  # ends during "this" test, started in the previous one
    with tracer.start_as_current_span("Agent.Session"):
        pass
    assert recorder.names() == ["Agent.Session"]


def test_mark_and_since(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Setup"):
        pass
    mark = recorder.mark()
    with tracer.start_as_current_span("Call"):
        pass
    assert [s.name for s in recorder.spans(since=mark)] == ["Call"]
    assert recorder.names() == ["Setup", "Call"]


def test_not_recording_ignores_spans(recorder: SpanRecorder, tracer: Tracer) -> None:
    recorder.recording = False
    with tracer.start_as_current_span("Ignored"):
        pass
    recorder.recording = True
    with tracer.start_as_current_span("Kept"):
        pass
    assert recorder.names() == ["Kept"]


def test_attach_is_idempotent_and_checks_the_type(recorder: SpanRecorder, provider: TracerProvider) -> None:
    assert recorder.attach(provider) is provider
    assert recorder.is_attached(provider)
    with provider.get_tracer("t").start_as_current_span("Once"):
        pass
    assert recorder.names() == ["Once"]
    from opentelemetry.trace import NoOpTracerProvider

    with pytest.raises(TypeError, match=r"needs an opentelemetry\.sdk\.trace\.TracerProvider"):
        recorder.attach(NoOpTracerProvider())  # type: ignore[type-var]


def test_works_under_a_concurrent_multi_span_processor() -> None:
    rec = SpanRecorder()
    prov = TracerProvider(shutdown_on_exit=False, active_span_processor=ConcurrentMultiSpanProcessor(2))
    rec.attach(prov)
    with prov.get_tracer("t").start_as_current_span("Agent.Session"):
        pass
    prov.shutdown()
    assert rec.one("Agent.Session").ended


def test_spans_from_many_threads(recorder: SpanRecorder, tracer: Tracer) -> None:
    barrier = threading.Barrier(8)

    def work(n: int) -> None:
        barrier.wait()
        for i in range(50):
            with tracer.start_as_current_span(f"T{n}.{i}"):
                pass

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = recorder.spans()
    assert len(spans) == 400
    assert all(s.ended for s in spans)


def test_spans_of_an_unattached_provider_are_not_recorded(recorder: SpanRecorder) -> None:
    other = TracerProvider(shutdown_on_exit=False)
    with other.get_tracer("t").start_as_current_span("Elsewhere"):
        pass
    assert recorder.spans() == []


# --- watching provider creation -------------------------------------------------------------------------


def test_watch_providers_attaches_providers_created_while_active(recorder: SpanRecorder) -> None:
    before = TracerProvider(shutdown_on_exit=False)
    original_init = TracerProvider.__init__
    with recorder.watch_providers():
        assert TracerProvider.__init__ is not original_init
        during = TracerProvider(shutdown_on_exit=False)

        class Custom(TracerProvider):
            def __init__(self) -> None:
                super().__init__(shutdown_on_exit=False)

        custom = Custom()
    after = TracerProvider(shutdown_on_exit=False)
    assert TracerProvider.__init__ is original_init
    assert recorder.is_attached(during)
    assert recorder.is_attached(custom)
    assert not recorder.is_attached(before)
    assert not recorder.is_attached(after)
    for prov, name in [(before, "Before"), (during, "During"), (custom, "Custom"), (after, "After")]:
        with prov.get_tracer("t").start_as_current_span(name):
            pass
    assert recorder.names() == ["During", "Custom"]


def test_watch_providers_nests(recorder: SpanRecorder) -> None:
    other = SpanRecorder()
    original_init = TracerProvider.__init__
    with recorder.watch_providers():
        with other.watch_providers(), recorder.watch_providers():
            both = TracerProvider(shutdown_on_exit=False)
        assert TracerProvider.__init__ is not original_init
        only_first = TracerProvider(shutdown_on_exit=False)
    assert TracerProvider.__init__ is original_init
    assert recorder.is_attached(both)
    assert other.is_attached(both)
    assert recorder.is_attached(only_first)
    assert not other.is_attached(only_first)


# --- queries -------------------------------------------------------------------------------------------


def _sample(tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as sess:
        sess.set_attribute("session.id", "s1")
        with tracer.start_as_current_span("Agent.Run"), tracer.start_as_current_span("MCP.CallTool"):
            pass
        with pytest.raises(RuntimeError), tracer.start_as_current_span("MCP.DeleteSession"):
            raise RuntimeError("gone")
    with tracer.start_as_current_span("MCP.Initialize"):
        pass


def test_find_by_exact_name_glob_and_status(recorder: SpanRecorder, tracer: Tracer) -> None:
    _sample(tracer)
    assert [s.name for s in recorder.find("MCP.*")] == ["MCP.CallTool", "MCP.DeleteSession", "MCP.Initialize"]
    assert [s.name for s in recorder.find(["Agent.Run", "MCP.Init*"])] == ["Agent.Run", "MCP.Initialize"]
    assert recorder.find("MCP.*", exact=True) == []
    assert [s.name for s in recorder.find("MCP.*", status="error")] == ["MCP.DeleteSession"]
    assert recorder.find("agent.session") == []  # case-sensitive


def test_one_raises_a_clear_assertion_on_none(recorder: SpanRecorder, tracer: Tracer) -> None:
    _sample(tracer)
    with pytest.raises(SpanLookupError) as info:
        recorder.one("Agent.Sesion")
    assert isinstance(info.value, AssertionError)
    msg = str(info.value)
    assert "no span named 'Agent.Sesion' was recorded" in msg
    assert "'Agent.Session', 'Agent.Run', 'MCP.CallTool'" in msg


def test_one_raises_on_several_never_first_match(recorder: SpanRecorder, tracer: Tracer) -> None:
    _sample(tracer)
    with pytest.raises(SpanLookupError, match=r"3 spans named 'MCP\.\*' were recorded, expected exactly one"):
        recorder.one("MCP.*")
    assert recorder.one("MCP.C*").name == "MCP.CallTool"


def test_one_on_an_empty_recording(recorder: SpanRecorder) -> None:
    with pytest.raises(SpanLookupError, match="span names seen: none"):
        recorder.one("Agent.Session")


def test_tree_navigation(recorder: SpanRecorder, tracer: Tracer) -> None:
    _sample(tracer)
    spans = recorder.spans()
    sess, run, call = (one_span(spans, n) for n in ("Agent.Session", "Agent.Run", "MCP.CallTool"))
    assert [s.name for s in children(spans, sess)] == ["Agent.Run", "MCP.DeleteSession"]
    assert [s.name for s in recorder.children(sess)] == ["Agent.Run", "MCP.DeleteSession"]
    assert [s.name for s in descendants(spans, sess)] == ["Agent.Run", "MCP.CallTool", "MCP.DeleteSession"]
    assert [s.name for s in recorder.descendants(run)] == ["MCP.CallTool"]
    assert [s.name for s in roots(spans)] == ["Agent.Session", "MCP.Initialize"]
    assert [s.name for s in recorder.roots()] == ["Agent.Session", "MCP.Initialize"]
    assert parent_of(spans, call) == run
    assert recorder.parent(run) == sess
    assert recorder.parent(sess) is None
    assert [s.name for s in ancestors(spans, call)] == ["Agent.Run", "Agent.Session"]
    assert sess.attributes["session.id"] == "s1"
    assert one_span(spans, "MCP.DeleteSession").event_names() == ["exception"]


def test_a_span_whose_parent_was_not_recorded_is_a_root(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Earlier"):
        recorder.clear()
        with tracer.start_as_current_span("Agent.Session"):
            pass
    spans = recorder.spans()
    assert [s.name for s in roots(spans)] == ["Agent.Session"]
    assert parent_of(spans, spans[0]) is None
    assert "not recorded" in format_tree(spans)


# --- identity: OpenTelemetry ids repeat, spans never merge ---------------------------------------------


class SameIds(IdGenerator):
    """Every span gets the same ids, as a reseeded ``random`` gives them (Hypothesis reseeds it)."""

    def generate_span_id(self) -> int:
        return 0x1111

    def generate_trace_id(self) -> int:
        return 0x2222


@pytest.fixture
def same_ids(recorder: SpanRecorder) -> Iterator[Tracer]:
    p = recorder.attach(TracerProvider(shutdown_on_exit=False, id_generator=SameIds()))
    yield p.get_tracer("same-ids")
    p.shutdown()


def _sessions(tracer: Tracer, count: int) -> None:
    for i in range(count):
        with tracer.start_as_current_span("Agent.Session", attributes={"i": i}):
            for _ in range(i):
                with tracer.start_as_current_span("Agent.Call"):
                    pass
            with tracer.start_as_current_span("MCP.DeleteSession"):
                pass


def test_spans_with_repeated_ids_stay_distinct_spans_and_trees(
    recorder: SpanRecorder, same_ids: Tracer
) -> None:
    _sessions(same_ids, 3)
    spans = recorder.spans()
    assert len(spans) == 3 + (0 + 1 + 2) + 3
    assert len({(s.trace_id, s.span_id) for s in spans}) == 1  # every span has the same ids
    assert len(set(spans)) == len(spans)  # ... and none merges with another
    assert sorted(s.uid for s in spans if s.uid is not None) == [s.uid for s in spans]  # start order
    sessions = recorder.find("Agent.Session")
    assert roots(spans) == sessions
    for i, sess in enumerate(sessions):
        assert [c.name for c in children(spans, sess)] == ["Agent.Call"] * i + ["MCP.DeleteSession"]
        assert len(descendants(spans, sess)) == i + 1
        delete = children(spans, sess)[-1]
        assert parent_of(spans, delete) is sess
        assert ancestors(spans, delete) == [sess]
        assert delete.parent_uid == sess.uid
        assert delete.parent_id == sess.span_id  # the OpenTelemetry fields are kept as they are
    assert format_tree(spans).splitlines() == [
        "Agent.Session [UNSET]  i=0",
        "└── MCP.DeleteSession [UNSET]",
        "Agent.Session [UNSET]  i=1",
        "├── Agent.Call [UNSET]",
        "└── MCP.DeleteSession [UNSET]",
        "Agent.Session [UNSET]  i=2",
        "├── Agent.Call [UNSET]",
        "├── Agent.Call [UNSET]",
        "└── MCP.DeleteSession [UNSET]",
    ]
    recorder.assert_invariants()  # one cleanup per session: no false cleanup_at_most


def test_a_propagated_parent_resolves_to_the_latest_open_span_with_its_ids(
    recorder: SpanRecorder, same_ids: Tracer
) -> None:
    with same_ids.start_as_current_span("Old"):
        pass
    outer = same_ids.start_span("Outer")
    inner = same_ids.start_span("Inner", context=trace.set_span_in_context(outer))
    # Only the ids travel (as across a process boundary): the parent is the latest open span with them.
    remote = trace.set_span_in_context(trace.NonRecordingSpan(inner.get_span_context()))
    with same_ids.start_as_current_span("Remote", context=remote):
        pass
    inner.end()
    outer.end()
    with same_ids.start_as_current_span("Late", context=remote):  # none open: the latest with those ids
        pass
    spans = recorder.spans()
    by_name = {s.name: s for s in spans}
    assert parent_of(spans, by_name["Remote"]) is by_name["Inner"]
    assert parent_of(spans, by_name["Inner"]) is by_name["Outer"]
    assert parent_of(spans, by_name["Late"]) is by_name["Remote"]  # every span here has the same ids
    assert parent_of(spans, by_name["Old"]) is None


def test_an_unrecorded_parent_with_a_recorded_spans_ids_is_not_that_span(
    recorder: SpanRecorder, same_ids: Tracer
) -> None:
    earlier = same_ids.start_span("Earlier")  # started before the clear: not recorded
    recorder.clear()
    with same_ids.start_as_current_span("Agent.Session"):
        pass
    with same_ids.start_as_current_span("Child", context=trace.set_span_in_context(earlier)):
        pass
    earlier.end()
    spans = recorder.spans()
    assert [s.name for s in roots(spans)] == ["Agent.Session", "Child"]
    assert parent_of(spans, spans[1]) is None
    assert "Child [UNSET]  (parent 0000000000001111 not recorded)" in format_tree(spans)


def test_ancestors_status_at_start_and_event_timestamps(recorder: SpanRecorder, tracer: Tracer) -> None:
    with (
        tracer.start_as_current_span("Agent.Session") as session,
        tracer.start_as_current_span("Agent.Run") as run,
    ):
        with tracer.start_as_current_span("Before"):
            pass
        session.set_status(Status(StatusCode.ERROR, "x"))
        run.add_event("tick")
        with tracer.start_as_current_span("After"):
            pass
    sess, run_snap = recorder.one("Agent.Session"), recorder.one("Agent.Run")
    before, after = recorder.one("Before"), recorder.one("After")
    assert before.ancestors_at_start == ((run_snap.uid, "UNSET"), (sess.uid, "UNSET"))
    assert after.ancestors_at_start == ((run_snap.uid, "UNSET"), (sess.uid, "ERROR"))
    assert before.status_of_ancestor_at_start(sess) == "UNSET"
    assert after.status_of_ancestor_at_start(sess) == "ERROR"
    assert after.status_of_ancestor_at_start(before) is None  # not an ancestor
    [tick] = run_snap.events
    assert tick.timestamp is not None
    assert before.end_time is not None and after.start_time is not None
    assert before.end_time <= tick.timestamp <= after.start_time
    assert tick == ("tick", {})  # still the (name, attributes) pair


def test_hand_made_snapshots_relate_by_ids() -> None:
    def snap(name: str, span_id: int, parent_id: int | None) -> RecordedSpan:
        return RecordedSpan(name, 1, span_id, parent_id, "UNSET", None, {}, (), 1, 2)

    sess, run = snap("Agent.Session", 10, None), snap("Agent.Run", 11, 10)
    spans = [sess, run]
    assert (sess.uid, sess.parent_uid, sess.ancestors_at_start) == (None, None, ())
    assert parent_of(spans, run) is sess
    assert children(spans, sess) == [run]
    assert roots(spans) == [sess]


def test_matches_and_find_reject_blank_patterns() -> None:
    assert matches("MCP.DeleteSession", "MCP.*")
    assert not matches("MCP.DeleteSession", ["Agent.*"])
    with pytest.raises(ValueError, match="non-blank"):
        matches("x", ["Agent.*", " "])
    with pytest.raises(ValueError, match="at least one"):
        find_spans([], [])


# --- the tree -------------------------------------------------------------------------------------------


def test_tree_shows_structure_status_attributes_exceptions_and_open_spans(
    recorder: SpanRecorder, tracer: Tracer
) -> None:
    _sample(tracer)
    open_span = tracer.start_span("Left.Open")
    text = recorder.tree()
    open_span.end()
    assert text.splitlines() == [
        "Agent.Session [UNSET]  session.id='s1'",
        "├── Agent.Run [UNSET]",
        "│   └── MCP.CallTool [UNSET]",
        "└── MCP.DeleteSession [ERROR: RuntimeError: gone]",
        "        ! exception RuntimeError: gone",
        "MCP.Initialize [UNSET]",
        "Left.Open [UNSET] ⟨NOT ENDED⟩",
    ]


def test_tree_keeps_multiline_descriptions_on_one_line(recorder: SpanRecorder, tracer: Tracer) -> None:
    with tracer.start_as_current_span("Agent.Session") as span:
        span.set_status(Status(StatusCode.ERROR, "line one\nline two"))
    assert format_tree(recorder.spans()) == "Agent.Session [ERROR: line one⏎ line two]"
    assert format_tree([]) == "(no spans recorded)"


# --- lazy imports -----------------------------------------------------------------------------------------


def test_importing_the_span_modules_does_not_import_opentelemetry() -> None:
    code = textwrap.dedent(
        """
        import sys
        import pytest_mcpfaults.spans.recorder, pytest_mcpfaults.invariants, pytest_mcpfaults._pytest.spans
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        assert not loaded, loaded
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
