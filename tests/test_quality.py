"""The package ships its type marker and the documented spellings type-check in user code.

mypy --strict on the package and ruff over the tree run in `.ci/run` (its lint step), not here: they
check the source, not behaviour, and cost the unit suite most of a minute.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=400
    )


def test_package_ships_its_type_marker() -> None:
    assert (ROOT / "pytest_mcpfaults" / "py.typed").exists()


USER_CODE = """
from pytest_mcpfaults import Hang, Sidecar, Stall, Status, Trigger, parse_fault

plan = [Stall(after_bytes=0, when="tools/call"), Status(503, when=Trigger("health", times=3)), Hang()]
with Sidecar(faults=[*plan, parse_fault("backend_gone")]) as sidecar:
    target: str = plan[0].trigger.target
    url: str = sidecar.mcp_url
"""


@pytest.mark.timeout(450)
def test_typed_user_code_passes_mypy_strict(tmp_path: Path) -> None:
    """The documented spellings (``when="tools/call"``) type-check in a user's mypy --strict run."""
    user = tmp_path / "user_test_code.py"
    user.write_text(USER_CODE)
    proc = _run("mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), str(user))
    assert proc.returncode == 0, proc.stdout + proc.stderr
