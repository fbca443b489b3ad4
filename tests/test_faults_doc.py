"""The catalogue of what clients see (docs/faults.md) is each kind's ``seen`` cells, in registry order
(:func:`catalogue_rows`; the docs hook writes the table, adding each kind's parameters and default
target from the class): every built-in kind has its row and its legacy-SSE cell, each row names the
test modules that measured it, and its mcp 1.x cell is measured by one of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.faults import fault_kinds
from pytest_mcpfaults.faults.kinds import catalogue_rows

TESTS = Path(__file__).resolve().parent


def _built_in() -> list[type[F.Fault]]:
    return [cls for cls in fault_kinds().values() if cls.__module__.startswith("pytest_mcpfaults")]


def test_every_built_in_kind_has_its_row_first_then_its_variants_in_registry_order() -> None:
    rows = [(cls, seen.variant) for cls, seen in catalogue_rows()]
    assert [cls for cls, variant in rows if not variant] == _built_in()
    for i, (cls, variant) in enumerate(rows):
        if variant:  # a variant's row follows its kind's and is a valid construction of it
            assert rows[i - 1][0] is cls, variant
            assert type(eval(variant, vars(F))) is cls, variant


def test_each_row_names_its_modules_and_each_http_kind_its_legacy_sse_cell() -> None:
    for cls, seen in catalogue_rows():
        assert seen.proved and all((TESTS / m).is_file() for m in seen.proved), (cls.__name__, seen.proved)
        assert all(getattr(seen, cell).strip() for cell in ("examples", "httpx", "mcp2", "mcp1")), cls
    http = [cls.kind for cls in _built_in() if "http" in cls.transports]
    assert [kind for kind in http if not fault_kinds()[kind].legacy_sse] == []


MCP1_TESTS = TESTS / "test_faults_mcp1.py"


def _tests_of(module: Path) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(module.read_text())
    return {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
    }


def measured_with_the_mcp1_client(module: Path, kind: str, cls: str) -> list[str]:
    """The tests of ``module`` that take the ``mcp1_client`` fixture and name the kind (its text-form name
    or its class) in their body: a kind's own test measuring the mcp 1.x column (tests/mcp1_client.py)."""
    source = module.read_text()
    return [
        name
        for name, node in _tests_of(module).items()
        if "mcp1_client" in {a.arg for a in node.args.args + node.args.kwonlyargs}
        and re.search(rf"\b({kind}|{cls})\b", ast.get_source_segment(source, node) or "")
    ]


def test_the_mcp1_column_is_measured_by_a_test_per_kind() -> None:
    """Every row's mcp 1.x cell is backed by a test of a module the row names in ``proved``: either
    ``test_mcp1_<kind>`` in tests/test_faults_mcp1.py (tox's ``mcp1`` env runs that file; it skips under
    mcp 2.x), or a test of the kind's own module that calls it with the mcp 1.x client through the
    ``mcp1_client`` fixture (a child Python with the mcp 1.x overlay), so a new kind's one test carries
    both clients."""
    tests = set(_tests_of(MCP1_TESTS))
    for cls, seen in catalogue_rows():
        kind, name = cls.kind, cls.__name__
        assert seen.mcp1, f"{kind}: no mcp 1.x cell"
        in_mcp1_file = MCP1_TESTS.name in seen.proved and (
            any(t == f"test_mcp1_{kind}" or t.startswith(f"test_mcp1_{kind}_") for t in tests)
            or (seen.mcp1 == "—" and any(kind in t for t in tests))
        )
        own = [
            t
            for module in seen.proved
            if module != MCP1_TESTS.name
            for t in measured_with_the_mcp1_client(TESTS / module, kind, name)
        ]
        assert in_mcp1_file or own, (
            f"{kind}: its mcp 1.x cell is measured by no test: give it test_mcp1_{kind} in "
            f"{MCP1_TESTS.name}, or a test taking the mcp1_client fixture in a module its seen.proved "
            f"names (it names {list(seen.proved)})"
        )
    tox = (TESTS.parent / "tox.ini").read_text()
    mcp1 = tox.split("[testenv:mcp1]", 1)[1].split("\n[", 1)[0]
    assert "tests/test_faults_mcp1.py" in mcp1.split("commands =", 1)[1]
