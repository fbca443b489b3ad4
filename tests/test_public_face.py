"""The package's face: ``pytest_mcpfaults.__all__`` is one literal list of at most 40 names, the same
names the ``__init__`` imports under ``TYPE_CHECKING`` (where each lives, read by ``lazy_exports``), each
resolving lazily; the fault kinds resolve from the root without being listed; the names that left the
face stay importable where they live."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_mcpfaults
from pytest_mcpfaults.lazy import _type_checking_imports

INIT = Path(pytest_mcpfaults.__file__)

#: Names that were on the face until issue 37 and where they live now (CHANGELOG.md says so too).
LEFT = {
    "pytest_mcpfaults.mcp.tools": ["BenchmarkSession", "BenchmarkSessions"],
    "pytest_mcpfaults.proxy.cassette": ["CassetteError", "Exchange"],
    "pytest_mcpfaults.spans": [
        "RecordedEvent",
        "SpanLookupError",
        "SpanWiringWarning",
        "find_spans",
        "format_tree",
        "global_recorder",
        "one_span",
    ],
    "pytest_mcpfaults.invariants": ["Violation", "all_spans_ended", "cleanup_at_most", "format_violations"],
}


def test_all_is_one_literal_list_of_at_most_40_names_the_type_checking_imports() -> None:
    tree = ast.parse(INIT.read_text())
    [literal] = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]
    ]
    where, stars = _type_checking_imports(INIT.read_text())
    assert pytest_mcpfaults.__all__ == literal == sorted(where)
    assert len(literal) <= 40
    assert stars == ["pytest_mcpfaults.faults.kinds"]  # the kinds: resolved, not listed


def _definition(obj: object) -> tuple[str | None, str | None]:
    return getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)


def test_each_public_name_resolves_from_where_the_imports_say() -> None:
    where, _ = _type_checking_imports(INIT.read_text())
    for name in pytest_mcpfaults.__all__:
        public, defined = (
            getattr(pytest_mcpfaults, name),
            getattr(__import__(where[name], fromlist=[name]), name),
        )
        # the same object, or the same definition imported again: an in-process pytester run (say
        # tests/test_areas.py's) drops the modules it imported from sys.modules when it ends, so a name
        # the package resolved before points at the earlier import of the same class
        assert public is defined or _definition(public) == _definition(defined) != (None, None), name
    assert pytest_mcpfaults.PatienceError.__module__ == "pytest_mcpfaults.verdicts.patience"


def test_kinds_resolve_from_the_root_and_the_names_that_left_live_where_they_are() -> None:
    from pytest_mcpfaults import Fault, Stall, Status, fault_kinds  # lazily, from fault_types
    from pytest_mcpfaults.faults import Stall as FaultsStall

    assert Stall is FaultsStall and issubclass(Status, Fault) and fault_kinds()["stall"] is Stall
    for module, names in LEFT.items():
        for name in names:
            assert name not in pytest_mcpfaults.__all__
            assert hasattr(__import__(module, fromlist=[name]), name), (module, name)
            with pytest.raises(AttributeError, match=rf"module 'pytest_mcpfaults' has no attribute '{name}'"):
                getattr(pytest_mcpfaults, name)


def test_star_import_gives_the_face_and_a_fresh_import_binds_nothing_eagerly() -> None:
    code = (
        "import sys, pytest_mcpfaults as p\n"
        "eager = sorted(set(p.__all__) & set(vars(p)))\n"
        "ns = {}\n"
        "exec('from pytest_mcpfaults import *', ns)\n"
        "print(eager, sorted(k for k in ns if k != '__builtins__') == p.__all__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[0] == "[] True", out.stdout + out.stderr
