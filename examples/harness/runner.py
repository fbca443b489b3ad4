"""A small benchmark-session runner, modelled on real MCP benchmark harnesses.

For each task: wait for the sidecar's ``/health``, then one ``Agent.Session`` span holding
``MCP.CreateSession`` → ``Agent.Call`` (the agent, bounded by a timeout) → ``Evaluator.Evaluate`` →
``MCP.DeleteSession``. Spans go through the OpenTelemetry API (``trace.get_tracer``), so whatever
provider the process has set records them.

It comes in two variants, chosen with ``Runner(..., hardened=...)``:

* **unhardened** (the incident): ``MCP.DeleteSession`` lets a cleanup failure escape into the session's
  failure handler, which marks ``Agent.Session`` ERROR with the cleanup's message and deletes again.
* **hardened** (the fix): cleanup failures are caught inside the ``MCP.DeleteSession`` span, "already
  gone" answers are a no-op, and the session's status comes from the primary failure only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.client.stdio import StdioServerParameters
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from .mcp_client import McpTools
from .readiness import wait_ready

__all__ = ["Agent", "AgentTimeout", "Runner", "RunnerConfig", "SessionResult", "echo_agent"]

log = logging.getLogger(__name__)

#: An agent: given the MCP tools and the created session (``task``, ``session_id``, ``context``), answer.
Agent = Callable[[McpTools, dict[str, Any]], Awaitable[str]]


async def echo_agent(tools: McpTools, session: dict[str, Any]) -> str:
    """A stand-in agent: one tool call through the sidecar (``echo``) per task."""
    return str(await tools.call("echo", {"text": f"answer to {session['task']}"}))


class AgentTimeout(TimeoutError):
    """The agent did not finish within ``RunnerConfig.agent_timeout``."""


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"RunnerConfig: {name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class RunnerConfig:
    """Where the sidecar is and how patient the runner is (defaults are small; real ones are larger).
    ``mcp_url`` may also be ``StdioServerParameters``: the runner then spawns that stdio server for each
    MCP operation, as it opens one HTTP connection per operation otherwise."""

    mcp_url: str | StdioServerParameters  # or a stdio server to spawn (one child per MCP operation)
    health_url: str | None = None  # None: no readiness wait
    health_probes: int = 10
    health_interval: float = 0.2
    health_timeout: float = 1.0  # per probe
    read_timeout: float = 5.0  # per MCP request
    call_timeout: float = 15.0  # per MCP operation, connection set-up and close included
    agent_timeout: float = 30.0
    mode: str = "legacy"  # mcp Client mode: "legacy" (session era) or "auto"

    def __post_init__(self) -> None:
        for url_name in ("mcp_url", "health_url"):
            url = getattr(self, url_name)
            if url is None and url_name == "health_url":
                continue
            if url_name == "mcp_url" and isinstance(url, StdioServerParameters):
                continue
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"RunnerConfig: {url_name} must be an http(s) URL, got {url!r}")
        probes = self.health_probes
        if isinstance(probes, bool) or not isinstance(probes, int) or probes < 1:
            raise ValueError(f"RunnerConfig: health_probes must be a positive integer, got {probes!r}")
        for name in ("health_interval", "health_timeout", "read_timeout", "call_timeout", "agent_timeout"):
            _positive(name, getattr(self, name))
        if self.mode not in ("legacy", "auto"):
            raise ValueError(f"RunnerConfig: mode must be 'legacy' or 'auto', got {self.mode!r}")


@dataclass(frozen=True)
class SessionResult:
    """What one session came to. ``outcome``: ``'completed'``, ``'timeout'`` or ``'failed'``;
    ``cleanup``: ``'deleted'``, ``'already_gone'``, ``'failed'`` or ``None`` (nothing to delete)."""

    task_id: str
    session_id: str | None
    outcome: str
    score: float | None = None
    error: str | None = None
    cleanup: str | None = None


class Runner:
    """Runs benchmark sessions against one MCP sidecar; ``hardened`` picks the cleanup variant."""

    def __init__(
        self,
        config: RunnerConfig,
        *,
        hardened: bool = True,
        agent: Agent = echo_agent,
        tracer: Tracer | None = None,
    ) -> None:
        if not isinstance(config, RunnerConfig):
            raise ValueError(f"Runner: config must be a RunnerConfig, got {config!r}")
        self.config, self.hardened, self.agent = config, hardened, agent
        self.tracer = tracer or trace.get_tracer("examples.harness")
        self.tools = McpTools(
            config.mcp_url,
            mode=config.mode,
            read_timeout=config.read_timeout,
            call_timeout=config.call_timeout,
            hardened=hardened,
        )

    # -- the run ------------------------------------------------------------------------------------
    async def wait_ready(self) -> int:
        """Wait for ``/health`` (span ``Sidecar.WaitReady``); raises ``SidecarNotReady``."""
        c = self.config
        assert c.health_url is not None
        with self.tracer.start_as_current_span("Sidecar.WaitReady") as span:
            probes = await wait_ready(
                c.health_url, probes=c.health_probes, interval=c.health_interval, timeout=c.health_timeout
            )
            span.set_attribute("health.probes", probes)
            return probes

    async def run(self, task_ids: Sequence[str] | None = None) -> list[SessionResult]:
        """Wait for the sidecar, then run one session per task (all tasks by default)."""
        if self.config.health_url is not None:
            await self.wait_ready()
        tasks = list(task_ids) if task_ids is not None else await self.tools.list_tasks()
        results = []
        for task_id in tasks:
            try:
                results.append(await self.run_session(task_id))
            except Exception as exc:  # one broken session must not end the benchmark run
                log.error("session for %s raised: %s", task_id, exc)
                results.append(SessionResult(task_id, None, "failed", error=f"{type(exc).__name__}: {exc}"))
        return results

    async def run_session(self, task_id: str) -> SessionResult:
        """One benchmark session for ``task_id``, in the runner's variant."""
        if self.hardened:
            return await self._session_hardened(task_id)
        return await self._session_unhardened(task_id)

    # -- steps shared by both variants --------------------------------------------------------------
    async def _create(self, task_id: str) -> dict[str, Any]:
        with self.tracer.start_as_current_span("MCP.CreateSession") as span:
            created = await self.tools.create_session(task_id)
            span.set_attribute("session.id", created["session_id"])
            return created

    async def _agent_step(self, created: dict[str, Any]) -> str:
        timeout = self.config.agent_timeout
        with self.tracer.start_as_current_span("Agent.Call") as span:
            try:
                answer = await asyncio.wait_for(self.agent(self.tools, created), timeout)
            except asyncio.TimeoutError:
                raise AgentTimeout(f"agent did not finish within {timeout} s") from None
            span.set_attribute("agent.answer_chars", len(answer))
            return answer

    async def _evaluate(self, session_id: str) -> float:
        with self.tracer.start_as_current_span("Evaluator.Evaluate") as span:
            evaluation = await self.tools.evaluate_session(session_id)
            span.set_attribute("evaluation.score", evaluation["score"])
            return float(evaluation["score"])

    # -- the unhardened variant (the incident) ------------------------------------------------------
    async def _session_unhardened(self, task_id: str) -> SessionResult:
        with self.tracer.start_as_current_span("Agent.Session") as span:
            session_id = None
            try:
                created = await self._create(task_id)
                session_id = created["session_id"]
                outcome, error, score = "completed", None, None
                try:
                    await self._agent_step(created)
                except AgentTimeout as exc:
                    outcome, error = "timeout", str(exc)
                    span.set_status(Status(StatusCode.ERROR, "Session completed (timeout)"))
                if outcome == "completed":
                    score = await self._evaluate(session_id)
                with self.tracer.start_as_current_span("MCP.DeleteSession"):
                    cleanup = await self.tools.delete_session(session_id)  # raises on failure
                return SessionResult(task_id, session_id, outcome, score, error, cleanup)
            except Exception as exc:
                # Whatever escaped, cleanup included, becomes the session's error; then delete again.
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                cleanup = None
                if session_id is not None:
                    with self.tracer.start_as_current_span("MCP.DeleteSession"):
                        cleanup = await self.tools.delete_session(session_id)
                return SessionResult(task_id, session_id, "failed", error=str(exc), cleanup=cleanup)

    # -- the hardened variant (the fix) -------------------------------------------------------------
    async def _session_hardened(self, task_id: str) -> SessionResult:
        with self.tracer.start_as_current_span("Agent.Session") as span:
            session_id = None
            try:
                created = await self._create(task_id)
                session_id = created["session_id"]
                await self._agent_step(created)
                score = await self._evaluate(session_id)
                result = SessionResult(task_id, session_id, "completed", score)
            except AgentTimeout as exc:
                span.set_status(Status(StatusCode.ERROR, "Session completed (timeout)"))
                result = SessionResult(task_id, session_id, "timeout", error=str(exc))
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                result = SessionResult(task_id, session_id, "failed", error=str(exc))
            if session_id is not None:  # exactly one cleanup, which never raises
                result = dataclasses.replace(result, cleanup=await self._delete_hardened(session_id))
            return result

    async def _delete_hardened(self, session_id: str) -> str:
        with self.tracer.start_as_current_span("MCP.DeleteSession") as span:
            try:
                outcome = await self.tools.delete_session(session_id)
            except Exception as exc:
                # A residual cleanup failure is recorded here, on the cleanup span, and goes no further.
                log.warning("cleanup of session %s failed: %s", session_id, exc)
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                return "failed"
            if outcome == "already_gone":
                span.add_event("mcp.session.already_gone", {"session.id": session_id})
            return outcome
