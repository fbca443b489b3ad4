"""Fixtures of the example fault suite: which runner variant to test, and a runner aimed at a sidecar.

Run the suite against the fixed runner (the default) or the one from the incident::

    pytest -p mcpfaults examples/                                  # hardened
    pytest -p mcpfaults examples/ --runner-variant=unhardened      # the incident's runner
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness import Runner, RunnerConfig

from pytest_mcpfaults import Sidecar

VARIANTS = ("hardened", "unhardened")

#: Every wait in the runner is bounded by one of these. A budget costs time only when a fault makes the
#: runner wait it out, so the generous ones never slow a passing path; tests that exercise a timeout
#: pass a small one (``make_runner(sidecar, agent_timeout=0.5)``).
FAST: dict[str, Any] = {
    "health_probes": 3,
    "health_interval": 0.05,
    "health_timeout": 2.0,
    "read_timeout": 5.0,
    "call_timeout": 15.0,
    "agent_timeout": 5.0,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runner-variant",
        choices=VARIANTS,
        default="hardened",
        help="which example runner the fault suite tests: hardened (default) or unhardened",
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"example harness: the {config.getoption('--runner-variant')} runner"


@pytest.fixture
def hardened(pytestconfig: pytest.Config) -> bool:
    """Whether the suite tests the hardened runner (``--runner-variant``)."""
    return bool(pytestconfig.getoption("--runner-variant") == "hardened")


@pytest.fixture
def make_runner(hardened: bool) -> Callable[..., Runner]:
    """``make_runner(sidecar, **RunnerConfig overrides)``: a runner of the selected variant."""

    def make(sidecar: Sidecar, **overrides: Any) -> Runner:
        config = RunnerConfig(mcp_url=sidecar.mcp_url, health_url=sidecar.health_url, **{**FAST, **overrides})
        return Runner(config, hardened=hardened)

    return make
