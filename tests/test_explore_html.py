"""Explore's HTML page in a real headless browser (Debian's Chromium): a screenshot shows the grid's
cells in their verdicts' colours and a violation's timeline (an ERROR span bar and the fault's line).
Skipped where no ``chromium`` is installed, except in CI (the ``CI`` environment variable set): there
it fails, since ``.ci/run`` installs Debian's ``chromium`` when ``/usr/bin/chromium`` is missing (the
page's structure is checked by test_explore_plugin either way)."""

from __future__ import annotations

import html
import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpfaults.explore.html import COLOURS, render

#: The flags the test machines' Chromium needs headless (a fresh --user-data-dir is added per run).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str:
    """The chromium to run; without one, a skip, or in CI (``CI`` set) a failure: CI must run this test."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is not None:
        return found
    if os.environ.get("CI"):
        pytest.fail(
            "no chromium installed, and CI is set: the page's browser test must run in CI "
            "(.ci/run installs it: apt-get install -y --no-install-recommends chromium)",
            pytrace=False,
        )
    pytest.skip("no chromium installed (Debian: apt-get install chromium)")


TESTS = [
    {
        "nodeid": "test_x.py::test_x",
        "steps": 2,
        "kinds": ["die", "status"],
        "planned": 4,
        "pruned": [],
        "ran": 4,
        "verdicts": {"violation": 1, "behaviour": 1, "ok": 2},
        "runs": [
            {
                "id": f"explore:{k}@{s}",
                "verdict": v,
                "found": [],
                "note": "",
                "plan": [{"step": s, "fault": f"{k}@x"}],
            }
            for s, k, v in [
                ("tool:echo#1", "die", "behaviour"),
                ("tool:echo#1", "status", "ok"),
                ("tool:delete_session#1", "die", "ok"),
                ("tool:delete_session#1", "status", "violation"),
            ]
        ],
        "violations": [
            {
                "id": "explore:status-at-tool:delete_session[1]",
                "found": ["invariant:cleanup_never_flips"],
                "plan": '@pytest.mark.mcp_sidecar(faults=["status@tool:delete_session[nth=1]"])',
            }
        ],
    }
]
DETAILS = {
    "test_x.py::test_x::explore:status-at-tool:delete_session[1]": {
        "spans": [
            {
                "id": 1,
                "parent": None,
                "name": "Agent.Session",
                "status": "ERROR",
                "description": "cleanup",
                "start": 10.0,
                "end": 11.0,
            },
            {
                "id": 2,
                "parent": 1,
                "name": "MCP.DeleteSession",
                "status": "ERROR",
                "description": None,
                "start": 10.5,
                "end": 10.9,
            },
        ],
        "journal": [
            {
                "id": 0,
                "conn": 0,
                "label": "POST tools/call echo",
                "status": 200,
                "fault": None,
                "error": None,
                "start": 10.1,
                "end": 10.2,
            },
            {
                "id": 1,
                "conn": 1,
                "label": "POST tools/call delete_session",
                "status": 503,
                "fault": "status@tool:delete_session[nth=1]",
                "error": None,
                "start": 10.6,
                "end": 10.7,
            },
        ],
    }
}


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit RGB/RGBA PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 3
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = bytes(line)
        rows.append(b"".join(prev[x * channels : x * channels + 3] for x in range(width)))
    return width, height, rows


def _count(rows: list[bytes], hex_colour: str) -> int:
    rgb = bytes.fromhex(hex_colour.lstrip("#"))
    return sum(row[i : i + 3] == rgb for row in rows for i in range(0, len(row), 3))


def test_without_chromium_it_skips_but_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no chromium installed"):
        chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set: the page's browser test must run in CI"):
        chromium()


def test_ci_installs_chromium_before_the_suite_when_it_is_missing() -> None:
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    body = ci.split("ensure_chromium() {", 1)[1].split("\n}\n", 1)[0]
    assert '[ -x "$bin" ] && return 0' in body and "/usr/bin/chromium" in body
    assert "apt-get install -y -qq --no-install-recommends chromium" in body
    assert "timeout " in body and "exit 1" in body  # bounded; a failed install fails CI
    calls = [i for i, line in enumerate(ci.splitlines()) if line == "ensure_chromium"]
    suite = next(i for i, line in enumerate(ci.splitlines()) if line == 'run "$test_cmd"')
    assert calls and calls[0] < suite


@pytest.mark.timeout(180)
def test_a_screenshot_shows_the_grid_and_a_timeline(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "explore.html"
    page.write_text(render(TESTS, DETAILS), encoding="utf-8")
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            browser,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1000,700",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stdout + proc.stderr
    width, height, rows = _pixels(shot.read_bytes())
    assert (width, height) == (1000, 700)
    # the grid: a violation cell, an ok cell and a behaviour cell, each ~26x20 px in its colour
    for verdict in ("violation", "ok", "behaviour"):
        assert _count(rows, COLOURS[verdict]) > 300, verdict
    # the timeline: two ERROR span bars (one wide) and the fault's line
    assert _count(rows, "#b02828") > 2000
    assert _count(rows, "#d000d0") > 20


#: Appended to a copy of the page (the page itself has no script): each grid cell's box and its column
#: header's, as JSON in a <pre> that --dump-dom prints.
MEASURE = """<script>
const out = [];
for (const table of document.querySelectorAll("table.grid")) {
  const heads = [...table.rows[0].cells].map(c => c.getBoundingClientRect());
  for (const row of [...table.rows].slice(1)) {
    [...row.cells].forEach((cell, i) => {
      const r = cell.getBoundingClientRect();
      out.push({row: row.rowIndex, col: i, cls: cell.className, left: r.left, right: r.right,
                head_left: heads[i] ? heads[i].left : null, head_right: heads[i] ? heads[i].right : null});
    });
  }
}
const pre = document.createElement("pre");
pre.id = "geometry";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


