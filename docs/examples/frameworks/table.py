"""Print docs/frameworks.md's tables from the measurements the framework modules wrote.

    python docs/examples/frameworks/table.py [results folder]

Reads every ``results/<framework>.json`` (written by ``tox -m frameworks``; stdlib only, so it runs in
any env) and prints Markdown: the versions and dates, the interop table, then one row per fault case
with what the framework does on its own, the plugin's verdict at a 2 s patience, and the bounded recipe.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ORDER = ["openai-agents", "pydantic-ai", "langchain", "langchain-per-call", "strands", "adk", "adk-modern"]
LABEL = {
    "langchain-per-call": "langchain, a session per call (its default)",
    "adk-modern": "adk with ADK_ENABLE_MCP_MODERN_PROTOCOL=1",
}
FAULT = {
    "freeze": "sidecar frozen at close",
    "hang_del": "`DELETE /mcp` hangs at close",
    "stall": "`tools/call` body stalls",
    "expire": "session expired (404), then a 2nd call",
}


def load(folder: Path) -> list[dict[str, Any]]:
    docs = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    return [docs[n] for n in [*ORDER, *sorted(set(docs) - set(ORDER))] if n in docs]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _interop(doc: dict[str, Any], era: str) -> str:
    raw = doc["cases"].get(f"none-{era}", {}).get("raw")
    if raw is None:
        return "not run"
    if raw["summary"] == "ok":
        return f"passes ({raw['path']} era)"
    return _cell(raw["summary"])


def _verdict(v: dict[str, Any] | None) -> str:
    if v is None:
        return "no hang (it gives up or answers on its own)"
    if v.get("hygiene_error"):  # a client carrying on after each failed call, on a session it lost
        return _cell(f"fails with SessionHygieneError at teardown in {v['s']:.1f} s: {v['lost'][0]}")
    how = "fails with PatienceError" if v["patience_error"] else "fails without a verdict"
    extra = ", but only at pytest-timeout (40 s): the call never returns" if v["pytest_timeout"] else ""
    head = v["headlines"][0].split(" without giving up")[0].split(" (20 bytes")[0] if v["headlines"] else ""
    if len(v["headlines"]) > 1:
        head += f" (and {len(v['headlines']) - 1} more held in turn)"
    return _cell(f"{how} in {v['s']:.1f} s{extra}: {head}")


def _bounded(case: dict[str, Any]) -> str:
    if "cannot_bound" in case:
        return _cell(f"none: {case['cannot_bound']}")
    b = case.get("bounded")
    if b is None:
        return "not run"
    if "bounded_lost_session" in case:  # bounded, but no knob makes it open a new session
        lost = "fails with SessionHygieneError: it calls its lost session again"
        return _cell(f"bounded ({b['summary']}), but {lost}")
    return _cell(f"passes: {b['summary']}")


def render(docs: list[dict[str, Any]]) -> str:
    out = ["| framework | version (mcp) | measured | Python, plugin |", "|---|---|---|---|"]
    for d in docs:
        name = LABEL.get(d["framework"], d["framework"])
        out.append(f"| {name} | {d['dist']}=={d['version']} (mcp {d['mcp']}) | {d['date']} | "
                   f"{d['python']}, pytest-mcpfaults {d['plugin']} |")  # fmt: skip
    out += [
        "",
        '| framework | sidecar `era="auto"` | `era="session"` | `era="stateless"` |',
        "|---|---|---|---|",
    ]
    for d in docs:
        name = LABEL.get(d["framework"], d["framework"])
        stateless = _interop(d, "stateless") if "none-stateless" in d["cases"] else "(not run)"
        out.append(f"| {name} | {_interop(d, 'auto')} | {_interop(d, 'session')} | {stateless} |")
    out += [
        "",
        "| framework | fault (sidecar era) | on its own (each phase bounded at 30 s) | "
        "the plugin, patience 2 s | the recipe's knobs |",
        "|---|---|---|---|---|",
    ]
    for d in docs:
        name = LABEL.get(d["framework"], d["framework"])
        for key, case in sorted(d["cases"].items(), key=lambda kv: list(FAULT).index(kv[0].split("-")[0])
                                if kv[0].split("-")[0] in FAULT else -1):  # fmt: skip
            fault, era = key.rsplit("-", 1)
            if fault not in FAULT or "raw" not in case:
                continue
            out.append(f"| {name} | {FAULT[fault]} ({era}) | {_cell(case['raw']['summary'])} | "
                       f"{_verdict(case.get('verdict'))} | {_bounded(case)} |")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else HERE / "results"
    docs = load(folder)
    if not docs:
        print(f"no measurements in {folder}: run `tox -m frameworks` first", file=sys.stderr)
        return 1
    print(render(docs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
