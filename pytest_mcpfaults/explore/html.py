"""Explore's HTML page (``--mcpfaults-html=PATH``): one self-contained file, no network, no script.
Pure: the findings, then per explored test its step × fault grid and, per violation, its plan, span
timeline and journal.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mcpfaults.explore.findings import VERDICTS, kind_of, step_of

#: The grid's colour of each verdict.
COLOURS: dict[str, str] = {verdict: colour for verdict, (_, colour) in VERDICTS.items()}

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 32px; } h3 { font-size: 15px; }
table.grid { border-collapse: collapse; margin: 8px 0; }
table.grid td, table.grid th { border: 1px solid #999; padding: 2px 6px; font-size: 12px; }
table.grid td.cell { width: 26px; height: 20px; text-align: center; }
table.grid td.cell a { color: #fff; font-weight: bold; text-decoration: none; display: block; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; border: 1px solid #999; }
div.detail { display: flex; gap: 24px; align-items: flex-start; border-top: 1px solid #ccc;
  padding-top: 8px; }
ol.findings li { margin: 8px 0; } ol.findings .title { font-weight: bold; }
ol.findings .what { color: #555; font-size: 12px; } ol.findings .hint { font-size: 12px; }
.timeline { position: relative; flex: 0 0 560px; border-left: 1px solid #888; }
.timeline .bar { position: absolute; height: 16px; font-size: 11px; white-space: nowrap;
  overflow: visible; border-radius: 3px; padding-left: 3px; color: #111; }
.timeline .bar.ERROR { background: #b02828; color: #fff; }
.timeline .bar.UNSET, .timeline .bar.OK { background: #9cc3e6; }
.timeline .fault { position: absolute; top: 0; bottom: 0; width: 2px; background: #d000d0; }
.timeline .fault span { position: absolute; top: -16px; left: 4px; font-size: 11px; color: #d000d0;
  white-space: nowrap; }
table.journal { border-collapse: collapse; font: 11px monospace; white-space: nowrap; }
table.journal td { padding: 1px 6px; border-bottom: 1px solid #eee; }
table.journal tr.faulted td { background: #f6d0f6; }
code.plan { display: block; background: #f4f4f4; padding: 4px 8px; margin: 4px 0; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def grid_column(run: Mapping[str, Any]) -> str:
    """A single-fault run's column in the grid: its kind, or its kind's named cell (``error_payload.gone``),
    so the cells of one kind do not hide each other's verdict."""
    kind = kind_of(run)
    head = str(run.get("id", "")).removeprefix("explore:").split("-at-", 1)[0]
    return head if head.startswith(kind + ".") else kind


def grid(runs: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str], dict[tuple[str, str], Any]]:
    """The step × fault grid of the single-fault runs: its steps, its columns, each cell's run."""
    cells = {(step_of(r), grid_column(r)): r for r in runs if len(r["plan"]) == 1}
    return list(dict.fromkeys(s for s, _ in cells)), list(dict.fromkeys(k for _, k in cells)), cells


def _anchor(test: str, run_id: str) -> str:
    return "v-" + "".join(c if c.isalnum() else "-" for c in f"{test}-{run_id}")


def _grid(test: str, runs: Sequence[Mapping[str, Any]]) -> str:
    steps, kinds, cells = grid(runs)
    if not cells:
        return "<p>no single-fault run ran</p>"
    out = ['<table class="grid"><tr><th>step \\ fault</th>']
    out += [f"<th>{_e(k)}</th>" for k in kinds]
    out.append("</tr>")
    for step in steps:
        out.append(f"<tr><th>{_e(step)}</th>")
        for k in kinds:
            run = cells.get((step, k))
            if run is None:
                out.append('<td class="cell"></td>')
                continue
            verdict = str(run["verdict"])
            title = f"{run['id']}: {verdict} {', '.join(run.get('found', []))} {run.get('note', '')}".strip()
            inner = f'<a href="#{_anchor(test, str(run["id"]))}">V</a>' if verdict == "violation" else ""
            out.append(
                f'<td class="cell {_e(verdict)}" style="background:{COLOURS.get(verdict, "#fff")}" '
                f'title="{_e(title)}">{inner}</td>'
            )
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _depths(spans: Sequence[Mapping[str, Any]]) -> dict[Any, int]:
    parent = {s["id"]: s.get("parent") for s in spans}
    out: dict[Any, int] = {}
    for s in spans:
        d, p, seen = 0, parent.get(s["id"]), set()
        while p in parent and p not in seen:
            seen.add(p)
            d, p = d + 1, parent[p]
        out[s["id"]] = d
    return out


