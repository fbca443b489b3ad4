"""What the mcp 1.x client sees for each fault kind: docs/faults.md's catalogue column "what the mcp 1.x
``ClientSession`` sees" is measured here for the built-in kinds, one test per kind (``test_mcp1_<kind>``); a
kind added since may measure it in its own test instead, with the ``mcp1_client`` fixture
(tests/mcp1_client.py). tests/test_faults_doc.py checks every row's cell is measured one way or the other.

The client is mcp 1.x's ``streamablehttp_client`` + ``ClientSession`` (session era, the only one it
speaks), in one ``async with``, as a harness written from the SDK's README uses it; the socket sidecar is
``Sidecar`` itself (no fixture, so its verdicts do not decide these tests). Where a call never returns the
test says so by waiting a bounded time (``HANG``) after the sidecar has done all it will do, then shows
the same call bounded by ``read_timeout_seconds``. The last section measures the runner's pattern: a
session opened in one ``run_until_complete`` and used in later ones, where every fault that breaks the
transport hangs the call. The stdio-only kinds are measured with mcp 1.x's ``stdio_client``.

Runs in the tox env ``mcp1`` and in ``test_mcp1_env``; where the installed mcp is 2.x (no
``streamablehttp_client``) the suite does not collect it (conftest); named on the command line, it skips."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import anyio
import httpx
import pytest
from memory_tokens import MemoryTokens as _MemoryTokens

from pytest_mcpfaults import Sidecar, StdioServer

streamable_http = pytest.importorskip(
    "mcp.client.streamable_http",
    reason="needs the mcp 1.x client (streamablehttp_client); the installed mcp is 2.x",
)
if not hasattr(streamable_http, "streamablehttp_client"):
    pytest.skip(
        "needs the mcp 1.x client (streamablehttp_client); the installed mcp is 2.x", allow_module_level=True
    )

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402

if sys.version_info < (3, 11):  # pragma: no cover - the backport anyio installs
    from exceptiongroup import BaseExceptionGroup

streamablehttp_client = streamable_http.streamablehttp_client
# mcp 1.30 renamed it streamable_http_client; harnesses pinned to 1.26 (and langchain-mcp-adapters) use
# this name
pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client` instead:DeprecationWarning")

LIMIT = 15.0  # every test's whole body is bounded by this (anyio.fail_after / asyncio.wait_for)
HANG = 1.5  # "hangs": still no answer this long after the sidecar has done all it will do
TIMED_OUT = "Timed out while waiting for response to ClientRequest"  # mcp 1.x's read timeout message
ECHO = ("echo", {"text": "hi"})


def leaves(exc: BaseException) -> list[str]:
    """The type names of an exception group's leaves (anyio nests groups depending on timing)."""
    if isinstance(exc, BaseExceptionGroup):
        return [name for e in exc.exceptions for name in leaves(e)]
    return [type(exc).__name__]


@contextlib.asynccontextmanager
async def session(sc: Sidecar, read_timeout: float | None = None) -> AsyncIterator[Any]:
    """An initialized mcp 1.x session on the sidecar (``read_timeout``: the session's
    ``read_timeout_seconds``; ``None``: the SDK's default, no timeout). The timeout is the session's
    from after its ``initialize`` on (the attribute ``ClientSession(read_timeout_seconds=)`` sets):
    the calls under test are bounded by it, the handshake before them is not, so a loaded machine
    that takes longer than 0.3 s to answer an ``initialize`` does not fail a test of a call."""
    async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
        async with ClientSession(read, write) as s:
            await s.initialize()
            assert hasattr(s, "_session_read_timeout_seconds"), "mcp 1.x renamed its session timeout"
            if read_timeout is not None:
                s._session_read_timeout_seconds = timedelta(seconds=read_timeout)
            yield s


async def call_cancelled(sc: Sidecar, tool: str, args: dict[str, Any]) -> tuple[bool, BaseException]:
    """The call, in one ``async with``: (was the call cancelled, what leaving ``async with`` raised)."""
    cancelled = False
    with pytest.raises(BaseExceptionGroup) as exited:  # noqa: PT012
        async with session(sc) as s:
            try:
                await s.call_tool(tool, args)
            except asyncio.CancelledError:
                cancelled = True
                raise
    return cancelled, exited.value


