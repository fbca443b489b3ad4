"""A tiny agent harness for the fuzzing docs: one benchmark session over plain httpx JSON-RPC.

Spans: ``Agent.Session`` ⊃ ``MCP.CreateSession``, ``Agent.Call``, ``Evaluator.Evaluate``,
``MCP.DeleteSession``. The unhardened variant lets a cleanup failure escape ``MCP.DeleteSession``
into the session span (the incident's flip); the hardened one records it on the delete span only.
It speaks the stateless era with plain httpx, so it runs against both the socket sidecar and the
in-process backend.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from typing import Any

import httpx
from opentelemetry.trace import Tracer

HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}


class HarnessError(Exception):
    """A tool call failed: transport error, HTTP error, JSON-RPC error, isError or an error payload."""


class Runner:
    """Runs one session: create, call a tool, evaluate, delete (always, in ``finally``)."""

    def __init__(self, client: httpx.Client, mcp_url: str, tracer: Tracer, *, hardened: bool) -> None:
        self.client, self.mcp_url, self.tracer, self.hardened = client, mcp_url, tracer, hardened
        self._id = 0

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        self._id += 1
        message = {"jsonrpc": "2.0", "id": self._id, "method": "tools/call"}
        message["params"] = {"name": tool, "arguments": arguments}  # type: ignore[assignment]
        try:
            r = self.client.post(self.mcp_url, json=message, headers={**HEADERS, "Mcp-Name": tool})
            body = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise HarnessError(f"{tool}: {type(exc).__name__}: {exc}") from exc
        if r.status_code != 200 or "error" in body:
            raise HarnessError(f"{tool}: HTTP {r.status_code}: {body.get('error')}")
        result = body["result"]
        payload = json.loads(result["content"][0]["text"]) if not result.get("isError") else None
        if payload is None or "error" in payload:
            raise HarnessError(f"{tool} failed: {payload or result['content'][0]['text']}")
        return payload  # type: ignore[no-any-return]

    def run(self, task_id: str = "task-1") -> dict[str, Any]:
        with self.tracer.start_as_current_span("Agent.Session"):
            with self.tracer.start_as_current_span("MCP.CreateSession"):
                sid = self.call("create_session", task_id=task_id)["session_id"]
            try:
                with self.tracer.start_as_current_span("Agent.Call"):
                    self.call("list_tasks")
                with self.tracer.start_as_current_span("Evaluator.Evaluate"):
                    return self.call("evaluate_session", session_id=sid)
            finally:
                self.delete(sid)

    def delete(self, sid: str) -> None:
        with self.tracer.start_as_current_span("MCP.DeleteSession") as span:
            if not self.hardened:
                self.call("delete_session", session_id=sid)  # a failure escapes into Agent.Session
                return
            try:
                self.call("delete_session", session_id=sid)
            except HarnessError as exc:  # already gone: record it here, never on the session
                span.add_event("mcp.session.cleanup_failed", {"error": str(exc)})


class SteppedRunner(Runner):
    """The same session one step at a time (for a state machine): ``open``, ``tool``, ``evaluate``,
    ``close``. A failed step is the session's primary failure, reported when it closes."""

    def open(self, task_id: str = "task-1") -> None:
        self._stack = ExitStack()
        self._stack.enter_context(self.tracer.start_as_current_span("Agent.Session"))
        self.failure: BaseException | None = None
        try:
            with self.tracer.start_as_current_span("MCP.CreateSession"):
                self.sid = self.call("create_session", task_id=task_id)["session_id"]
        except BaseException:
            self._stack.__exit__(*sys.exc_info())  # the session ends with the create failure
            raise

    def tool(self) -> None:
        with self._primary(), self.tracer.start_as_current_span("Agent.Call"):
            self.call("list_tasks")

    def evaluate(self) -> None:
        with self._primary(), self.tracer.start_as_current_span("Evaluator.Evaluate"):
            self.call("evaluate_session", session_id=self.sid)

    def close(self) -> None:
        try:
            self.delete(self.sid)
        except BaseException:
            self._stack.__exit__(*sys.exc_info())  # a cleanup failure escapes into the session
            raise
        failure = self.failure
        if failure is None:
            self._stack.close()
        else:
            self._stack.__exit__(type(failure), failure, failure.__traceback__)

    def _primary(self) -> ExitStack:
        stack = ExitStack()

        def remember(exc_type: Any, exc: BaseException | None, tb: Any) -> None:
            if exc is not None and self.failure is None:
                self.failure = exc

        stack.push(remember)
        return stack
