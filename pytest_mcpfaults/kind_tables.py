"""The docs tables that list every fault kind, made from the registry (:func:`fault_kinds`).

``docs/faults.md`` holds each table between ``<!-- kinds:NAME -->`` and ``<!-- /kinds:NAME -->``
markers, committed so the page reads the same in a repository browser as on the site.
``python -m pytest_mcpfaults.kind_tables`` rewrites them after a kind is added or changed;
``--check`` only says whether they are fresh (``tests/test_kind_tables.py`` runs it).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_mcpfaults.fault_types import Fault, fault_kinds
from pytest_mcpfaults.text_values import format_value

__all__ = ["TABLES", "fresh", "refresh", "summary", "table_text_form", "table_transports"]

_BLOCKING = ("patience", "expect_hang")


def summary(cls: type[Fault]) -> str:
    """The first sentence of the kind's docstring, on one line."""
    text = " ".join((cls.__doc__ or "").split("\n\n", 1)[0].split()).replace("``", "`")
    head = re.split(r"(?<=\.)\s(?=[A-Z(`])", text, maxsplit=1)[0]
    return head.replace("|", "\\|")


def _parameters(cls: type[Fault]) -> str:
    fields = [f for f in dataclasses.fields(cls) if f.name != "when"]
    shown = []
    for f in sorted(fields, key=lambda f: f.name in _BLOCKING):  # patience, expect_hang last
        if f.name in _BLOCKING or f.default in (dataclasses.MISSING, None):
            shown.append(f"`{f.name}`")
        else:
            shown.append(f"`{f.name}={format_value(f.default)}`")
    return ", ".join(shown)


def table_text_form() -> str:
    """Every kind by its text-form name: its default target, its parameters and what it does."""
    rows = ["| kind | default target | parameters | what it does |", "|---|---|---|---|"]
    for kind, cls in fault_kinds().items():
        rows.append(f"| `{kind}` | `{cls.default_target}` | {_parameters(cls)} | {summary(cls)} |")
    return "\n".join(rows)


def table_transports() -> str:
    """Every kind and the backends it applies to (``Fault.transports``, ``Fault.needs_sockets``)."""
    rows = [
        "| kind | HTTP (`Sidecar`) | in-process (`mock_sidecar`) | stdio (`StdioServer`) |",
        "|---|---|---|---|",
    ]
    for kind, cls in fault_kinds().items():
        http = "http" in cls.transports
        cells = (http, http and cls.needs_sockets is None, "stdio" in cls.transports)
        rows.append(f"| `{kind}` | " + " | ".join("yes" if c else "no" for c in cells) + " |")
    return "\n".join(rows)


#: Each generated table by its marker name.
TABLES: dict[str, Callable[[], str]] = {"text-form": table_text_form, "transports": table_transports}


def refresh(text: str) -> str:
    """``text`` (a docs page) with every marked table made afresh."""
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- kinds:{name} -->\n)(?:.*?\n)?(<!-- /kinds:{name} -->)", re.S)
        table = make().replace("\\", "\\\\")  # a replacement template: backslashes doubled
        text = pattern.sub(rf"\g<1>{table}\n\g<2>", text)
    return text


def fresh(page: Path) -> bool:
    """Whether every marked table of ``page`` is what the registry makes now."""
    text = page.read_text(encoding="utf-8")
    return refresh(text) == text


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    pages = [Path(a) for a in args if a != "--check"] or [Path("docs/faults.md")]
    stale = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        new = refresh(text)
        if new != text:
            stale.append(str(page))
            if not check:
                page.write_text(new, encoding="utf-8")
    if check and stale:
        print(f"stale kind tables in {', '.join(stale)}: run python -m pytest_mcpfaults.kind_tables")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
