"""docs/api.md is a short hand-written page: mkdocstrings directives (``::: module``) that the site build
expands into the signatures and docstrings of each public module's ``__all__``, and the fixtures table
that docs/hooks.py makes from the plugin's source. Nothing generated is committed; the site build
(``tests/test_docs.py``) checks the expanded page has every public name and fixture."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"
sys.path.insert(0, str(ROOT / "docs"))

import hooks  # noqa: E402

import pytest_mcpfaults  # noqa: E402

#: The modules users import by path, each with its directive on the page (the root first).
MODULES = [
    "pytest_mcpfaults",
    "pytest_mcpfaults.faults",
    "pytest_mcpfaults.spans",
    "pytest_mcpfaults.invariants",
]


def _directives(text: str) -> list[str]:
    return re.findall(r"^::: ([\w.]+)$", text, re.M)


def test_the_page_is_short_and_hand_written() -> None:
    text = PAGE.read_text()
    assert len(text.splitlines()) < 200
    assert "generated" not in text[:400].lower()
    assert "<!-- mcpfaults:fixtures -->" in text


def test_each_public_module_has_a_directive_showing_its_all() -> None:
    directives = _directives(PAGE.read_text())
    assert directives[0] == "pytest_mcpfaults"
    assert set(MODULES) <= set(directives)
    for block in re.split(r"^::: ", PAGE.read_text(), flags=re.M)[1:]:
        path = block.split("\n", 1)[0]
        module, _, name = path.rpartition(".")
        if name[:1].isupper():  # a class, by its module's path
            assert hasattr(importlib.import_module(module), name), path
            continue
        assert hasattr(importlib.import_module(path), "__all__"), path
        assert "\n      filters: public\n" in block, path  # the module's __all__, nothing else


def test_every_fixture_has_its_heading_in_the_filled_page() -> None:
    headings = set(re.findall(r"^### `(\w+)`$", hooks.fill(PAGE.read_text()), re.M))
    names = {name for name, *_ in hooks.fixtures()}
    assert names >= {"mcp_sidecar", "mcp_sidecar_factory", "mcp_spans", "mcp_stdio_server"}
    assert names <= headings


def test_the_fixtures_keyword_arguments_are_every_sidecar_parameter() -> None:
    text = hooks.fill(PAGE.read_text()).split("## Fixtures", 1)[1].split("\n## ", 1)[0]
    table = text.split("### `mcp_sidecar`", 1)[1].split("### ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert listed == list(inspect.signature(pytest_mcpfaults.Sidecar).parameters)
    factory = text.split("### `mcp_sidecar_factory`", 1)[1].split("### ", 1)[0]
    assert "those of `Sidecar`" in factory