async def never_returns(s: Any, tool: str, args: dict[str, Any], seconds: float = HANG) -> bool:
    """The call did not return (nor raise) within ``seconds``."""
    with anyio.move_on_after(seconds) as scope:
        await s.call_tool(tool, args)
    return scope.cancelled_caught


def text(result: Any) -> str:
    return str(result.content[0].text)


def request(sc: Sidecar, label: str) -> Any:
    """The one request the journal recorded as ``label`` (the order of the client's own ``GET /mcp``
    among the others varies from run to run, so no test counts positions)."""
    [found] = [r for r in sc.journal.requests if r.label == label]
    return found


def deleted(sc: Sidecar, status: int = 200) -> bool:
    """The client's exit sent its ``DELETE /mcp`` and got ``status``."""
    sc.wait_idle(5)
    return request(sc, "DELETE /mcp").status == status


async def test_mcp1_without_a_fault_the_same_call_returns() -> None:
    """The control for every "never returns" below: with no fault the same call returns at once."""
    with anyio.fail_after(LIMIT), Sidecar() as sc:
        async with session(sc) as s:
            assert not await never_returns(s, *ECHO)


def test_mcp1_without_a_fault_a_kept_session_returns() -> None:
    """The control for the kept-session hangs at the end: the pattern itself works."""
    with Sidecar() as sc, kept(sc) as k:
        assert text(k.call(*ECHO, within=HANG)) == "hi"
        assert text(k.call(*ECHO, within=HANG)) == "hi"  # and again, in a later run_until_complete


# -- die ------------------------------------------------------------------------------------------------


async def test_mcp1_die() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["die@tools/call"]) as sc:
        cancelled, exited = await call_cancelled(sc, *ECHO)
        assert cancelled  # the call in flight is cancelled (in one `async with`) ...
        assert leaves(exited) == ["ReadError"]  # ... and exit raises ExceptionGroup[httpx.ReadError]
        assert isinstance(exited, BaseExceptionGroup)
        assert sc.fired == {"die": 1}
        assert "DELETE /mcp" not in sc.journal.sequence()  # never arrives
        with pytest.raises(httpx.ConnectError):
            httpx.get(sc.health_url)


async def test_mcp1_die_restart() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["die(restart=True)@tools/call"]) as sc:
        cancelled, exited = await call_cancelled(sc, *ECHO)
        assert cancelled and leaves(exited) == ["ReadError"]  # the call in flight fails as for die
        assert httpx.get(sc.health_url).status_code == 200  # the sidecar is back, without the session


# -- holds ----------------------------------------------------------------------------------------------


async def test_mcp1_freeze() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["freeze@tools/call"], patience=1.0) as sc:
        # no read timeout: the call waits until patience aborts the POST, then as for die
        started = time.monotonic()
        cancelled, exited = await call_cancelled(sc, *ECHO)
        assert cancelled and leaves(exited) == ["ReadError"]
        assert 0.9 < time.monotonic() - started < 3.0
        assert request(sc, "POST tools/call echo").hold == "patience"
    with anyio.fail_after(LIMIT), Sidecar(faults=["freeze@tools/call"], patience=1.0) as sc:
        with pytest.raises(BaseExceptionGroup) as exited_rt:  # noqa: PT012
            async with session(sc, read_timeout=0.3) as s:
                with pytest.raises(McpError, match=TIMED_OUT):
                    await s.call_tool(*ECHO)
        # the POST stays open until patience aborts it; the DELETE is frozen too
        assert leaves(exited_rt.value) == ["ReadError"]
        call = request(sc, "POST tools/call echo")
        assert call.hold == "patience"
        assert "DELETE /mcp" in sc.journal.sequence()


async def test_mcp1_hang() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["hang@tools/call"], patience=1.0) as sc:
        cancelled, exited = await call_cancelled(sc, *ECHO)  # held until patience aborts it
        assert cancelled and leaves(exited) == ["ReadError"]
    with anyio.fail_after(LIMIT), Sidecar(faults=["hang@tools/call"], patience=5.0) as sc:
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool(*ECHO)
        assert deleted(sc)  # a clean exit
        sc.assert_client_gave_up(within=1.0, target="tools/call")  # the client closed the POST


