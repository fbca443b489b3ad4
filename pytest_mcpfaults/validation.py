"""Argument checks shared by the fault and trigger types (Hypothesis' ``internal/validation.py`` is
the model): each refuses a bad value with a ``ValueError`` that names the owner, the argument and the
value, and says what would be valid.
"""

from __future__ import annotations

import math

__all__ = ["check_count", "check_seconds", "is_finite_number"]


def is_finite_number(value: object) -> bool:
    """Whether ``value`` is an ``int`` or ``float`` (not a bool) that is finite: NaN, infinity and an
    int too large for a float (``10**400``: no timer can take it) are not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_count(owner: str, name: str, value: object, *, minimum: int = 0, optional: bool = False) -> None:
    """Refuse anything but an ``int`` ``>= minimum`` (``None`` too, with ``optional``)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        want = "a positive integer" if minimum == 1 else "a non-negative integer"
        if optional:
            want += " or None"
        raise ValueError(f"{owner}: {name} must be {want}, got {value!r}")


def check_seconds(
    owner: str, name: str, value: object, *, optional: bool = False, positive: bool = False
) -> None:
    """Refuse anything but a finite number of seconds (``>= 0``, or ``> 0`` with ``positive``): a
    bool, a string, NaN and infinity included. The message names ``owner``, ``name`` and the value."""
    if value is None and optional:
        return
    if is_finite_number(value) and (value > 0 if positive else value >= 0):  # type: ignore[operator]
        return
    want = "a finite positive number of seconds" if positive else "a finite non-negative number of seconds"
    raise ValueError(f"{owner}: {name} must be {want}{' or None' if optional else ''}, got {value!r}")
