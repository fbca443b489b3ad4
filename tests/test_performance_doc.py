"""docs/performance.md quotes what the benchmark scripts print, with commands as a user types them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "performance.md").read_text()
RTT = (ROOT / "benchmarks" / "rtt.py").read_text()


def test_no_machine_specific_interpreter_paths() -> None:
    texts = {
        p: p.read_text() for p in [*ROOT.glob("docs/*.md"), *ROOT.glob("benchmarks/*"), ROOT / "README.md"]
    }
    for path, text in texts.items():
        found = re.findall(r"(?<![\w.])/(?:work|home|root|opt|usr/local)/\S*python\S*", text)
        assert not found, f"{path.relative_to(ROOT)}: machine-specific interpreter path(s) {found}"
    assert ".venv/bin/python benchmarks/rtt.py" in PAGE


def test_the_tools_call_target_quotes_the_run_on_the_page() -> None:
    section = PAGE.split("## Round trip", 1)[1].split("\n## ", 1)[0]
    met = re.search(
        r"^MET: sidecar \(serve\) tools/call RTT is ([\d.]+)x the SDK's own server", section, re.M
    )
    assert met, "the Round trip section lost the run's tools/call verdict line"
    row = next(line for line in PAGE.splitlines() if line.startswith("| `tools/call` RTT"))
    assert f"{met[1]}x as `serve`" in row
    # the quoted rows are the ones rtt.py prints, the SDK server in its own process among them
    for label in ("Sidecar, `python -m pytest_mcpfaults serve`", "uvicorn, own process"):
        assert label in section and label in RTT
