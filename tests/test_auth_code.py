"""``auth='oauth'``'s dynamic client registration (RFC 7591) and authorization code grant with PKCE (RFC
6749 4.1, RFC 7636): through raw HTTP (what the sidecar answers, the RFCs' errors), and through the mcp
SDK's default ``OAuthClientProvider`` of 2.x and 1.x, which registers, signs in through a headless
redirect and, when a token expires, signs in again."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp1_client import REDIRECT_URI, Mcp1Client
from memory_tokens import HeadlessRedirect, MemoryTokens

from pytest_mcpfaults import Sidecar, TokenExpired
from pytest_mcpfaults.auth import registration as auth_code
from pytest_mcpfaults.auth.registration import AUTHORIZE_PATH, REGISTER_PATH
from pytest_mcpfaults.auth.server import ASM_PATH, AUTH_GRANTS, TOKEN_PATH
from pytest_mcpfaults.core.records import AuthSeen, RequestRecord

VERIFIER = "v" * 43 + "-._~" + "0123456789"
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
METADATA = {"redirect_uris": [REDIRECT_URI], "grant_types": ["authorization_code", "refresh_token"]}


def _auth(r: RequestRecord) -> AuthSeen:
    """What the ``auth=`` layer saw of ``r`` (every field ``None``: nothing)."""
    return r.auth or AuthSeen()


def _register(sc: Sidecar, **meta: Any) -> httpx.Response:
    return httpx.post(sc.url + REGISTER_PATH, json={**METADATA, **meta}, timeout=5)


def _authorize(sc: Sidecar, client_id: str, **params: str) -> httpx.Response:
    asked = {
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI, "state": "st4te",
        "code_challenge": CHALLENGE, "code_challenge_method": "S256", "scope": "mcp", **params,
    }  # fmt: skip
    asked = {k: v for k, v in asked.items() if v != "-"}  # "-": leave it out
    return httpx.get(f"{sc.url}{AUTHORIZE_PATH}?{urlencode(asked)}", timeout=5)


def _redirected(answer: httpx.Response) -> tuple[str, dict[str, str]]:
    assert answer.status_code == 302, answer.text
    where = urlsplit(answer.headers["Location"])
    return f"{where.scheme}://{where.netloc}{where.path}", dict(parse_qsl(where.query))


def _exchange(sc: Sidecar, client: dict[str, Any], code: str, **form: str) -> httpx.Response:
    data = {
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "client_id": client["client_id"], "code_verifier": VERIFIER, **form,
    }  # fmt: skip
    data = {k: v for k, v in data.items() if v != "-"}
    basic = (client["client_id"], client["client_secret"]) if "client_secret" in client else None
    return httpx.post(sc.url + TOKEN_PATH, data=data, auth=basic, timeout=5)


def _init(sc: Sidecar, token: str) -> int:
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(sc.mcp_url, json=INIT, headers=headers, timeout=5).status_code


def test_the_metadata_advertises_registration_the_code_grant_and_s256_only() -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        asm = httpx.get(sc.url + ASM_PATH, timeout=5).json()
    assert asm == {
        "issuer": sc.url,
        "authorization_endpoint": sc.url + AUTHORIZE_PATH,
        "token_endpoint": sc.url + TOKEN_PATH,
        "registration_endpoint": sc.url + REGISTER_PATH,
        "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "scopes_supported": ["mcp"],
    }
    assert asm["grant_types_supported"] == list(AUTH_GRANTS)


def test_a_client_registers_signs_in_with_a_code_and_its_verifier_and_the_journal_says_so() -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        registered = _register(sc, client_name="harness", application_type="native", client_id="mine")
        assert registered.status_code == 201
        client = registered.json()
        assert client["client_id"].startswith("mcpf_client_") and client["client_secret"]  # not "mine"
        assert client["token_endpoint_auth_method"] == "client_secret_basic"  # RFC 7591's default
        assert (client["client_secret_expires_at"], client["redirect_uris"]) == (0, [REDIRECT_URI])
        assert (client["client_name"], client["application_type"]) == ("harness", "native")  # echoed
        target, query = _redirected(_authorize(sc, client["client_id"]))
        assert target == REDIRECT_URI
        assert (query["state"], query["iss"]) == ("st4te", sc.url)
        tokens = _exchange(sc, client, query["code"]).json()
        assert (tokens["token_type"], tokens["scope"]) == ("Bearer", "mcp")
        assert _init(sc, tokens["access_token"]) == 200
        refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        basic = (client["client_id"], client["client_secret"])
        refreshed = httpx.post(sc.url + TOKEN_PATH, data=refresh, auth=basic, timeout=5)
        assert _init(sc, refreshed.json()["access_token"]) == 200
        public = _register(sc, token_endpoint_auth_method="none", client_secret="made-up").json()
        assert "client_secret" not in public  # a public client: PKCE is its only proof
    seen = [
        (r.label, r.status, _auth(r).client, _auth(r).grant, _auth(r).issued, _auth(r).token)
        for r in sc.journal
    ]
    assert seen == [
        ("POST /oauth/register", 201, "c1", None, None, None),
        ("GET /oauth/authorize", 302, "c1", None, None, None),
        ("POST /oauth/token", 200, "c1", "authorization_code", "t1", None),
        ("POST initialize", 200, None, None, None, "t1"),
        ("POST /oauth/token", 200, "c1", "refresh_token", "t2", None),
        ("POST initialize", 200, None, None, None, "t2"),
        ("POST /oauth/register", 201, "c2", None, None, None),
    ]
    assert "POST /oauth/token" in sc.journal.format() and "client=c1 grant=authorization_code issued=t1" in (
        sc.journal.format()
    )


@pytest.mark.parametrize(
    ("meta", "error", "says"),
    [
        ({"redirect_uris": "http://localhost/cb"}, "invalid_redirect_uri", "redirect_uris must be a list"),
        ({"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri", "must be on loopback"),
        ({"redirect_uris": ["http://localhost/cb#x"]}, "invalid_redirect_uri", "without a fragment"),
        ({"redirect_uris": ["cb"]}, "invalid_redirect_uri", "'cb' must be an absolute URI"),
        ({"redirect_uris": []}, "invalid_redirect_uri", "the authorization_code grant needs redirect_uris"),
        ({"grant_types": ["password"]}, "invalid_client_metadata", "grant_types must be a list of"),
        ({"grant_types": [{}]}, "invalid_client_metadata", "grant_types must be a list of"),
        ({"response_types": [["code"]]}, "invalid_client_metadata", "response_types must be ['code']"),
        ({"response_types": ["token"]}, "invalid_client_metadata", "response_types must be ['code']"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata",
         "token_endpoint_auth_method must be one of client_secret_basic, client_secret_post, none"),
        ({"scope": 'a"b'}, "invalid_client_metadata", "scope must be space-separated OAuth scope tokens"),
    ],
)  # fmt: skip
def test_bad_client_metadata_is_refused_with_the_rfcs_error(
    meta: dict[str, Any], error: str, says: str
) -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        refused = _register(sc, **meta)
        not_json = httpx.post(sc.url + REGISTER_PATH, content=b"[1, 2", timeout=5)
        too_deep = httpx.post(sc.url + REGISTER_PATH, content=b"[" * 100_000, timeout=5)  # RecursionError
        assert httpx.get(sc.url + REGISTER_PATH, timeout=5).status_code == 405
    assert (refused.status_code, refused.json()["error"]) == (400, error)
    assert says in refused.json()["error_description"]
    assert not_json.json()["error"] == too_deep.json()["error"] == "invalid_client_metadata"
    record = sc.journal.requests[0]
    assert (record.auth, record.error_by) == (None, "client")  # nothing registered; the client's mistake
    assert record.error is not None and record.error.startswith(f"{error}: ")


def test_the_authorization_endpoint_refuses_without_redirecting_unless_it_knows_where_to() -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        client_id = _register(sc).json()["client_id"]
        unknown = _authorize(sc, "someone-else")
        elsewhere = _authorize(sc, client_id, redirect_uri="http://localhost:9/other")
        redirected = {
            "no challenge": _authorize(sc, client_id, code_challenge="-", code_challenge_method="-"),
            "plain": _authorize(sc, client_id, code_challenge_method="plain"),
            "token": _authorize(sc, client_id, response_type="token"),
        }
        no_grant = _register(sc, grant_types=["client_credentials"], response_types=[])
        unauthorized = _authorize(sc, no_grant.json()["client_id"], redirect_uri="-")
    assert (unknown.status_code, unknown.json()["error"]) == (400, "invalid_request")
    assert "client_id 'someone-else' is not registered: register at /oauth/register" in unknown.text
    assert elsewhere.status_code == 400 and "is not one the client registered" in elsewhere.text
    errors = {name: _redirected(answer)[1] for name, answer in redirected.items()}
    assert {name: (q["error"], q["state"]) for name, q in errors.items()} == {
        "no challenge": ("invalid_request", "st4te"),
        "plain": ("invalid_request", "st4te"),
        "token": ("unsupported_response_type", "st4te"),
    }
    assert "PKCE is required" in errors["no challenge"]["error_description"]
    assert "code_challenge_method must be S256, got 'plain'" in errors["plain"]["error_description"]
    assert "code" not in errors["plain"]
    # a client that did not register the grant, its one redirect URI taken as the one meant
    assert _redirected(unauthorized)[1]["error"] == "unauthorized_client"


def _signed_in(sc: Sidecar) -> tuple[dict[str, Any], str]:
    client = _register(sc).json()
    return client, _redirected(_authorize(sc, client["client_id"]))[1]["code"]


def test_a_wrong_verifier_is_invalid_grant_and_a_code_works_once() -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        client, code = _signed_in(sc)
        wrong = _exchange(sc, client, code, code_verifier="w" * 43)
        assert (wrong.status_code, wrong.json()["error"]) == (400, "invalid_grant")
        assert wrong.json()["error_description"] == "code_verifier does not match the code_challenge (S256)"
        again = _exchange(sc, client, code)  # the code was spent on the wrong verifier
        assert again.json() == {
            "error": "invalid_grant",
            "error_description": "the authorization code was used already",
        }
        _, code = _signed_in(sc)
        missing = _exchange(sc, client, code, code_verifier="-")
        assert missing.json()["error"] == "invalid_request" and "code_verifier" in missing.text
        client, code = _signed_in(sc)
        token = _exchange(sc, client, code).json()["access_token"]
        assert _init(sc, token) == 200
        reused = _exchange(sc, client, code)
        assert reused.json()["error"] == "invalid_grant"
        assert _init(sc, token) == 401  # a code used twice: the token it became is revoked
        other, _ = _signed_in(sc)
        _, code = _signed_in(sc)
        stolen = _exchange(sc, other, code)  # another client's code, with its own good credentials
        assert stolen.json()["error_description"] == "the authorization code was issued to another client"
        client, code = _signed_in(sc)
        moved = _exchange(sc, client, code, redirect_uri="http://localhost:9/else")
        assert moved.json()["error_description"] == "redirect_uri does not match the authorization request's"
        client, code = _signed_in(sc)
        bad_secret = _exchange(sc, {**client, "client_secret": "guess"}, code)
        assert (bad_secret.status_code, bad_secret.json()["error"]) == (401, "invalid_client")
        assert (
            _exchange(sc, client, "made-up").json()["error_description"]
            == "the authorization code is not known"
        )
    token_requests = [r for r in sc.journal if r.path == TOKEN_PATH]
    assert {_auth(r).grant for r in token_requests} == {"authorization_code"}
    assert [_auth(r).issued for r in token_requests if _auth(r).issued] == ["t1"]  # one of nine was good


def test_the_clients_and_codes_kept_are_bounded_the_oldest_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_code, "MAX_CLIENTS", 2)
    monkeypatch.setattr(auth_code, "MAX_CODES", 2)
    with Sidecar(era="session", auth="oauth") as sc:
        clients = [_register(sc).json() for _ in range(3)]
        assert _authorize(sc, clients[0]["client_id"]).status_code == 400  # forgotten: not registered
        codes = [_redirected(_authorize(sc, clients[2]["client_id"]))[1]["code"] for _ in range(3)]
        forgotten = _exchange(sc, clients[2], codes[0])
        assert forgotten.json()["error_description"] == "the authorization code is not known"
        assert _exchange(sc, clients[2], codes[2]).status_code == 200


def test_a_code_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_code, "CODE_LIFETIME", -1.0)  # expired as soon as it is issued
    with Sidecar(era="session", auth="oauth") as sc:
        client, code = _signed_in(sc)
        late = _exchange(sc, client, code)
    assert late.json() == {
        "error": "invalid_grant",
        "error_description": "the authorization code expired (-1 s)",
    }


# -- the SDK's default OAuthClientProvider -------------------------------------------------------------------


def _provider(sc: Sidecar) -> OAuthClientProvider:
    """mcp 2.x's ``OAuthClientProvider`` with its defaults, the redirect headless."""
    browser = HeadlessRedirect()

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(**browser.query)

    meta = OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="harness")  # type: ignore[list-item]
    return OAuthClientProvider(sc.mcp_url, meta, MemoryTokens(), browser.redirect, callback)


