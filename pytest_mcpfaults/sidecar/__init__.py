"""The fake MCP sidecar: a real aiohttp server on loopback, hosted on one process-wide loop thread.

The names below are loaded on first use (as the top-level package's are): importing one of this
package's modules (``sidecar.journal``, say) must not import the server, which imports the OTLP
receiver, which imports ``sidecar.journal``: an import cycle through this ``__init__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mcpfaults.lazy import lazy_exports

if TYPE_CHECKING:
    from pytest_mcpfaults.sidecar.errors import SidecarError as SidecarError
    from pytest_mcpfaults.sidecar.journal import Journal as Journal
    from pytest_mcpfaults.sidecar.outbound import ClientRequestError as ClientRequestError
    from pytest_mcpfaults.sidecar.outbound import ToolContext as ToolContext
    from pytest_mcpfaults.sidecar.records import CancellationRecord as CancellationRecord
    from pytest_mcpfaults.sidecar.records import ConnectionRecord as ConnectionRecord
    from pytest_mcpfaults.sidecar.records import RequestRecord as RequestRecord
    from pytest_mcpfaults.sidecar.records import ServerMessageRecord as ServerMessageRecord
    from pytest_mcpfaults.sidecar.records import StreamRecord as StreamRecord
    from pytest_mcpfaults.sidecar.server import Sidecar as Sidecar
    from pytest_mcpfaults.sidecar.surface import Prompt as Prompt
    from pytest_mcpfaults.sidecar.surface import PromptArgument as PromptArgument
    from pytest_mcpfaults.sidecar.surface import Resource as Resource
    from pytest_mcpfaults.sidecar.surface import ResourceTemplate as ResourceTemplate
    from pytest_mcpfaults.sidecar.tools import BenchmarkSession as BenchmarkSession
    from pytest_mcpfaults.sidecar.tools import BenchmarkSessions as BenchmarkSessions
    from pytest_mcpfaults.sidecar.tools import Tool as Tool
    from pytest_mcpfaults.sidecar.tools import ToolContent as ToolContent
    from pytest_mcpfaults.sidecar.tools import ToolResultError as ToolResultError
    from pytest_mcpfaults.sidecar.violation import PatienceViolation as PatienceViolation
    from pytest_mcpfaults.sidecar.worker_calls import SyncToolContext as SyncToolContext

__all__ = [
    "BenchmarkSession",
    "BenchmarkSessions",
    "CancellationRecord",
    "ClientRequestError",
    "ConnectionRecord",
    "Journal",
    "PatienceViolation",
    "Prompt",
    "PromptArgument",
    "RequestRecord",
    "Resource",
    "ResourceTemplate",
    "ServerMessageRecord",
    "Sidecar",
    "SidecarError",
    "StreamRecord",
    "SyncToolContext",
    "Tool",
    "ToolContent",
    "ToolContext",
    "ToolResultError",
]

_EXPORTS: dict[str, str] = {
    "BenchmarkSession": "pytest_mcpfaults.sidecar.tools",
    "BenchmarkSessions": "pytest_mcpfaults.sidecar.tools",
    "CancellationRecord": "pytest_mcpfaults.sidecar.records",
    "ClientRequestError": "pytest_mcpfaults.sidecar.outbound",
    "ConnectionRecord": "pytest_mcpfaults.sidecar.records",
    "Journal": "pytest_mcpfaults.sidecar.journal",
    "PatienceViolation": "pytest_mcpfaults.sidecar.violation",
    "RequestRecord": "pytest_mcpfaults.sidecar.records",
    "ServerMessageRecord": "pytest_mcpfaults.sidecar.records",
    "Sidecar": "pytest_mcpfaults.sidecar.server",
    "SidecarError": "pytest_mcpfaults.sidecar.errors",
    "StreamRecord": "pytest_mcpfaults.sidecar.records",
    "Tool": "pytest_mcpfaults.sidecar.tools",
    "ToolContext": "pytest_mcpfaults.sidecar.outbound",
    "ToolResultError": "pytest_mcpfaults.sidecar.tools",
    "ToolContent": "pytest_mcpfaults.sidecar.tools",
    "SyncToolContext": "pytest_mcpfaults.sidecar.worker_calls",
    "Prompt": "pytest_mcpfaults.sidecar.surface",
    "PromptArgument": "pytest_mcpfaults.sidecar.surface",
    "Resource": "pytest_mcpfaults.sidecar.surface",
    "ResourceTemplate": "pytest_mcpfaults.sidecar.surface",
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