async def test_mcp1_delay() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["delay(seconds=0.6)@tools/call"]) as sc:
        async with session(sc) as s:
            started = time.monotonic()
            assert text(await s.call_tool(*ECHO)) == "hi"  # late, whole
            assert time.monotonic() - started >= 0.6
        async with session(sc, read_timeout=0.2) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool(*ECHO)


# -- answers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_mcp1_status(code: int) -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=[f"status(code={code})@tools/call"]) as sc:
        cancelled, exited = await call_cancelled(sc, *ECHO)
        # no McpError: the call is cancelled, exit raises the transport's HTTPStatusError (no retry)
        assert cancelled and leaves(exited) == ["HTTPStatusError"]
        assert f"'{code} " in str(exited.exceptions[0])  # type: ignore[attr-defined]
        assert sc.journal.sequence().count("POST tools/call echo") == 1


async def test_mcp1_flap_and_absent_answer_health_only() -> None:
    """No mcp column for `flap` and `absent`: their default target is `health`; the client is untouched."""
    with anyio.fail_after(LIMIT), Sidecar(faults=["flap(every=1)", "absent()"]) as sc:
        async with session(sc) as s:
            assert text(await s.call_tool(*ECHO)) == "hi"
        assert sc.fired == {}


async def test_mcp1_terminating() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["terminating"]) as sc:
        with pytest.raises(BaseExceptionGroup) as exited:
            async with session(sc):
                pass  # never reached: initialize is answered 503
        assert leaves(exited.value) == ["HTTPStatusError"]
        assert "'503 Service Unavailable'" in str(exited.value.exceptions[0])
        assert sc.journal.sequence() == ["POST initialize"]  # no fallback, no retry


# -- bodies ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """The mcp client's log messages (WARNING and up) while the block runs."""
    seen: list[str] = []
    with caplog.at_level(logging.WARNING, logger="mcp"):
        yield seen
    seen.extend(f"{r.levelname} {r.getMessage()}" for r in caplog.records if r.name.startswith("mcp"))


async def test_mcp1_stall(caplog: pytest.LogCaptureFixture) -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["stall(after_bytes=10)@tools/call"], patience=0.5) as sc:
        with logged(caplog) as log:
            async with session(sc) as s:
                # patience cuts the response at 0.5 s; mcp 1.x logs a parse error and never returns
                assert await never_returns(s, *ECHO)
        assert request(sc, "POST tools/call echo").hold == "patience"
        assert "ERROR Error parsing JSON response" in log
    with anyio.fail_after(LIMIT), Sidecar(faults=["stall(after_bytes=10)@tools/call"], patience=5.0) as sc:
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool(*ECHO)
        sc.assert_client_released(within=1.0)  # the POST is closed; the exit's DELETE follows
        assert deleted(sc)


async def test_mcp1_drip() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["drip(chunk_bytes=8,interval=0.01)@tools/call"]) as sc:
        async with session(sc) as s:
            assert text(await s.call_tool(*ECHO)) == "hi"  # slowly, whole
        assert sc.fired == {"drip": 1}


@pytest.mark.parametrize("fault", ["truncate(after_bytes=10)@tools/call", "reset(after_bytes=10)@tools/call"])
async def test_mcp1_truncate(fault: str, caplog: pytest.LogCaptureFixture) -> None:
    """`truncate`, and `reset` after some body bytes: mcp 1.x logs a parse error and the call never
    returns (mcp 2.x cancels it); only a read timeout ends it."""
    with anyio.fail_after(LIMIT), Sidecar(faults=[fault]) as sc:
        with logged(caplog) as log:
            async with session(sc) as s:
                assert await never_returns(s, *ECHO)
        call = request(sc, "POST tools/call echo")
        assert (call.label, call.status, call.bytes_sent) == ("POST tools/call echo", 200, 10)
        assert "ERROR Error parsing JSON response" in log
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool(*ECHO)


