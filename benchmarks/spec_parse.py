"""Parsing a fault spec at the length limit (``MAX_SPEC_CHARS``): linear, with no Python loop per character.

Three rows, medians of 30 runs each in one process: the spec at the limit (a ``status`` body made of escaped
quotes and commas, the worst case for the tokenizer), the same spec a quarter as long, and ``json.loads`` of a
JSON text as long as the limit (C speed, the anchor). Linear means the limit costs about 4x the quarter; no
Python loop per character means well within 200x of ``json.loads`` (a loop per character is about 1000x).

Targets: at-limit / quarter <= 6; at-limit / json.loads <= 200.
Run: ``.venv/bin/python benchmarks/spec_parse.py``
"""

from __future__ import annotations

import json

import _bench

from pytest_mcpfaults.faults.text import MAX_SPEC_CHARS, parse_fault


def spec(units: int) -> str:
    return "status(body='" + "b\\'," * units + "')@tool:none"


def main() -> None:
    units = (MAX_SPEC_CHARS - 40) // 4
    at_limit, quarter = spec(units), spec(units // 4)
    anchor = json.dumps({"body": "b'," * units})
    rows = {
        "parse_fault, at the limit": lambda: parse_fault(at_limit),
        "parse_fault, a quarter as long": lambda: parse_fault(quarter),
        "json.loads, as long (anchor)": lambda: json.loads(anchor),
    }
    medians = {name: _bench.median(_bench.timed(fn, 30)) for name, fn in rows.items()}
    full, part, base = medians.values()
    _bench.table(
        f"Parsing a fault spec of {len(at_limit)} characters",
        [[name, _bench.fmt_s(m), f"{m / base:.0f}x"] for name, m in medians.items()],
        ["what", "median", "vs json.loads"],
    )
    print(_bench.verdict(full / part <= 6, f"at the limit / a quarter = {full / part:.1f} (linear: about 4)"))
    print(_bench.verdict(full / base <= 200, f"at the limit / json.loads = {full / base:.0f}x (<= 200x)"))


if __name__ == "__main__":
    main()
