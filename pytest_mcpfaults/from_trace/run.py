"""A trace's replay as an explore run: :class:`TraceRun`, whose plan is the inferred (step, fault)
pairs and whose id is ``from-trace:<trace id>`` (``…:plan2`` for the next plan tried), so explore's
items, oracles, verdicts and report apply to it unchanged; :func:`trace_run` builds one from a plan's
fault texts. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_mcpfaults.explore.plan import Run
from pytest_mcpfaults.faults.text import parse_fault

__all__ = ["TraceRun", "trace_run"]


@dataclass(frozen=True)
class TraceRun(Run):
    """One plan inferred from a trace, replayed: ``attempt`` counts the plans tried (1: the first)."""

    trace_id: str = ""
    attempt: int = 1

    @property
    def id(self) -> str:
        return f"from-trace:{self.trace_id}" + (f":plan{self.attempt}" if self.attempt > 1 else "")


def trace_run(trace_id: str, plan: Sequence[str], attempt: int = 1) -> TraceRun:
    """The run of ``plan`` (fault texts, each aimed at one request: ``die@tool:x[nth=1]``); each
    fault's step is its trigger's request as explore names it (``tool:x#1``)."""
    pairs = []
    for text in plan:
        fault = parse_fault(text)
        when = fault.trigger
        pairs.append((f"{when.target}#{when.nth or 1}", fault))
    return TraceRun(tuple(pairs), trace_id, attempt)
