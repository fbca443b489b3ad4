"""docs/api.md is generated from the code by docs/gen_api.py and committed: plain Markdown, readable
in a repository browser (no mkdocstrings directives), and never stale."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"
sys.path.insert(0, str(ROOT / "docs"))

import gen_api  # noqa: E402

import pytest_mcpfaults  # noqa: E402
from pytest_mcpfaults import faults  # noqa: E402


def test_the_committed_page_is_what_the_code_generates() -> None:
    assert PAGE.read_text() == gen_api.render(), (
        "docs/api.md is stale: run `python docs/gen_api.py` and commit the page"
    )


def test_the_check_mode_passes_on_the_committed_page_and_fails_on_a_stale_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_api.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    stale = tmp_path / "api.md"
    stale.write_text(PAGE.read_text().replace("### `install_recorder()`", "### `install_recorder_old()`"))
    monkeypatch.setattr(gen_api, "PAGE", stale)
    assert gen_api.main(["--check"]) == 1
    assert "api.md is stale: run `python docs/gen_api.py`" in capsys.readouterr().err


def test_the_page_is_plain_markdown() -> None:
    text = PAGE.read_text()
    assert not re.search(r"^:::", text, re.M), "a mkdocstrings directive: unreadable outside the site"
    assert not re.search(r":(class|meth|func|attr):`", text), "a reST role left in the page"


def _headings() -> set[str]:
    return set(re.findall(r"^#{2,4} `([^`]+?)(?:\(\))?`$", PAGE.read_text(), re.M))


def test_every_public_name_and_fixture_has_its_heading() -> None:
    headings = _headings()
    assert set(pytest_mcpfaults.__all__) <= headings
    assert "install_recorder" in headings
    assert {n for n in faults.__all__ if getattr(faults, n) not in vars(pytest_mcpfaults).values()} <= {
        h.removeprefix("pytest_mcpfaults.faults.") for h in headings
    } | set(pytest_mcpfaults.__all__)
    assert {name for name, *_ in gen_api.fixtures()} >= {"mcp_sidecar", "mcp_sidecar_factory", "mcp_spans"}
    assert {name for name, *_ in gen_api.fixtures()} <= headings


def test_the_fixtures_keyword_arguments_are_every_sidecar_parameter() -> None:
    text = PAGE.read_text().split("## Fixtures", 1)[1].split("\n## ", 1)[0]
    table = text.split("### `mcp_sidecar`", 1)[1].split("### ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert listed == list(inspect.signature(pytest_mcpfaults.Sidecar).parameters)
    factory = text.split("### `mcp_sidecar_factory`", 1)[1].split("### ", 1)[0]
    assert "those of `Sidecar`" in factory
