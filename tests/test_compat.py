"""The plugin alongside the async and timeout plugins users run it with: pytest-asyncio (auto and
strict modes), anyio's pytest plugin, and pytest-timeout killing a test blocked on a hung request."""

from __future__ import annotations

import pytest

ASYNC_BODY = """
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.get(mcp_sidecar.health_url)).json() == {"status": "ok"}
    async with Client(mcp_sidecar.mcp_url, mode="auto") as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"
    mcp_sidecar.wait_idle(5)
    seq = mcp_sidecar.journal.sequence()
    assert seq[:2] == ["GET /health", "POST server/discover"], seq
    assert "POST tools/call echo" in seq[2:], seq
    assert set(seq[2:]) <= {"POST tools/call echo", "POST tools/list"}, seq  # the client may list tools too
"""


def _async_test(decorator: str, signature: str) -> str:
    return (
        "import httpx, pytest\nfrom mcp.client import Client\n\n"
        f"{decorator}\nasync def test_it({signature}):" + ASYNC_BODY
    )


def test_pytest_asyncio_auto_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(_async_test("", "mcp_sidecar"))
    result = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "-p", "asyncio", "-p", "no:anyio",
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function", timeout=120,
    )  # fmt: skip
    result.assert_outcomes(passed=1)


def test_pytest_asyncio_strict_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(_async_test("@pytest.mark.asyncio", "mcp_sidecar"))
    result = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "-p", "asyncio", "-p", "no:anyio",
        "-o", "asyncio_mode=strict", "-o", "asyncio_default_fixture_loop_scope=function", timeout=120,
    )  # fmt: skip
    result.assert_outcomes(passed=1)


def test_anyio_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        _async_test("@pytest.mark.anyio", "mcp_sidecar, anyio_backend")
        + "\n\n@pytest.fixture\ndef anyio_backend():\n    return 'asyncio'\n"
    )
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-p", "anyio", "-p", "no:asyncio", timeout=120)
    result.assert_outcomes(passed=1)


def test_factory_from_async_tests_under_both_plugins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx, pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.anyio
        async def test_factory(mcp_sidecar_factory, anyio_backend):
            with mcp_sidecar_factory(faults=["status(code=503)@health[times=1]"]) as sc:
                async with httpx.AsyncClient(timeout=5) as http:
                    codes = [(await http.get(sc.health_url)).status_code for _ in range(2)]
            assert codes == [503, 200]
            assert sc.state == "stopped"
        """
    )
    result = pytester.runpytest_subprocess("-p", "mcpfaults", "-p", "anyio", "-p", "no:asyncio", timeout=120)
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_pytest_timeout_kills_a_test_blocked_on_a_hung_request_and_the_sidecar_is_released(
    pytester: pytest.Pytester, method: str
) -> None:
    pytester.makepyfile(
        """
        import socket, threading, httpx, pytest

        PORTS = []

        @pytest.mark.mcp_sidecar(faults=["hang@health"], patience=None)
        def test_blocks_forever(mcp_sidecar):
            PORTS.append(mcp_sidecar.port)
            print(f"SIDECAR-PORT={mcp_sidecar.port}", flush=True)
            httpx.get(mcp_sidecar.health_url, timeout=None)  # held until the sidecar stops

        def test_the_sidecar_was_released():
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", PORTS[0]), timeout=1)
            names = sorted(t.name for t in threading.enumerate())
            assert names == ["MainThread", "mcpfaults-sidecar-loop"], names
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "-p", "timeout", "--timeout=1", f"--timeout-method={method}", "-s", timeout=60
    )
    port = int(next(ln.split("=", 1)[1] for ln in result.outlines if "SIDECAR-PORT=" in ln).split()[0])
    if method == "signal":
        # the test fails with pytest-timeout's message; teardown stops the sidecar; the run goes on
        result.assert_outcomes(failed=1, passed=1)
        result.stdout.fnmatch_lines(["*Timeout (>1.0s) from pytest-timeout*"])
    else:
        # the thread method dumps stacks and ends the whole process at once
        assert result.ret != 0
        result.stdout.fnmatch_lines(["*+ Timeout +*", "*test_blocks_forever*"])
        result.stdout.no_fnmatch_line("*test_the_sidecar_was_released*PASSED*")
    assert result.duration < 30
    import socket

    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
