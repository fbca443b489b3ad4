"""A quoted boolean (``die(restart="false")``, a string) is refused wherever a fault is given: a marker's
``faults=`` at collection, ``serve --fault``, the control API (the plan all-or-nothing: nothing applied,
the sidecar untouched) and a kind of one's own whose parameter is ``bool | None``. The constructor, the
text form and the dict form of the built-in kinds: ``test_faults_triggers.py``."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import httpx
import pytest

from pytest_mcpfaults import Fault, Sidecar, fault_from_dict, parse_fault
from pytest_mcpfaults.cli import main
from pytest_mcpfaults.faults import unregister_fault_kind
from pytest_mcpfaults.transports.control import Control

TOKEN = "q" * 32
MESSAGE = "Die: restart must be True or False, got 'false'"


def test_a_markers_quoted_bool_fails_collection_naming_the_parameter(
    pytester: pytest.Pytester, run_plugin: Any
) -> None:
    pytester.makepyfile(
        test_text=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp_sidecar(faults=['die(restart="false")@tool:echo'])
            def test_text(mcp_sidecar):
                raise AssertionError("must not run")
            """
        ),
        test_built=textwrap.dedent(
            """
            import pytest
            from pytest_mcpfaults import Die

            @pytest.mark.mcp_sidecar(faults=[Die(restart="false")])
            def test_built(mcp_sidecar):
                raise AssertionError("must not run")
            """
        ),
    )
    result = run_plugin("--continue-on-collection-errors")
    result.stdout.fnmatch_lines_random(
        [
            f"*test_text.py::test_text: @pytest.mark.mcp_sidecar: {MESSAGE}*",
            "*ERROR collecting test_built.py*",
            f"*ValueError: {MESSAGE}*",
        ]
    )
    result.assert_outcomes(errors=2)
    result.stdout.no_fnmatch_line("*must not run*")


def test_serve_refuses_a_quoted_bool_in_fault_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--fault", 'die(restart="false")@health'])
    assert exc.value.code == 2
    assert f"argument --fault: {MESSAGE}" in capsys.readouterr().err


def test_the_control_api_refuses_a_plan_with_a_quoted_bool_and_applies_none_of_it() -> None:
    sc = Sidecar()
    Control(sc, TOKEN).mount()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with sc:
        with httpx.Client(timeout=5, headers=auth) as client:
            faults = sc.url + "/_mcpfaults/faults"
            plan = {"faults": ["status@tool:echo", 'die(restart="false")@health']}
            refused = client.post(faults, json=plan)
            listed = client.get(faults).json()["faults"]
            health = client.get(sc.health_url).status_code  # no die was armed: it answers
        sc.wait_idle(5)
        assert sc.errors == []
    assert (refused.status_code, refused.json()) == (400, {"error": MESSAGE})
    assert (listed, health) == ([], 200)


@pytest.fixture
def maybe_loud() -> Any:
    @dataclass(frozen=True)
    class MaybeLoud(Fault):
        """A kind of one's own with optional bools: ``None`` means "as the sidecar likes"."""

        kind: ClassVar[str] = "maybe_loud"
        loud: bool | None = None
        quiet: Optional[bool] = None  # noqa: UP045 - the older spelling is read as bool | None too

    yield MaybeLoud
    unregister_fault_kind("maybe_loud")


@pytest.mark.parametrize("name", ["loud", "quiet"])
def test_a_kind_of_ones_own_refuses_a_quoted_bool_for_an_optional_bool(maybe_loud: Any, name: str) -> None:
    message = f"MaybeLoud: {name} must be True, False or None, got 'false'"
    for make in (
        lambda: maybe_loud(**{name: "false"}),
        lambda: parse_fault(f'maybe_loud({name}="false")'),
        lambda: fault_from_dict({"kind": "maybe_loud", name: "false"}),
    ):
        with pytest.raises(ValueError, match="^" + message):
            make()
    assert parse_fault(f"maybe_loud({name}=false)").params()[name] is False
    assert maybe_loud(**{name: None}).params()[name] is None
