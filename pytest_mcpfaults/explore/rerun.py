"""An explore run whose finding is new to ``--mcpfaults-baseline`` is run once more before it fails the
gate: when the re-run does not find the same (timing alone changed it), the run is *unstable*: xfailed,
marked so in the JSON report, and never failing the gate by itself.

The item's protocol runs twice unlogged (``runtestprotocol(log=False)``, as pytest-rerunfailures does),
its stash and fixture request reset between; only the first attempt's reports are logged, so JUnit, the
JSON report and xdist see one test.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mcpfaults._pytest.records import explore_run
from pytest_mcpfaults.explore.summary import REPORT_ATTR


def _outcome(reports: list[pytest.TestReport]) -> dict[str, Any] | None:
    return next(
        (getattr(r, REPORT_ATTR) for r in reports if isinstance(getattr(r, REPORT_ATTR, None), dict)), None
    )


def _key(data: dict[str, Any] | None) -> str | None:
    """The finding key of an attempt that found something new, else ``None``."""
    from pytest_mcpfaults.explore.findings import finding_key, primary

    if not data or data.get("verdict") != "violation" or not data.get("found"):
        return None
    return finding_key(primary(data["found"]), str(data.get("where", "")), str(data["test"]))


class Rerun:
    """Registered by the explore glue when a baseline is given."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        run = explore_run(item)
        if run is None or not run.plan or not isinstance(item, pytest.Function):
            return None
        from _pytest.runner import runtestprotocol

        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        saved = dict(item.stash._storage)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        first = _outcome(reports)
        key = _key(first)
        if key is not None and first is not None:
            item.stash._storage.clear()
            item.stash._storage.update(saved)
            item._initrequest()  # a fresh fixture request, as pytest makes for each item
            again = _outcome(runtestprotocol(item, nextitem=nextitem, log=False))
            first["rerun"] = (again or {}).get("verdict", "not run")
            if _key(again) != key:
                _unstable(reports, first, again)
        for report in reports:
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


def _unstable(reports: list[pytest.TestReport], first: dict[str, Any], again: dict[str, Any] | None) -> None:
    then = ", ".join(first.get("found", ()))
    now = ", ".join((again or {}).get("found", ())) or (again or {}).get("verdict", "nothing")
    first["unstable"] = True
    for report in reports:
        if report.failed and report.when == "call":
            report.outcome = "skipped"
            report.wasxfail = f"unstable: found {then}, its re-run found {now} (not a baseline failure)"
            report.longrepr = None
        elif report.failed:  # the leak found at teardown
            report.outcome = "passed"
            report.longrepr = None
