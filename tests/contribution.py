"""One copy of the repository holding both made-up contributions the suite adds as a contributor would
(``tests/test_options.py``'s option the core reads, ``tests/test_add_kind.py``'s fault kind), each
counted from ``git status`` on its own, and its docs site built once for both: the two tests read it.

Each test made a copy of its own and built its site (about 7 s of CPU a build). Under pytest-xdist the
workers share it in the session's temporary directory, as they share the mcp 1.x overlay
(``tests/mcp1_overlay.py``): the first to take the lock makes it, the others wait for it and use it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from scratch_copy import copy_repository, git, run_in, touched


@dataclass(frozen=True)
class Contribution:
    """The copy, its site and what making them said."""

    copy: Path
    site: Path
    #: The files each contribution touched (``git status`` after it alone), by its name.
    touched: dict[str, list[str]]
    #: The site build's (``mkdocs build --strict``) exit code and output.
    build_returncode: int
    build_stdout: str
    build_stderr: str


def _make(where: Path) -> None:
    import test_add_kind
    import test_options

    copy = copy_repository(where)
    counted: dict[str, list[str]] = {}
    for name, add in (("option", test_options.add_the_option), ("kind", test_add_kind.add_the_kind)):
        add(copy)
        counted[name] = touched(copy)
        git(copy, "add", "-A")
        git(copy, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"the {name}")
    build = ["-m", "mkdocs", "build", "--strict", "-d", str(where / "site")]
    site = run_in(copy, *build, timeout=240, env={"NO_MKDOCS_2_WARNING": "1"})
    made = {
        "touched": counted,
        "build_returncode": site.returncode,
        "build_stdout": site.stdout,
        "build_stderr": site.stderr,
    }
    (where / "made.json").write_text(json.dumps(made))


def _read(where: Path) -> Contribution:
    made = json.loads((where / "made.json").read_text())
    return Contribution(copy=where / "repo", site=where / "site", **made)


def shared_contribution(tmp_path_factory: pytest.TempPathFactory) -> Contribution:
    """The copy with both contributions, made once per test session (once for all xdist workers)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-N/, beside the workers' popen-gwK/
    try:
        import fcntl
    except ImportError:  # not POSIX: each process makes its own
        where = tmp_path_factory.mktemp("contribution")
        _make(where)
        return _read(where)
    where = base / "contribution"
    with (base / "contribution.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (where / "made.json").exists():
            if where.exists():  # a process that failed half-way: start again
                import shutil

                shutil.rmtree(where)
            where.mkdir()
            _make(where)
        return _read(where)