async def test_mcp1_reset() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["reset@tools/call"]) as sc:
        cancelled, exited = await call_cancelled(sc, *ECHO)  # RST before the status line
        assert cancelled and leaves(exited) == ["ReadError"]
        call = request(sc, "POST tools/call echo")
        assert (call.label, call.status, call.bytes_sent) == ("POST tools/call echo", None, 0)
        assert any(c.closed_by == "sidecar" for c in sc.journal.connections)


async def test_mcp1_malformed_json(caplog: pytest.LogCaptureFixture) -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["malformed_json@tools/call"]) as sc:
        with logged(caplog) as log:
            async with session(sc) as s:
                assert await never_returns(s, *ECHO)  # mcp 2.x raises "Failed to parse JSON response"
        assert "ERROR Error parsing JSON response" in log
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool(*ECHO)


async def test_mcp1_endless_sse() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["endless_sse@tools/call"]) as sc:
        async with session(sc) as s:
            assert text(await s.call_tool(*ECHO)) == "hi"  # harmless: the event is taken ...
        sc.assert_client_released(within=1.0)  # ... and the endless stream closed
        assert request(sc, "POST tools/call echo").hold == "client_closed"


async def test_mcp1_progress_then_stall() -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    fault = "progress_then_stall(count=3,interval=0.05)@tool:echo"
    with anyio.fail_after(LIMIT), Sidecar(faults=[fault], patience=0.5) as sc:
        async with session(sc) as s:
            with anyio.move_on_after(0.5 + HANG) as scope:  # patience cuts the stream at 0.5 s ...
                await s.call_tool(*ECHO, progress_callback=on_progress)
            assert scope.cancelled_caught  # ... and the call never returns
        assert seen == [1, 2, 3]
        assert request(sc, "POST tools/call echo").hold == "patience"
    seen.clear()
    with (
        anyio.fail_after(LIMIT),
        Sidecar(faults=["progress_then_stall(count=20,interval=0.05)@tool:echo"]) as sc,
    ):
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):  # progress every 0.05 s does not reset it
                await s.call_tool(*ECHO, progress_callback=on_progress)
        assert 1 <= len(seen) < 20
        assert deleted(sc)


async def test_mcp1_notification_flood() -> None:
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    with anyio.fail_after(LIMIT), Sidecar(faults=["notification_flood(count=300)@tool:echo"]) as sc:
        async with streamablehttp_client(sc.mcp_url) as (read, write, _):  # noqa: SIM117
            async with ClientSession(read, write, logging_callback=on_log) as s:
                await s.initialize()
                assert text(await s.call_tool(*ECHO)) == "hi"  # the answer, after the flood
        assert len(logs) == 300 and logs[-1].data == "notification 300 of 300"
        assert len(sc.journal.server_messages) == 300


async def test_mcp1_jsonrpc_error() -> None:
    fault = 'jsonrpc_error(code=-32001,message="backend exploded")@tools/call'
    with anyio.fail_after(LIMIT), Sidecar(faults=[fault]) as sc:
        async with session(sc) as s:
            with pytest.raises(McpError, match="backend exploded") as raised:
                await s.call_tool(*ECHO)
        assert raised.value.error.code == -32001
        assert deleted(sc)


async def test_mcp1_tool_error() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=['tool_error(text="disk full")@tool:echo']) as sc:
        async with session(sc) as s:
            result = await s.call_tool(*ECHO)  # no exception: a result
        assert result.isError and text(result) == "disk full"


async def test_mcp1_session_expired(caplog: pytest.LogCaptureFixture) -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["session_expired@tools/call"]) as sc:
        with logged(caplog) as log:
            async with session(sc) as s:
                # not "Session not found" (the sidecar's text): mcp 1.x maps the 404 to its own
                with pytest.raises(McpError, match=r"^Session terminated$"):
                    await s.call_tool(*ECHO)
        sc.wait_idle(5)
        assert sc.journal.sequence().count("POST initialize") == 1  # no re-initialise
        assert deleted(sc, status=404)
        assert "WARNING Session termination failed: 404" in log  # logged and swallowed


async def test_mcp1_backend_gone() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["backend_gone"]) as sc:
        async with session(sc) as s:
            created = await s.call_tool("create_session", {"task_id": "task-1"})
            sid = json.loads(text(created))["session_id"]
            deleted = await s.call_tool("delete_session", {"session_id": sid})
        assert not deleted.isError
        assert json.loads(text(deleted)) == {
            "error": f"Error closing session {sid}: Service at {sc.url} is no longer alive"
        }


