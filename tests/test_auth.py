"""The sidecar as an OAuth-protected resource (``auth=``), its auth fault kinds, and what the journal says
the client did after an auth failure: through raw HTTP (what the sidecar answers, byte for byte where
the spec says) and through the mcp 2.x client with an httpx2 auth (the SDK's OAuth provider, and
hand-written ones that refresh, retry the same token, or give up)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from memory_tokens import MemoryTokens

from pytest_mcpfaults import InsufficientScope, Sidecar, TokenExpired, Trigger, Unauthorized
from pytest_mcpfaults.auth import server as auth
from pytest_mcpfaults.auth.server import ASM_PATH, PRM_PATH, TOKEN_PATH
from pytest_mcpfaults.core.records import AuthSeen, RequestRecord
from pytest_mcpfaults.options.fields import add_serve_flags, options_from_args

CLIENT = {"name": "t", "version": "1"}
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
if sys.version_info < (3, 11):  # pragma: no cover - the backport anyio installs
    from exceptiongroup import BaseExceptionGroup

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "auth_test.py"


def _auth(r: RequestRecord) -> AuthSeen:
    """What the ``auth=`` layer saw of ``r`` (every field ``None``: nothing)."""
    return r.auth or AuthSeen()


def _grant(sc: Sidecar, **form: str) -> httpx.Response:
    return httpx.post(sc.url + TOKEN_PATH, data={"client_id": "me", **form}, timeout=5)


def _init(sc: Sidecar, token: str | None) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(sc.mcp_url, json=INIT, headers={**HEADERS, **auth}, timeout=5)


def test_without_a_token_the_mcp_endpoint_answers_401_naming_its_resource_metadata() -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        r = _init(sc, None)
        assert r.status_code == 401
        metadata = f"{sc.url}{PRM_PATH}/mcp"
        assert r.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata}"'
        assert httpx.get(sc.health_url, timeout=5).status_code == 200  # health is not protected
        prm = httpx.get(metadata, timeout=5).json()
        assert prm == {
            "resource": sc.mcp_url, "authorization_servers": [sc.url], "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
        }  # fmt: skip
        assert httpx.get(sc.url + PRM_PATH, timeout=5).json() == prm  # the root form too
        asm = httpx.get(sc.url + ASM_PATH, timeout=5).json()
        assert (asm["issuer"], asm["token_endpoint"]) == (sc.url, sc.url + TOKEN_PATH)
        assert asm["grant_types_supported"] == ["authorization_code", "client_credentials", "refresh_token"]
        issued = _grant(sc, grant_type="client_credentials", scope="mcp tasks:write").json()
        got = (issued["token_type"], issued["scope"], issued["expires_in"])
        assert got == ("Bearer", "mcp tasks:write", 3600)
        assert _init(sc, issued["access_token"]).status_code == 200
        refreshed = _grant(sc, grant_type="refresh_token", refresh_token=issued["refresh_token"]).json()
        assert refreshed["scope"] == "mcp tasks:write"  # a refresh keeps the scope
        assert _init(sc, refreshed["access_token"]).status_code == 200
        bad = _init(sc, "not-a-token-it-issued")
        assert bad.status_code == 401
        assert bad.headers["WWW-Authenticate"] == (
            f'Bearer error="invalid_token", resource_metadata="{metadata}", '
            'error_description="the access token is not known"'
        )
        assert _grant(sc, grant_type="password").json()["error"] == "unsupported_grant_type"
        assert _grant(sc, grant_type="refresh_token", refresh_token="nope").json()["error"] == "invalid_grant"
        assert httpx.post(sc.url + TOKEN_PATH, data={"grant_type": "client_credentials"}).status_code == 401
    labels = [
        (r.label, r.status, _auth(r).token, _auth(r).error, _auth(r).grant, _auth(r).issued)
        for r in sc.journal
    ]
    assert labels[0] == ("POST initialize", 401, None, "missing", None, None)
    assert ("POST /oauth/token", 200, None, None, "client_credentials", "t1") in labels
    assert ("POST initialize", 200, "t1", None, None, None) in labels
    assert ("POST /oauth/token", 200, None, None, "refresh_token", "t2") in labels
    assert ("POST initialize", 401, "unknown", "invalid_token", None, None) in labels


def test_static_tokens_are_accepted_and_no_token_is_issued() -> None:
    with Sidecar(era="session", auth=["alpha", "beta"]) as sc:
        assert _init(sc, "beta").status_code == 200
        assert _init(sc, "gamma").status_code == 401
        assert _grant(sc, grant_type="client_credentials").status_code == 404  # no authorization server
        prm = httpx.get(f"{sc.url}{PRM_PATH}/mcp", timeout=5).json()
        assert prm["authorization_servers"] == []
    assert [_auth(r).token for r in sc.journal if r.path == "/mcp"] == ["static2", "unknown"]


def test_the_issued_tokens_are_bounded_the_oldest_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "MAX_TOKENS", 3)
    with Sidecar(era="session", auth="oauth") as sc:
        issued = [_grant(sc, grant_type="client_credentials").json() for _ in range(4)]
        oldest = _init(sc, issued[0]["access_token"])
        assert oldest.status_code == 401
        assert 'error_description="the access token is not known"' in oldest.headers["WWW-Authenticate"]
        refresh = _grant(sc, grant_type="refresh_token", refresh_token=issued[0]["refresh_token"])
        assert refresh.json()["error"] == "invalid_grant"
        assert [_init(sc, t["access_token"]).status_code for t in issued[1:]] == [200, 200, 200]


def test_the_auth_kinds_answer_with_their_challenges() -> None:
    faults = [
        InsufficientScope("tasks:write", when="tools/call"),
        TokenExpired(calls=2),
    ]
    with Sidecar(era="session", auth="oauth", faults=faults) as sc:
        token = _grant(sc, grant_type="client_credentials").json()["access_token"]
        assert _init(sc, token).status_code == 200  # call 1 of 2
        echo = {"name": "echo", "arguments": {}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo}
        r = httpx.post(sc.mcp_url, json=call, headers={**HEADERS, "Authorization": f"Bearer {token}"})
        assert r.status_code == 403
        metadata = f"{sc.url}{PRM_PATH}/mcp"
        assert r.headers["WWW-Authenticate"] == (
            f'Bearer error="insufficient_scope", scope="tasks:write", resource_metadata="{metadata}", '
            "error_description=\"this request needs the scope 'tasks:write'\""
        )
        r = _init(sc, token)  # call 3: past its two
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"] == (
            f'Bearer error="invalid_token", resource_metadata="{metadata}", '
            'error_description="The access token expired"'
        )
        fresh = _grant(sc, grant_type="client_credentials").json()["access_token"]
        assert _init(sc, fresh).status_code == 200  # counted per token: a new one has its own two calls
    assert sc.fired == {"insufficient_scope": 1, "token_expired": 1}


@pytest.mark.parametrize(("revoke", "retry_status"), [(True, 401), (False, 200)])
def test_unauthorized_revokes_the_token_it_refused_unless_told_not_to(
    revoke: bool, retry_status: int
) -> None:
    fault = Unauthorized(revoke=revoke, when=Trigger("initialize", times=1))
    with Sidecar(era="session", auth=["s3cret"], faults=[fault]) as sc:
        first = _init(sc, "s3cret")
        assert first.status_code == 401
        www = first.headers["WWW-Authenticate"]
        assert www.startswith('Bearer error="invalid_token", resource_metadata=')
        assert _init(sc, "s3cret").status_code == retry_status
    [after] = [f for f in sc.auth_follow_ups if f.failure.fault]
    assert after.outcome == "retried_same_token"


# -- what the client did next, with the mcp 2.x client and an httpx2 auth ---------------------------------


class RefreshingAuth(httpx2.Auth):
    """A harness's own auth: a token from the client_credentials grant; on a 401, the refresh_token
    grant, then the request once more (``same_token``: the broken variant, which retries as it was)."""

    def __init__(self, token_url: str, *, same_token: bool = False) -> None:
        self.token_url, self.same_token = token_url, same_token
        self.access: str | None = None
        self.refresh: str | None = None

    def _take(self, response: httpx2.Response) -> None:
        body = json.loads(response.content)
        self.access, self.refresh = body["access_token"], body["refresh_token"]

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.access is None:
            form = {"grant_type": "client_credentials", "client_id": "h"}
            got = yield httpx2.Request("POST", self.token_url, data=form)
            await got.aread()
            self._take(got)
        request.headers["Authorization"] = f"Bearer {self.access}"
        response = yield request
        if response.status_code == 401 and not self.same_token:
            form = {"grant_type": "refresh_token", "refresh_token": self.refresh or "", "client_id": "h"}
            got = yield httpx2.Request("POST", self.token_url, data=form)
            await got.aread()
            self._take(got)
            request.headers["Authorization"] = f"Bearer {self.access}"
            yield request
        elif response.status_code == 401:
            yield request


async def _echo_twice(sc: Sidecar, auth: httpx2.Auth | None, token: str | None = None) -> list[str]:
    """Call echo twice over one mcp 2.x session; what each call gave (its text or its error's type)."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    out: list[str] = []
    transport = streamable_http_client  # the mcp 2.x transport, over the harness's own httpx2 client
    async with (
        httpx2.AsyncClient(auth=auth, headers=headers, timeout=5) as http,
        Client(transport(sc.mcp_url, http_client=http), mode="legacy", read_timeout_seconds=5) as c,
    ):
        for text in ("one", "two"):
            try:
                out.append((await c.call_tool("echo", {"text": text})).content[0].text)  # type: ignore[union-attr]
            except Exception as exc:
                out.append(type(exc).__name__)
    return out


def _run(coro_factory: Callable[[], Any]) -> Any:
    try:
        return asyncio.run(asyncio.wait_for(coro_factory(), 30))
    except BaseExceptionGroup as group:  # leaving the client after a failed DELETE
        return [type(e).__name__ for e in group.exceptions]


MID_SESSION = [Unauthorized(when=Trigger("tool:echo", times=1))]


def test_a_harness_that_refreshes_its_token_passes_assert_client_reauthorized() -> None:
    with Sidecar(era="session", auth="oauth", faults=MID_SESSION) as sc:
        assert _run(lambda: _echo_twice(sc, RefreshingAuth(sc.url + TOKEN_PATH))) == ["one", "two"]
        sc.wait_idle()
        sc.assert_client_reauthorized()
    [after] = sc.auth_follow_ups
    assert (after.failure.label, after.failure.auth.token, after.outcome, after.grant) == (
        "POST tools/call echo", "t1", "refreshed", "refresh_token"
    )  # fmt: skip
    assert after.next is not None and (after.next.label, _auth(after.next).token) == (
        "POST tools/call echo",
        "t2",
    )
    assert [r.label for r in after.between] == ["POST /oauth/token"]


def test_a_harness_that_retries_the_refused_token_is_caught() -> None:
    with Sidecar(era="session", auth="oauth", faults=MID_SESSION) as sc:
        got = _run(lambda: _echo_twice(sc, RefreshingAuth(sc.url + TOKEN_PATH, same_token=True)))
        assert got[0] == "MCPError"  # the retry was refused too: the token was revoked
        sc.wait_idle()
        with pytest.raises(AssertionError) as failed:
            sc.assert_client_reauthorized(within=0.5)
    outcomes = [f.outcome for f in sc.auth_follow_ups]
    assert outcomes[0] == "retried_same_token"
    text = str(failed.value)
    assert "the client did not come back with a new token after" in text
    assert (
        "#4 POST tools/call echo (token t1) was refused (401 invalid_token, fault "
        "unauthorized@tool:echo[times=1]); the client then retried with the same token: "
        "#5 POST tools/call echo (token t1, 401)"
    ) in text


def test_a_harness_with_a_static_token_gives_up_the_session() -> None:
    with Sidecar(era="session", auth=["s3cret"], faults=[Unauthorized(when="tool:echo")]) as sc:
        got = _run(lambda: _echo_twice(sc, None, token="s3cret"))
        assert got == ["MCPError", "MCPError"]  # both calls refused: it has no other token
        sc.wait_idle()
    # its second call, with the revoked token; then DELETE (refused too), then nothing
    assert [f.outcome for f in sc.auth_follow_ups] == ["retried_same_token", "deleted_session", "gave_up"]


KINDS = [
    "unauthorized@tool:echo[times=1]",
    "token_expired(calls=3)",
    'insufficient_scope(scope="tasks:write")',
]


@pytest.mark.parametrize("fault", KINDS)
def test_each_auth_kind_with_the_sdks_oauth_provider_and_with_a_static_token(fault: str) -> None:
    """The catalogue's mcp 2.x cells: the SDK's client_credentials provider gets a new token and the
    calls return; a static token's call raises ``MCPError("Server returned an error response")``."""
    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        provider = ClientCredentialsOAuthProvider(sc.mcp_url, MemoryTokens(), "h", "s", issuer=sc.url)
        assert _run(lambda: _echo_twice(sc, provider)) == ["one", "two"]
        sc.wait_idle()
        sc.assert_client_reauthorized()
    with Sidecar(era="session", auth=["s3cret"], faults=[fault]) as sc:
        assert _run(lambda: _echo_twice(sc, None, token="s3cret")) == ["MCPError", "MCPError"]
        sc.wait_idle()
    # the second call with the refused token, then DELETE (a 403 is for the call, not the token: it passes)
    outcomes = ["retried_same_token", "deleted_session"] + ([] if "scope" in fault else ["gave_up"])
    assert [f.outcome for f in sc.auth_follow_ups] == outcomes
    assert {r.status for r in sc.journal if r.fault} == {403 if "scope" in fault else 401}


def test_assert_client_reauthorized_with_no_auth_failure_says_nothing_was_tested() -> None:
    with Sidecar(era="session", auth=["s3cret"]) as sc:
        assert _init(sc, "s3cret").status_code == 200
        with pytest.raises(AssertionError, match="the sidecar refused no token"):
            sc.assert_client_reauthorized(within=0)
        with pytest.raises(ValueError, match="within must be seconds >= 0, got -1"):
            sc.assert_client_reauthorized(within=-1)


# -- the span gate, on the docs' example harnesses ---------------------------------------------------------


@pytest.mark.parametrize("gate", [False, True], ids=["no gate", "gate"])
def test_the_gate_catches_the_harness_whose_401_flips_its_session(
    pytester: pytest.Pytester, gate: bool
) -> None:
    (pytester.path / EXAMPLE.name).write_text(EXAMPLE.read_text())
    args = ["-p", "mcpfaults", "-o", "asyncio_mode=auto", "-rx", EXAMPLE.name]
    if gate:  # the gate sets the process-wide tracer provider: a child pytest of its own
        result = pytester.runpytest_subprocess(*args, "--mcpfaults-check-spans", timeout=120)
    else:  # in-process: no child pytest to start
        args += ["-o", "asyncio_default_fixture_loop_scope=function"]
        result = pytester.runpytest(*args, "-W", "ignore::pytest.PytestAssertRewriteWarning")
    if gate:
        result.assert_outcomes(passed=5, xfailed=1)
        result.stdout.fnmatch_lines(
            [f"XFAIL {EXAMPLE.name}::test_a_harness_whose_401_flips_the_session - the span gate fails it"]
        )
    else:
        result.assert_outcomes(passed=6)


# -- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"auth": "yes"}, "Sidecar: auth must be None, 'oauth' (the sidecar issues tokens) or a list of"),
        ({"auth": []}, "Sidecar: auth must be None, 'oauth'"),
        ({"auth": ["a b"]}, "auth tokens must be non-empty strings without spaces or control characters"),
        ({"faults": [Unauthorized()]}, "Sidecar faults=: fault 'unauthorized' needs a sidecar with auth="),
        ({"faults": ["token_expired(calls=2)"]}, "fault 'token_expired(calls=2)' needs a sidecar with auth="),
        ({"auth": "oauth", "transport": "sse"}, "is for the fake's own Streamable HTTP endpoint"),
        ({"auth": "oauth", "upstream": "http://127.0.0.1:9/mcp"}, "not with upstream="),
    ],
)  # fmt: skip
def test_bad_auth_arguments_are_refused_naming_them(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Sidecar(**kwargs)


def test_bad_auth_kind_parameters_and_a_runtime_inject_without_auth_are_refused() -> None:
    with pytest.raises(ValueError, match="InsufficientScope: scope must be space-separated OAuth scope"):
        InsufficientScope('a"b')
    with pytest.raises(ValueError, match="TokenExpired: calls"):
        TokenExpired(calls=-1)
    refused = re.escape("Sidecar inject(): fault 'insufficient_scope' needs a sidecar with auth=")
    with Sidecar() as sc, pytest.raises(ValueError, match=refused):
        sc.inject(InsufficientScope())


def test_serve_takes_auth_as_oauth_or_tokens() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_serve_flags(parser)
    assert options_from_args(parser.parse_args(["--auth", "oauth"]))["auth"] == "oauth"
    assert options_from_args(parser.parse_args(["--auth", "a,b"]))["auth"] == ["a", "b"]
    assert options_from_args(parser.parse_args([]))["auth"] is None
    with pytest.raises(argparse.ArgumentError, match=r"must be 'oauth' .* or comma-separated bearer tokens"):
        parser.parse_args(["--auth", "a,,b"])
