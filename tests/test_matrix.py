"""The fault matrix: the standard catalogue (pure data) and the ``mcpfaults_matrix`` marker (via pytester)."""

from __future__ import annotations

import re

import pytest

from pytest_mcpfaults import BackendGone, Flap, ToolError, fault_kinds
from pytest_mcpfaults.matrix import (
    NOT_IN_CATALOGUE,
    STANDARD_CATALOGUE,
    TEARDOWN_TARGET,
    catalogue,
    catalogue_kinds,
)

# -- the catalogue --------------------------------------------------------------------------------


def test_catalogue_has_one_fault_per_kind_in_kind_order() -> None:
    assert catalogue_kinds() == tuple(k for k in fault_kinds() if k not in NOT_IN_CATALOGUE)
    assert len(STANDARD_CATALOGUE) == len(catalogue_kinds())  # one cell per kind in it
    # a kind is left out only with its reason; the stdio-only kinds do not apply to HTTP
    assert set(NOT_IN_CATALOGUE) == {k for k, cls in fault_kinds().items() if cls.catalogue_params is None}
    assert all(NOT_IN_CATALOGUE.values())
    assert {k for k, cls in fault_kinds().items() if "http" not in cls.transports} <= set(NOT_IN_CATALOGUE)


@pytest.mark.parametrize("argname", ["kinds", "exclude"])
def test_a_kind_left_out_of_the_catalogue_is_refused_with_the_reason(argname: str) -> None:
    message = (
        f"{argname}: fault kind 'error_payload' is not in the standard catalogue (at the delete it is the "
        "failed delete backend_gone already stages, with another reason); give it as faults=[...] instead"
    )
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        catalogue(**{argname: ["error_payload"]})  # type: ignore[arg-type]


def test_catalogue_aims_at_teardown_except_health_kinds() -> None:
    targets = {f.kind: f.when.target for f in STANDARD_CATALOGUE}
    assert targets.pop("flap") == "health"
    assert targets.pop("absent") == "health"
    assert set(targets.values()) == {TEARDOWN_TARGET}


def test_ids_are_the_text_forms() -> None:
    ids = [str(f) for f in STANDARD_CATALOGUE]
    assert ids[:2] == ["die@tool:delete_session", "freeze@tool:delete_session"]
    assert "flap" in ids
    assert "backend_gone" in ids
    assert len(set(ids)) == len(ids)


