"""The sidecar as a library, the fixtures, tools, eras and the journal."""

import httpx
import pytest
from mcp.client import Client

from pytest_mcpfaults import Sidecar, Tool, ToolResultError


# --8<-- [start:library]
def test_library_use_without_pytest_fixtures():
    with Sidecar(era="session", reply="sse") as sidecar:
        r = httpx.get(sidecar.health_url)
        assert r.json() == {"status": "ok"}
    assert sidecar.state == "stopped"


# --8<-- [end:library]


# --8<-- [start:tools]
def lookup(city: str) -> dict:
    if city == "Atlantis":
        raise ToolResultError("no such city")  # answered as isError, not re-raised in the test
    return {"city": city, "temperature": 21}


WEATHER = Tool(
    "weather",
    lookup,
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "Current weather for a city.",
)


@pytest.mark.mcp_sidecar(tools=[WEATHER], tool_sets=["benchmark"])
async def test_custom_tools(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        ok = await client.call_tool("weather", {"city": "Lisbon"})
        bad = await client.call_tool("weather", {"city": "Atlantis"})
    assert names == {"weather", "list_tasks", "create_session", "evaluate_session", "delete_session"}
    assert ok.content[0].text == '{"city": "Lisbon", "temperature": 21}'
    assert bad.is_error and bad.content[0].text == "no such city"


# --8<-- [end:tools]


# --8<-- [start:journal]
async def test_journal_of_a_session_era_client(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        await client.call_tool("create_session", {"task_id": "task-2"})
    mcp_sidecar.wait_idle(timeout=5)  # every client connection closed: no sleeps
    assert mcp_sidecar.journal.sequence() == [
        "POST initialize",
        "POST notifications/initialized",
        "GET /mcp",
        "POST tools/call create_session",
        "POST tools/list",  # the mcp 2.x client lists tools after a call, to validate its result
        "DELETE /mcp",
    ]
    delete = mcp_sidecar.requests[-1]
    assert delete.status == 200 and delete.session_id in mcp_sidecar.ended_sessions
    [session] = mcp_sidecar.benchmark.live  # the benchmark session outlives the transport session
    assert session.task_id == "task-2"


# --8<-- [end:journal]


# --8<-- [start:factory]
def test_factory_for_several_sidecars(mcp_sidecar_factory):
    primary = mcp_sidecar_factory()
    with mcp_sidecar_factory(health_path=None) as no_health:  # real exgentic sidecars have no /health
        assert httpx.get(no_health.url + "/health").status_code == 404
    assert httpx.get(primary.health_url).status_code == 200


# --8<-- [end:factory]


# --8<-- [start:compose]
@pytest.mark.mcp_sidecar(era="session", faults=["status(code=500)@health[times=1]"])
class TestComposedMarkers:
    @pytest.mark.mcp_sidecar(faults=["status(code=502)@health[times=1]"])
    def test_both_faults_the_closer_first(self, mcp_sidecar):
        codes = [httpx.get(mcp_sidecar.health_url).status_code for _ in range(3)]
        assert codes == [502, 500, 200]
        assert mcp_sidecar.era == "session"  # from the class marker


# --8<-- [end:compose]
