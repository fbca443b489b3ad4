"""The shared predicates of ``pytest_mcpfaults.options.validation``: the one rule behind every "positive
number of seconds" and "count" check (Sidecar, the ini options, the CLI, the strategies, the faults)."""

from __future__ import annotations

import math

import pytest

from pytest_mcpfaults.options.validation import (
    is_count,
    is_finite_number,
    is_integer,
    is_loopback_host,
    is_positive_seconds,
    is_probability,
)

NOT_NUMBERS = [True, False, None, "1", b"1", [1], 1j]


@pytest.mark.parametrize("value", [0.001, 1, 2.5, 1e300, 10**300])
def test_positive_seconds_are_finite_numbers_above_zero(value: object) -> None:
    assert is_positive_seconds(value)
    assert is_finite_number(value)


@pytest.mark.parametrize("value", [0, 0.0, -1, -0.5, math.inf, -math.inf, math.nan, 10**400, *NOT_NUMBERS])
def test_not_positive_seconds(value: object) -> None:
    """Zero, negatives, NaN, infinity, an int no float can hold (no timer takes it), bools, strings."""
    assert not is_positive_seconds(value)


@pytest.mark.parametrize(
    ("value", "minimum", "ok"), [(0, 0, True), (1, 1, True), (0, 1, False), (-1, 0, False)]
)
def test_counts_are_ints_from_the_minimum(value: int, minimum: int, ok: bool) -> None:
    assert is_count(value, minimum) is ok
    assert is_integer(value)


@pytest.mark.parametrize("value", [1.0, 2.5, math.nan, *NOT_NUMBERS])
def test_only_ints_are_counts(value: object) -> None:
    """``True`` is not a count of 1, ``1.0`` is not an int."""
    assert not is_count(value)
    assert not is_integer(value)


@pytest.mark.parametrize(("value", "ok"), [(0, True), (1, True), (0.5, True), (1.01, False), (-0.1, False)])
def test_probabilities_lie_in_0_1(value: float, ok: bool) -> None:
    assert is_probability(value) is ok


@pytest.mark.parametrize("value", [math.nan, math.inf, *NOT_NUMBERS])
def test_not_probabilities(value: object) -> None:
    assert not is_probability(value)


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("::", False),
        ("example.test", False),
        ("", False),
        ("LOCALHOST.", False),
    ],
)
def test_loopback_hosts(host: str, ok: bool) -> None:
    """The one rule Sidecar(host=), `serve --host` and the Origin check share."""
    assert is_loopback_host(host) is ok


def test_the_module_needs_no_test_framework() -> None:
    """It is imported by Sidecar and the CLI as well as by the pytest and Hypothesis layers."""
    import ast
    import pathlib

    import pytest_mcpfaults.options.validation as v

    tree = ast.parse(pathlib.Path(v.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "ipaddress", "math", "typing"}


@pytest.mark.parametrize(
    ("text", "off", "expected"),
    [
        ("2.5", "none", 2.5),
        (" 1 ", "none", 1.0),
        ("none", "none", None),
        ("NONE", "none", None),
        ("off", "off", None),
    ],
)
def test_parse_seconds_reads_a_duration_or_the_off_word(text: str, off: str, expected: float | None) -> None:
    from pytest_mcpfaults.options.validation import parse_seconds

    assert parse_seconds(text, off=off) == expected


@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "abc", "", "off", "1e999"])
def test_parse_seconds_refuses_anything_else(text: str) -> None:
    from pytest_mcpfaults.options.validation import parse_seconds

    with pytest.raises(ValueError, match="number of seconds"):
        parse_seconds(text)
