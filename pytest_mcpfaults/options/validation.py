"""Argument checks shared across the package (as Hypothesis' ``internal/validation.py``), standard library
only. The predicates (``is_*``) write each rule once, and each caller raises its own exception with its
own message (``ValueError``, ``ArgumentTypeError``, ``UsageError``, ``InvalidArgument``); the checks
(``check_*``) raise the ``ValueError`` naming the owner, the argument, the value and what is valid.
"""

from __future__ import annotations

import ipaddress
import math
from typing import TypeGuard


def is_finite_number(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a finite ``int`` or ``float``, not a bool (``10**400``: no timer can take it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


#: Host names that are loopback by definition (RFC 6761), besides the loopback IP addresses.
LOOPBACK_NAMES = ("localhost",)
_USUAL_LOOPBACK = frozenset(("127.0.0.1", "::1", "localhost"))


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``)."""
    if host in _USUAL_LOOPBACK:
        return True  # the common spellings, without parsing an address each time
    try:
        return host in LOOPBACK_NAMES or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_positive_seconds(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a duration a timer can take: a finite number ``> 0``."""
    return is_finite_number(value) and value > 0


def is_integer(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` and not a bool (``True`` is not a count of 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: object, minimum: int = 0) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` (not a bool) ``>= minimum``."""
    return is_integer(value) and value >= minimum


def is_probability(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a number (not a bool) in ``[0, 1]``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0


def check_count(owner: str, name: str, value: object, *, minimum: int = 0, optional: bool = False) -> None:
    """Refuse anything but an ``int`` ``>= minimum`` (``None`` too, with ``optional``)."""
    if value is None and optional:
        return
    if not is_count(value, minimum):
        want = "a positive integer" if minimum == 1 else "a non-negative integer"
        if optional:
            want += " or None"
        raise ValueError(f"{owner}: {name} must be {want}, got {value!r}")


#: The longest a fault may make a client wait in one go (a delay, a drip's interval, a blocking
#: fault's own patience): one hour. Past it the client has no verdict in any test's lifetime; a wait
#: with no end is what ``hang`` (with ``expect_hang``) is for.
MAX_FAULT_SECONDS = 3600.0


def check_timeout(owner: str, timeout: object) -> None:
    """Refuse a wait's ``timeout`` unless a finite number of seconds ``>= 0`` (NaN never passes a
    deadline and ``None`` would wait for ever; ``-1`` or a string is nonsense)."""
    if not is_finite_number(timeout) or timeout < 0:
        raise ValueError(
            f"{owner}: timeout must be a finite number of seconds, got {timeout!r} (valid: 0 or more)"
        )


def check_bool(owner: str, name: str, value: object, *, optional: bool = False) -> None:
    """Refuse anything but ``True`` or ``False`` (or ``None``, with ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, bool):
        valid = "True, False or None" if optional else "True or False"
        raise ValueError(f"{owner}: {name} must be {valid}, got {value!r}")


def check_seconds(
    owner: str,
    name: str,
    value: object,
    *,
    optional: bool = False,
    positive: bool = False,
) -> None:
    """Refuse anything but a finite number of seconds (``>= 0``, or ``> 0`` with ``positive``) up to
    :data:`MAX_FAULT_SECONDS`."""
    if value is None and optional:
        return
    want = "a finite positive number of seconds" if positive else "a finite non-negative number of seconds"
    if not is_finite_number(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{owner}: {name} must be {want}{' or None' if optional else ''}, got {value!r}")
    if value > MAX_FAULT_SECONDS:
        raise ValueError(
            f"{owner}: {name} must be at most {MAX_FAULT_SECONDS:g} seconds (max_fault_seconds; valid: "
            f"{want} up to {MAX_FAULT_SECONDS:g}{', or None' if optional else ''}), got {value!r}"
        )


def parse_seconds(text: str, *, off: str | None = "none") -> float | None:
    """A duration written as text: a positive finite number of seconds, or ``None`` for the word ``off``
    (any case; no word when ``off`` is ``None``); else ``ValueError``, which callers word as their own."""
    raw = text.strip()
    if off is not None and raw.lower() == off:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"not a number of seconds: {raw!r}") from None
    if not is_positive_seconds(value):  # zero, negatives, nan and inf
        raise ValueError(f"not a positive finite number of seconds: {raw!r}")
    return value