async def _echo(sc: Sidecar, texts: list[str]) -> list[str]:
    out = []
    async with (
        httpx2.AsyncClient(auth=_provider(sc), timeout=5) as http,
        Client(
            streamable_http_client(sc.mcp_url, http_client=http), mode="legacy", read_timeout_seconds=5
        ) as c,
    ):
        for text in texts:
            out.append((await c.call_tool("echo", {"text": text})).content[0].text)  # type: ignore[union-attr]
    return out


def test_the_mcp2_oauth_client_provider_registers_signs_in_and_signs_in_again_when_its_token_expires() -> (
    None
):
    with Sidecar(era="session", auth="oauth", faults=[TokenExpired(calls=3)]) as sc:
        texts = ["one", "two", "three", "four"]
        assert asyncio.run(asyncio.wait_for(_echo(sc, texts), 30)) == texts
        sc.wait_idle()
        sc.assert_client_reauthorized()
    assert [_auth(r).client for r in sc.journal if r.path == REGISTER_PATH] == ["c1"]  # registered once
    follow_ups = sc.auth_follow_ups
    assert [f.failure.auth.error for f in follow_ups] == ["missing", "invalid_token", "invalid_token"]
    # on a 401 it signs in again with a new code, not with its refresh token (it refreshes on its clock)
    assert [(f.outcome, f.grant) for f in follow_ups] == [("refreshed", "authorization_code")] * 3
    assert [r.label for r in follow_ups[1].between] == [
        "GET /.well-known/oauth-protected-resource/mcp", "GET /.well-known/oauth-authorization-server",
        "GET /oauth/authorize", "POST /oauth/token",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "grants"),
    [
        ("unauthorized@tool:echo[times=1]", ["authorization_code", "authorization_code"]),
        ('insufficient_scope(scope="tasks:write")', ["authorization_code", "authorization_code"]),
    ],
)
def test_the_mcp2_oauth_client_provider_signs_in_again_after_each_auth_kind(
    fault: str, grants: list[str]
) -> None:
    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        assert asyncio.run(asyncio.wait_for(_echo(sc, ["one", "two"]), 30)) == ["one", "two"]
        sc.wait_idle()
        sc.assert_client_reauthorized()
    assert [f.grant for f in sc.auth_follow_ups] == grants  # the first 401 (no token), then the fault's
    # a 403 passes once the token holds the scope: the call returned, so the step-up's code was granted it
    assert {r.status for r in sc.journal if r.fault} == {403 if "scope" in fault else 401}


