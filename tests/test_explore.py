"""Explore's planning (pure): the footprint of a journal, which kinds apply where (from the kinds'
own attributes), reduction, pairs, options, the regression line, and the docs' option table."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pytest_mcpfaults import fault_kinds
from pytest_mcpfaults import faults as F
from pytest_mcpfaults.explore import (
    OPTIONS,
    Options,
    Run,
    Step,
    applies_to,
    explore_kinds,
    footprint,
    id_part,
    new_steps,
    parse_options,
    plan_campaign,
    plan_pairs,
    regression_line,
    server_of,
)
from pytest_mcpfaults.faults.text import parse_fault
from pytest_mcpfaults.matrix import catalogue_kinds

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Req:
    method: str
    path: str
    mcp_method: str | None = None
    tool: str | None = None
    session_id: str | None = None


def _operation(sid: str, tool: str) -> list[Req]:
    """One session-era MCP operation, as the example harness makes it."""
    return [
        Req("POST", "/mcp", "initialize"),
        Req("POST", "/mcp", "notifications/initialized", session_id=sid),
        Req("GET", "/mcp", session_id=sid),
        Req("POST", "/mcp", "tools/call", tool, sid),
        Req("DELETE", "/mcp", session_id=sid),
    ]


JOURNAL = [Req("GET", "/health"), *_operation("a", "delete_session"), *_operation("b", "delete_session")]


def test_footprint_names_each_request_as_a_trigger_aims_at_it() -> None:
    steps = footprint(JOURNAL)
    assert [s.id for s in steps] == [
        "health#1",
        "initialize#1",
        "notifications/initialized#1",
        "GET /mcp#1",
        "tool:delete_session#1",
        "DELETE /mcp#1",
        "initialize#2",
        "notifications/initialized#2",
        "GET /mcp#2",
        "tool:delete_session#2",
        "DELETE /mcp#2",
    ]
    # the initialize (no session id yet) belongs to the session it opened
    assert steps[1].shape == steps[4].shape == steps[7].shape
    assert steps[1].position == 0 and steps[4].position == 3
    assert (steps[0].endpoint, steps[4].endpoint) == ("health", "mcp")
    assert steps[4].answered and not steps[2].answered and not steps[3].answered


def test_each_run_aims_at_exactly_its_request() -> None:
    camp = plan_campaign(footprint(JOURNAL), Options(kinds=("die",), reduce=False))
    by_id = {r.id: r for r in camp.runs}
    die = by_id["explore:die-at-tool:delete_session[2]"].faults[0]
    assert die.trigger == F.Trigger("tool:delete_session", nth=2)
    assert str(die) == "die@tool:delete_session[nth=2]"
    assert len(camp.runs) == 11  # die applies everywhere


def test_kinds_apply_where_their_attributes_say() -> None:
    steps = {s.id: s for s in footprint(JOURNAL)}
    kinds = fault_kinds()
    health, call, note, get = (
        steps[k] for k in ("health#1", "tool:delete_session#1", "notifications/initialized#1", "GET /mcp#1")
    )
    assert applies_to(kinds["flap"], health) and not applies_to(kinds["flap"], call)
    assert applies_to(kinds["tool_error"], call) and not applies_to(kinds["tool_error"], note)
    assert applies_to(kinds["jsonrpc_error"], call) and not applies_to(kinds["jsonrpc_error"], note)
    assert not applies_to(kinds["jsonrpc_error"], get) and not applies_to(kinds["terminating"], health)
    assert not applies_to(kinds["unauthorized"], call)  # neither in the catalogue nor explore_cells
    assert applies_to(kinds["error_payload"], call) and not applies_to(kinds["error_payload"], note)
    assert not applies_to(kinds["stdout_noise"], call)  # stdio only
    assert applies_to(kinds["die"], call, "stdio") and not applies_to(kinds["status"], call, "stdio")


def test_a_kind_defined_later_joins_the_campaign() -> None:
    from pytest_mcpfaults.core.routing import applies

    @dataclass(frozen=True)
    class Gremlin(F.Fault):
        kind: ClassVar[str] = "gremlin_explore"
        catalogue_params: ClassVar[Any] = {}

    @applies.register(Gremlin)  # the router's dispatcher: it answers tools/call only
    def _tool_calls(fault: F.Fault, info: Any) -> bool:
        return info.mcp is not None and info.mcp.method == "tools/call"

    try:
        assert "gremlin_explore" in catalogue_kinds()
        camp = plan_campaign(footprint(JOURNAL), Options(kinds=("gremlin_explore",), reduce=False))
        assert [r.id for r in camp.runs] == [
            "explore:gremlin_explore-at-tool:delete_session[1]",
            "explore:gremlin_explore-at-tool:delete_session[2]",
        ]
    finally:
        F.unregister_fault_kind("gremlin_explore")


def test_reduction_prunes_a_repeated_operation_and_says_which() -> None:
    camp = plan_campaign(footprint(JOURNAL), Options(kinds=("die", "status")))
    assert [r.id for r in camp.runs][:2] == ["explore:die-at-health[1]", "explore:status-at-health[1]"]
    assert len(camp.runs) == 1 * 2 + 5 * 2  # /health, then the first operation's five steps
    assert len(camp.pruned) == 5 * 2
    pruned = {p.run.id: p for p in camp.pruned}
    assert pruned["explore:die-at-tool:delete_session[2]"].same_as == "tool:delete_session#1"
    assert "same-shaped session" in pruned["explore:die-at-tool:delete_session[2]"].why
    budget = plan_campaign(footprint(JOURNAL), Options(kinds=("die",), max_runs=4))
    assert (len(budget.runs), len(budget.over_budget)) == (4, 2)


def test_pairs_aim_at_the_steps_a_first_fault_newly_reached() -> None:
    clean = footprint(JOURNAL[:6])
    retried = footprint([*JOURNAL[:6], *_operation("c", "delete_session")])
    assert [s.id for s in new_steps(clean, retried)] == [
        "initialize#2",
        "notifications/initialized#2",
        "GET /mcp#2",
        "tool:delete_session#2",
        "DELETE /mcp#2",
    ]
    first = Run((("tool:delete_session#1", parse_fault("status@tool:delete_session[nth=1]")),))
    pairs = plan_pairs(first, clean, retried, Options(kinds=("hang",)))
    assert pairs[3].id == "explore:status-at-tool:delete_session[1]+hang-at-tool:delete_session[2]"
    assert regression_line(pairs[3]) == (
        '@pytest.mark.mcp_sidecar(faults=["status@tool:delete_session[nth=1]", '
        '"hang@tool:delete_session[nth=2]"])'
    )
    assert Run.from_dict(pairs[3].to_dict()) == pairs[3]


def test_with_several_servers_each_step_names_its_server_and_each_fault_goes_to_it() -> None:
    one = footprint(JOURNAL[:6], server=1)
    two = footprint(JOURNAL[:6], server=2)
    assert [s.id for s in two][:2] == ["sidecar2/health#1", "sidecar2/initialize#1"]
    assert [server_of(s.id) for s in (*one, *two)] == [1] * 6 + [2] * 6
    assert server_of("DELETE /mcp#1") == server_of("tool:sidecar2/x#1") == 0
    # the same request on another server is not a repeat of it (reduction is per server)
    camp = plan_campaign((*one, *two), Options(kinds=("die",)))
    assert [r.id for r in camp.runs if "delete_session" in r.id] == [
        "explore:die-at-sidecar1.tool:delete_session[1]",
        "explore:die-at-sidecar2.tool:delete_session[1]",
    ]
    assert Step.from_dict(two[0].to_dict()) == two[0]
    pair = Run(
        (
            ("sidecar1/tool:delete_session#1", parse_fault("die@tool:delete_session[nth=1]")),
            ("sidecar2/health#1", parse_fault("status@health[nth=1]")),
        )
    )
    assert [str(f) for f in pair.faults_on(1)] == ["die@tool:delete_session[nth=1]"]
    assert [str(f) for f in pair.faults_on(2)] == ["status@health[nth=1]"]
    assert pair.faults_on(3) == ()
    assert regression_line(pair, makers=["mcp_sidecar", "mcp_sidecar_factory"]) == (
        'sidecar 1: @pytest.mark.mcp_sidecar(faults=["die@tool:delete_session[nth=1]"]); '
        'sidecar 2: mcp_sidecar_factory(faults=["status@health[nth=1]"])'
    )
    # one server: no step names it, its faults go to the first (only) server the test makes
    only = Run((("health#1", parse_fault("status@health[nth=1]")),))
    assert len(only.faults_on(1)) == 1 and only.faults_on(2) == ()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"depth": 3}, "depth must be 1 (one fault per run) or 2"),
        ({"max_runs": "many"}, "max_runs must be a positive number of runs"),
        ({"kinds": ["explode"]}, "kinds: unknown fault kind 'explode'; valid kinds: die"),
        ({"kinds": "die", "exclude": ["die"]}, "kinds=['die'] minus exclude=['die'] leaves no kind"),
        ({"reduce": "maybe"}, "reduce must be true or false, got 'maybe'"),
        ({"patience": 0}, "patience must be a positive number of seconds"),
        ({"own_asserts": "no"}, "own_asserts must be 'behaviour'"),
        ({"nope": 1}, "unknown option 'nope'; valid options: kinds, exclude, steps, depth, max_runs"),
    ],
)
def test_bad_options_name_the_option_and_what_is_valid(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_options(given)


def test_blocking_kinds_take_the_campaign_patience() -> None:
    camp = plan_campaign(footprint(JOURNAL[:1]), parse_options({"kinds": "hang,die", "patience": "8"}))
    assert [str(r.faults[0]) for r in camp.runs] == ["die@health[nth=1]", "hang(patience=8.0)@health[nth=1]"]


def test_the_docs_table_lists_every_option() -> None:
    page = (ROOT / "docs" / "explore.md").read_text()
    documented = re.findall(r"^\| `(\w+)` \|", page.split("Options (")[1].split("\n\n")[1], re.M)
    assert documented == list(OPTIONS)


def test_the_docs_name_the_stdio_campaign_kinds() -> None:
    page = (ROOT / "docs" / "explore.md").read_text()
    named = page.split("whose campaign kinds are")[1].split(");")[0]
    stdio = [k for k in catalogue_kinds() if "stdio" in fault_kinds()[k].transports]
    assert re.findall(r"`(\w+)`", named) == stdio


def test_the_docs_name_the_kinds_the_in_process_backend_leaves_out() -> None:
    page = (ROOT / "docs" / "explore.md").read_text()
    named = page.split("`needs_sockets` is `None`: not ")[1].split(")")[0]
    assert re.findall(r"`(\w+)`", named) == [k for k in catalogue_kinds() if fault_kinds()[k].needs_sockets]


def test_the_docs_name_the_kinds_each_endpoint_rule_narrows() -> None:
    page = (ROOT / "docs" / "explore.md").read_text()
    health = re.findall(r"`(\w+)`", page.split("`/health` kinds (")[1].split(")")[0])
    mcp = re.findall(r"`(\w+)`", page.split("MCP kinds (")[1].split(")")[0])
    kinds = {k: fault_kinds()[k] for k in catalogue_kinds()}
    assert health == [k for k, c in kinds.items() if c.default_target == "health"]
    assert mcp == [k for k, c in kinds.items() if c.default_target not in ("health", "*")]


def test_error_payload_is_planned_with_each_catalogue_text_and_ids_name_the_cell() -> None:
    """Not in the matrix's catalogue, ``error_payload`` is explored with its ``explore_cells``: the
    incident's text (the sidecar's own URL), the same in capitals, a missing session, a generic failure."""
    camp = plan_campaign(footprint(JOURNAL), Options(kinds=("error_payload",), reduce=False))
    ids = [r.id for r in camp.runs]
    cells = F.ErrorPayload.explore_cells
    assert ids[: len(cells)] == [f"explore:error_payload.{n}-at-tool:delete_session[1]" for n in cells]
    messages = [r.faults[0].message for r in camp.runs[: len(cells)]]
    assert messages[0] == "Service at {service_url} is no longer alive"
    assert messages[1] == "SERVICE AT {service_url} IS NO LONGER ALIVE"
    assert "session not found" in messages
    fault = camp.runs[0].faults[0]
    assert fault.error_message("echo", {}, "http://127.0.0.1:4242") == (
        "Service at http://127.0.0.1:4242 is no longer alive"
    )
    assert Run.from_dict(camp.runs[0].to_dict()).id == ids[0]  # the id survives the text form
    assert "error_payload" in explore_kinds() and "unauthorized" not in explore_kinds()


@pytest.mark.parametrize(
    ("step", "part"),
    [
        ("tool:delete_session#1", "tool:delete_session[1]"),
        ("DELETE /mcp#2", "DELETE:mcp[2]"),
        ("notifications/initialized#1", "notifications.initialized[1]"),
        ("sidecar2/tool:echo#12", "sidecar2.tool:echo[12]"),
        ("sidecar2/GET /mcp#3", "sidecar2.GET:mcp[3]"),
        ("method:x/y#1", "method:x.y[1]"),
        ("tool:a b@c#1", "tool:a_b_c[1]"),
    ],
)
def test_ids_hold_only_what_pytest_k_takes(step: str, part: str) -> None:
    from _pytest.mark.expression import Expression

    assert id_part(step) == part
    run_id = Run(((step, F.Die(when=None)),)).id
    assert run_id == f"explore:die-at-{part}"
    Expression.compile(run_id)  # one -k name: no @, #, space or slash
