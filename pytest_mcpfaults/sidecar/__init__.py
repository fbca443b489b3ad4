"""The fake MCP sidecar: a real aiohttp server on loopback, hosted on one process-wide loop thread."""

from pytest_mcpfaults.sidecar.journal import ConnectionRecord, Journal, PatienceViolation, RequestRecord
from pytest_mcpfaults.sidecar.server import Sidecar, SidecarError
from pytest_mcpfaults.sidecar.tools import BenchmarkSession, BenchmarkSessions, Tool, ToolResultError

__all__ = [
    "BenchmarkSession",
    "BenchmarkSessions",
    "ConnectionRecord",
    "Journal",
    "PatienceViolation",
    "RequestRecord",
    "Sidecar",
    "SidecarError",
    "Tool",
    "ToolResultError",
]
