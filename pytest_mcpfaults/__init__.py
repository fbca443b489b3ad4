"""pytest-mcpfaults: test agent harnesses against fault-injected MCP sidecars.

Public names are imported lazily (on first attribute access), so loading the pytest plugin costs
almost nothing in a run that never uses it. This module imports neither pytest, hypothesis nor respx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mcpfaults.lazy import lazy_exports

if TYPE_CHECKING:
    from pytest_mcpfaults import fault_types as _fault_types
    from pytest_mcpfaults.cassette import (
        Cassette as Cassette,
    )
    from pytest_mcpfaults.cassette import (
        CassetteError as CassetteError,
    )
    from pytest_mcpfaults.cassette import (
        Exchange as Exchange,
    )
    from pytest_mcpfaults.cassette import (
        read_cassette as read_cassette,
    )
    from pytest_mcpfaults.fault_types import *  # noqa: F403  (the kinds, Fault, fault_kinds)
    from pytest_mcpfaults.faults import (
        Trigger as Trigger,
    )
    from pytest_mcpfaults.faults import (
        fault_from_dict as fault_from_dict,
    )
    from pytest_mcpfaults.faults import (
        format_plan as format_plan,
    )
    from pytest_mcpfaults.faults import (
        parse_fault as parse_fault,
    )
    from pytest_mcpfaults.faults import (
        parse_plan as parse_plan,
    )
    from pytest_mcpfaults.invariants import (
        SpanInvariantError as SpanInvariantError,
    )
    from pytest_mcpfaults.invariants import (
        Violation as Violation,
    )
    from pytest_mcpfaults.invariants import (
        all_spans_ended as all_spans_ended,
    )
    from pytest_mcpfaults.invariants import (
        check_all as check_all,
    )
    from pytest_mcpfaults.invariants import (
        cleanup_at_most as cleanup_at_most,
    )
    from pytest_mcpfaults.invariants import (
        cleanup_never_flips as cleanup_never_flips,
    )
    from pytest_mcpfaults.invariants import (
        format_violations as format_violations,
    )
    from pytest_mcpfaults.sidecar import (
        BenchmarkSession as BenchmarkSession,
    )
    from pytest_mcpfaults.sidecar import (
        BenchmarkSessions as BenchmarkSessions,
    )
    from pytest_mcpfaults.sidecar import (
        CancellationRecord as CancellationRecord,
    )
    from pytest_mcpfaults.sidecar import (
        ClientRequestError as ClientRequestError,
    )
    from pytest_mcpfaults.sidecar import (
        ConnectionRecord as ConnectionRecord,
    )
    from pytest_mcpfaults.sidecar import (
        Journal as Journal,
    )
    from pytest_mcpfaults.sidecar import (
        PatienceViolation as PatienceViolation,
    )
    from pytest_mcpfaults.sidecar import (
        Prompt as Prompt,
    )
    from pytest_mcpfaults.sidecar import (
        PromptArgument as PromptArgument,
    )
    from pytest_mcpfaults.sidecar import (
        RequestRecord as RequestRecord,
    )
    from pytest_mcpfaults.sidecar import (
        Resource as Resource,
    )
    from pytest_mcpfaults.sidecar import (
        ResourceTemplate as ResourceTemplate,
    )
    from pytest_mcpfaults.sidecar import (
        ServerMessageRecord as ServerMessageRecord,
    )
    from pytest_mcpfaults.sidecar import (
        Sidecar as Sidecar,
    )
    from pytest_mcpfaults.sidecar import (
        SidecarError as SidecarError,
    )
    from pytest_mcpfaults.sidecar import (
        StreamRecord as StreamRecord,
    )
    from pytest_mcpfaults.sidecar import (
        SyncToolContext as SyncToolContext,
    )
    from pytest_mcpfaults.sidecar import (
        Tool as Tool,
    )
    from pytest_mcpfaults.sidecar import (
        ToolContent as ToolContent,
    )
    from pytest_mcpfaults.sidecar import (
        ToolContext as ToolContext,
    )
    from pytest_mcpfaults.sidecar import (
        ToolResultError as ToolResultError,
    )
    from pytest_mcpfaults.sidecar.factory import (
        SidecarFactory as SidecarFactory,
    )
    from pytest_mcpfaults.sidecar.harness_process import (
        HarnessProcess as HarnessProcess,
    )
    from pytest_mcpfaults.sidecar.harness_process import (
        HarnessProcessError as HarnessProcessError,
    )
    from pytest_mcpfaults.spans import (
        RecordedEvent as RecordedEvent,
    )
    from pytest_mcpfaults.spans import (
        RecordedSpan as RecordedSpan,
    )
    from pytest_mcpfaults.spans import (
        SpanLookupError as SpanLookupError,
    )
    from pytest_mcpfaults.spans import (
        SpanRecorder as SpanRecorder,
    )
    from pytest_mcpfaults.spans import (
        SpanWiringWarning as SpanWiringWarning,
    )
    from pytest_mcpfaults.spans import (
        find_spans as find_spans,
    )
    from pytest_mcpfaults.spans import (
        format_tree as format_tree,
    )
    from pytest_mcpfaults.spans import (
        global_recorder as global_recorder,
    )
    from pytest_mcpfaults.spans import (
        install_recorder as install_recorder,
    )
    from pytest_mcpfaults.spans import (
        one_span as one_span,
    )
    from pytest_mcpfaults.stdio.records import (
        ChildRecord as ChildRecord,
    )
    from pytest_mcpfaults.stdio.records import (
        SignalRecord as SignalRecord,
    )
    from pytest_mcpfaults.stdio.records import (
        StdioViolation as StdioViolation,
    )
    from pytest_mcpfaults.stdio.server import (
        StdioServer as StdioServer,
    )

__version__ = "0.1.0"

#: The public names, then the fault kinds (``fault_types.__all__``): those are added on first use of
#: ``__all__`` or of a kind, so that a new kind is exported without being listed here, and importing
#: the package stays cheap.
__all__ = [
    "BenchmarkSession",
    "BenchmarkSessions",
    "CancellationRecord",
    "Cassette",
    "CassetteError",
    "ChildRecord",
    "ClientRequestError",
    "ConnectionRecord",
    "Exchange",
    "HarnessProcess",
    "HarnessProcessError",
    "Journal",
    "PatienceViolation",
    "Prompt",
    "PromptArgument",
    "RecordedEvent",
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
    "SpanLookupError",
    "SpanRecorder",
    "SpanWiringWarning",
    "StdioServer",
    "StdioViolation",
    "StreamRecord",
    "SyncToolContext",
    "Tool",
    "ToolContent",
    "ToolContext",
    "ToolResultError",
    "Trigger",
    "Violation",
    "all_spans_ended",
    "check_all",
    "cleanup_at_most",
    "cleanup_never_flips",
    "fault_from_dict",
    "find_spans",
    "format_plan",
    "format_tree",
    "format_violations",
    "global_recorder",
    "install_recorder",
    "one_span",
    "parse_fault",
    "parse_plan",
    "read_cassette",
]

_EXPORTS: dict[str, str] = {
    "Cassette": "pytest_mcpfaults.cassette",
    "CassetteError": "pytest_mcpfaults.cassette",
    "Exchange": "pytest_mcpfaults.cassette",
    "read_cassette": "pytest_mcpfaults.cassette",
    "Trigger": "pytest_mcpfaults.faults",
    "fault_from_dict": "pytest_mcpfaults.faults",
    "fault_kinds": "pytest_mcpfaults.faults",
    "format_plan": "pytest_mcpfaults.faults",
    "parse_fault": "pytest_mcpfaults.faults",
    "parse_plan": "pytest_mcpfaults.faults",
    "SpanInvariantError": "pytest_mcpfaults.invariants",
    "Violation": "pytest_mcpfaults.invariants",
    "all_spans_ended": "pytest_mcpfaults.invariants",
    "check_all": "pytest_mcpfaults.invariants",
    "cleanup_at_most": "pytest_mcpfaults.invariants",
    "cleanup_never_flips": "pytest_mcpfaults.invariants",
    "format_violations": "pytest_mcpfaults.invariants",
    "BenchmarkSession": "pytest_mcpfaults.sidecar",
    "BenchmarkSessions": "pytest_mcpfaults.sidecar",
    "CancellationRecord": "pytest_mcpfaults.sidecar",
    "ClientRequestError": "pytest_mcpfaults.sidecar",
    "ConnectionRecord": "pytest_mcpfaults.sidecar",
    "Journal": "pytest_mcpfaults.sidecar",
    "PatienceViolation": "pytest_mcpfaults.sidecar",
    "RequestRecord": "pytest_mcpfaults.sidecar",
    "ServerMessageRecord": "pytest_mcpfaults.sidecar",
    "Sidecar": "pytest_mcpfaults.sidecar",
    "SidecarError": "pytest_mcpfaults.sidecar",
    "StreamRecord": "pytest_mcpfaults.sidecar",
    "Tool": "pytest_mcpfaults.sidecar",
    "ToolContext": "pytest_mcpfaults.sidecar",
    "ToolResultError": "pytest_mcpfaults.sidecar",
    "ToolContent": "pytest_mcpfaults.sidecar",
    "SyncToolContext": "pytest_mcpfaults.sidecar",
    "Prompt": "pytest_mcpfaults.sidecar",
    "PromptArgument": "pytest_mcpfaults.sidecar",
    "Resource": "pytest_mcpfaults.sidecar",
    "ResourceTemplate": "pytest_mcpfaults.sidecar",
    "SidecarFactory": "pytest_mcpfaults.sidecar.factory",
    "HarnessProcess": "pytest_mcpfaults.sidecar.harness_process",
    "HarnessProcessError": "pytest_mcpfaults.sidecar.harness_process",
    "StdioServer": "pytest_mcpfaults.stdio.server",
    "ChildRecord": "pytest_mcpfaults.stdio.records",
    "SignalRecord": "pytest_mcpfaults.stdio.records",
    "StdioViolation": "pytest_mcpfaults.stdio.records",
    "RecordedEvent": "pytest_mcpfaults.spans",
    "RecordedSpan": "pytest_mcpfaults.spans",
    "SpanLookupError": "pytest_mcpfaults.spans",
    "SpanRecorder": "pytest_mcpfaults.spans",
    "SpanWiringWarning": "pytest_mcpfaults.spans",
    "find_spans": "pytest_mcpfaults.spans",
    "format_tree": "pytest_mcpfaults.spans",
    "global_recorder": "pytest_mcpfaults.spans",
    "install_recorder": "pytest_mcpfaults.spans",
    "one_span": "pytest_mcpfaults.spans",
}


_PUBLIC = list(__all__)
if TYPE_CHECKING:
    __all__ += _fault_types.__all__
else:
    del __all__  # made on first use, with the kinds (see lazy_exports)

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, public=_PUBLIC, more="pytest_mcpfaults.fault_types")
