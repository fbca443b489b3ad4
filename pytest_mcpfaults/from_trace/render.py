"""What was inferred, as text (:func:`inferred_lines`), and as a standalone regression test
(:func:`regression_test`): the plan as an ``mcp_sidecar`` marker on the user's clean test. Pure."""

from __future__ import annotations

import textwrap
from collections.abc import Sized

from pytest_mcpfaults.from_trace.infer import Inferred

#: Symptoms, and spans not mapped, listed at most each (the count says how many more).
MAX_LISTED = 10


def inferred_lines(inferred: Inferred, source: str) -> list[str]:
    """Span → request → fault for each span mapped, then what could not be mapped, then the plan."""
    out = [f"trace {inferred.trace_id} ({source})"]
    for span in inferred.symptoms[:MAX_LISTED]:
        desc = f": {span.status_description[:118]}" if span.status_description else ""
        out.append(f"symptom: {span.name} (span {span.span_id_hex}) {span.status_code}{desc}")
    out += _more(inferred.symptoms, "symptoms")
    mapped = [i for i in inferred.inferences if i.faults]
    rest = [i for i in inferred.inferences if not i.faults]
    if not inferred.inferences:
        out.append("no span of the trace failed but the session spans: nothing to replay")
    for n, inf in enumerate(mapped, 1):
        out.append(f"{n}. {inf.span.name} (span {inf.span.span_id_hex}) → {inf.step} → {inf.faults[0]}")
        out.append(f"   {inf.reason}")
        if inf.outcome == "ambiguous":
            out.append(
                f"   several faults fit ({len(inf.faults)}); the first is planned, the others are tried next"
            )
    if rest:
        out.append("not mapped:")
        out += [f"- [{i.outcome.replace('_', ' ')}] {i.reason}" for i in rest[:MAX_LISTED]]
        out += _more(rest, "spans not mapped")
    if mapped:
        out.append(
            "plan: @pytest.mark.mcp_sidecar(faults=[" + ", ".join(repr(f) for f in inferred.plan) + "])"
        )
    return out


def _more(items: Sized, what: str) -> list[str]:
    return [f"… and {len(items) - MAX_LISTED} more {what}"] if len(items) > MAX_LISTED else []


#: What a module :func:`regression_test` wrote says of itself (``--write`` overwrites only those).
WRITTEN_BY = "written by ``python -m pytest_mcpfaults from-trace``"


def regression_test(inferred: Inferred, source: str, module: str, test: str, name: str) -> str:
    """A test module whose test ``name`` runs ``module``'s test ``test`` under the inferred plan."""
    why = "\n".join(
        textwrap.fill(i.reason, 100, initial_indent="# ", subsequent_indent="#   ")
        for i in inferred.inferences
        if i.faults
    )
    plan = "".join(f"    {f!r},\n" for f in inferred.plan)
    shown = source.replace("\\", "\\\\").replace('"', '\\"')  # as the docstring's text, whatever it holds
    return f'''"""Regression test from trace {inferred.trace_id} ({shown}),
{WRITTEN_BY}: {module}::{test} under the faults the trace
recorded (its own assertions of a clean run are behaviour under fault; a span invariant fails it)."""

from pytest_mcpfaults.from_trace.regression import replay

{why}
PLAN = [
{plan}]

{name} = replay({module!r}, {test!r}, PLAN, globals())
'''
