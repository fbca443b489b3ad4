"""docs/faults.md's catalogue table is pinned to the fault registry: one row per built-in kind, in
catalogue order, each with the class's parameter defaults and default target. Adding a kind without its
row, or changing a default without the docs, fails here."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from pytest_mcpfaults.faults import fault_kinds
from pytest_mcpfaults.text_values import format_value

PAGE = Path(__file__).resolve().parent.parent / "docs" / "faults.md"


def catalogue_rows() -> list[list[str]]:
    text = PAGE.read_text()
    table = text.split("## The catalogue", 1)[1].split("\n\n| kind |", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    return [r for r in rows if re.fullmatch(r"`[A-Za-z]+`", r[0])]  # one row per class; variants skipped


def test_every_built_in_kind_has_one_row_in_catalogue_order() -> None:
    built_in = [
        cls.__name__ for cls in fault_kinds().values() if cls.__module__.startswith("pytest_mcpfaults")
    ]
    assert [r[0].strip("`") for r in catalogue_rows()] == built_in


def test_each_row_states_the_class_defaults_and_default_target() -> None:
    kinds = {cls.__name__: cls for cls in fault_kinds().values()}
    for row in catalogue_rows():
        cls = kinds[row[0].strip("`")]
        cell = row[1]
        target = re.search(r"\(`([^`]+)`\)\s*$", cell)
        assert target is not None, f"{cls.__name__}: no (default target) in {cell!r}"
        assert target.group(1) == cls.default_target, cls.__name__
        shown = dict(re.findall(r"`(\w+)=([^`]*)`", cell))
        for f in dataclasses.fields(cls):
            if f.name in shown:
                default = f.default if f.default is not dataclasses.MISSING else None
                assert shown[f.name] == repr(default) or shown[f.name] == format_value(default), (
                    f"{cls.__name__}.{f.name}: docs say {shown[f.name]}, the class {default!r}"
                )
        blocking_params = {"patience", "expect_hang"}
        own = {f.name for f in dataclasses.fields(cls)} - {"when"} - blocking_params
        missing = own - set(shown)
        assert not missing, f"{cls.__name__}: parameters {sorted(missing)} not in the docs' row"


MCP1_TESTS = PAGE.parent.parent / "tests" / "test_faults_mcp1.py"
MCP1_COLUMN = "what the mcp 1.x `ClientSession` sees"


def catalogue_header() -> list[str]:
    text = PAGE.read_text()
    line = "| kind |" + text.split("## The catalogue", 1)[1].split("\n\n| kind |", 1)[1].split("\n", 1)[0]
    return [c.strip() for c in line.strip("|").split("|")]


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
    """Every row's mcp 1.x cell is backed by a test of a module the row names in "proved in": either
    ``test_mcp1_<kind>`` in tests/test_faults_mcp1.py (tox's ``mcp1`` env runs that file; it skips under
    mcp 2.x), or a test of the kind's own module that calls it with the mcp 1.x client through the
    ``mcp1_client`` fixture (a child Python with the mcp 1.x overlay), so a new kind's one test carries
    both clients."""
    header = catalogue_header()
    assert MCP1_COLUMN in header, header
    col = header.index(MCP1_COLUMN)
    tests = set(_tests_of(MCP1_TESTS))
    names = {cls.__name__: kind for kind, cls in fault_kinds().items()}
    for row in catalogue_rows():
        cls = row[0].strip("`")
        kind = names[cls]
        assert row[col], f"{kind}: no mcp 1.x cell"
        named = re.findall(r"`(test_\w+\.py)`", row[-1])
        in_mcp1_file = "test_faults_mcp1.py" in named and (
            any(t == f"test_mcp1_{kind}" or t.startswith(f"test_mcp1_{kind}_") for t in tests)
            or (row[col] == "—" and any(kind in t for t in tests))
        )
        own = [
            t
            for module in named
            if module != MCP1_TESTS.name and (MCP1_TESTS.parent / module).is_file()
            for t in measured_with_the_mcp1_client(MCP1_TESTS.parent / module, kind, cls)
        ]
        assert in_mcp1_file or own, (
            f"{kind}: its mcp 1.x cell is measured by no test: give it test_mcp1_{kind} in "
            f"{MCP1_TESTS.name}, or a test taking the mcp1_client fixture in a module its row names "
            f"(it names {named})"
        )
    tox = (PAGE.parent.parent / "tox.ini").read_text()
    mcp1 = tox.split("[testenv:mcp1]", 1)[1].split("\n[", 1)[0]
    assert "tests/test_faults_mcp1.py" in mcp1.split("commands =", 1)[1]