async def test_mcp1_error_payload() -> None:
    with anyio.fail_after(LIMIT), Sidecar(faults=["error_payload[times=1]"]) as sc:
        async with session(sc) as s:
            created = await s.call_tool("create_session", {"task_id": "task-1"})
            sid = json.loads(text(created))["session_id"]
            failed = await s.call_tool("delete_session", {"session_id": sid})
        assert not failed.isError  # a normal result: the failure is in its JSON
        assert json.loads(text(failed)) == {"error": f"Error closing session {sid}: backend timed out"}


# -- auth (a sidecar with auth=): mcp 1.x's own OAuth provider, and a harness with one static token ----------


async def echo_twice_with_auth(sc: Sidecar, *, oauth: bool) -> list[str]:
    """Two echo calls in one ``async with``: with mcp 1.x's ``ClientCredentialsOAuthProvider`` as the
    transport's ``auth=`` (``oauth``), else with the static token ``s3cret`` in ``headers=``."""
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

    storage = _MemoryTokens()
    auth = ClientCredentialsOAuthProvider(sc.mcp_url, storage, "h", "s", issuer=sc.url) if oauth else None
    headers = None if oauth else {"Authorization": "Bearer s3cret"}
    out: list[str] = []
    async with streamablehttp_client(sc.mcp_url, headers=headers, auth=auth) as (read, write, _):  # noqa: SIM117
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=5)) as s:
            await s.initialize()
            for said in ("one", "two"):
                out.append(text(await s.call_tool("echo", {"text": said})))
    return out


async def _mcp1_auth_kind(fault: str, refused: int) -> None:
    """The OAuth provider gets a new token and the calls return; the static token's call is cancelled,
    exit raises ``ExceptionGroup[httpx.HTTPStatusError]`` and no DELETE comes (the client gave up)."""
    with anyio.fail_after(LIMIT), Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        assert await echo_twice_with_auth(sc, oauth=True) == ["one", "two"]
        sc.wait_idle(5)
        sc.assert_client_reauthorized()
    with anyio.fail_after(LIMIT), Sidecar(era="session", auth=["s3cret"], faults=[fault]) as sc:
        with pytest.raises(BaseExceptionGroup) as exited:
            await echo_twice_with_auth(sc, oauth=False)
        assert leaves(exited.value) == ["HTTPStatusError"]
        assert f"{refused} " in str(exited.value.exceptions[0])
        sc.wait_idle(5)
        assert [f.outcome for f in sc.auth_follow_ups] == ["gave_up"]
        assert "DELETE /mcp" not in sc.journal.sequence()


async def test_mcp1_unauthorized() -> None:
    await _mcp1_auth_kind("unauthorized@tool:echo[times=1]", 401)


async def test_mcp1_token_expired() -> None:
    await _mcp1_auth_kind("token_expired(calls=3)", 401)


async def test_mcp1_insufficient_scope() -> None:
    await _mcp1_auth_kind('insufficient_scope(scope="tasks:write")', 403)


# -- cancellation ---------------------------------------------------------------------------------------


async def test_mcp1_does_not_cancel_its_call_at_its_read_timeout() -> None:
    """mcp 1.x's read timeout raises ``McpError`` and sends no ``notifications/cancelled``: the call is
    left in flight when the session ends, and ``assert_client_cancelled`` says so."""
    with anyio.fail_after(LIMIT), Sidecar() as sc:
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool("sleep", {"seconds": 1.5})
        assert deleted(sc)
        assert sc.cancellations == () and "POST notifications/cancelled" not in sc.journal.sequence()
        missed = (
            r"the client sent DELETE /mcp at .* without cancelling tools/call sleep \(id 1\), still in flight"
        )
        with pytest.raises(AssertionError, match=missed):
            sc.assert_client_cancelled("tool:sleep", within=1.0)


