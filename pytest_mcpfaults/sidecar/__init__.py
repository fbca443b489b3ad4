"""The fake MCP sidecar: a real aiohttp server on loopback, hosted on one process-wide loop thread.

The names below are loaded on first use (as the top-level package's are): importing one of this
package's modules (``sidecar.journal``, say) must not import the server, which imports the OTLP
receiver, which imports ``sidecar.journal``: an import cycle through this ``__init__``. Where each name
lives is its import under ``TYPE_CHECKING`` (read by :func:`~pytest_mcpfaults.lazy.lazy_exports`).
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

__getattr__, __dir__ = lazy_exports(globals())
