"""The in-process backend: the same fault plans for code that calls httpx directly, without sockets."""

import httpx
import pytest
from hypothesis import given, settings

from pytest_mcpfaults import Status, Trigger
from pytest_mcpfaults.inprocess import SUPPORTED_KINDS, UnsupportedInProcess, intercepting, mock_sidecar
from pytest_mcpfaults.strategies import fault_plans


# --8<-- [start:probe]
def wait_ready(client: httpx.Client, url: str, probes: int = 5) -> int:
    """A readiness probe: how many probes until /health answered 200."""
    for n in range(1, probes + 1):
        if client.get(url).status_code == 200:
            return n
    raise TimeoutError(f"{url} not ready after {probes} probes")


def test_probe_waits_out_a_starting_sidecar():
    plan = [Status(503, when=Trigger("health", times=3))]  # starting up: 503 three times
    with mock_sidecar(base_url="http://sidecar.test", faults=plan) as side, httpx.Client() as client:
        assert wait_ready(client, side.health_url) == 4
    assert side.journal.sequence() == ["GET /health"] * 4
    assert side.fired == {"status": 3}


# --8<-- [end:probe]


# --8<-- [start:refused]
def test_faults_that_need_sockets_are_refused():
    with pytest.raises(UnsupportedInProcess, match="'stall' needs real sockets"):
        mock_sidecar(faults=["stall@health"])


# --8<-- [end:refused]


# --8<-- [start:fuzz]
client = httpx.Client()


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(plan=fault_plans(max_faults=2, kinds=SUPPORTED_KINDS, targets=["health"]))
def probe_never_raises_anything_but_timeout(plan):
    with mock_sidecar(faults=plan) as side:
        try:
            wait_ready(client, side.health_url)
        except (TimeoutError, httpx.TransportError):
            pass  # not ready, or the sidecar died: both are answers a probe must survive


def test_fuzz_the_probe_in_process():
    with intercepting():  # respx is installed once for all 300 examples
        probe_never_raises_anything_but_timeout()


# --8<-- [end:fuzz]
