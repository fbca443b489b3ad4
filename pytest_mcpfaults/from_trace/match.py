"""Trace spans to clean-run spans, by name and parentage: :func:`match_span`.

A span's *place* is its path of names from the nearest session span (a span the session patterns
match, whatever its name: the trace's ``Agent.Session`` and a test's ``bench.session`` are the same
place when both are session spans), each step with its occurrence among its siblings of that name in
start order: ``(session #1) / MCP.DeleteSession #2``. A span outside any session has its path from its
root. Two spans match when their places are equal; a span whose place the clean run does not have
matches the clean span of its name with the same occurrence in start order, *by name only*, and is
said so; the trace's third span of a name matches nothing in a clean run with two. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults.from_trace.trace import Trace
from pytest_mcpfaults.spans.queries import Patterns, as_patterns, matches
from pytest_mcpfaults.spans.records import RecordedSpan

SESSION = "<session>"
Place = tuple[tuple[str, int], ...]
How = Literal["place", "name", "none"]


@dataclass(frozen=True)
class Places:
    """Every span's place in one trace, and the spans at each place and of each name."""

    of: dict[int, Place]
    at: dict[Place, RecordedSpan]
    named: dict[str, list[RecordedSpan]]
    rank: dict[int, int]  # span id -> its index in ``named`` (its occurrence of its name, in start order)


@dataclass(frozen=True)
class Match:
    """The clean-run span a trace span matched (``None``: none), and how."""

    span: RecordedSpan | None
    how: How


def _role(name: str, session: tuple[str, ...]) -> str:
    return SESSION if matches(name, session) else name


def places(trace: Trace, session: Patterns) -> Places:
    pats = as_patterns(session)
    sessions = {s.span_id: n for n, s in enumerate((s for s in trace.spans if matches(s.name, pats)), 1)}
    of: dict[int, Place] = {}
    counts: dict[tuple[Place, str], int] = {}
    stack: list[tuple[RecordedSpan, Place]] = [(s, ()) for s in reversed(trace.children.get(None, []))]
    while stack:
        span, parent = stack.pop()
        if span.span_id in sessions:
            place: Place = ((SESSION, sessions[span.span_id]),)
        else:
            role = _role(span.name, pats)
            n = counts[parent, role] = counts.get((parent, role), 0) + 1
            place = (*parent, (role, n))
        of[span.span_id] = place
        stack += [(c, place) for c in reversed(trace.children.get(span.span_id, []))]
    named: dict[str, list[RecordedSpan]] = {}
    rank: dict[int, int] = {}
    for s in trace.spans:
        same = named.setdefault(_role(s.name, pats), [])
        rank[s.span_id] = len(same)
        same.append(s)
    return Places(of, {p: trace.by_id[sid] for sid, p in of.items()}, named, rank)


def match_span(span: RecordedSpan, trace: Places, clean: Places, session: Patterns) -> Match:
    """The clean-run span ``span`` (of the trace) stands for."""
    place = trace.of.get(span.span_id)
    if place is not None and place in clean.at:
        return Match(clean.at[place], "place")
    role = _role(span.name, as_patterns(session))
    theirs = clean.named.get(role, [])
    if not theirs:
        return Match(None, "none")
    nth = trace.rank.get(span.span_id, 0)
    if nth >= len(theirs):  # a second delete where the clean run made one: no counterpart
        return Match(None, "none")
    return Match(theirs[nth], "name")


def describe_place(place: Place) -> str:
    """A place as text: ``(session #1) / MCP.DeleteSession #2``."""
    return " / ".join(f"(session #{n})" if name == SESSION else f"{name} #{n}" for name, n in place)