def test_the_mcp1_oauth_client_provider_does_the_same(mcp1_client: Mcp1Client) -> None:
    with Sidecar(era="session", auth="oauth", faults=[TokenExpired(calls=3)]) as sc:
        seen = mcp1_client.call(sc.mcp_url, "echo", {"text": "hi"}, oauth=True)
        sc.wait_idle()
        sc.assert_client_reauthorized()
    assert (seen.texts, seen.error, seen.exited) == (["hi"], None, [])
    assert [_auth(r).client for r in sc.journal if r.path == REGISTER_PATH] == ["c1"]
    assert [(f.outcome, f.grant) for f in sc.auth_follow_ups] == [("refreshed", "authorization_code")] * 2
    assert {_auth(r).grant for r in sc.journal if r.path == TOKEN_PATH} == {"authorization_code"}


# -- the authorization server failing: the existing kinds, aimed at its paths -------------------------------

AS_DOWN = [
    (["status(code=503)@POST /oauth/register"], "OAuthRegistrationError", "POST /oauth/register"),
    (["token_expired(calls=3)", "status(code=503)@POST /oauth/token[nth=2]"], "OAuthTokenError",
     "POST /oauth/token"),
    (["token_expired(calls=3)", "reset@POST /oauth/token[nth=2]"], "ReadError", "POST /oauth/token"),
]  # fmt: skip