#: A grid whose rows hold violations side by side and between other verdicts (adjacent cells of one
#: display would be wrapped in one anonymous table cell: the row then shifts left).
GRID = [
    {
        "nodeid": "test_x.py::test_x",
        "runs": [
            {"id": f"explore:{k}@{s}", "verdict": v, "found": [], "plan": [{"step": s, "fault": f"{k}@x"}]}
            for s, verdicts in [
                ("initialize#1", "VVV.b"),
                ("tool:echo#1", ".VV.V"),
                ("tool:delete_session#1", "b.VVV"),
            ]
            for k, v in zip(
                ["die", "status", "reset", "delay", "tool_error"],
                [{"V": "violation", ".": "ok", "b": "behaviour"}[c] for c in verdicts],
                strict=True,
            )
        ],
    }
]


def _geometry(browser: str, tmp_path: Path, page: str) -> list[dict[str, Any]]:
    path = tmp_path / "measured.html"
    path.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,700", "--dump-dom",
         path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert '<pre id="geometry">' in proc.stdout, proc.stderr[-2000:]
    text = proc.stdout.split('<pre id="geometry">', 1)[1].split("</pre>", 1)[0]
    return list(json.loads(html.unescape(text)))


@pytest.mark.timeout(180)
def test_each_grid_cell_stays_inside_its_column(tmp_path: Path) -> None:
    browser = chromium()
    cells = _geometry(browser, tmp_path, render(GRID, {}))
    grid = [c for c in cells if "cell" in c["cls"].split()]
    # the first column is the step's header; every verdict's cell is measured, a violation's included
    assert {"violation", "ok", "behaviour"} <= {v for c in grid for v in c["cls"].split()}
    for c in cells:
        assert c["head_left"] is not None, c  # no row has more cells than the header has columns
        assert c["head_left"] - 1 <= c["left"] and c["right"] <= c["head_right"] + 1, c
