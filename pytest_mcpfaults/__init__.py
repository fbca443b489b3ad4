"""pytest-mcpfaults: test agent harnesses against fault-injected MCP sidecars.

Public names are imported lazily (on first attribute access), so loading the pytest plugin costs
almost nothing in a run that never uses it. This module imports neither pytest, hypothesis nor respx.

The imports under ``TYPE_CHECKING`` are the one list of where each public name lives: type checkers
read them, and :func:`~pytest_mcpfaults.lazy.lazy_exports` reads them from this file's source. The
fault kinds are imported from :mod:`pytest_mcpfaults.faults` (``from pytest_mcpfaults.faults import
Stall``); they, ``Fault`` and ``fault_kinds`` (the star-imported module's ``__all__``) also resolve
here, for type checkers too, without being in this ``__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mcpfaults.lazy import lazy_exports

if TYPE_CHECKING:
    from pytest_mcpfaults.core.errors import SidecarError
    from pytest_mcpfaults.core.journal import Journal
    from pytest_mcpfaults.core.records import (
        CancellationRecord,
        ConnectionRecord,
        RequestRecord,
        ServerMessageRecord,
        StreamRecord,
    )
    from pytest_mcpfaults.faults import Trigger, fault_from_dict, format_plan, parse_fault, parse_plan
    from pytest_mcpfaults.faults.kinds import *  # noqa: F403  (the kinds: resolved, not in __all__)
    from pytest_mcpfaults.invariants import SpanInvariantError, check_all, cleanup_never_flips
    from pytest_mcpfaults.mcp.outbound import ClientRequestError, ToolContext
    from pytest_mcpfaults.mcp.surface import Prompt, PromptArgument, Resource, ResourceTemplate
    from pytest_mcpfaults.mcp.tools import Tool, ToolContent, ToolResultError
    from pytest_mcpfaults.mcp.worker_calls import SyncToolContext
    from pytest_mcpfaults.proxy.cassette import Cassette, read_cassette
    from pytest_mcpfaults.spans.recorder import SpanRecorder, install_recorder
    from pytest_mcpfaults.spans.records import RecordedSpan
    from pytest_mcpfaults.stdio.records import ChildRecord, SignalRecord, StdioViolation
    from pytest_mcpfaults.stdio.server import StdioServer
    from pytest_mcpfaults.transports.factory import SidecarFactory
    from pytest_mcpfaults.transports.server import Sidecar
    from pytest_mcpfaults.verdicts.harness_process import HarnessProcess, HarnessProcessError
    from pytest_mcpfaults.verdicts.patience import PatienceError
    from pytest_mcpfaults.verdicts.violation import PatienceViolation

__version__ = "0.1.0"

__all__ = [
    "CancellationRecord",
    "Cassette",
    "ChildRecord",
    "ClientRequestError",
    "ConnectionRecord",
    "HarnessProcess",
    "HarnessProcessError",
    "Journal",
    "PatienceError",
    "PatienceViolation",
    "Prompt",
    "PromptArgument",
    "RecordedSpan",
    "RequestRecord",
    "Resource",
    "ResourceTemplate",
    "ServerMessageRecord",
    "Sidecar",
    "SidecarError",
    "SidecarFactory",
    "SignalRecord",
    "SpanInvariantError",
    "SpanRecorder",
    "StdioServer",
    "StdioViolation",
    "StreamRecord",
    "SyncToolContext",
    "Tool",
    "ToolContent",
    "ToolContext",
    "ToolResultError",
    "Trigger",
    "check_all",
    "cleanup_never_flips",
    "fault_from_dict",
    "format_plan",
    "install_recorder",
    "parse_fault",
    "parse_plan",
    "read_cassette",
]

__getattr__, __dir__ = lazy_exports(globals())
