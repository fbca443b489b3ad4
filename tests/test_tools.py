"""Tools: a tool needs an input schema (refused at construction otherwise), arguments are checked
against it, and the benchmark tool set answers exactly the exgentic payload shapes."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from pytest_mcpfaults import Sidecar, Tool

MODERN = {"MCP-Protocol-Version": "2026-07-28"}


def call(sc: Any, name: str, **arguments: Any) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    reply = httpx.post(sc.mcp_url, json=body, headers=MODERN)
    assert reply.status_code == 200
    return reply.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("schema", [None, {}, {"type": "string"}, "object"])
def test_a_tool_without_an_object_schema_is_refused_naming_input_schema(schema: Any) -> None:
    with pytest.raises(ValueError, match=r"Tool 'lookup': input_schema must be a JSON Schema object"):
        Tool("lookup", lambda: "x", schema)


@pytest.mark.parametrize(
    ("schema", "problem"),
    [  # each was taken: every call refused ('required' read letter by letter), or never checked
        ({"required": "city"}, "'required' must be a list of property names, got 'city'"),
        ({"properties": []}, "'properties' must be an object of property schemas, got []"),
        ({"properties": {"city": "string"}}, "property 'city' must be a schema (an object), got 'string'"),
        ({"properties": {"n": {"type": "integr"}}}, "property 'n': 'type' must be one of string, number,"),
        ({"properties": {"n": {"type": ["integer", 1]}}}, "property 'n': 'type' must be one of"),
        ({"properties": {"n": {"enum": "ab"}}}, "property 'n': 'enum' must be a list of values, got 'ab'"),
        ({"properties": {"n": {"minimum": "3"}}}, "property 'n': 'minimum' must be a number, got '3'"),
    ],
)
def test_a_schema_the_check_would_misread_is_refused_naming_the_keyword(schema: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"Tool 'lookup': input_schema: {problem}")):
        Tool("lookup", lambda city: city, {"type": "object", **schema})


def test_two_tools_of_one_name_are_refused_naming_it() -> None:
    """The second silently replaced the first (tools/list showed one, its description the second's)."""
    schema = {"type": "object", "properties": {}}
    with pytest.raises(
        ValueError, match="Sidecar: tools has two tools named 'a'; give each a name of its own"
    ):
        Sidecar(
            tools=[Tool("a", lambda: 1, schema), Tool("b", lambda: 2, schema), Tool("a", lambda: 3, schema)]
        )


def test_add_tool_requires_the_schema_keyword() -> None:
    sc = Sidecar()
    with pytest.raises(TypeError, match="input_schema"):
        sc.add_tool("lookup", lambda: "x")  # type: ignore[call-arg]


def test_a_marker_tool_without_a_schema_fails_at_collection(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import pytest
        from pytest_mcpfaults import Tool

        @pytest.mark.mcp_sidecar(tools=["not a tool"])
        def test_it(mcp_sidecar):
            raise AssertionError("must not run")
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the module's collection failed
    result.stdout.fnmatch_lines(["*ERROR collecting*", "*tools must be Tool instances, got 'not a tool'*"])


def test_arguments_are_checked_against_the_schema() -> None:
    """Input validation errors are tool execution errors (2025-11-25 spec, SEP-1303; the mcp SDK's
    MCPServer answers them so), journaled as the client's, never a sidecar error."""
    with Sidecar() as sc:
        missing = call(sc, "echo")
        wrong = call(sc, "echo", text=3)
        assert [(r.error_by, r.error) for r in sc.requests] == [
            ("client", "invalid arguments for tool echo: missing required argument 'text'"),
            ("client", "invalid arguments for tool echo: argument 'text' must be of type string, got 3"),
        ]
    for answer in (missing, wrong):
        assert answer["result"]["isError"] is True
    assert missing["result"]["content"][0]["text"] == (
        "Error executing tool echo: missing required argument 'text'"
    )
    assert wrong["result"]["content"][0]["text"] == (
        "Error executing tool echo: argument 'text' must be of type string, got 3"
    )
    assert sc.errors == []


def test_benchmark_tools_answer_the_exgentic_payload_shapes() -> None:
    with Sidecar(tool_sets=["benchmark"]) as sc:
        tasks = json.loads(call(sc, "list_tasks")["result"]["content"][0]["text"])
        created = json.loads(call(sc, "create_session", task_id="task-1")["result"]["content"][0]["text"])
        sid = created["session_id"]
        evaluated = json.loads(call(sc, "evaluate_session", session_id=sid)["result"]["content"][0]["text"])
        deleted = json.loads(call(sc, "delete_session", session_id=sid)["result"]["content"][0]["text"])
        again = json.loads(call(sc, "delete_session", session_id=sid)["result"]["content"][0]["text"])
        gone = json.loads(call(sc, "evaluate_session", session_id=sid)["result"]["content"][0]["text"])
        unknown = json.loads(call(sc, "create_session", task_id="t1")["result"]["content"][0]["text"])
        assert [s.session_id for s in sc.benchmark.deleted] == [sid]
    assert tasks == {"tasks": ["task-1", "task-2", "task-3"]}
    assert (
        set(created) == {"status", "session_id", "task_id", "task", "context"}
        and created["status"] == "success"
    )
    assert evaluated == {"status": "success", "success": True, "score": 1.0, "is_finished": True}
    assert deleted == {"status": "success"}
    assert again == gone == {"error": f"No session found with session_id {sid}"}
    assert unknown == {"error": "Unknown task_id t1"}  # docs/sidecar.md: only list_tasks' ids


def _slow_delete(session_id: str) -> dict[str, Any]:
    return {"error": f"Error closing session {session_id}: backend timed out"}


SCHEMA = {"type": "object", "properties": {"session_id": {"type": "string"}}, "required": ["session_id"]}


def _listed(sc: Any) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    reply = httpx.post(sc.mcp_url, json=body, headers=MODERN)
    return reply.json()["result"]["tools"]  # type: ignore[no-any-return]


def test_a_custom_tool_with_a_built_in_name_replaces_the_built_in() -> None:
    """Documented in docs/sidecar.md: the custom tool answers, tools/list shows it once, in the
    built-in's place, with its own description and schema; the built-in's state is not touched."""
    custom = Tool("delete_session", _slow_delete, SCHEMA, "A delete that fails.")
    with Sidecar(tools=[custom]) as sc:
        created = json.loads(call(sc, "create_session", task_id="task-1")["result"]["content"][0]["text"])
        sid = created["session_id"]
        deleted = json.loads(call(sc, "delete_session", session_id=sid)["result"]["content"][0]["text"])
        listed = _listed(sc)
        assert [s.session_id for s in sc.benchmark.live] == [sid]  # the built-in delete never ran
        assert sc.tools["delete_session"] is custom
    assert deleted == {"error": f"Error closing session {sid}: backend timed out"}
    names = [t["name"] for t in listed]
    assert names == ["echo", "sleep", "list_tasks", "create_session", "evaluate_session", "delete_session"]
    assert listed[-1]["description"] == "A delete that fails."


def test_add_tool_at_runtime_replaces_a_built_in_too() -> None:
    with Sidecar(tool_sets=["basic"]) as sc:
        before = call(sc, "echo", text="hi")["result"]["content"][0]["text"]
        sc.add_tool("echo", lambda text: text.upper(), input_schema={"type": "object", "properties": {}})
        after = call(sc, "echo", text="hi")["result"]["content"][0]["text"]
        assert [t["name"] for t in _listed(sc)] == ["echo", "sleep"]
    assert (before, after) == ("hi", "HI")


def test_the_in_process_backend_replaces_a_built_in_the_same_way() -> None:
    from pytest_mcpfaults.inprocess import mock_sidecar

    custom = Tool("delete_session", _slow_delete, SCHEMA, "A delete that fails.")
    with mock_sidecar(tools=[custom]) as side:
        deleted = call(side, "delete_session", session_id="s-1")
        assert [t["name"] for t in _listed(side)][-1] == "delete_session"
    assert json.loads(deleted["result"]["content"][0]["text"]) == {
        "error": "Error closing session s-1: backend timed out"
    }
