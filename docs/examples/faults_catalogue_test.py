"""One short example per fault kind, quoted in docs/faults.md. Run with `pytest -p mcpfaults`."""

import json
import sys

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import (
    Absent,
    BackendGone,
    Delay,
    Die,
    Drip,
    EndlessSse,
    ErrorPayload,
    Flap,
    Freeze,
    Hang,
    JsonRpcError,
    MalformedJson,
    Reset,
    SessionExpired,
    Stall,
    Status,
    Terminating,
    ToolError,
    Trigger,
    Truncate,
)

# a stateless-era tools/call, for plain httpx
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}
MODERN = {"MCP-Protocol-Version": "2026-07-28"}

if sys.version_info < (3, 11):  # the backport that anyio (and so mcp) already installs
    from exceptiongroup import ExceptionGroup


# --8<-- [start:die]
@pytest.mark.mcp_sidecar(faults=[Die(when=Trigger("tools/call", nth=2))])
async def test_die(mcp_sidecar):
    # leaving `async with` re-raises the transport error: ExceptionGroup[httpx2.ReadError]
    with pytest.raises(ExceptionGroup):  # noqa: PT012
        async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
            await client.call_tool("echo", {"text": "one"})
            await client.call_tool("echo", {"text": "two"})  # the sidecar dies under this call
    with pytest.raises(httpx.ConnectError):
        httpx.get(mcp_sidecar.health_url)  # and stays dead: connection refused
    assert mcp_sidecar.fired == {"die": 1}


# --8<-- [end:die]


