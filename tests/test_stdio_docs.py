"""docs/faults.md's transports table is the registry's: each kind's row says yes exactly where its
class says it applies (``transports``, and ``needs_sockets`` for the in-process backend). The table is
made when the site is built (docs/hooks.py): this reads the page as the hook fills it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pytest_mcpfaults import fault_kinds
from pytest_mcpfaults.faults import KIND_NAME

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS))

import hooks  # noqa: E402


def test_the_transports_table_matches_the_registry() -> None:
    text = hooks.fill((DOCS / "faults.md").read_text())
    section = text.split("## Which transports a kind applies to", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(rf"^\| `({KIND_NAME})` \| (yes|no) \| (yes|no) \| (yes|no)", section, flags=re.M)
    table = {kind: (http, inproc, stdio) for kind, http, inproc, stdio in rows}
    expected = {
        kind: (
            "yes" if "http" in cls.transports else "no",
            "yes" if "http" in cls.transports and cls.needs_sockets is None else "no",
            "yes" if "stdio" in cls.transports else "no",
        )
        for kind, cls in fault_kinds().items()
    }
    assert table == expected
