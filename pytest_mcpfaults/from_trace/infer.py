"""The faults that replay a trace against a clean run: :func:`infer`. Pure.

Each span of the trace that failed or never ended, but for the session spans (the symptom, not a
cause), is matched to a clean-run span; the request made inside that one is where its fault goes, and
what the span recorded says which fault. A failed span with a failed span beneath it *follows* from that
one; a failed span with no request inside it is *not reproducible by the sidecar* (the agent's own
timeout, say). When several requests or kinds fit, the first is planned and the others are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.explore.plan import Run
from pytest_mcpfaults.from_trace.classify import MAX_READ, Candidate, classify, span_text
from pytest_mcpfaults.from_trace.footprint import Call, CleanRun
from pytest_mcpfaults.from_trace.match import match_span, places
from pytest_mcpfaults.from_trace.trace import Trace
from pytest_mcpfaults.spans.queries import DEFAULT_SESSION, Patterns, as_patterns, matches
from pytest_mcpfaults.spans.records import RecordedSpan

#: Faults listed at most for one span (requests × kinds that fit).
MAX_CANDIDATES = 6
#: Plans :meth:`Inferred.plans` gives at most: the planned one, then one other candidate at a time.
MAX_PLANS = 8
#: Characters of a span's recorded text quoted in a reason.
QUOTED = 120

Outcome = Literal["mapped", "ambiguous", "unmatched", "not_reproducible", "follows"]


@dataclass(frozen=True)
class SpanNames:
    """The span-name globs the gate uses that from-trace reads (its ``session`` setting)."""

    session: tuple[str, ...] = DEFAULT_SESSION

    @classmethod
    def of(cls, session: Patterns = DEFAULT_SESSION) -> SpanNames:
        return cls(as_patterns(session))


@dataclass(frozen=True)
class Inference:
    """What one failed span became: ``faults`` (the first planned, the others candidates), its step, why."""

    span: RecordedSpan
    outcome: Outcome
    reason: str
    faults: tuple[str, ...] = ()
    step: str | None = None


@dataclass(frozen=True)
class Inferred:
    """Everything inferred from one trace, per failed span in start order; ``symptoms``: the session
    spans that failed."""

    trace_id: str
    inferences: tuple[Inference, ...]
    symptoms: tuple[RecordedSpan, ...] = ()

    @property
    def plan(self) -> tuple[str, ...]:
        """The faults planned: the first of each span that maps to a request."""
        return tuple(i.faults[0] for i in self.inferences if i.faults)

    def plans(self) -> list[tuple[str, ...]]:
        """:attr:`plan`, then it with one span's fault swapped for another candidate (:data:`MAX_PLANS`)."""
        base = self.plan
        out = [base]
        for n, inf in enumerate(i for i in self.inferences if i.faults):
            out += [(*base[:n], other, *base[n + 1 :]) for other in inf.faults[1:]]
        return out[:MAX_PLANS]


def infer(trace: Trace, clean: CleanRun, names: SpanNames = SpanNames(), budget: float = 5.0) -> Inferred:
    """The faults that replay ``trace``'s MCP failures against ``clean``; a held request is held for
    ``budget`` seconds."""
    failing = [s for s in trace.spans if s.failed or not s.end_time]
    symptoms = tuple(s for s in failing if matches(s.name, names.session))
    causes = [s for s in failing if not matches(s.name, names.session)]
    below = _failing_below(trace, causes)
    tp, cp = places(trace, names.session), places(clean.trace, names.session)
    out = []
    for span in causes:
        if span.span_id in below:
            child = below[span.span_id]
            out.append(Inference(span, "follows", f"{_who(span)} follows from {_who(child)} beneath it"))
            continue
        found = match_span(span, tp, cp, names.session)
        if found.span is None:
            n = len(cp.named.get(span.name, []))
            there = (
                f"it has {n} span{'s' if n != 1 else ''} named {span.name!r}"
                if n
                else f"no span named {span.name!r} there"
            )
            why = f"{_who(span)} matches no span of the clean run ({there}, at no place matching the trace's)"
            out.append(Inference(span, "unmatched", why))
            continue
        calls = _calls_inside(clean, found.span)
        if not calls:
            why = (
                f"{_who(span)} recorded {_quote(span)}, but the clean run made no MCP request inside "
                f"{span.name}: a failure outside MCP, not reproducible by the sidecar"
            )
            out.append(Inference(span, "not_reproducible", why))
            continue
        out.append(_at_calls(span, calls, found.how, budget))
    return Inferred(trace.trace_id_hex, tuple(out), symptoms)


def _failing_below(trace: Trace, failing: list[RecordedSpan]) -> dict[int, RecordedSpan]:
    out: dict[int, RecordedSpan] = {}
    for span in failing:
        node = trace.parent(span)
        while node is not None and node.span_id not in out:
            out[node.span_id] = span
            node = trace.parent(node)
    return out


