import httpx
import pytest

from pytest_mcpfaults import Hang, Status, Trigger


@pytest.mark.mcp_sidecar(faults=[Status(503, when=Trigger("health", times=3))])
def test_runner_starting_up(mcp_sidecar):
    statuses = [httpx.get(mcp_sidecar.health_url).status_code for _ in range(4)]
    assert statuses == [503, 503, 503, 200]


@pytest.mark.mcp_sidecar(faults=[Hang(when="health")])
def test_probe_gives_up_on_a_hung_health(mcp_sidecar):
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(mcp_sidecar.health_url, timeout=0.2)
    mcp_sidecar.wait_idle(timeout=2)
    assert mcp_sidecar.requests[0].hold == "client_closed"
