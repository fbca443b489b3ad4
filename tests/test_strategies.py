"""Hypothesis strategies: validation, restriction, shrinking toward no fault, determinism, and a
fresh sidecar per example through the plugin's session-scoped factory."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, NoSuchExample

from pytest_mcpfaults import (
    BackendGone,
    Die,
    ErrorPayload,
    Fault,
    Hang,
    IgnoreEof,
    Status,
    Trigger,
    fault_kinds,
    format_plan,
    parse_fault,
    parse_plan,
)
from pytest_mcpfaults.faults import Draw, unregister_fault_kind
from pytest_mcpfaults.strategies import (
    BLOCKING_KINDS,
    DEFAULT_TARGETS,
    KIND_ORDER,
    drawn_parameters,
    fault_plans,
    faults,
    kind_order,
    triggers,
)

DERANDOMIZED = settings(derandomize=True, database=None, deadline=None)
#: ``find``'s settings: no explain phase, which only words a failure's notes after the minimal example
#: is found (it ran every find's example some hundred times more: 0.5 s a find, most of this module).
FIND = settings(DERANDOMIZED, phases=(Phase.generate, Phase.shrink))


def minimal(strategy: st.SearchStrategy, condition=lambda _: True):  # type: ignore[no-untyped-def]
    return find(strategy, condition, settings=FIND)


# -- argument validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fault_plans(max_faults=-1), "max_faults must be >= 0, got -1"),
        (lambda: fault_plans(max_faults="3"), "max_faults must be an integer, got '3'"),
        (lambda: fault_plans(min_faults=-2), "min_faults must be >= 0, got -2"),
        (lambda: fault_plans(max_faults=1, min_faults=2), "min_faults must be <= max_faults=1, got 2"),
        (lambda: triggers(max_count=-1), "max_count must be >= 0, got -1"),
        (lambda: faults(patience=0), "patience must be a finite positive number of seconds or None, got 0"),
        (
            lambda: faults(patience=float("inf")),
            "patience must be a finite positive number of seconds or None, got inf",
        ),
        (
            lambda: fault_plans(patience=float("nan")),
            "patience must be a finite positive number of seconds or None, got nan",
        ),
        (
            lambda: fault_plans(patience=10**400),  # too large for a float: refused, not an OverflowError
            f"patience must be a finite positive number of seconds or None, got {10**400!r}",
        ),
        (lambda: faults(expect_hang="yes"), "expect_hang must be True or False, got 'yes'"),
        (
            lambda: faults(kinds="die"),
            "kinds must be a list of fault kind names or Fault classes, got 'die'; valid kinds: "
            + ", ".join(kind_order()),
        ),
        (lambda: faults(kinds=[]), "kinds must name at least one fault kind, got []"),
        (lambda: faults(targets="health"), "targets must be a list of trigger targets, got 'health'"),
        (lambda: triggers(targets=[]), "targets must name at least one trigger target, got []"),
    ],
)
def test_bad_arguments_name_the_argument_and_the_value(call, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgument) as info:
        call()
    assert str(info.value) == message


def test_an_unknown_kind_is_named_with_the_valid_ones() -> None:
    with pytest.raises(InvalidArgument) as info:
        fault_plans(kinds=["die", "explode"])
    text = str(info.value)
    assert text.startswith("kinds: unknown fault kind 'explode'; valid kinds: backend_gone, tool_error")
    assert all(k in text for k in fault_kinds())


def test_an_unknown_target_is_named() -> None:
    with pytest.raises(InvalidArgument, match=r"targets: Trigger: target 'the-delete' is unknown"):
        faults(targets=["the-delete"])


def test_kinds_that_fit_no_target_are_refused_at_once() -> None:
    with pytest.raises(InvalidArgument) as info:
        faults(kinds=["backend_gone", "tool_error"], targets=["health"])
    assert "backend_gone, tool_error: tools/call targets only" in str(info.value)


def test_errors_come_when_the_strategy_is_built_not_when_drawn() -> None:
    with pytest.raises(InvalidArgument):
        fault_plans(max_faults=-1)  # no .example(), no @given: the call itself fails


# -- restriction ---------------------------------------------------------------------------------------


@DERANDOMIZED
@given(plan=fault_plans(max_faults=4, kinds=["die", Status, "hang"], targets=["health", "tools/call"]))
def test_plans_respect_kinds_targets_and_size(plan: list[Fault]) -> None:
    assert len(plan) <= 4
    assert {f.kind for f in plan} <= {"die", "status", "hang"}
    assert {f.when.target for f in plan} <= {"health", "tools/call"}


@DERANDOMIZED
@given(fault=faults(kinds=["backend_gone", "tool_error", "status"]))
def test_tool_only_kinds_get_tool_targets_only(fault: Fault) -> None:
    if fault.kind in ("backend_gone", "tool_error"):
        assert fault.when.target in (
            "tool:create_session",
            "tool:evaluate_session",
            "tool:delete_session",
            "tools/call",
            "mcp",
            "*",
        )


@DERANDOMIZED
@given(fault=faults(kinds=list(BLOCKING_KINDS), patience=0.25))
def test_blocking_faults_hold_for_the_small_patience_or_twice_it(fault: Fault) -> None:
    assert fault.blocking
    assert fault.patience in (0.25, 0.5)  # type: ignore[attr-defined]
    assert fault.expect_hang is False  # type: ignore[attr-defined]


@DERANDOMIZED
@given(trigger=triggers(targets=["health"], max_count=2))
def test_triggers_are_pure_counts(trigger: Trigger) -> None:
    assert trigger.target == "health"
    assert trigger.probability == 1.0
    assert not (trigger.nth is not None and trigger.after)  # nth never combined with after (never fires)
    assert trigger.nth in (None, 1, 2)
    assert trigger.after <= 2
    assert trigger.times in (None, 1, 2)


@DERANDOMIZED
@given(fault=faults())
def test_every_drawn_fault_round_trips_through_the_text_form(fault: Fault) -> None:
    assert parse_fault(str(fault)) == fault


@DERANDOMIZED
@given(plan=fault_plans())
def test_plans_round_trip_and_delays_stay_small(plan: list[Fault]) -> None:
    assert list(parse_plan(format_plan(plan))) == plan
    assert all(getattr(f, "seconds", 0) <= 0.05 for f in plan)


# -- shrinking toward "no fault" -------------------------------------------------------------------


def test_a_plan_shrinks_to_the_empty_plan() -> None:
    assert minimal(fault_plans()) == []


def test_a_fault_shrinks_to_the_simplest_kind_and_the_first_target() -> None:
    assert KIND_ORDER[0] == "backend_gone"
    assert minimal(faults()) == BackendGone(when=DEFAULT_TARGETS[0])


def test_simplest_kind_first_whatever_order_the_kinds_are_given_in() -> None:
    assert minimal(faults(kinds=["hang", "die", "status"], targets=["health"])) == Status(503, when="health")
    assert minimal(faults(kinds=["hang", "die"], targets=["health"])) == Die(when="health")


_HTTP_KINDS = [k for k in KIND_ORDER if "http" in fault_kinds()[k].transports]
_STDIO_ONLY = [k for k in KIND_ORDER if "http" not in fault_kinds()[k].transports]


def _accepts(cls: type[Fault], target: str) -> bool:
    try:
        cls(when=target)
    except ValueError:
        return False
    return True


def _shape(kind: str, targets: Sequence[str] | None) -> tuple[object, ...]:
    """What Hypothesis sees of a kind in ``faults(kinds=..., targets=targets)``, besides its branch:
    the choices its strategy makes (how many targets it fits, whether it holds for a drawn
    ``patience``, and each ``draws`` entry's type and whether it has a choice to make). Kinds of one
    shape make the same choices, so they shrink alike against any other kind."""
    cls = fault_kinds()[kind]
    fits = [t for t in (targets or DEFAULT_TARGETS) if _accepts(cls, t)]
    draws = tuple((type(values).__name__, len(values) > 1) for values in cls.draws.values())
    return (len(fits), cls.blocking, draws)


def _representatives(kinds: Sequence[str], targets: Sequence[str] | None) -> list[str]:
    """The first and the last kind (in ``kinds``' order) of each shape, in ``kinds``' order.

    Between two kinds, Hypothesis' preference depends only on their shapes and on which comes first
    among ``one_of``'s branches. For two shapes, each order of their members that ``kinds`` holds also
    holds between a first and a last one (if a member of A comes before one of B, A's first comes
    before B's last), so checking the representatives checks every pair: a check whose cost grows with
    the number of shapes (ways a kind draws), not with the number of kinds."""
    by_shape: dict[tuple[object, ...], list[str]] = {}
    for kind in kinds:
        by_shape.setdefault(_shape(kind, targets), []).append(kind)
    ends = {kind for group in by_shape.values() for kind in (group[0], group[-1])}
    return [k for k in kinds if k in ends]


def _shrink_order(kinds: Sequence[str], targets: Sequence[str] | None) -> list[str]:
    """The kinds in the order Hypothesis really shrinks to: the minimal fault of all of them, then
    the minimal of the rest, and so on."""
    remaining, order = list(kinds), []
    while remaining:
        order.append(minimal(faults(kinds=remaining, targets=targets)).kind)
        remaining.remove(order[-1])
    return order


def _adjacent_representatives() -> list[Any]:
    pairs = []
    for kinds, targets in ((_HTTP_KINDS, ["tools/call"]), (_STDIO_ONLY, ["*"])):
        pairs += [
            pytest.param(a, b, targets, id=f"{a}-{b}")
            for a, b in itertools.pairwise(_representatives(kinds, targets))
        ]
    return pairs


@pytest.mark.parametrize(("simpler", "harder", "targets"), _adjacent_representatives())
def test_kind_order_is_the_shrink_order(simpler: str, harder: str, targets: list[str]) -> None:
    # the stdio event kinds (ignore_eof, ignore_sigterm) take only the '*' target
    assert minimal(faults(kinds=[harder, simpler], targets=targets)).kind == simpler


def test_kind_order_is_the_order_hypothesis_shrinks_to() -> None:
    """``kind_order()`` is checked against Hypothesis itself, over a representative of every shape at
    once (:func:`_representatives`: their number, not the number of kinds, sets the cost): with the
    default targets (the HTTP kinds) and with one target every kind accepts (stdio-only ones too)."""
    http = _representatives(_HTTP_KINDS, None)
    assert _shrink_order(http, None) == http
    every = _representatives(kind_order(), ["*"])
    assert _shrink_order(every, ["*"]) == every


@pytest.fixture
def ranked_against_their_draws() -> Iterator[tuple[str, str]]:
    """Two made-up kinds whose ``shrink_rank`` alone would misplace them: one ranked first that draws
    two parameters, one ranked last that draws none."""

    @dataclass(frozen=True)
    class Eager(Status):
        kind: ClassVar[str] = "eager_two_draws"
        shrink_rank: ClassVar[int] = 1
        draws: ClassVar[Mapping[str, Draw]] = {"code": (502, 503), "retry_after": (1, 2)}

    @dataclass(frozen=True)
    class Plain(Status):
        kind: ClassVar[str] = "plain_ranked_last"
        shrink_rank: ClassVar[int] = 5000
        draws: ClassVar[Mapping[str, Draw]] = {"code": (502,)}  # one value: no choice to draw

    yield Eager.kind, Plain.kind
    unregister_fault_kind(Eager.kind)
    unregister_fault_kind(Plain.kind)


def test_kind_order_puts_a_kind_where_its_draws_make_hypothesis_shrink(
    ranked_against_their_draws: tuple[str, str],
) -> None:
    eager, plain = ranked_against_their_draws
    assert drawn_parameters(fault_kinds()[eager]) == 2 and drawn_parameters(fault_kinds()[plain]) == 0
    drawn = fault_kinds()  # the kinds faults() draws unless named: HTTP ones a sidecar without auth= takes
    http = [k for k in kind_order() if "http" in drawn[k].transports and not drawn[k].needs_auth]
    drawn_by = {k: drawn_parameters(fault_kinds()[k]) for k in http}  # by shape, not by a kind's name
    assert next(k for k in http if drawn_by[k] == 2) == eager  # first drawing two, despite rank 1
    assert all(drawn_by[k] < 2 for k in http[: http.index(eager)])
    drawing_none = [k for k in http if k != plain and drawn_parameters(fault_kinds()[k]) == 0]
    assert http.index(plain) == http.index(drawing_none[-1]) + 1  # last of the kinds drawing none
    shown = _representatives(http, None)
    assert {eager, plain} <= set(shown)  # each the end of its shape (Plain's one-valued draw is its own)
    assert _shrink_order(shown, None) == shown


def test_stdio_only_kinds_are_drawn_only_when_named() -> None:
    with pytest.raises(NoSuchExample):
        minimal(faults(), lambda f: "http" not in f.transports)
    assert minimal(faults(kinds=["ignore_eof"])) == IgnoreEof()


def test_a_plan_that_must_hit_the_delete_step_shrinks_to_one_plain_fault_there() -> None:
    found = minimal(fault_plans(), lambda p: any(f.when.target == "tool:delete_session" for f in p))
    assert found == [BackendGone()]


def test_a_trigger_shrinks_to_every_matching_request() -> None:
    assert minimal(triggers()) == Trigger(DEFAULT_TARGETS[0])
    assert minimal(triggers(), lambda t: t.nth is not None) == Trigger(DEFAULT_TARGETS[0], nth=1)


def test_a_blocking_fault_shrinks_to_defaults_with_its_patience() -> None:
    assert minimal(faults(kinds=["hang"], targets=["health"])) == Hang(patience=0.1, when="health")


def test_the_docstrings_say_how_they_shrink() -> None:
    for fn in (faults, fault_plans, triggers):
        assert "Shrinks toward" in (fn.__doc__ or "") or "shrinks toward" in (fn.__doc__ or "")


def test_kind_order_covers_every_kind_once() -> None:
    assert sorted(KIND_ORDER) == sorted(fault_kinds())


# -- determinism -------------------------------------------------------------------------------------


def _draw_all() -> list[str]:
    seen: list[str] = []

    @settings(DERANDOMIZED, max_examples=40)
    @given(plan=fault_plans())
    def collect(plan: list[Fault]) -> None:
        seen.append(format_plan(plan))

    collect()
    return seen


def test_derandomized_runs_draw_the_same_plans() -> None:
    first, second = _draw_all(), _draw_all()
    assert first == second
    assert len(set(first)) > 20  # and they are not all the same plan


def test_importing_the_package_does_not_import_hypothesis_or_respx() -> None:
    code = (
        "import sys, pytest_mcpfaults; pytest_mcpfaults.Sidecar; "
        "print(sorted(m for m in ('hypothesis', 'respx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- a fresh sidecar per example, through the plugin ------------------------------------------------


PER_EXAMPLE = """
import httpx
from hypothesis import HealthCheck, given, settings
from pytest_mcpfaults import Status, format_plan
from pytest_mcpfaults.strategies import fault_plans

SEEN = []
client = httpx.Client(timeout=2.0)

@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(plan=fault_plans(2, ["status", "absent", "backend_gone"], ["health", "tools/call"]))
def test_each_example_gets_a_fresh_sidecar(mcp_sidecar_factory, plan):
    with mcp_sidecar_factory(faults=plan) as sidecar:
        assert len(sidecar.journal) == 0            # fresh journal
        assert sidecar.benchmark.sessions == {}     # fresh benchmark sessions
        assert sidecar.plan == tuple(plan)
        r = client.post(sidecar.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "create_session", "arguments": {"task_id": "task-1"}}},
                        headers={"MCP-Protocol-Version": "2026-07-28"})
        client.get(sidecar.health_url)
        assert len(sidecar.journal) == 2
        assert len(sidecar.benchmark.sessions) == (1 if r.status_code == 200 and "error" not in r.text else 0)
        SEEN.append((sidecar.port, format_plan(plan)))
    assert sidecar.state == "stopped"

def test_the_examples_ran_on_many_sidecars():
    assert len(SEEN) >= 50
    assert len({plan for _, plan in SEEN}) > 20
"""


def test_a_given_test_gets_a_fresh_sidecar_per_example_without_health_check_failures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_per_example=PER_EXAMPLE)
    result = pytester.runpytest(  # in-process
        "-p", "mcpfaults", "-p", "no:cacheprovider", "-p", "no:randomly",
        "-o", "asyncio_default_fixture_loop_scope=function",
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "HealthCheck" not in out
    assert "function_scoped_fixture" not in out
    used = re.search(r"used the plugin \((\d+) sidecars", out)
    assert used is not None, out[-2000:]
    assert int(used[1]) >= 50  # the plugin saw every one


# -- the failed-delete kind ------------------------------------------------------------------------------


@DERANDOMIZED
@given(fault=faults(kinds=["error_payload"]))
def test_error_payloads_are_drawn_on_tool_targets_with_a_real_failure_reason(fault: Fault) -> None:
    assert isinstance(fault, ErrorPayload)
    assert fault.reason in ("backend timed out", "connection reset by peer", "internal error")
    assert fault.message is None
    assert fault.when.target in ("tool:create_session", "tool:evaluate_session", "tool:delete_session",
                                 "tools/call", "mcp", "*")  # fmt: skip
    assert parse_fault(str(fault)) == fault


def test_an_error_payload_shrinks_to_the_default_failed_delete() -> None:
    assert (
        minimal(faults(kinds=["error_payload"], targets=["tool:delete_session", "health"])) == ErrorPayload()
    )
    drawn = minimal(faults(kinds=["error_payload"]), lambda f: f.reason != "backend timed out")
    assert drawn == ErrorPayload("connection reset by peer", when=DEFAULT_TARGETS[0])


def test_the_plans_drawn_by_default_include_error_payloads() -> None:
    """A search among every kind drawn by default: its budget grows with their number, so a kind added
    (one drawing two parameters shifted the draws) does not leave it without an example."""
    drawn = [k for k, cls in fault_kinds().items() if cls.drawn_by_default and not cls.needs_auth]
    search = settings(FIND, max_examples=40 * len(drawn))  # it stops at the first plan that has one
    found = find(fault_plans(), lambda p: any(f.kind == "error_payload" for f in p), settings=search)
    assert found == [ErrorPayload(when=DEFAULT_TARGETS[0])]