async def test_mcp1_ignore_cancel() -> None:
    """mcp 1.x never cancels, so the fault never acts: as without it, ``McpError("Timed out …")``."""
    with anyio.fail_after(LIMIT), Sidecar(faults=["ignore_cancel"]) as sc:
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool("sleep", {"seconds": 0.6})
        assert deleted(sc)
        call = request(sc, "POST tools/call sleep")
        assert call.fault == "ignore_cancel" and call.cancel is None and call.status == 200


async def test_mcp1_answer_after_cancel() -> None:
    """Never cancelled, so held as a hang: ``McpError("Timed out …")`` at the read timeout, the POST is
    closed (the hold ends ``client_closed``), a clean exit."""
    with anyio.fail_after(LIMIT), Sidecar(faults=["answer_after_cancel"], patience=5.0) as sc:
        async with session(sc, read_timeout=0.3) as s:
            with pytest.raises(McpError, match=TIMED_OUT):
                await s.call_tool(*ECHO)
        assert deleted(sc)
        assert request(sc, "POST tools/call echo").hold == "client_closed" and sc.cancellations == ()


# -- resumption -----------------------------------------------------------------------------------------


async def test_mcp1_close_stream() -> None:
    """mcp 1.x resumes a stream closed after its priming event: after the retry, a GET with
    Last-Event-ID, and the call returns its result."""
    with anyio.fail_after(LIMIT), Sidecar(faults=["close_stream(retry_ms=100)"]) as sc:
        async with session(sc, read_timeout=5.0) as s:
            assert text(await s.call_tool(*ECHO)) == "hi"
        assert deleted(sc)
        [stream] = sc.closed_streams
        assert stream.resumed_with == stream.last_event_id and stream.replayed == 1
        sc.assert_client_resumed("tools/call", within=2.0)


# -- the stdio-only kinds, with mcp 1.x's stdio_client ---------------------------------------------------


async def stdio_call(server: StdioServer, read_timeout: float | None = None) -> tuple[Any, float]:
    """One echo call over mcp 1.x's ``stdio_client``: (the result or the exception, close seconds)."""
    kw = {} if read_timeout is None else {"read_timeout_seconds": timedelta(seconds=read_timeout)}
    params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **kw) as s:
            await s.initialize()
            try:
                result: Any = await s.call_tool(*ECHO)
            except McpError as exc:
                result = exc
        closing = time.monotonic()
    return result, time.monotonic() - closing


def run_stdio(server: StdioServer, read_timeout: float | None = None) -> tuple[Any, float]:
    return asyncio.run(asyncio.wait_for(stdio_call(server, read_timeout), LIMIT))


def test_mcp1_ignore_eof() -> None:
    with StdioServer(faults=["ignore_eof"], patience=None) as server:
        result, closed = run_stdio(server)
        child = server.wait_exit()
    assert text(result) == "hi"
    # stdio_client closes stdin, waits 2 s, SIGTERMs (the child dies of it)
    assert [(s.name, s.action) for s in child.signals] == [("SIGTERM", "died")]
    assert child.exited_at is not None and child.stdin_closed_at is not None
    assert 1.9 < child.exited_at - child.stdin_closed_at < 3.0
    assert 1.9 < closed < 3.5


def test_mcp1_ignore_sigterm() -> None:
    with StdioServer(faults=["ignore_eof", "ignore_sigterm"], patience=None) as server:
        result, closed = run_stdio(server)
        child = server.wait_exit()
    assert text(result) == "hi"
    [term] = child.received("SIGTERM")
    assert term.action == "ignored"
    assert child.stdin_closed_at is not None and 1.9 < term.at - child.stdin_closed_at < 3.0
    # mcp 1.x then waits 2 s for the child's exit and SIGKILLs it: close takes about 4 s, as in 2.x
    assert child.exited_at is not None and 1.9 < child.exited_at - term.at < 3.0
    assert 3.8 < closed < 5.5, closed


def test_mcp1_stderr_flood() -> None:
    import os

    with StdioServer(faults=["stderr_flood(bytes=1000000)@tools/call"]) as server:
        read_end, write_end = os.pipe()  # a pipe the harness never drains

        async def go() -> Any:
            params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
            with os.fdopen(write_end, "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (r, w):  # noqa: SIM117
                    async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=1)) as s:
                        await s.initialize()
                        with pytest.raises(McpError, match=TIMED_OUT):
                            await s.call_tool(*ECHO)  # the child blocks in its write

        try:
            asyncio.run(asyncio.wait_for(go(), LIMIT))
        finally:
            os.close(read_end)
        assert server.fired == {"stderr_flood": 1}


