"""Faults and triggers as data: frozen, comparable, printable, serialisable; no I/O.

A *fault* says how a request is answered; its *trigger* (``when=``) says which requests. Faults are
plain frozen dataclasses, so plans compare, hash and print, and the CI report and the command line
read and write them in one text form (:func:`parse_fault` is the inverse of ``str(fault)``)::

    Stall(after_bytes=0, when="tools/call")           # str: stall(after_bytes=0)@tools/call
    Status(502, when=Trigger("health", times=3))      # str: status(code=502)@health[times=3]
    BackendGone()                                     # str: backend_gone
    ErrorPayload(reason="backend timed out")          # str: error_payload

Triggers count requests, never wall-clock time, so a run is reproducible.
"""

from __future__ import annotations

from pytest_mcpfaults.faults import kinds as fault_types
from pytest_mcpfaults.faults.kinds import *  # noqa: F403  (every kind, Fault, fault_kinds: fault_types.__all__)
from pytest_mcpfaults.faults.kinds import (
    KIND_NAME,
    Draw,
    check_kind_names,
    check_transport,
    unregister_fault_kind,
)
from pytest_mcpfaults.faults.text import as_plan, fault_from_dict, format_plan, parse_fault, parse_plan
from pytest_mcpfaults.faults.triggers import MCP_METHODS, Trigger, TriggerState, check_target

__all__ = [
    "KIND_NAME",
    "MCP_METHODS",
    "Draw",
    "Trigger",
    "TriggerState",
    "as_plan",
    "check_kind_names",
    "check_target",
    "check_transport",
    "fault_from_dict",
    "format_plan",
    "parse_fault",
    "parse_plan",
    "unregister_fault_kind",
]
__all__ += fault_types.__all__  # the kinds, read from the module that defines them