def _calls_inside(clean: CleanRun, span: RecordedSpan) -> list[Call]:
    """The requests made inside ``span`` or beneath it (a client instrumented under pytest makes each
    call inside a span of its own that the trace need not have)."""
    inside: set[int] = set()
    stack = [span]
    while stack:
        node = stack.pop()
        inside.add(node.span_id)
        stack += clean.trace.children.get(node.span_id, [])
    return [c for c in clean.calls if c.span in inside]


def _at_calls(span: RecordedSpan, calls: list[Call], how: str, budget: float) -> Inference:
    """The faults at the requests inside the span's match, likeliest first, at most :data:`MAX_CANDIDATES`."""
    texts: list[tuple[str, Call, Candidate]] = []
    kinds: dict[bool, list[Candidate]] = {}  # classified once for a tool call, once for another request
    for call in _ranked(calls):
        tool_call = call.target.startswith("tool:")
        if tool_call not in kinds:
            kinds[tool_call] = classify(span, tool_call, budget)
        for cand in kinds[tool_call]:
            text = _fault(cand, call)
            if text is not None and len(texts) < MAX_CANDIDATES:
                texts.append((text, call, cand))
    if not texts:
        why = f"{_who(span)} recorded {_quote(span)}: no catalogue fault fits its request(s) " + ", ".join(
            c.step for c in calls
        )
        return Inference(span, "unmatched", why)
    _, call, cand = texts[0]
    where = "the request made inside that span in the clean run"
    if len(calls) > 1:
        listed = ", ".join(c.step for c in calls[:MAX_CANDIDATES]) + (
            ", …" if len(calls) > MAX_CANDIDATES else ""
        )
        where = (
            f"the likeliest of the {len(calls)} requests made inside that span in the clean run ({listed})"
        )
    if how == "name":
        where += f" (matched by name only: the clean run has no {span.name} at the trace's place)"
    reason = f"{_who(span)} recorded {_quote(span)}{_cut(span)} → {cand.kind} at {call.step}, {where}"
    if cand.why:
        reason += f"; {cand.why}"
    if len(texts) > 1:
        reason += "; also fits: " + ", ".join(t for t, _, _ in texts[1:])
    outcome: Outcome = "ambiguous" if len(texts) > 1 else "mapped"
    return Inference(span, outcome, reason, tuple(t for t, _, _ in texts), call.step)


#: Requests of the protocol's own housekeeping: a failure is likelier at the call a span was for.
_HOUSEKEEPING = ("initialize", "notifications/", "DELETE ", "GET ", "health", "ping")


def _ranked(calls: list[Call]) -> list[Call]:
    """The requests by how likely a span's failure came from each: those for its own purpose (a tool,
    prompt or resource, else another MCP method) before housekeeping; the later first (its failure
    ended the span)."""

    def purpose(call: Call) -> int:
        own = call.target.startswith(("tool:", "prompt:", "resource:"))
        return 0 if own else 2 if call.target.startswith(_HOUSEKEEPING) else 1

    return sorted(reversed(calls), key=purpose)  # a stable sort: the later first within each


def _fault(cand: Candidate, call: Call) -> str | None:
    try:  # classify's kinds are built-in
        return str(F.fault_kinds()[cand.kind](**cand.params, when=F.Trigger(call.target, nth=call.nth)))
    except (TypeError, ValueError):
        return None


def _who(span: RecordedSpan) -> str:
    return f"{span.name} (span {span.span_id_hex})"


def _cut(span: RecordedSpan) -> str:
    """What of a text over :data:`~pytest_mcpfaults.from_trace.classify.MAX_READ` characters was read."""
    n = len(span_text(span))
    return f" (of its {n} characters, the first and last {MAX_READ // 2} read)" if n > MAX_READ else ""


def _quote(span: RecordedSpan) -> str:
    if not span.end_time:
        return "no end (the span never ended)"
    text = span_text(span) or f"status {span.status_code} with no description"
    if len(text) > QUOTED:  # its start (the exception type) and its end (what went wrong)
        text = text[: QUOTED // 3] + " … " + text[-(QUOTED - QUOTED // 3) :]
    return repr(text)


@dataclass(frozen=True)
class TraceRun(Run):
    """A trace's plan replayed as an explore run (so explore's items, oracles, verdicts and report apply
    to it unchanged): ``attempt`` counts the plans tried (1: the first)."""

    trace_id: str = ""
    attempt: int = 1

    @property
    def id(self) -> str:
        return f"from-trace:{self.trace_id}" + (f":plan{self.attempt}" if self.attempt > 1 else "")

    @classmethod
    def of(cls, trace_id: str, plan: Sequence[str], attempt: int = 1) -> TraceRun:
        """The run of ``plan`` (fault texts, each aimed at one request: ``die@tool:x[nth=1]``); each
        fault's step is its trigger's request as explore names it (``tool:x#1``)."""
        from pytest_mcpfaults.faults.text import parse_fault

        faults = [parse_fault(text) for text in plan]
        return cls(tuple((f"{f.trigger.target}#{f.trigger.nth or 1}", f) for f in faults), trace_id, attempt)
