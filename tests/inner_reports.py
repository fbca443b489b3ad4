"""Reading an inner pytest run's reports (pytester): call-phase durations printed by
:data:`DURATIONS_CONFTEST`, and one inner test's failure text."""

from __future__ import annotations

import json

import pytest

#: An inner run's conftest that prints each test's call-phase duration (read by :func:`durations`).
DURATIONS_CONFTEST = """
import json
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call":
        print("DURATION " + json.dumps({"name": item.name, "duration": call.duration}))
    return report
"""


def durations(result: pytest.RunResult) -> dict[str, float]:
    """Each inner test's call-phase duration, by name (run with ``-s`` and :data:`DURATIONS_CONFTEST`)."""
    out = {}
    for line in result.outlines:
        if "DURATION {" in line:  # may follow a progress dot on the same line
            data = json.loads(line[line.index("DURATION {") + len("DURATION ") :])
            out[data["name"]] = data["duration"]
    return out


def failure(result: pytest.RunResult, name: str) -> str:
    """The failure text of one inner test: from its ``___ name ___`` header to the next header, section
    (captured output) or summary line."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {name} " in line)
    ends = (i for i in range(start + 1, len(lines)) if lines[i].startswith(("_____", "=====", "-----")))
    return "\n".join(lines[start : next(ends, len(lines))])