# --8<-- [start:freeze]
@pytest.mark.mcp_sidecar(faults=[Freeze(when="tools/call")])
async def test_freeze(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto", read_timeout_seconds=0.3) as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("echo", {"text": "hi"})
    assert mcp_sidecar.state == "frozen"  # every later request is held too, until release()
    mcp_sidecar.assert_client_gave_up(within=1.0)


# --8<-- [end:freeze]


# --8<-- [start:hang]
@pytest.mark.mcp_sidecar(faults=[Hang(when="health")])
def test_hang(mcp_sidecar):
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(mcp_sidecar.health_url, timeout=0.2)
    mcp_sidecar.assert_client_gave_up(within=1.0, target="health")
    assert mcp_sidecar.requests[0].hold == "client_closed"


# --8<-- [end:hang]


# --8<-- [start:delay]
@pytest.mark.mcp_sidecar(faults=[Delay(0.5, jitter=0.1, seed=7, when="tools/call")])
async def test_delay(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto", read_timeout_seconds=0.2) as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("echo", {"text": "hi"})


# --8<-- [end:delay]


# --8<-- [start:status]
@pytest.mark.mcp_sidecar(faults=[Status(503, retry_after=1, when=Trigger("health", times=3))])
def test_status(mcp_sidecar):
    codes = [httpx.get(mcp_sidecar.health_url).status_code for _ in range(4)]
    assert codes == [503, 503, 503, 200]  # a runner that is starting up


# --8<-- [end:status]


# --8<-- [start:flap]
@pytest.mark.mcp_sidecar(faults=[Flap(every=2)])
def test_flap(mcp_sidecar):
    codes = [httpx.get(mcp_sidecar.health_url).status_code for _ in range(6)]
    assert codes == [200, 200, 503, 503, 200, 200]


# --8<-- [end:flap]


# --8<-- [start:absent]
@pytest.mark.mcp_sidecar(faults=[Absent()])
def test_absent(mcp_sidecar):
    assert httpx.get(mcp_sidecar.health_url).status_code == 404  # like exgentic sidecars


# --8<-- [end:absent]


# --8<-- [start:terminating]
@pytest.mark.mcp_sidecar(faults=[Terminating()])
def test_terminating(mcp_sidecar):
    assert httpx.get(mcp_sidecar.health_url).json() == {"status": "ok"}  # still says ready
    r = httpx.post(mcp_sidecar.mcp_url, json=CALL, headers=MODERN)
    assert (r.status_code, r.headers["Connection"]) == (503, "close")


# --8<-- [end:terminating]


# --8<-- [start:stall]
@pytest.mark.mcp_sidecar(faults=[Stall(after_bytes=10, when="tools/call")])
def test_stall(mcp_sidecar):
    with (
        httpx.Client(timeout=httpx.Timeout(2.0, read=0.3)) as client,
        client.stream("POST", mcp_sidecar.mcp_url, json=CALL, headers=MODERN) as resp,
    ):
        chunks = resp.iter_raw()
        assert resp.status_code == 200
        assert next(chunks) == b'{"jsonrpc"'  # 10 bytes, then nothing
        with pytest.raises(httpx.ReadTimeout):
            next(chunks)
    mcp_sidecar.assert_client_released(within=1.0)


# --8<-- [end:stall]


# --8<-- [start:drip]
@pytest.mark.mcp_sidecar(faults=[Drip(chunk_bytes=8, interval=0.01, when="tools/call")])
async def test_drip(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto") as client:
        result = await client.call_tool("echo", {"text": "hi"})  # slow, but whole
    assert result.content[0].text == "hi"


# --8<-- [end:drip]


# --8<-- [start:truncate]
@pytest.mark.mcp_sidecar(faults=[Truncate(after_bytes=10, when="tools/call")])
def test_truncate(mcp_sidecar):
    with pytest.raises(httpx.RemoteProtocolError, match="received 10 bytes"):
        httpx.post(mcp_sidecar.mcp_url, json=CALL, headers=MODERN)


# --8<-- [end:truncate]


# --8<-- [start:reset]
@pytest.mark.mcp_sidecar(faults=[Reset(when="tools/call")])
def test_reset(mcp_sidecar):
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):  # RST before the status line
        httpx.post(mcp_sidecar.mcp_url, json=CALL, headers=MODERN)
    assert mcp_sidecar.journal.connections[0].closed_by == "sidecar"


# --8<-- [end:reset]


# --8<-- [start:malformed_json]
@pytest.mark.mcp_sidecar(faults=[MalformedJson(when="tools/call")])
async def test_malformed_json(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto") as client:
        with pytest.raises(MCPError, match="Failed to parse JSON response"):
            await client.call_tool("echo", {"text": "hi"})


# --8<-- [end:malformed_json]


# --8<-- [start:endless_sse]
@pytest.mark.mcp_sidecar(faults=[EndlessSse(when="tools/call")])
async def test_endless_sse(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto") as client:
        result = await client.call_tool("echo", {"text": "hi"})  # mcp 2.x takes the event ...
    assert result.content[0].text == "hi"
    mcp_sidecar.assert_client_released(within=1.0)  # ... and closes the endless stream


# --8<-- [end:endless_sse]


# --8<-- [start:jsonrpc_error]
@pytest.mark.mcp_sidecar(faults=[JsonRpcError(-32001, "backend exploded", when="tools/call")])
async def test_jsonrpc_error(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        with pytest.raises(MCPError, match="backend exploded"):
            await client.call_tool("echo", {"text": "hi"})


# --8<-- [end:jsonrpc_error]


# --8<-- [start:tool_error]
@pytest.mark.mcp_sidecar(faults=[ToolError(text="disk full", when="tool:echo")])
async def test_tool_error(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto") as client:
        result = await client.call_tool("echo", {"text": "hi"})  # no exception: a result
    assert result.is_error
    assert result.content[0].text == "disk full"


# --8<-- [end:tool_error]


# --8<-- [start:session_expired]
@pytest.mark.mcp_sidecar(faults=[SessionExpired(when=Trigger("tools/call", nth=2))])
async def test_session_expired(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "one"})
        with pytest.raises(MCPError, match="Session not found"):
            await client.call_tool("echo", {"text": "two"})  # no re-initialise follows
    assert mcp_sidecar.journal.sequence().count("POST initialize") == 1


# --8<-- [end:session_expired]


# --8<-- [start:backend_gone]
@pytest.mark.mcp_sidecar(faults=[BackendGone()])
async def test_backend_gone(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        created = await client.call_tool("create_session", {"task_id": "task-1"})
        sid = json.loads(created.content[0].text)["session_id"]
        deleted = await client.call_tool("delete_session", {"session_id": sid})
    assert json.loads(deleted.content[0].text) == {
        "error": f"Error closing session {sid}: Service at {mcp_sidecar.url} is no longer alive"
    }


# --8<-- [end:backend_gone]


# --8<-- [start:error_payload]
FAILED_DELETE = ErrorPayload(reason="backend timed out", when=Trigger("tool:delete_session", times=1))


@pytest.mark.mcp_sidecar(faults=[FAILED_DELETE])
async def test_error_payload(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="legacy") as client:
        created = await client.call_tool("create_session", {"task_id": "task-1"})
        sid = json.loads(created.content[0].text)["session_id"]
        failed = await client.call_tool("delete_session", {"session_id": sid})
    assert not failed.is_error  # a normal result: the failure is in its JSON
    assert json.loads(failed.content[0].text) == {"error": f"Error closing session {sid}: backend timed out"}
    assert mcp_sidecar.fired == {"error_payload": 1}
    # "a failed delete is not retried": count the deletes the sidecar saw
    assert mcp_sidecar.journal.sequence().count("POST tools/call delete_session") == 1
    assert [s.session_id for s in mcp_sidecar.benchmark.live] == [sid]  # the delete never ran


# --8<-- [end:error_payload]


# --8<-- [start:error_payload_template]
REFUSED = (
    'error_payload(reason="quota exceeded",message="Cannot create {task_id}: {reason}")@tool:create_session'
)


@pytest.mark.mcp_sidecar(faults=[REFUSED])  # the text form, as --fault and the control API take it
async def test_error_payload_on_any_tool(mcp_sidecar):
    async with Client(mcp_sidecar.mcp_url, mode="auto") as client:
        refused = await client.call_tool("create_session", {"task_id": "task-2"})
    assert json.loads(refused.content[0].text) == {"error": "Cannot create task-2: quota exceeded"}
    assert mcp_sidecar.benchmark.sessions == {}


# --8<-- [end:error_payload_template]
