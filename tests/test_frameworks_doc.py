"""docs/frameworks.md shows what its tox envs measured: the five recipes are the tested modules, each
run by a tox env that pins the framework the page names, and the page's tables are what
docs/examples/frameworks/table.py prints from the measurements those runs wrote.

(The framework modules themselves need the frameworks installed: they run in ``tox -m frameworks``.)
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "frameworks.md").read_text()
FOLDER = ROOT / "docs" / "examples" / "frameworks"
#: tox env -> (the module it runs, the pinned requirement, the results files it writes)
ENVS = {
    "fw-openai-agents": ("openai_agents_test.py", "openai-agents==0.24.0", ["openai-agents"]),
    "fw-pydantic-ai": ("pydantic_ai_test.py", "pydantic-ai-slim[mcp]==2.68.0", ["pydantic-ai"]),
    "fw-langchain": (
        "langchain_test.py",
        "langchain-mcp-adapters==0.3.2",
        ["langchain", "langchain-per-call"],
    ),
    "fw-strands": ("strands_test.py", "strands-agents==1.62.0", ["strands"]),
    "fw-adk": ("adk_test.py", "google-adk[mcp]==2.13.0", ["adk", "adk-modern"]),
}


def _tox() -> configparser.ConfigParser:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    return tox


def _table_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("frameworks_table", FOLDER / "table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("env", ENVS)
def test_each_framework_has_a_tox_env_running_its_recipe_module(env: str) -> None:
    module, pin, _ = ENVS[env]
    section = _tox()[f"testenv:{env}"]
    assert pin in section["deps"].split()
    assert section["commands"].split()[:2] == ["pytest", f"docs/examples/frameworks/{module}"]
    assert section["labels"].strip() == "frameworks"
    assert env not in _tox()["tox"]["env_list"]  # heavy: not in the default list
    assert f'--8<-- "docs/examples/frameworks/{module}:recipe"' in PAGE
    text = (FOLDER / module).read_text()
    assert "# --8<-- [start:recipe]" in text and "# --8<-- [end:recipe]" in text
    assert pin.replace('"', "") in PAGE.replace('"', "")  # the page's install line is the env's pin


@pytest.mark.parametrize("env", ENVS)
def test_the_measurements_come_from_the_pinned_versions(env: str) -> None:
    _, pin, names = ENVS[env]
    for name in names:
        doc = json.loads((FOLDER / "results" / f"{name}.json").read_text())
        assert f"{doc['dist']}=={doc['version']}" == pin
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", doc["date"])
        assert doc["cases"], name


def test_the_page_shows_the_tables_table_py_prints() -> None:
    table = _table_module()
    block = PAGE.split("<!-- table.py: start -->\n", 1)[1].split("<!-- table.py: end -->", 1)[0]
    assert block.strip() == table.render(table.load(FOLDER / "results")).strip()
