"""The tox env ``mcp1``'s files, run by the README's test command too: the mcp 1.x client (what real
harnesses pin) from ``mcp1_overlay`` in a child pytest. The file list is read from tox.ini's ``mcp1``
command, so the two cannot drift; the catalogue's mcp 1.x column (docs/faults.md, pinned by test_faults_doc
to ``tests/test_faults_mcp1.py`` or to a kind's own test using the ``mcp1_client`` fixture) is measured on
every run this way.

The one test deselected is fastmcp's stdio transport: fastmcp needs mcp 2.x (tox's ``mcp1`` env does not
install it, and it skips there); the main suite runs it.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEEDS_MCP2 = "tests/test_stdio_interop.py::test_fastmcp_stdio_transport"


def mcp1_files() -> list[str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    words = tox["testenv:mcp1"]["commands"].split()
    return [w for w in words if w.endswith(".py")]


def test_tox_mcp1_files_exist_and_include_the_catalogue_column() -> None:
    files = mcp1_files()
    assert "tests/test_faults_mcp1.py" in files, files
    only_mcp1 = sorted(f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*_mcp1.py"))
    assert len(only_mcp1) >= 2 and set(only_mcp1) <= set(files), (
        only_mcp1,
        files,
    )  # conftest leaves them out
    assert all((ROOT / f).is_file() for f in files), files


def test_the_mcp1_files_pass_with_the_mcp1_client(mcp1_path: str) -> None:
    env = {**os.environ, "PYTHONPATH": mcp1_path, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "mcpfaults", "-p", "asyncio", "-p", "timeout", "-p", "xdist"]
    cmd += ["-n", "2", "-q", "-p", "no:cacheprovider", "--deselect", NEEDS_MCP2, *mcp1_files()]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert "skipped" not in summary and "failed" not in summary, summary  # mcp 1.x was really there
