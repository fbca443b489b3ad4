"""The docs tables that list every kind are made from the registry when the site is built (the
``<!-- mcpfaults:kinds-… -->`` markers of docs/faults.md, filled by docs/hooks.py); nothing generated is
committed. This checks what the hook puts there: a row for every registered kind, a kind of one's own
included, so a kind added, removed or changed shows on the page without anyone remaking it."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_mcpfaults.faults import KIND_NAME, Status, fault_kinds, unregister_fault_kind

DOCS = Path(__file__).resolve().parent.parent / "docs"
sys.path.insert(0, str(DOCS))

import hooks  # noqa: E402

PAGE = DOCS / "faults.md"
MARKERS = ("kinds-text-form", "kinds-transports", "kinds-legacy-sse")


def _tables(text: str) -> dict[str, list[str]]:
    """The kinds of each filled table, in order, by the marker it replaced."""
    filled = hooks.fill(text)
    out = {}
    for name in MARKERS:
        assert f"<!-- mcpfaults:{name} -->" not in filled
        header = hooks.TABLES[name]().split("\n", 1)[0]
        table = filled.split(f"\n{header}\n", 1)[1].split("\n\n", 1)[0]
        out[name] = re.findall(rf"^\| `({KIND_NAME})` \|", table, re.M)
    return out


def test_the_faults_page_marks_its_kind_tables_and_commits_none() -> None:
    text = PAGE.read_text()
    for name in MARKERS:
        assert text.count(f"\n<!-- mcpfaults:{name} -->\n") == 1, name
    assert "| `die` | `*` |" not in text  # the text-form table is not in git


def test_each_kind_table_has_a_row_for_every_registered_kind_in_registry_order() -> None:
    tables = _tables(PAGE.read_text())
    assert tables == {name: list(fault_kinds()) for name in MARKERS}


def test_a_new_kind_gets_its_rows_and_loses_them_when_unregistered() -> None:
    @dataclass(frozen=True)
    class Teapot(Status):
        """Answer 418. The rest of this docstring is not in the table."""

        kind: ClassVar[str] = "teapot_made_up"
        default_target: ClassVar[str] = "health"
        code: int = 418

    text = PAGE.read_text()
    try:
        filled = hooks.fill(text)
        assert "| `teapot_made_up` | `health` | `code=418`, `retry_after`, `body` | Answer 418. |" in filled
        assert "| `teapot_made_up` | yes | yes | no |" in filled
    finally:
        unregister_fault_kind("teapot_made_up")
    assert "teapot_made_up" not in hooks.fill(text)


def test_an_unknown_marker_fails_the_build_naming_the_tables() -> None:
    with pytest.raises(
        ValueError, match=r"unknown table marker '<!-- mcpfaults:kinds-txt -->'; the tables: "
    ):
        hooks.fill("<!-- mcpfaults:kinds-txt -->\n")


def test_the_fuzzing_pages_in_process_table_names_every_http_kind_as_the_registry_says() -> None:
    """docs/fuzzing.md's hand-written in-process table says how each kind acts there: every built-in
    HTTP kind is in it once, in a **refused** row exactly when the in-process backend refuses it
    (it left out `ignore_cancel`, which it takes, and nine it refuses)."""
    page = (DOCS / "fuzzing.md").read_text()
    table = page.split("| fault | in-process |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines():
        cell, says = line.split(" | ", 1)
        for kind in re.findall(rf"`({KIND_NAME})`", cell):
            assert kind not in rows, f"{kind} is in two rows"
            rows[kind] = "**refused**" in says
    kinds = fault_kinds().items()
    http = {
        k: cls
        for k, cls in kinds
        if cls.__module__ == "pytest_mcpfaults.faults.kinds" and "http" in cls.transports
    }
    assert rows == {k: cls.needs_sockets is not None for k, cls in http.items()}
