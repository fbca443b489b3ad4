"""One tool call made by the mcp 1.x client, from a test running with the suite's mcp 2.x.

A kind's own test measures what mcp 1.x sees (docs/faults.md's catalogue column "what the mcp 1.x
``ClientSession`` sees") with the ``mcp1_client`` fixture, so that column needs no second test in
another module: :func:`call_with_mcp1` runs this file as a child Python whose ``PYTHONPATH`` starts
with the mcp 1.x overlay (``mcp1_overlay``), against the test's own sidecar. The child does what a
harness written from the SDK's README does — ``streamablehttp_client`` + ``ClientSession`` in one
``async with``, ``initialize``, one ``call_tool``; with ``oauth=True`` through the SDK's default
``OAuthClientProvider`` (registration, the authorization code grant with PKCE, a headless redirect:
``memory_tokens.HeadlessRedirect``) — and prints what it saw as one JSON line:
:class:`Mcp1Call`. The test asserts that and the sidecar's journal, as ``tests/test_faults_mcp1.py``
does in process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SEEN = "MCP1-SEEN "
#: The redirect URI the child's OAuth client registers (nothing listens there: the redirect is headless).
REDIRECT_URI = "http://localhost:3030/callback"


@dataclasses.dataclass(frozen=True)
class Mcp1Call:
    """What the mcp 1.x client saw of one call (in one ``async with``)."""

    #: The ``mcp`` version the child imported (``1.x``: the overlay was really first).
    version: str
    #: The result's text contents, or ``None`` when the call did not return one.
    texts: list[str] | None
    #: The result's ``isError`` (``None``: no result).
    is_error: bool | None
    #: ``str()`` of the ``McpError`` the call raised, or ``None``.
    error: str | None
    #: The call was cancelled (the transport failed under it).
    cancelled: bool
    #: The call neither returned nor raised within ``within`` seconds.
    hung: bool
    #: The type names of what leaving ``async with`` raised (an exception group's leaves); ``[]``: a
    #: clean exit.
    exited: list[str]
    #: Seconds from the call's start until it returned, raised or was given up.
    seconds: float
    #: The child's stderr (the SDK's log lines, e.g. ``Error parsing JSON response``).
    log: str


def call_with_mcp1(
    overlay: str,
    url: str,
    tool: str,
    args: dict[str, Any],
    *,
    read_timeout: float | None = None,
    within: float = 10.0,
    oauth: bool = False,
    elicit: str | None = None,
    sse: bool = False,
) -> Mcp1Call:
    """Call ``tool`` on the MCP endpoint ``url`` with the mcp 1.x client in ``overlay`` (``oauth``: with
    the SDK's ``OAuthClientProvider``, for a sidecar with ``auth='oauth'``; ``elicit``: the session
    answers ``elicitation/create`` accepting with ``{"answer": elicit}``; ``None``: it has no
    elicitation callback, so it answers an error; ``sse``: over the legacy HTTP+SSE transport, ``url``
    the sidecar's ``sse_url``, with ``sse_client``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = overlay
    # The overlay is installed without bytecode (pip --no-compile): with the run's shared bytecode cache
    # (tests/shared_pycache.py: PYTHONPYCACHEPREFIX) the first child compiles mcp 1.x and its
    # dependencies there and the next ones read them (1.75 s -> 0.55 s of CPU a call); without it none
    # writes.
    if not env.get("PYTHONPYCACHEPREFIX"):
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    asked = {"url": url, "tool": tool, "args": args, "read_timeout": read_timeout, "within": within}
    asked["oauth"], asked["elicit"], asked["sse"] = oauth, elicit, sse
    request = json.dumps(asked)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), request],
        env=env,
        capture_output=True,
        text=True,
        timeout=within + 60,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith(SEEN)]
    assert proc.returncode == 0 and lines, f"the mcp 1.x child failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    seen = Mcp1Call(**json.loads(lines[-1].removeprefix(SEEN)), log=proc.stderr)
    assert seen.version.startswith("1."), f"the child imported mcp {seen.version}, not mcp 1.x"
    return seen


@dataclasses.dataclass(frozen=True)
class Mcp1Client:
    """The ``mcp1_client`` fixture: :meth:`call` makes one call with mcp 1.x (the overlay in ``overlay``)."""

    overlay: str

    def call(
        self,
        url: str,
        tool: str,
        args: dict[str, Any],
        *,
        read_timeout: float | None = None,
        within: float = 10.0,
        oauth: bool = False,
        elicit: str | None = None,
        sse: bool = False,
    ) -> Mcp1Call:
        """See :func:`call_with_mcp1`; ``url``: the sidecar's ``mcp_url`` (``sse_url`` with ``sse``)."""
        return call_with_mcp1(
            self.overlay,
            url,
            tool,
            args,
            read_timeout=read_timeout,
            within=within,
            oauth=oauth,
            elicit=elicit,
            sse=sse,
        )


def _leaves(exc: BaseException) -> list[str]:
    group: Any = exc
    if hasattr(group, "exceptions"):
        return [name for e in group.exceptions for name in _leaves(e)]
    return [type(exc).__name__]


def _oauth_provider(url: str) -> Any:
    """The child's side: mcp 1.x's default ``OAuthClientProvider``, its redirect headless."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata
    from memory_tokens import HeadlessRedirect, MemoryTokens

    browser = HeadlessRedirect()
    meta = OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="mcp1-harness")
    return OAuthClientProvider(url, meta, MemoryTokens(), browser.redirect, browser.code_and_state)


async def _measure(
    url: str,
    tool: str,
    args: dict[str, Any],
    read_timeout: float | None,
    within: float,
    oauth: bool,
    elicit: str | None,
    sse: bool = False,
) -> dict[str, Any]:
    """The child's side: runs with mcp 1.x importable (``call_with_mcp1`` set its path)."""
    from datetime import timedelta
    from importlib.metadata import version

    import anyio
    from mcp import ClientSession, types
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.exceptions import McpError

    seen: dict[str, Any] = {"version": version("mcp"), "texts": None, "is_error": None, "error": None}
    seen.update(cancelled=False, hung=False, exited=[], seconds=0.0)
    kw: dict[str, Any] = (
        {} if read_timeout is None else {"read_timeout_seconds": timedelta(seconds=read_timeout)}
    )
    if elicit is not None:

        async def answer(context: object, params: Any) -> Any:
            return types.ElicitResult(action="accept", content={"answer": elicit})

        kw["elicitation_callback"] = answer
    started = time.monotonic()
    try:
        auth = _oauth_provider(url) if oauth else None
        connect = sse_client(url, auth=auth) if sse else streamablehttp_client(url, auth=auth)
        async with connect as (read, write, *_):  # noqa: SIM117
            async with ClientSession(read, write, **kw) as session:
                await session.initialize()
                started = time.monotonic()
                try:
                    with anyio.move_on_after(within) as scope:
                        result = await session.call_tool(tool, args)
                        seen["texts"] = [getattr(c, "text", "") for c in result.content]
                        seen["is_error"] = bool(result.isError)
                    seen["hung"] = scope.cancelled_caught
                except McpError as e:
                    seen["error"] = str(e)
                except asyncio.CancelledError:
                    seen["cancelled"] = True
                    raise
                finally:
                    seen["seconds"] = time.monotonic() - started
    except BaseException as e:  # the exit's exception group, or the cancellation's
        seen["exited"] = _leaves(e)
    return seen


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)  # mcp 1.30 renamed streamablehttp_client
    asked = json.loads(sys.argv[1])
    print(SEEN + json.dumps(asyncio.run(_measure(**asked))), flush=True)