async def _exit_of(sc: Sidecar) -> list[str]:
    """What leaving the mcp 2.x client raised when its session was signing in (an exception group's
    leaves), ``[]`` when the calls returned."""
    try:
        await _echo(sc, ["one", "two"])
    except BaseException as exc:  # the client's task group: an exception group, or the error itself
        group: Any = exc
        return [type(e).__name__ for e in getattr(group, "exceptions", [exc])]
    return []


@pytest.mark.parametrize(
    ("faults", "raised", "failed"), AS_DOWN, ids=["register 503", "token 503", "token reset"]
)
def test_an_authorization_server_that_fails_ends_the_mcp2_session(
    faults: list[str], raised: str, failed: str
) -> None:
    """Registration refused, or the token endpoint down while the client signs in again mid-session:
    mcp 2.x's provider raises, its call is cancelled, leaving ``async with`` raises that error, and no
    DELETE is sent (the journal says the client gave up)."""
    with Sidecar(era="session", auth="oauth", faults=faults) as sc:
        assert asyncio.run(asyncio.wait_for(_exit_of(sc), 30)) == [raised]
        sc.wait_idle()
        with pytest.raises(AssertionError, match="the client then sent nothing more to the MCP endpoint"):
            sc.assert_client_reauthorized(within=0.5)
    last = sc.journal.requests[-1]
    kind = faults[-1].split("@")[0].split("(")[0]
    assert (last.label, last.fault_kind) == (failed, kind)  # the last thing the client did
    assert not [r for r in sc.journal if r.method == "DELETE"]
    assert sc.auth_follow_ups[-1].outcome == "gave_up"


def test_an_authorization_server_that_fails_mid_session_ends_the_mcp1_session(
    mcp1_client: Mcp1Client,
) -> None:
    faults = ["token_expired(calls=3)", "status(code=503)@POST /oauth/token[nth=2]"]
    with Sidecar(era="session", auth="oauth", faults=faults) as sc:
        seen = mcp1_client.call(sc.mcp_url, "echo", {"text": "hi"}, oauth=True)
        sc.wait_idle()
    assert (seen.texts, seen.cancelled, seen.exited) == (None, True, ["OAuthTokenError"])
    assert "Token exchange failed (503)" in seen.log
    assert not [r for r in sc.journal if r.method == "DELETE"]
    assert sc.auth_follow_ups[-1].outcome == "gave_up"
