"""A copy of this repository in a test's ``tmp_path``, a git repository of its own: a test adds something
there as a contributor would (a fault kind, an option), counts the files it touched from ``git status``
and checks what it added in a child Python that imports the copy's package (``tests/test_add_kind.py``,
``tests/test_options.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, timeout=60
    ).stdout


def copy_repository(tmp_path: Path) -> Path:
    """The repository's files (tracked and not ignored) copied to ``tmp_path / 'repo'``, committed."""
    copy = tmp_path / "repo"
    tracked = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "before")
    return copy


def touched(copy: Path) -> list[str]:
    """The files changed or added in ``copy`` since :func:`copy_repository`, sorted."""
    return sorted(line[3:] for line in git(copy, "status", "--porcelain", "-uall").splitlines())


def insert_after(path: Path, marker: str, text: str) -> None:
    """Insert ``text`` after the line of ``path`` holding ``marker``."""
    source = path.read_text()
    at = source.index(marker)
    end = source.index("\n", at) + 1
    path.write_text(source[:end] + text + source[end:])


def child_env(copy: Path) -> dict[str, str]:
    """The environment of a child Python that imports the copy's package, not this checkout's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = str(copy)
    # Nothing written beside the copy's sources: with the run's shared bytecode cache
    # (tests/shared_pycache.py: PYTHONPYCACHEPREFIX) the children write there, so the copy's package,
    # compiled by its first child, is read by the next ones (each compiled it again: seconds of CPU per
    # copy test); without it, none writes.
    if not env.get("PYTHONPYCACHEPREFIX"):
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_in(
    copy: Path, *args: str, timeout: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python *args`` in ``copy`` with :func:`child_env` (and ``env`` over it)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=copy,
        env={**child_env(copy), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
