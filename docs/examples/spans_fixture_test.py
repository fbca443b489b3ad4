"""The mcp_spans fixture: a harness that builds its own TracerProvider, queries, and the invariants."""

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from pytest_mcpfaults.invariants import format_violations


class McpClient:
    """Stands in for the harness's MCP client; the sidecar may already be gone at cleanup."""

    def __init__(self, sidecar_alive=True):
        self.sidecar_alive = sidecar_alive

    def delete_session(self):
        if not self.sidecar_alive:
            raise RuntimeError("Session deletion failed: Service is no longer alive")


# --8<-- [start:harness]
class Harness:
    def __init__(self, client):
        self.client = client
        self.tracer = TracerProvider().get_tracer("harness")  # its own provider

    def run_session(self, agent):
        with self.tracer.start_as_current_span("Agent.Session") as session:
            try:
                with self.tracer.start_as_current_span("Agent.Run"):
                    agent()
            except TimeoutError as exc:
                session.set_status(Status(StatusCode.ERROR, f"agent timed out: {exc}"))
            finally:
                with self.tracer.start_as_current_span("MCP.DeleteSession") as delete:
                    try:  # a cleanup failure stays inside MCP.DeleteSession
                        self.client.delete_session()
                    except RuntimeError as exc:
                        delete.add_event("mcp.session.already_gone", {"error": str(exc)})


# --8<-- [end:harness]


def agent_times_out():
    raise TimeoutError("no answer within 30s")


# --8<-- [start:fixture]
def test_timeout_with_a_dead_sidecar(mcp_spans):
    Harness(McpClient(sidecar_alive=False)).run_session(agent_times_out)

    session = mcp_spans.one("Agent.Session")  # exactly one, or an AssertionError
    assert session.status_code == "ERROR"
    assert session.status_description == "agent timed out: no answer within 30s"
    [delete] = mcp_spans.find("MCP.*")
    assert mcp_spans.parent(delete) == session
    assert delete.event_names() == ["mcp.session.already_gone"]

    mcp_spans.assert_invariants()  # cleanup_never_flips, cleanup_at_most(1), all_spans_ended


# --8<-- [end:fixture]


# --8<-- [start:buggy]
class BuggyHarness(Harness):
    def run_session(self, agent):
        with self.tracer.start_as_current_span("Agent.Session") as session:
            try:
                with self.tracer.start_as_current_span("Agent.Run"):
                    agent()
                with self.tracer.start_as_current_span("MCP.DeleteSession"):
                    self.client.delete_session()  # escapes into the handler below
            except Exception as exc:
                session.set_status(Status(StatusCode.ERROR, str(exc)))
                with self.tracer.start_as_current_span("MCP.DeleteSession"):
                    pass  # ...and deletes again


def test_the_buggy_harness_is_caught(mcp_spans):
    BuggyHarness(McpClient(sidecar_alive=False)).run_session(lambda: None)

    violations = mcp_spans.check()  # what assert_invariants() would raise, without raising
    assert [v.invariant for v in violations] == ["cleanup_never_flips", "cleanup_at_most"]
    print(format_violations(violations, mcp_spans.spans()))
    # --8<-- [end:buggy]
    message = format_violations(violations, mcp_spans.spans())
    assert "[cleanup_never_flips] Agent.Session is ERROR" in message
    assert "cause: MCP.DeleteSession" in message
    assert "[cleanup_at_most] Agent.Session ran cleanup 2 times" in message
    assert "└── MCP.DeleteSession [UNSET]" in message
