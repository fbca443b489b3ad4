"""The ``mcp_harness_process`` fixture: run the harness as a child process, with a verdict when it
never exits (:mod:`pytest_mcpfaults.verdicts.harness_process`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpfaults._pytest.records import HARNESSES, SERVERS

if TYPE_CHECKING:
    from pytest_mcpfaults.verdicts.harness_process import HarnessProcess


@pytest.fixture
def mcp_harness_process(request: pytest.FixtureRequest) -> Iterator[Callable[..., HarnessProcess]]:
    """Start the harness as a child process watched against the test's servers:
    ``mcp_harness_process(args, servers=None, budget=None, startup=60, env=None, cwd=None)`` returns a
    ``HarnessProcess``; ``servers`` defaults to every server of the test, read live (one made after
    the process started counts too). Its ``wait()`` gives a verdict (``HarnessProcessError``) with its
    threads' stacks when it outlives the budget after its last MCP traffic or after ``stop()``; at
    teardown every one still running is stopped the same way and killed with its process group."""
    from pytest_mcpfaults.verdicts.harness_process import HarnessProcess

    item = request.node
    started: list[HarnessProcess] = item.stash.setdefault(HARNESSES, [])

    def start(args: Sequence[str], *, servers: Sequence[Any] | None = None, **options: Any) -> HarnessProcess:
        watched = servers if servers is not None else lambda: [s for s, _ in item.stash.get(SERVERS, [])]
        proc = HarnessProcess(args, servers=watched, **options)  # budget=, startup=, env=, cwd=
        started.append(proc)
        return proc.start()

    yield start
    failed: list[str] = []
    try:
        for proc in started:
            try:
                if proc.returncode is None:
                    proc.stop()
                    proc.wait()
            except AssertionError as exc:
                failed.append(str(exc))
            finally:
                proc.close()
    finally:  # an interrupt (the plugin's patience watcher) left the loop: the rest are killed too
        for proc in started:
            proc.close()
    if failed:
        pytest.fail("\n\n".join(failed), pytrace=False)
