"""Explore's generic checks (its oracles), by name: the one registry that the ``checks=`` and
``exclude_checks=`` options, the ini key ``mcpfaults_explore_exclude_checks``, their refusals and the
docs' table derive from. Pure: no I/O, no pytest.

A check's name is what a run's ``found`` entry starts with (``left_open``, ``patience``,
``exception`` for ``exception:RuntimeError``), or, for a span invariant, the invariant's own name
(``cleanup_never_flips`` for ``invariant:cleanup_never_flips``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_mcpfaults.invariants import ALL_INVARIANTS


@dataclass(frozen=True)
class Check:
    """One of explore's generic checks: what it fails a run on, and whether a clean run that fails it
    (and nothing else) still took its whole path (``footprint``: the check is made once the test's body
    is over), so its campaign goes on with the check off."""

    what: str
    footprint: bool


#: Every generic check, by name (the span invariants first).
CHECKS: dict[str, Check] = {
    **{
        name: Check(
            f"the span invariant `{name}` (docs/spans.md) broke, whether or not the span gate is on", True
        )
        for name in ALL_INVARIANTS
    },
    "patience": Check(
        "a patience or no-progress verdict (docs/hangs.md): the harness waited out a held request", False
    ),
    "left_open": Check(
        "a connection to the sidecar, or a stdio child, was still open 1 s after the test's fixtures "
        "were done",
        True,
    ),
    "sessions": Check(
        "session hygiene (docs/sessions.md): a session the client opened was never ended (no `DELETE`), "
        "it called a session after the sidecar's 404 for it, or its calls after a failed one failed "
        "without reaching the sidecar",
        True,
    ),
    "exception": Check(
        "an exception other than `AssertionError` escaped the test (`exception:<Type>`), but those "
        "`raises` names",
        False,
    ),
    "teardown": Check("the teardown failed otherwise (an error raised in the sidecar)", False),
}


def check_of(found: str) -> str:
    """The check a ``found`` entry comes from: ``invariant:cleanup_at_most`` -> ``cleanup_at_most``,
    ``exception:KeyError`` -> ``exception``, ``left_open`` -> ``left_open``."""
    head, _, rest = found.partition(":")
    return rest if head == "invariant" else head


def check_names(key: str, value: object) -> tuple[str, ...]:
    """``value`` (a list of names, or one string of them) as check names; a ``ValueError`` naming
    ``key``, the bad value and every valid name otherwise."""
    if isinstance(value, str):
        names: Sequence[object] = [v for v in value.replace(",", " ").split() if v]
    elif isinstance(value, (list, tuple)):
        names = value
    else:
        raise ValueError(f"{key} must be a list of check names ({', '.join(CHECKS)}), got {value!r}")
    bad = [n for n in names if not isinstance(n, str) or n not in CHECKS]
    if bad:
        raise ValueError(f"{key}: unknown check {bad[0]!r}; valid checks: {', '.join(CHECKS)}")
    return tuple(str(n) for n in names)


def kept_off(checks: Sequence[str] | None, exclude: Iterable[str]) -> frozenset[str]:
    """The checks off: those not in ``checks`` (``None``: every check is on) and those in ``exclude``."""
    on = set(CHECKS) if checks is None else set(checks)
    return frozenset(set(CHECKS) - on) | frozenset(exclude)


def whole_footprint(found: Sequence[str]) -> bool:
    """Whether a clean run that found ``found`` still took its whole path (``Check.footprint``)."""
    return bool(found) and all(CHECKS.get(check_of(f), Check("", False)).footprint for f in found)


def checks_table() -> str:
    """The docs' table of checks (docs/explore.md), from the registry."""
    rows = ["| check | a run fails when |", "|---|---|"]
    rows += [f"| `{name}` | {c.what} |" for name, c in CHECKS.items()]
    return "\n".join(rows)
