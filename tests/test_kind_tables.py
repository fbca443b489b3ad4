"""The docs tables that list every kind are made from the registry (pytest_mcpfaults.kind_tables) and
committed; this checks they are fresh, so a kind added, removed or changed without running
``python -m pytest_mcpfaults.kind_tables`` fails here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pytest_mcpfaults import kind_tables
from pytest_mcpfaults.faults import Status, unregister_fault_kind

PAGE = Path(__file__).resolve().parent.parent / "docs" / "faults.md"


def test_the_kind_tables_of_the_faults_page_are_fresh() -> None:
    assert kind_tables.main(["--check", str(PAGE)]) == 0, "run: python -m pytest_mcpfaults.kind_tables"
    text = PAGE.read_text()
    for name in kind_tables.TABLES:
        assert f"<!-- kinds:{name} -->\n| kind |" in text


def test_a_new_kind_gets_its_rows_and_a_stale_page_is_told(tmp_path: Path) -> None:
    @dataclass(frozen=True)
    class Teapot(Status):
        """Answer 418. The rest of this docstring is not in the table."""

        kind: ClassVar[str] = "teapot_made_up"
        default_target: ClassVar[str] = "health"
        code: int = 418

    page = tmp_path / "page.md"
    page.write_text(PAGE.read_text())
    try:
        assert kind_tables.main(["--check", str(page)]) == 1
        assert kind_tables.main([str(page)]) == 0
        text = page.read_text()
        assert "| `teapot_made_up` | `health` | `code=418`, `retry_after`, `body` | Answer 418. |" in text
        assert "| `teapot_made_up` | yes | yes | no |" in text
    finally:
        unregister_fault_kind("teapot_made_up")
    assert kind_tables.main(["--check", str(page)]) == 1  # forgotten again: the page is stale
