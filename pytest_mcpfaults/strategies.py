"""Hypothesis strategies for faults, triggers and whole fault plans.

Only users of strategies import this module, so it imports Hypothesis at the top; the package's
``__init__`` never does. Every strategy is deterministic given Hypothesis' choices (triggers count
requests, never wall-clock time), so ``derandomize=True`` or a ``ci`` profile replays the same run.

Shrinking goes toward "no fault": the empty plan, then fewer and simpler faults (each function says
how it shrinks).

Use inside ``@given`` with a per-example sidecar::

    @given(plan=fault_plans(max_faults=2))
    def test_cleanup_never_flips(mcp_sidecar_factory, plan):
        with mcp_sidecar_factory(faults=plan) as sidecar:
            run_harness(sidecar.mcp_url)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.options.validation import is_integer, is_positive_seconds

__all__ = [
    "BLOCKING_KINDS",
    "DEFAULT_TARGETS",
    "KIND_ORDER",
    "drawn_parameters",
    "fault_plans",
    "faults",
    "kind_order",
    "triggers",
]


def drawn_parameters(cls: type[F.Fault]) -> int:
    """How many of a kind's parameters :func:`faults` draws (with its default ``patience``): one per
    ``draws`` entry with more than one value, plus a blocking kind's ``patience``. A single-valued
    entry is no choice for Hypothesis."""
    return sum(1 for values in cls.draws.values() if len(values) > 1) + (1 if cls.blocking else 0)


def kind_order() -> tuple[str, ...]:
    """Every registered fault kind, simplest first: exactly the order faults shrink in. A kind defined
    after this module was imported is included.

    Hypothesis shrinks toward fewer choices first, then earlier ones, so the order is derived: kinds
    that draw fewer parameters (:func:`drawn_parameters`) come first, and each kind's ``shrink_rank``
    orders kinds that draw as many (ties keep definition order). A ``shrink_rank`` cannot put a kind
    that draws two parameters before one that draws none: Hypothesis would not shrink that way.
    """
    kinds = F.fault_kinds()
    return tuple(sorted(kinds, key=lambda name: (drawn_parameters(kinds[name]), kinds[name].shrink_rank)))


#: The built-in fault kinds, simplest first: exactly the order faults shrink in (:func:`kind_order`
#: also lists kinds defined later): none drawn (one wrong answer, led by the incident's own
#: ``backend_gone``), one (a failed call's reason, an error code, a latency, a dying or cut
#: connection, then the blocking faults, whose one parameter is how long they hold), two. With fewer
#: targets or ``patience=None`` a kind that draws fewer choices there (one fitting target, no hold
#: time) shrinks sooner than this order says.
KIND_ORDER: tuple[str, ...] = kind_order()

#: The built-in kinds that hold a request (they get the strategies' small ``patience``).
BLOCKING_KINDS: tuple[str, ...] = tuple(k for k in KIND_ORDER if F.fault_kinds()[k].blocking)

#: Targets drawn by default: the steps of a benchmark-session lifecycle, most specific first (a
#: fault on one tool disturbs less than one on every MCP request), so faults shrink toward one step.
DEFAULT_TARGETS: tuple[str, ...] = (
    "tool:create_session",
    "tool:evaluate_session",
    "tool:delete_session",
    "tools/call",
    "initialize",
    "DELETE /mcp",
    "health",
    "mcp",
    "*",
)

# -- argument validation (Hypothesis style: the argument, the bad value) -----------------------------


def _check_int(name: str, value: object) -> int:
    if not is_integer(value):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise InvalidArgument(f"{name} must be >= 0, got {value!r}")
    return value


def _check_kinds(kinds: object) -> tuple[str, ...]:
    order = kind_order()
    if kinds is None:  # the HTTP kinds: stdio-only ones (ignore_eof, ...), those needing a sidecar with
        registry = F.fault_kinds()  # auth= (unauthorized, ...) and those not drawn_by_default only by name
        return tuple(
            k
            for k in order
            if "http" in registry[k].transports
            and not registry[k].needs_auth
            and registry[k].drawn_by_default
        )
    try:
        names = F.check_kind_names("kinds", kinds, order)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    if not names:
        raise InvalidArgument("kinds must name at least one fault kind, got []")
    wanted = set(names)
    return tuple(k for k in order if k in wanted)  # simplest first, whatever order given


def _check_targets(targets: object) -> tuple[str, ...]:
    if targets is None:
        return DEFAULT_TARGETS
    if isinstance(targets, str) or not isinstance(targets, Sequence):
        raise InvalidArgument(f"targets must be a list of trigger targets, got {targets!r}")
    out: list[str] = []
    for t in targets:
        try:
            F.check_target(t)
        except ValueError as exc:
            raise InvalidArgument(f"targets: {exc}") from None
        out.append(t)
    if not out:
        raise InvalidArgument("targets must name at least one trigger target, got []")
    return tuple(dict.fromkeys(out))


def _accepts(cls: type[F.Fault], target: str) -> bool:
    try:
        cls(when=F.Trigger(target))
    except ValueError:
        return False
    return True


# -- strategies ------------------------------------------------------------------------------------


def triggers(targets: Sequence[str] | None = None, max_count: int = 3) -> st.SearchStrategy[F.Trigger]:
    """Triggers on one of ``targets`` (default :data:`DEFAULT_TARGETS`) with counts up to ``max_count``.

    Three shapes, plainest first: every matching request (``Trigger(target)``); only the ``nth``
    (1..max_count); or after the first ``after`` (0..max_count), at most ``times`` (``None`` or
    1..max_count). Probability stays 1.0, so every trigger is a pure count. Shrinks toward the first
    target and toward "every matching request".
    """
    pool = _check_targets(targets)
    n = _check_int("max_count", max_count)
    return _triggers(pool, n)


def _triggers(pool: tuple[str, ...], n: int) -> st.SearchStrategy[F.Trigger]:
    target = st.sampled_from(pool)
    plain = st.builds(F.Trigger, target)
    if n == 0:
        return plain
    counts = st.integers(1, n)
    # nth and after are never combined (nth <= after would never fire): three shapes, plainest first.
    nth = st.builds(F.Trigger, target, nth=counts)
    after = st.builds(F.Trigger, target, after=st.integers(0, n), times=st.none() | counts)
    return plain | nth | after


def _draw(values: F.Draw) -> st.SearchStrategy[Any]:
    if isinstance(values, range):
        return st.integers(values.start, values.stop - 1)  # shrinks toward the start
    return st.sampled_from(values)  # shrinks toward the first value


def faults(
    kinds: Sequence[str | type[F.Fault]] | None = None,
    targets: Sequence[str] | None = None,
    *,
    max_count: int = 3,
    patience: float | None = 0.1,
    expect_hang: bool = False,
) -> st.SearchStrategy[F.Fault]:
    """Single faults of ``kinds`` (names or classes; default: every HTTP kind that needs no ``auth=``
    and is ``drawn_by_default``, so stdio-only, auth, cancel and resumption kinds are drawn only when
    named) on ``targets`` (default :data:`DEFAULT_TARGETS`), each kind only with targets it accepts.

    Parameters come from each kind's ``draws``; blocking kinds (:data:`BLOCKING_KINDS`) hold a request
    for ``patience`` or twice that (``None``: the sidecar's budget) and carry ``expect_hang``;
    triggers come from :func:`triggers` with ``max_count``.

    Shrinks toward the simplest kind first (:data:`KIND_ORDER`), then the earliest target, the
    plainest trigger and default parameters.
    """
    names = _check_kinds(kinds)
    pool = _check_targets(targets)
    n = _check_int("max_count", max_count)
    if patience is not None and not is_positive_seconds(patience):
        raise InvalidArgument(
            f"patience must be a finite positive number of seconds or None, got {patience!r}"
        )
    wait = None if patience is None else float(patience)
    if not isinstance(expect_hang, bool):
        raise InvalidArgument(f"expect_hang must be True or False, got {expect_hang!r}")
    branches: list[st.SearchStrategy[F.Fault]] = []
    skipped: list[str] = []
    for kind in names:
        cls = F.fault_kinds()[kind]
        fits = tuple(t for t in pool if _accepts(cls, t))
        if not fits:
            skipped.append(kind)
            continue
        params = {name: _draw(values) for name, values in cls.draws.items()}
        if cls.blocking:
            params["patience"] = st.just(None) if wait is None else st.sampled_from((wait, 2 * wait))
            params["expect_hang"] = st.just(expect_hang)
        build: Callable[..., F.Fault] = cls
        branches.append(st.builds(build, when=_triggers(fits, n), **params))
    if not branches:
        raise InvalidArgument(
            f"no kind in kinds={list(names)} accepts any of targets={list(pool)} "
            f"({', '.join(skipped)}: tools/call targets only; add 'tools/call' or 'tool:<name>')"
        )
    return st.one_of(branches)


def fault_plans(
    max_faults: int = 3,
    kinds: Sequence[str | type[F.Fault]] | None = None,
    targets: Sequence[str] | None = None,
    *,
    min_faults: int = 0,
    max_count: int = 3,
    patience: float | None = 0.1,
    expect_hang: bool = False,
) -> st.SearchStrategy[list[F.Fault]]:
    """Fault plans: lists of ``min_faults``..``max_faults`` faults from :func:`faults` (same options),
    ready for ``Sidecar(faults=plan)`` or ``mcp_sidecar_factory(faults=plan)``.

    A plan is a list of steps and shrinks toward the empty plan ("no fault"), then toward fewer steps,
    each as simple as :func:`faults` makes it. ``format_plan(plan)`` prints it in the text form.
    """
    hi = _check_int("max_faults", max_faults)
    lo = _check_int("min_faults", min_faults)
    if lo > hi:
        raise InvalidArgument(f"min_faults must be <= max_faults={hi}, got {lo}")
    one = faults(kinds, targets, max_count=max_count, patience=patience, expect_hang=expect_hang)
    return st.lists(one, min_size=lo, max_size=hi)