def _timeline(detail: Mapping[str, Any]) -> str:
    spans = list(detail.get("spans", ()))
    journal = list(detail.get("journal", ()))
    times = [t for s in spans for t in (s.get("start"), s.get("end")) if t is not None]
    times += [t for r in journal for t in (r.get("start"), r.get("end")) if t is not None]
    if not times:
        return '<div class="timeline"><p>no spans recorded</p></div>'
    t0, t1 = min(times), max(times)
    width = max(t1 - t0, 1e-6)

    def pct(t: float) -> float:
        return float(round(100.0 * (t - t0) / width, 3))

    depth = _depths(spans)
    rows = []
    for i, s in enumerate(sorted(spans, key=lambda s: s.get("start") or t0)):
        start = s.get("start") or t0
        end = s.get("end") or t1
        left, w = pct(start), max(pct(end) - pct(start), 0.5)
        label = s["name"] + (f" — {s['description']}" if s.get("description") else "")
        rows.append(
            f'<div class="bar {_e(s.get("status", "UNSET"))}" style="top:{i * 20 + 20}px;left:{left}%;'
            f'width:{w}%" title="{_e(label)}">'
            f"{'&nbsp;' * 2 * depth.get(s['id'], 0)}{_e(s['name'])}</div>"
        )
    for r in [r for r in journal if r.get("fault")][:1]:  # the first fault's moment
        rows.append(f'<div class="fault" style="left:{pct(r["start"])}%"><span>{_e(r["fault"])}</span></div>')
    height = len(spans) * 20 + 30
    return f'<div class="timeline" style="height:{height}px">{"".join(rows)}</div>'


def _journal(detail: Mapping[str, Any]) -> str:
    out = ['<table class="journal">']
    for r in detail.get("journal", ()):
        cls = ' class="faulted"' if r.get("fault") else ""
        status = r.get("status") if r.get("status") is not None else "-"
        server = f"sidecar{r['server']}/" if r.get("server") else ""  # as its steps name it
        out.append(
            f"<tr{cls}><td>{_e(server)}#{_e(r['id'])}</td><td>conn#{_e(r.get('conn'))}</td><td>{_e(r['label'])}</td>"
            f"<td>{_e(status)}</td><td>{_e(r.get('fault') or r.get('error') or '')}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _findings(found: Sequence[Mapping[str, Any]], linked: set[str]) -> str:
    """The findings, the smallest run's details linked when the page has them."""
    if not found:
        return "<h2>Findings</h2><p>no finding</p>"
    out = [f"<h2>Findings ({len(found)})</h2>", '<ol class="findings">']
    for f in found:
        tags = "".join(f" [{t}]" for t in ("known", "unstable") if f.get(t))
        test, _, rid = str(f.get("plan_run", "")).rpartition("::")
        link = f' <a href="#{_anchor(test, rid)}">details</a>' if f.get("plan_run") in linked else ""
        out.append(
            f'<li><span class="title">{_e(f["title"])}{_e(tags)}</span>{link}'
            f'<div class="what">oracle {_e(f["found"])}; kinds {_e(", ".join(f.get("kinds", [])))}; '
            f"steps {_e(', '.join(f.get('steps', [])))}"
            + (f"; where {_e(f['where'])}" if f.get("where") else "")
            + f'</div><code class="plan">{_e(f["plan"])}</code>'
            + (f'<div class="hint">fix: {_e(f["hint"])}</div>' if f.get("hint") else "")
            + "</li>"
        )
    out.append("</ol>")
    return "".join(out)


def render(
    tests: Sequence[Mapping[str, Any]],
    details: Mapping[str, Mapping[str, Any]],
    findings: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The page from the JSON report's ``explore`` section and ``findings``; ``details``: each violating
    run's spans and journal, by ``"<test>::<run id>"``."""
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>mcpfaults explore</title>",
        f"<style>{_CSS}</style></head><body><h1>mcpfaults explore</h1>",
        '<p class="legend">'
        + "".join(f'<span style="background:{c}">{_e(v)}</span>' for v, c in COLOURS.items())
        + "</p>",
        _findings(findings, {f"{e['nodeid']}::{v['id']}" for e in tests for v in e.get("violations", [])}),
        "<h2>Runs</h2>",
    ]
    for entry in tests:
        test = str(entry["nodeid"])
        out.append(f"<h2>{_e(test)}</h2>")
        v = entry.get("verdicts", {})
        out.append(
            f"<p>{_e(entry.get('steps'))} steps × {len(entry.get('kinds') or [])} kinds → "
            f"{_e(entry.get('planned'))} runs, {len(entry.get('pruned', []))} pruned, {_e(entry.get('ran'))} "
            f"ran: {_e(v.get('violation', 0))} violations, {_e(v.get('behaviour', 0))} behaviour under "
            "fault</p>"
        )
        out.append(_grid(test, entry.get("runs", [])))
        for viol in entry.get("violations", []):
            rid = str(viol["id"])
            detail = details.get(f"{test}::{rid}", {})
            out.append(f'<h3 id="{_anchor(test, rid)}">{_e(rid)}: {_e(", ".join(viol["found"]))}</h3>')
            out.append(f'<code class="plan">{_e(viol["plan"])}</code>')
            out.append(f'<div class="detail">{_timeline(detail)}{_journal(detail)}</div>')
    out.append("</body></html>")
    return "\n".join(out)
