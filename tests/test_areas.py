"""The suite's area markers (tests/areas.py, applied by tests/conftest.py): every test module has
exactly one area, every area and ``slow`` is registered in pyproject.toml, and ``-m AREA`` selects
exactly that area's modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from areas import AREAS, DURATIONS, SLOW, module_walls

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_every_test_module_has_exactly_one_area() -> None:
    modules = sorted(p.stem for p in TESTS.glob("test_*.py"))
    mapped = [m for group in AREAS.values() for m in group]
    assert sorted(mapped) == modules  # none missing, none twice, none stale


def test_the_areas_and_slow_are_the_registered_markers() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert {line.split(":", 1)[0] for line in ini["markers"]} == {*AREAS, "slow"}


def test_the_slow_entries_name_real_modules_and_tests() -> None:
    for entry in SLOW:
        module, _, test = entry.partition("::")
        source = (TESTS / f"{module}.py").read_text()
        assert not test or f"def {test}(" in source, entry


def test_the_measured_durations_name_real_modules() -> None:
    """A module removed or renamed leaves a stale entry: refresh the file (a module not measured yet
    is dealt by tests/conftest.py's rule, so a new one needs no entry at once)."""
    modules = {m for ms in AREAS.values() for m in ms}
    stale = set(module_walls()) - modules
    assert not stale, f"{DURATIONS.name} names {sorted(stale)}: benchmarks/suite_time.py --write-durations"
    assert all(isinstance(s, float) and s >= 0 for s in module_walls().values())


def test_minus_m_selects_an_area_and_not_slow(pytester: pytest.Pytester) -> None:
    def collected(*args: str) -> set[str]:  # a few modules of several areas: collecting all takes long
        modules = [
            str(TESTS / f"{m}.py") for m in ("test_stdio", "test_cli", "test_docs", "test_quickstart_venv")
        ]
        # In-process: the selection is this conftest's and pyproject.toml's (the rootdir is the
        # repository's, found from the paths), not a fresh interpreter's, so no child pytest is started.
        out = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider", *args, *modules)
        assert out.ret == 0, "\n".join(out.outlines[-40:] + out.errlines[-40:])
        return {line for line in out.outlines if "::" in line}

    # test_stdio: stdio; test_cli: cli; test_docs: docs, two of its tests slow; test_quickstart_venv: slow
    nodes = collected("-m", "stdio or (docs and not slow)")
    assert {n.split("::", 1)[0] for n in nodes} == {"tests/test_stdio.py", "tests/test_docs.py"}
    assert "tests/test_docs.py::test_there_are_examples_and_pages" in nodes
    assert "tests/test_docs.py::test_doc_examples_pass" not in nodes


def test_contributing_lists_every_marker_as_registered() -> None:
    """CONTRIBUTING.md's marker table is pyproject.toml's ``markers``, row for row."""
    tomllib = pytest.importorskip("tomllib")
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = [tuple(part.strip() for part in line.split(":", 1)) for line in ini["markers"]]
    rows = [
        line.split("|")[1:3]
        for line in (ROOT / "CONTRIBUTING.md").read_text().splitlines()
        if line.startswith("| `")
    ]
    table = [(name.strip().strip("`"), what.strip().replace("`", "")) for name, what in rows]
    assert table == registered


def test_no_inner_test_file_takes_the_name_of_a_suite_module() -> None:
    """An in-process pytester run (``pytester.runpytest``) imports its files into the worker's
    ``sys.modules``: a file named as a module of this suite the worker already imported fails its
    collection with "import file mismatch" (``test_stall_verdict`` wrote ``test_progress.py``)."""
    import re

    modules = {p.stem for p in TESTS.glob("*.py")}
    named = {
        (p.name, m[1])
        for p in TESTS.glob("test_*.py")
        for m in re.finditer(r"make(?:py|conftest)?file\(\s*(\w+)\s*=", p.read_text())
    }
    assert sorted((where, name) for where, name in named if name in modules) == []