def test_subset_exclude_and_retarget() -> None:
    assert [f.kind for f in catalogue(kinds=["stall", "die"])] == ["die", "stall"]  # catalogue order
    assert "flap" not in [f.kind for f in catalogue(exclude=["flap"])]
    assert len(catalogue(exclude=["flap"])) == len(STANDARD_CATALOGUE) - 1
    retargeted = catalogue(kinds=["die", "flap", "tool_error"], target="tools/call")
    assert [str(f) for f in retargeted] == ["die@tools/call", "flap", "tool_error"]
    assert retargeted[1] == Flap()  # health kinds keep their target
    assert retargeted[2] == ToolError(when="tools/call")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"kinds": ["die", "explode"]},
            "kinds: unknown fault kind 'explode'; valid kinds: die, freeze, hang",
        ),
        ({"exclude": ["nope"]}, "exclude: unknown fault kind 'nope'; valid kinds: die, freeze"),
        ({"kinds": "die"}, "kinds must be a list of fault kind names or Fault classes, got 'die'"),
        ({"kinds": ["die"], "exclude": ["die"]}, "the fault matrix is empty"),
        ({"kinds": ["backend_gone"], "target": "health"}, "target='health': BackendGone: answers tools/call"),
        ({"target": "nowhere"}, "target 'nowhere' is unknown"),
    ],
)
def test_bad_selection_names_the_argument(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        catalogue(**kwargs)  # type: ignore[arg-type]


def test_default_backend_gone_aims_at_delete_session() -> None:
    assert BackendGone() in STANDARD_CATALOGUE


# -- the marker, through pytest -------------------------------------------------------------------

DELETE = """
import httpx

def delete_session(sidecar):
    # One stateless-era tools/call of the benchmark cleanup tool, as a harness sends it at teardown.
    return httpx.post(
        sidecar.mcp_url,
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
              "params": {"name": "delete_session", "arguments": {"session_id": "s-1"}}},
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                 "Mcp-Method": "tools/call", "Mcp-Name": "delete_session"},
        timeout=5,
    )
"""


def test_marker_ids_cover_the_whole_catalogue(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mcpfaults_matrix
        def test_cleanup(mcp_sidecar):
            pass

        @pytest.mark.mcpfaults_matrix(kinds=["die", "stall"], target="tools/call")
        def test_sub(mcpfaults_fault):
            pass
        """
    )
    result = run_plugin("--collect-only", "-q")
    assert result.ret == 0
    ids = [line for line in result.outlines if "::" in line]
    assert ids[:3] == [
        "test_marker_ids_cover_the_whole_catalogue.py::test_cleanup[die@tool:delete_session]",
        "test_marker_ids_cover_the_whole_catalogue.py::test_cleanup[freeze@tool:delete_session]",
        "test_marker_ids_cover_the_whole_catalogue.py::test_cleanup[hang@tool:delete_session]",
    ]
    names = [line.split("::")[1] for line in ids]
    assert len(names) == len(STANDARD_CATALOGUE) + 2  # test_cleanup's whole catalogue, test_sub's two
    assert {
        "test_cleanup[flap]",
        "test_cleanup[backend_gone]",
        "test_cleanup[stall@tool:delete_session]",
    } <= set(names)
    assert names[-2:] == ["test_sub[die@tools/call]", "test_sub[stall@tools/call]"]


def test_the_fault_reaches_the_sidecar_and_fires(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(helpers=DELETE)
    pytester.makepyfile(
        """
        import json, pytest
        from helpers import delete_session

        @pytest.mark.mcp_sidecar(faults=["delay(seconds=0)"])
        @pytest.mark.mcpfaults_matrix(kinds=["tool_error", "jsonrpc_error", "backend_gone"])
        def test_cleanup(mcp_sidecar, mcpfaults_fault):
            # the matrix's fault comes first, the marker's faults after it
            assert [str(f) for f in mcp_sidecar.plan] == [str(mcpfaults_fault), "delay(seconds=0)"]
            reply = delete_session(mcp_sidecar).json()
            print("REPLY", mcpfaults_fault.kind, json.dumps(reply, sort_keys=True))
            assert mcp_sidecar.fired == {mcpfaults_fault.kind: 1}
            assert mcp_sidecar.journal.sequence() == ["POST tools/call delete_session"]

        @pytest.mark.mcpfaults_matrix(faults=["status(code=502)@tool:delete_session"])
        def test_custom(mcp_sidecar_factory, mcpfaults_fault):
            with mcp_sidecar_factory(faults=[mcpfaults_fault]) as sc:
                assert delete_session(sc).status_code == 502
                assert sc.fired == {"status": 1}
        """
    )
    result = run_plugin("-v", "-s")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            '*test_cleanup?jsonrpc_error@tool:delete_session? REPLY jsonrpc_error {"error": {"code": -32603, '
            '"message": "Internal error"}*',
            '*test_cleanup?tool_error@tool:delete_session? REPLY tool_error {"id": 7, "jsonrpc": "2.0", '
            '"result": {*"isError": true*',
            "*test_cleanup?backend_gone? REPLY backend_gone *Error closing session s-1: Service at *"
            "no longer alive*",
            "*test_custom?status(code=502)@tool:delete_session? PASSED*",
        ]
    )


@pytest.mark.parametrize(
    ("marker", "fixture", "message"),
    [
        (
            "mcpfaults_matrix(kinds=['die', 'explode'])",
            "mcp_sidecar",
            "*kinds: unknown fault kind 'explode'; valid kinds: die, freeze, hang, delay*",
        ),
        (
            "mcpfaults_matrix(colour='red')",
            "mcp_sidecar",
            "*unknown argument 'colour'; valid arguments: kinds*",
        ),
        ("mcpfaults_matrix('die')", "mcp_sidecar", "*keyword arguments only*got positional ('die',)*"),
        (
            "mcpfaults_matrix(faults=['die'], kinds=['die'])",
            "mcp_sidecar",
            "*cannot be combined with kinds=*",
        ),
        ("mcpfaults_matrix(faults=['boom@x'])", "mcp_sidecar", "*unknown kind 'boom'*"),
        ("mcpfaults_matrix", "tmp_path", "*uses neither the mcp_sidecar nor the mcpfaults_fault fixture*"),
    ],
)
def test_bad_marker_is_a_usage_error_at_collection(
    pytester: pytest.Pytester,
    run_plugin,  # type: ignore[no-untyped-def]
    marker: str,
    fixture: str,
    message: str,
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}
        def test_it({fixture}):
            raise AssertionError("must not run")
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the module's collection failed
    result.stdout.fnmatch_lines(
        ["*ERROR collecting*", "*test_it: @pytest.mark.mcpfaults_matrix: *" + message[1:]]
    )
    result.stdout.no_fnmatch_line("*must not run*")
