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
    from pytest_mcpfaults.cassette import Cassette, read_cassette
    from pytest_mcpfaults.fault_types import *  # noqa: F403  (the kinds: resolved, not in __all__)
    from pytest_mcpfaults.faults import Trigger, fault_from_dict, format_plan, parse_fault, parse_plan
    from pytest_mcpfaults.invariants import SpanInvariantError, check_all, cleanup_never_flips
    from pytest_mcpfaults.sidecar.errors import SidecarError
    from pytest_mcpfaults.sidecar.factory import SidecarFactory
    from pytest_mcpfaults.sidecar.harness_process import HarnessProcess, HarnessProcessError
    from pytest_mcpfaults.sidecar.journal import Journal
    from pytest_mcpfaults.sidecar.outbound import ClientRequestError, ToolContext
    from pytest_mcpfaults.sidecar.patience import PatienceError
    from pytest_mcpfaults.sidecar.records import (
        CancellationRecord,
        ConnectionRecord,
        RequestRecord,
        ServerMessageRecord,
        StreamRecord,
    )
    from pytest_mcpfaults.sidecar.server import Sidecar
    from pytest_mcpfaults.sidecar.surface import Prompt, PromptArgument, Resource, ResourceTemplate
    from pytest_mcpfaults.sidecar.tools import Tool, ToolContent, ToolResultError
    from pytest_mcpfaults.sidecar.violation import PatienceViolation
    from pytest_mcpfaults.sidecar.worker_calls import SyncToolContext
    from pytest_mcpfaults.spans import RecordedSpan, SpanRecorder, install_recorder
    from pytest_mcpfaults.stdio.records import ChildRecord, SignalRecord, StdioViolation
    from pytest_mcpfaults.stdio.server import StdioServer

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
