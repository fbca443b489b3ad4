"""What the sidecar can tell about a client from its requests, and the patience hint for it.

The sidecar sees a request's ``User-Agent`` and ``MCP-Protocol-Version`` headers, its path, method
and era, and what it sent back before a hold (the status line, how many body bytes, whether the body
was complete). It does not see the client's timeouts. So a hint states what was observed and says
"if" where it guesses; the client families below are recognised from the User-Agent each sends
(measured: the mcp 2.x SDK sends ``python-httpx2/<version>``, the mcp 1.x SDK and plain httpx
``python-httpx/<version>``, the TypeScript SDK on Node's ``fetch`` ``node``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.verdicts.violation import answered

ClientFamily = Literal["httpx2", "httpx", "node", "aiohttp", "requests", "curl", "unknown"]
"""A client library, as recognised from the ``User-Agent`` it sends (:func:`client_family`)."""


#: What each family's ``User-Agent`` starts with (lower-cased), first match wins; ``node`` is Node's own
#: fetch (undici), which the TypeScript SDK uses.
_FAMILIES: Mapping[str, ClientFamily] = {
    "python-httpx2/": "httpx2",
    "python-httpx/": "httpx",
    "node$": "node",
    ".*aiohttp/": "aiohttp",
    "python-requests/": "requests",
    "curl/": "curl",
}


def client_family(user_agent: str | None) -> ClientFamily:
    ua = (user_agent or "").lower()
    return next((family for start, family in _FAMILIES.items() if re.match(start, ua)), "unknown")


def client_seen(r: RequestRecord) -> str:
    """E.g. ``User-Agent python-httpx/0.28.1, MCP-Protocol-Version 2025-11-25``."""
    bits = [f"User-Agent {r.user_agent}" if r.user_agent else "no User-Agent"]
    if r.protocol_version:
        bits.append(f"MCP-Protocol-Version {r.protocol_version}")
    return ", ".join(bits)


def _mcp_hint(r: RequestRecord, family: ClientFamily, budget: str) -> str | None:
    if family == "httpx2":  # the mcp 2.x SDK (streamable_http_client's httpx2.AsyncClient)
        if r.method == "DELETE":
            return (
                "if this is the mcp 2.x SDK (it sends this User-Agent): it sends this DELETE when the "
                "client closes, through its transport's httpx2 client (read timeout 300 s by default; "
                "Client(read_timeout_seconds=...) does not bound it): pass streamable_http_client(url, "
                "http_client=<an httpx2.AsyncClient with a short read timeout>) as the Client's server"
            )
        if r.method == "POST" and r.mcp_method == "server/discover":
            return (
                "if this is the mcp 2.x SDK (it sends this User-Agent): Client(mode='auto'), the default, "
                "probes server/discover when it connects and waits up to 10 s for it (the SDK's "
                "DISCOVER_TIMEOUT_SECONDS; Client(read_timeout_seconds=...) does not bound it), then "
                "falls back to initialize; give the Client the protocol version it should speak "
                "(mode='legacy' or a version) to skip the probe, or a patience budget above 10 s"
            )
        if r.method == "POST" and r.mcp_method and not r.mcp_method.startswith("notifications/"):
            return (
                "if this is the mcp 2.x SDK (it sends this User-Agent): it waits for this reply until "
                "Client(read_timeout_seconds=...) or call_tool(..., read_timeout_seconds=...) runs out, "
                "else its httpx2 read timeout (300 s by default); it did not give up within "
                f"{budget}, so any such timeout is longer than that: set one below the budget"
            )
        return None
    if family == "httpx":  # plain httpx, or the mcp 1.x SDK (streamablehttp_client)
        if r.method == "POST" and r.mcp_method and not r.mcp_method.startswith("notifications/"):
            return (
                "if this is the mcp 1.x SDK (streamablehttp_client + ClientSession send this "
                "User-Agent): when this reply fails it only logs 'Error parsing JSON response' and the "
                "awaiting call does not return by itself; bound the call with "
                "ClientSession(read, write, read_timeout_seconds=timedelta(seconds=...)) or "
                "session.call_tool(..., read_timeout_seconds=timedelta(seconds=...)) below the budget"
            )
        if r.method == "DELETE":
            return (
                "if this is the mcp 1.x SDK: it sends this DELETE when streamable_http_client (or the "
                "deprecated streamablehttp_client) exits, through its httpx client, whose read timeout "
                "bounds it: 300 s by default (the SDK's create_mcp_http_client; streamablehttp_client's "
                "sse_read_timeout=, not its timeout=); pass streamable_http_client(url, "
                "http_client=httpx.AsyncClient(timeout=httpx.Timeout(30, read=...))) with a read timeout "
                "below the budget (terminate_on_close=False skips the DELETE)"
            )
    return None


def _generic_hint(r: RequestRecord, family: ClientFamily, budget: str, seconds: float) -> str:
    seen = answered(r)
    if seen == "complete":
        return (
            "the whole response was sent; if the client has finished with it, it kept the connection "
            "open (an unclosed response, or a connection pool that is never closed): close the "
            "response or the client once done"
        )
    if seen == "partial":
        what = {
            "httpx": "httpx: client.stream(...) and leave the block, or response.close()",
            "httpx2": "httpx2: client.stream(...) and leave the block, or response.aclose()",
            "aiohttp": "aiohttp: response.release() / leave the `async with`",
            "requests": "requests: stream=True and response.close()",
        }.get(family, "close the response")
        return (
            f"if the client needs only the status (a readiness probe), close the response without "
            f"reading the body ({what}); if it needs the body, it waited {budget} for the rest: give "
            f"the read a timeout below the budget"
        )
    return (
        f"the client did not give up within {budget}: if it has a read timeout, it is longer than "
        f"that; give this request a timeout below the budget{_default_timeout(family, seconds)}"
    )


def _default_timeout(family: ClientFamily, seconds: float) -> str:
    if family == "httpx":
        if seconds >= 5:
            return " (httpx gives up after 5 s by default, so this one has a longer timeout or timeout=None)"
        return " (httpx's default timeout, 5 s, is longer than this budget)"
    return {
        "aiohttp": " (aiohttp: ClientTimeout(total=300) by default; set sock_read= or total=)",
        "requests": " (requests: no timeout unless timeout= is passed)",
        "curl": " (curl: --max-time)",
    }.get(family, "")


@dataclass(frozen=True)
class _Answering:
    """``setup`` is formatted with the ``handlers``; ``without``: the session era's behaviour."""

    setup: str
    handlers: Mapping[str, str]
    without: str
    bound: str


