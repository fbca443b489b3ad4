"""pytest-mcpfaults: test agent harnesses against fault-injected MCP sidecars.

Public names are imported lazily (on first attribute access), so loading the pytest plugin costs
almost nothing in a run that never uses it. This module imports neither pytest, hypothesis nor respx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_mcpfaults.faults import (
        Absent,
        BackendGone,
        Delay,
        Die,
        Drip,
        EndlessSse,
        Fault,
        Flap,
        Freeze,
        Hang,
        JsonRpcError,
        MalformedJson,
        Reset,
        SessionExpired,
        Stall,
        Status,
        Terminating,
        ToolError,
        Trigger,
        Truncate,
        fault_from_dict,
        fault_kinds,
        format_plan,
        parse_fault,
        parse_plan,
    )
    from pytest_mcpfaults.sidecar import (
        BenchmarkSession,
        BenchmarkSessions,
        ConnectionRecord,
        Journal,
        PatienceViolation,
        RequestRecord,
        Sidecar,
        SidecarError,
        Tool,
        ToolResultError,
    )
    from pytest_mcpfaults.sidecar.factory import SidecarFactory

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        [
            "Absent", "BackendGone", "Delay", "Die", "Drip", "EndlessSse", "Fault", "Flap", "Freeze", "Hang",
            "JsonRpcError", "MalformedJson", "Reset", "SessionExpired", "Stall", "Status", "Terminating",
            "ToolError", "Trigger", "Truncate", "fault_from_dict", "fault_kinds", "format_plan", "parse_fault",
            "parse_plan",
        ],
        "pytest_mcpfaults.faults",
    ),
    **dict.fromkeys(
        [
            "BenchmarkSession", "BenchmarkSessions", "ConnectionRecord", "Journal", "PatienceViolation",
            "RequestRecord", "Sidecar", "SidecarError", "Tool", "ToolResultError",
        ],
        "pytest_mcpfaults.sidecar",
    ),
    "SidecarFactory": "pytest_mcpfaults.sidecar.factory",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_mcpfaults' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
