"""A fault kind describes itself once, on its class: defining a subclass with a new ``kind`` makes it
appear in the text form, the strategies, the matrix catalogue and the in-process backend, with no
list edited anywhere."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
import pytest
from hypothesis import find

from pytest_mcpfaults import Hang, Sidecar, Status, fault_kinds, parse_fault
from pytest_mcpfaults.faults import (
    KIND_NAME,
    Draw,
    Fault,
    Trigger,
    fault_from_dict,
    format_plan,
    parse_plan,
    unregister_fault_kind,
)
from pytest_mcpfaults.inprocess import check_plan, mock_sidecar
from pytest_mcpfaults.matrix import catalogue, catalogue_kinds, not_in_catalogue, standard_catalogue
from pytest_mcpfaults.report import Report, TestEntry, plan_kind, summary_lines
from pytest_mcpfaults.strategies import faults, kind_order


@pytest.fixture
def overloaded() -> Iterator[type[Status]]:
    """A made-up kind: a rate-limited answer, simplest of all kinds, drawn with three Retry-After values."""

    @dataclass(frozen=True)
    class Overloaded(Status):
        """429 with a Retry-After header."""

        kind: ClassVar[str] = "overloaded"
        shrink_rank: ClassVar[int] = 1
        draws: ClassVar[Mapping[str, Draw]] = {"retry_after": (1, 2, 5)}
        catalogue_params: ClassVar[Mapping[str, Any] | None] = {"retry_after": 3}
        code: int = 429
        retry_after: int | None = 1

    yield Overloaded
    unregister_fault_kind("overloaded")


def test_a_new_kind_is_in_the_text_and_dict_forms(overloaded: type[Status]) -> None:
    fault = parse_fault("overloaded(retry_after=2)@health[times=1]")
    assert fault == overloaded(retry_after=2, when=Trigger("health", times=1))
    assert str(fault) == "overloaded(retry_after=2)@health[times=1]"
    assert fault_from_dict(fault.to_dict()) == fault
    assert list(fault_kinds())[-1] == "overloaded"


def test_a_new_kind_is_drawn_first_of_its_group_and_shrinks_to_its_first_draw(
    overloaded: type[Status],
) -> None:
    # rank 1, but it draws one parameter: first of the kinds that draw one, after those drawing none
    assert kind_order().index("overloaded") == kind_order().index("error_payload") - 1
    assert find(faults(kinds=["overloaded", "error_payload", "status"]), lambda f: True).kind == "overloaded"
    drawn = find(faults(), lambda f: f.kind == "overloaded")
    assert drawn == overloaded(retry_after=1, when="tool:create_session")
    big = find(faults(kinds=["overloaded"]), lambda f: f.retry_after == 5)  # type: ignore[attr-defined]
    assert big.retry_after == 5  # type: ignore[attr-defined]


def test_a_new_kind_has_a_cell_in_the_matrix_catalogue(overloaded: type[Status]) -> None:
    assert catalogue_kinds()[-1] == "overloaded"
    (cell,) = catalogue(kinds=["overloaded"])
    assert str(cell) == "overloaded(retry_after=3)@tool:delete_session"
    assert cell in standard_catalogue()


def test_a_kind_can_stay_out_of_the_catalogue_with_a_reason(overloaded: type[Status]) -> None:
    @dataclass(frozen=True)
    class Quiet(Fault):
        kind: ClassVar[str] = "quiet_made_up"
        catalogue_params: ClassVar[Mapping[str, Any] | None] = None
        not_in_catalogue: ClassVar[str] = "it is only an example"

    try:
        assert not_in_catalogue()["quiet_made_up"] == "it is only an example"
        assert "quiet_made_up" not in catalogue_kinds()
        with pytest.raises(ValueError, match=r"'quiet_made_up' is not in the standard catalogue \(it is"):
            catalogue(kinds=["quiet_made_up"])
    finally:
        unregister_fault_kind(Quiet.kind)


def test_a_kind_of_ones_own_is_checked_by_its_bool_annotations_and_left_out_by_its_reason() -> None:
    """Its ``bool`` parameters are checked as bools with no ``checks`` written (``int`` and ``float`` are
    not: their meaning is the kind's own, a negative offset may be valid); a reason alone leaves it out of
    the catalogue."""

    @dataclass(frozen=True)
    class Typed(Fault):
        kind: ClassVar[str] = "typed_made_up"
        not_in_catalogue: ClassVar[str] = "it is only an example"
        offset: int = 1
        loud: bool = False

    try:
        assert Typed.catalogue_params is None and "typed_made_up" not in catalogue_kinds()
        assert Typed(offset=-1).params() == {"offset": -1, "loud": False}
        with pytest.raises(ValueError, match=re.escape("Typed: loud must be True or False, got 'false'")):
            Typed(loud="false")  # type: ignore[arg-type]
    finally:
        unregister_fault_kind(Typed.kind)


def test_a_new_kind_behaves_as_its_base_on_both_backends(overloaded: type[Status]) -> None:
    plan = ["overloaded(retry_after=2)@health[times=1]"]
    with Sidecar(faults=plan) as sidecar:
        first, second = (httpx.get(sidecar.health_url, timeout=5) for _ in range(2))
        assert (first.status_code, first.headers["Retry-After"], second.status_code) == (429, "2", 200)
        assert sidecar.fired == {"overloaded": 1}
    assert check_plan(plan) == (parse_fault(plan[0]),)  # no needs_sockets: the in-process backend takes it
    with mock_sidecar(faults=plan) as fake:
        assert httpx.get(fake.health_url).status_code == 429
        assert fake.fired == {"overloaded": 1}


def test_kind_names_are_unique_and_built_ins_stay() -> None:
    with pytest.raises(TypeError, match=r"fault kind 'hang' is already defined by pytest_mcpfaults"):

        @dataclass(frozen=True)
        class Hang2(Fault):
            kind: ClassVar[str] = "hang"

    with pytest.raises(ValueError, match=r"'hang' is a built-in fault kind"):
        unregister_fault_kind("hang")
    with pytest.raises(ValueError, match=r"unknown fault kind 'nope'"):
        unregister_fault_kind("nope")
    for bad in ("Bad Name", "Slow", "_slow", "5xx", "slow-5xx", "sl\u00f6w"):
        with pytest.raises(TypeError, match=rf"kind must be a name of lower-case .*, got {bad!r}"):

            @dataclass(frozen=True)
            class Bad(Fault):
                kind: ClassVar[str] = bad


def test_a_kind_name_with_a_digit_round_trips_and_the_report_names_it() -> None:
    """One grammar (``faults.KIND_NAME``) for the registry, the text form and the report: a kind the
    registry accepts, digits and all, is read back from its text form and named whole in the report
    (it once printed ``slow_ ... never fired``)."""

    @dataclass(frozen=True)
    class Slow5xx(Status):
        kind: ClassVar[str] = "slow_5xx"
        code: int = 502

    try:
        assert re.fullmatch(KIND_NAME, "slow_5xx")
        fault = parse_fault("slow_5xx(code=504)@health[times=1]")
        assert fault == Slow5xx(504, when=Trigger("health", times=1))
        assert str(fault) == "slow_5xx(code=504)@health[times=1]"
        assert parse_plan(format_plan([fault, Slow5xx()])) == (fault, Slow5xx())
        assert plan_kind(str(fault)) == "slow_5xx"
        entry = TestEntry("t.py::test_it", plans=[[str(fault)]])
        lines = summary_lines(Report([entry]))
        assert any(line.startswith("slow_5xx ") and line.endswith("never fired") for line in lines), lines
        assert lines[-1].endswith("missing: slow_5xx"), lines
    finally:
        unregister_fault_kind("slow_5xx")


def test_a_new_blocking_kind_brings_its_own_verdict_wording() -> None:
    """The patience verdict names a held request with the kind's ``held_wording`` (from its class)."""

    @dataclass(frozen=True)
    class Dozing(Hang):
        kind: ClassVar[str] = "dozing"
        held_wording: ClassVar[str | None] = "a dozing {request}"

    try:
        with Sidecar(faults=["dozing(patience=0.2)@health"], expect_hang=True) as sidecar:
            with pytest.raises(httpx.HTTPError):
                httpx.get(sidecar.health_url, timeout=5)
            sidecar.wait_idle()
            (violation,) = sidecar.patience_violations
        assert violation.kind == "dozing"
        assert violation.what() == "a dozing `GET /health`"
        assert violation.describe().startswith(
            "the client waited 0.2 s (the whole budget) on a dozing `GET /health`"
        )
    finally:
        unregister_fault_kind("dozing")


def test_every_built_in_kind_is_exported_from_the_package() -> None:
    """The kinds are ``pytest_mcpfaults.faults``'s exports; the package root resolves them too, lazily
    (binding them at import would cost every run that loads the plugin about 60 ms), without listing
    them in its ``__all__`` (the face of at most 40 names)."""
    import pytest_mcpfaults
    from pytest_mcpfaults import faults

    for cls in fault_kinds().values():
        assert cls.__name__ in faults.__all__ and getattr(faults, cls.__name__) is cls
        assert cls.__name__ not in pytest_mcpfaults.__all__
        assert getattr(pytest_mcpfaults, cls.__name__) is cls


def test_every_kind_declares_a_phase_and_a_bad_one_is_refused() -> None:
    from pytest_mcpfaults.faults.kinds import PHASES

    assert {cls.phase for cls in fault_kinds().values()} == set(PHASES)
    assert [k for k, cls in fault_kinds().items() if cls.event] == ["ignore_eof", "ignore_sigterm"]
    # the order a request meets them (the server-request phase while its answer is made)
    assert PHASES == ("connection", "answer", "server_request", "body", "cancel", "child")
    with pytest.raises(TypeError, match=rf"phase must be one of {', '.join(PHASES)}, got 'later'"):

        @dataclass(frozen=True)
        class Later(Fault):
            kind: ClassVar[str] = "later_made_up"
            phase: ClassVar[str] = "later"  # type: ignore[assignment]