#: The mcp SDK's (1.x and 2.x) callback for each server-to-client request.
_PYTHON_CALLBACKS: Mapping[str, str] = {
    "elicitation/create": "elicitation_callback=...",
    "sampling/createMessage": "sampling_callback=...",
    "roots/list": "list_roots_callback=...",
}
#: Per client family (the mcp 2.x SDK's for any it does not recognise), how it answers the
#: server-to-client requests a tool sends; ``ping`` is answered by every SDK on its own.
_ANSWERING: Mapping[ClientFamily, _Answering] = {
    "httpx2": _Answering(
        "mcp 2.x: a Client({handlers}) that returns, or declines, in time",
        _PYTHON_CALLBACKS,
        "a client without the callback answers an error at once, which the tool gets",
        "call_tool(..., read_timeout_seconds=...)",
    ),
    "httpx": _Answering(
        "if this is the mcp 1.x SDK (it sends this User-Agent): a ClientSession(read, write, {handlers}) "
        "that returns, or declines, in time",
        _PYTHON_CALLBACKS,
        "a session without the callback answers an error at once, which the tool gets",
        "session.call_tool(..., read_timeout_seconds=timedelta(seconds=...))",
    ),
    "node": _Answering(
        "if this is the TypeScript SDK (its fetch sends this User-Agent): a Client whose {handlers} "
        "returns, or declines, in time",
        {
            "elicitation/create": "setRequestHandler(ElicitRequestSchema, ...) (with the `elicitation` "
            "capability in its ClientOptions)",
            "sampling/createMessage": "setRequestHandler(CreateMessageRequestSchema, ...) (with the "
            "`sampling` capability)",
            "roots/list": "setRequestHandler(ListRootsRequestSchema, ...) (with the `roots` capability)",
        },
        "a client without the capability answers -32601 Method not found at once, which the tool gets",
        "client.callTool(params, undefined, { timeout }); 60 s by default",
    ),
}
_STATELESS_WITHOUT = "a client without the callback raises at once and never retries, so the tool never hears"


def answering(r: RequestRecord) -> _Answering:
    return _ANSWERING.get(client_family(r.user_agent), _ANSWERING["httpx2"])


def server_request_hint(r: RequestRecord, method: str) -> str:
    """For a tool that waited out the budget for the client's answer to its ``method``."""
    how = answering(r)
    named = how.handlers[method] if method in how.handlers else ", ".join(how.handlers.values())
    without = _STATELESS_WITHOUT if r.era == "stateless" else how.without
    return (
        f"the harness received the server's `{method}` and never answered it: answer every request a "
        f"server sends, within a bound of your own ({how.setup.format(handlers=named)}; {without}), "
        f"and bound the call itself ({how.bound})"
    )


def patience_hint(r: RequestRecord, *, mcp_path: str, budget: float) -> str:
    family = client_family(r.user_agent)
    b = f"{budget:g} s"
    if r.path == mcp_path:
        hint = _mcp_hint(r, family, b)
        if hint is not None:
            return hint
    return _generic_hint(r, family, b, budget)
