"""Harnesses that own a provider built before the test, and the library without the plugin."""

from opentelemetry.sdk.trace import TracerProvider

from pytest_mcpfaults.invariants import check_all, cleanup_never_flips
from pytest_mcpfaults.spans import SpanRecorder, format_tree

# --8<-- [start:attach]
# Built at import time and never made global: nothing catches it automatically.
PROVIDER = TracerProvider()
tracer = PROVIDER.get_tracer("harness")


def test_attach_a_provider_built_earlier(mcp_spans):
    mcp_spans.attach(PROVIDER)  # idempotent
    with tracer.start_as_current_span("Agent.Session"), tracer.start_as_current_span("MCP.DeleteSession"):
        pass
    assert mcp_spans.names() == ["Agent.Session", "MCP.DeleteSession"]


# --8<-- [end:attach]


# --8<-- [start:library]
def test_without_the_plugin():
    recorder = SpanRecorder(session="Harness.Episode", cleanup=["mcp.close*"])
    provider = recorder.attach(TracerProvider())
    t = provider.get_tracer("harness")
    with t.start_as_current_span("Harness.Episode"):
        t.start_span("mcp.close").end()

    spans = recorder.spans()  # immutable RecordedSpan snapshots, in start order
    assert check_all(spans, session="Harness.Episode", cleanup="mcp.close*") == []
    violations = cleanup_never_flips(spans)  # default names: nothing matches Agent.Session
    assert violations[0].message.startswith("no session span was recorded")
    print(format_tree(spans))


# --8<-- [end:library]
