"""The example harness under test: a benchmark-session runner that talks MCP to a sidecar.

``Runner(config, hardened=False)`` is the harness of the incident (a cleanup failure flips the
session span); ``Runner(config)`` is the fixed one. ``examples/test_example_faults.py`` is its fault
suite, written the way a harness team would write it with pytest-mcpfaults.
"""

from .mcp_client import McpCallError, McpTools, SessionDeletionError
from .readiness import SidecarNotReady, wait_ready
from .runner import Agent, AgentTimeout, Runner, RunnerConfig, SessionResult, echo_agent

__all__ = [
    "Agent",
    "AgentTimeout",
    "McpCallError",
    "McpTools",
    "Runner",
    "RunnerConfig",
    "SessionDeletionError",
    "SessionResult",
    "SidecarNotReady",
    "echo_agent",
    "wait_ready",
]
