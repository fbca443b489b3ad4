"""The package stays typed and lint-clean: mypy --strict (pyproject config) and ruff, as CI proves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINTED = ["pytest_mcpfaults", "tests", "examples", "docs/examples", "benchmarks"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=400
    )


@pytest.mark.timeout(450)
def test_mypy_strict_is_clean_on_the_package() -> None:
    proc = _run("mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout


def test_ruff_check_and_format_are_clean() -> None:
    check = _run("ruff", "check", *LINTED)
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = _run("ruff", "format", "--check", *LINTED)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


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