def test_mcp1_stdout_noise(caplog: pytest.LogCaptureFixture) -> None:
    with (
        StdioServer(faults=["stdout_noise(lines=3)@tools/call"]) as server,
        caplog.at_level(logging.WARNING, logger="mcp"),
    ):
        result, _ = run_stdio(server)
    assert text(result) == "hi"  # the SDK logs each line and returns the result
    parse_errors = [r for r in caplog.records if r.name.startswith("mcp") and "JSON" in r.getMessage()]
    assert len(parse_errors) == 3, [r.getMessage() for r in caplog.records]


# -- the runner's pattern: a session kept across run_until_complete calls --------------------------------


class KeptSession:
    """A benchmark runner's mcp 1.x client: the session is entered (``AsyncExitStack``) in one
    ``loop.run_until_complete`` and each call made in a later one. The task that entered the transport's
    task group has finished by then, so when the transport fails nothing cancels the waiting call."""

    def __init__(self, url: str, read_timeout: float | None) -> None:
        self.loop = asyncio.new_event_loop()
        self.stack = contextlib.AsyncExitStack()
        self.read_timeout = read_timeout
        self.session = self.loop.run_until_complete(asyncio.wait_for(self._open(url), LIMIT))

    async def _open(self, url: str) -> Any:
        read, write, _ = await self.stack.enter_async_context(streamablehttp_client(url))
        s = await self.stack.enter_async_context(ClientSession(read, write))
        await s.initialize()
        if self.read_timeout is not None:  # the session's timeout from after its handshake: see session()
            s._session_read_timeout_seconds = timedelta(seconds=self.read_timeout)
        return s

    def call(self, tool: str, args: dict[str, Any], within: float) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(self.session.call_tool(tool, args), within))

    def close(self) -> None:
        """The runner's close (``stack.aclose()`` in a later task) raises anyio's "exit cancel scope in a
        different task"; then the loop's own tasks are cancelled and awaited, bounded, so none leaks."""
        with contextlib.suppress(RuntimeError, BaseExceptionGroup):
            self.loop.run_until_complete(asyncio.wait_for(self.stack.aclose(), 5))
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=5))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


@contextlib.contextmanager
def kept(sc: Sidecar, read_timeout: float | None = None) -> Iterator[KeptSession]:
    k = KeptSession(sc.mcp_url, read_timeout)
    try:
        yield k
    finally:
        k.close()


TRANSPORT_BREAKERS = [
    "die@tools/call",
    "die(restart=True)@tools/call",
    "status(code=503)@tools/call",
    "reset@tools/call",
    "truncate(after_bytes=10)@tools/call",
    "malformed_json@tools/call",
]


@pytest.mark.parametrize("fault", TRANSPORT_BREAKERS)
def test_mcp1_kept_session_hangs_without_a_read_timeout(fault: str) -> None:
    """In one ``async with`` die, status and reset cancel the call; in a kept session nothing does:
    the call hangs until the harness's own bound (here ``HANG``), however long that is."""
    with Sidecar(faults=[fault]) as sc, kept(sc) as k:
        started = time.monotonic()
        with pytest.raises((asyncio.TimeoutError, TimeoutError)):
            k.call(*ECHO, within=HANG)
        assert time.monotonic() - started >= HANG - 0.05
        assert sum(sc.fired.values()) == 1  # the fault fired at once; the call waited on regardless
        call = request(sc, "POST tools/call echo")
        assert call.ended_at is not None and call.ended_at - call.started_at < 0.5


@pytest.mark.parametrize("fault", TRANSPORT_BREAKERS)
def test_mcp1_kept_session_with_a_read_timeout_raises_timed_out(fault: str) -> None:
    with (
        Sidecar(faults=[fault]) as sc,
        kept(sc, read_timeout=0.5) as k,
        pytest.raises(McpError, match=TIMED_OUT),
    ):
        k.call(*ECHO, within=LIMIT)
