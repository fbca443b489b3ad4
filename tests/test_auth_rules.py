"""``auth='oauth'`` as strict as a real authorization server where a hostile or careless client tests it:
refresh tokens bound to the client they were issued to and rotated (OAuth 2.1 4.3), redirect URIs only
``https``, loopback ``http`` or a private-use scheme (RFC 8252; RFC 7591's ``invalid_redirect_uri``
otherwise), and a client secret that is not ASCII refused as any wrong secret is (``401``), never a
sidecar error. What the client got, and what the journal says of it."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx
import pytest

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.auth import registration as auth_code
from pytest_mcpfaults.auth.registration import (
    AUTHORIZE_PATH,
    MAX_REDIRECT_URI_CHARS,
    MAX_REDIRECT_URIS,
    REGISTER_PATH,
)
from pytest_mcpfaults.auth.server import TOKEN_PATH

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SECRET_CLIENT = {
    "grant_types": ["client_credentials", "refresh_token"], "response_types": [],
    "token_endpoint_auth_method": "client_secret_post",
}  # fmt: skip
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def _register(sc: Sidecar, **meta: Any) -> httpx.Response:
    return httpx.post(sc.url + REGISTER_PATH, json=meta, timeout=5)


def _token(sc: Sidecar, client: dict[str, Any] | None, **form: str) -> httpx.Response:
    creds = {"client_id": client["client_id"], "client_secret": client["client_secret"]} if client else {}
    return httpx.post(sc.url + TOKEN_PATH, data={**creds, **form}, timeout=5)


def _refused(answer: httpx.Response) -> tuple[int, str, str]:
    body = answer.json()
    return answer.status_code, body["error"], body["error_description"]


def _init(sc: Sidecar, token: str) -> int:
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(sc.mcp_url, json=INIT, headers=headers, timeout=5).status_code


# -- refresh tokens ---------------------------------------------------------------------------------------


def test_a_refresh_token_is_redeemed_only_by_its_client_and_only_once() -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        c1, c2 = _register(sc, **SECRET_CLIENT).json(), _register(sc, **SECRET_CLIENT).json()
        first = _token(sc, c1, grant_type="client_credentials").json()
        rt = first["refresh_token"]
        by_c2 = _token(sc, c2, grant_type="refresh_token", refresh_token=rt)
        by_anyone = _token(sc, None, grant_type="refresh_token", refresh_token=rt, client_id="anyone")
        wider = _token(sc, c1, grant_type="refresh_token", refresh_token=rt, scope="mcp admin")
        refreshed = _token(sc, c1, grant_type="refresh_token", refresh_token=rt)  # still good: none took it
        again = _token(sc, c1, grant_type="refresh_token", refresh_token=rt)
        rotated = refreshed.json()["refresh_token"]
        then = _token(sc, c1, grant_type="refresh_token", refresh_token=rotated)
        assert _init(sc, refreshed.json()["access_token"]) == 200
        sc.wait_idle(5)
        assert sc.errors == []
    assert _refused(by_c2) == (400, "invalid_grant", "the refresh token was issued to another client")
    assert _refused(by_anyone) == (400, "invalid_grant", "the refresh token was issued to another client")
    assert _refused(wider) == (400, "invalid_scope", "a refresh cannot widen the scope")
    assert refreshed.status_code == 200 and rotated not in (rt, first["access_token"])
    assert refreshed.json()["access_token"] != first["access_token"]
    assert _refused(again) == (
        400, "invalid_grant",
        "the refresh token was used already (it is rotated: use the one its token response carried)",
    )  # fmt: skip
    assert then.status_code == 200 and then.json()["refresh_token"] != rotated
    tokens = [
        (r.auth.client, r.status, r.auth.grant, r.auth.issued, r.error_by)
        for r in sc.requests
        if r.path == TOKEN_PATH
    ]
    assert tokens == [
        ("c1", 200, "client_credentials", "t1", None),
        ("c2", 400, "refresh_token", None, "client"),
        (None, 400, "refresh_token", None, "client"),
        ("c1", 400, "refresh_token", None, "client"),
        ("c1", 200, "refresh_token", "t2", None),
        ("c1", 400, "refresh_token", None, "client"),
        ("c1", 200, "refresh_token", "t3", None),
    ]


def test_a_client_taken_on_trust_refreshes_its_own_token_and_nobody_elses() -> None:
    """The ``client_credentials`` grant takes an unregistered client id on trust: its refresh token is
    bound to that id as a registered client's is to its own."""
    with Sidecar(era="session", auth="oauth") as sc:
        issued = _token(sc, None, grant_type="client_credentials", client_id="me").json()
        other = _token(
            sc, None, grant_type="refresh_token", refresh_token=issued["refresh_token"], client_id="you"
        )
        mine = _token(
            sc, None, grant_type="refresh_token", refresh_token=issued["refresh_token"], client_id="me"
        )
    assert _refused(other) == (400, "invalid_grant", "the refresh token was issued to another client")
    assert mine.status_code == 200 and mine.json()["scope"] == "mcp"


def test_a_refresh_token_of_a_client_no_longer_registered_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered client forgotten (``MAX_CLIENTS``): its id is no longer one the server knows, so its
    refresh token is refused rather than taken on trust."""
    monkeypatch.setattr(auth_code, "MAX_CLIENTS", 1)
    with Sidecar(era="session", auth="oauth") as sc:
        c1 = _register(sc, **SECRET_CLIENT).json()
        rt = _token(sc, c1, grant_type="client_credentials").json()["refresh_token"]
        _register(sc, **SECRET_CLIENT)  # c2: c1 is forgotten
        gone = _token(sc, c1, grant_type="refresh_token", refresh_token=rt)
    assert _refused(gone) == (
        400, "invalid_grant", "the refresh token was issued to a client that is no longer registered"
    )  # fmt: skip


# -- redirect URIs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("javascript:alert(1)//", "got the scheme 'javascript'"),
        ("data:text/html,<script>x</script>", "got the scheme 'data'"),
        ("file:///etc/passwd", "got the scheme 'file'"),
        ("myapp:/callback", "got the scheme 'myapp'"),  # a private-use scheme must be a reverse domain name
        ("HTTP://EVIL.EXAMPLE/cb", "an http redirect URI must be on loopback"),
        ("http://127.0.0.1@evil.example/cb", "must not carry user information"),
        ("https://user:pw@app.example/cb", "must not carry user information"),
        ("http://127.0.0.1/cb\r\nSet-Cookie: x=1", "must not hold spaces or control characters"),
        ("http://127.0.0.1:99999/cb", "is not a URI (Port out of range 0-65535)"),
        ("https:///cb", "has no host"),
    ],
)
def test_a_redirect_uri_that_is_not_https_loopback_or_private_use_is_refused(uri: str, says: str) -> None:
    meta = {
        "redirect_uris": [uri],
        "grant_types": ["authorization_code"],
        "token_endpoint_auth_method": "none",
    }
    with Sidecar(era="session", auth="oauth") as sc:
        refused = _register(sc, **meta)
        [record] = sc.requests
    status, error, why = _refused(refused)
    assert (status, error) == (400, "invalid_redirect_uri")
    assert says in why and why.startswith(repr(uri)), why
    assert (record.auth, record.error_by) == (None, "client")


def test_redirect_uris_are_bounded_in_length_and_number_and_quoted_cut() -> None:
    """A client is kept with its redirect URIs (``MAX_CLIENTS`` of them): at most ``MAX_REDIRECT_URIS``,
    each at most ``MAX_REDIRECT_URI_CHARS``; one at the bound registers and is redirected to."""
    base = "https://app.example/"
    at_bound = base + "a" * (MAX_REDIRECT_URI_CHARS - len(base))
    many = [f"http://127.0.0.1:{9000 + i}/cb" for i in range(MAX_REDIRECT_URIS + 1)]
    code = {"grant_types": ["authorization_code"], "token_endpoint_auth_method": "none"}
    with Sidecar(era="session", auth="oauth") as sc:
        long_one = _refused(_register(sc, redirect_uris=[at_bound + "a"], **code))
        too_many = _refused(_register(sc, redirect_uris=many, **code))
        enough = _register(sc, redirect_uris=many[:-1], **code)
        client_id = _register(sc, redirect_uris=[at_bound], **code).json()["client_id"]
        query = {
            "response_type": "code", "client_id": client_id, "redirect_uri": at_bound,
            "code_challenge": CHALLENGE, "code_challenge_method": "S256",
        }  # fmt: skip
        answer = httpx.get(f"{sc.url}{AUTHORIZE_PATH}?{urlencode(query)}", timeout=5)
        javascript = _refused(_register(sc, redirect_uris=["javascript:" + "a" * 300], **code))[2]
    assert long_one[:2] == too_many[:2] == (400, "invalid_redirect_uri")
    assert long_one[2] == (
        f"{at_bound[:200]!r} ... ({MAX_REDIRECT_URI_CHARS + 1} characters): a redirect URI may be at most "
        f"{MAX_REDIRECT_URI_CHARS} characters (MAX_REDIRECT_URI_CHARS)"
    )
    assert too_many[2] == (
        f"redirect_uris holds {MAX_REDIRECT_URIS + 1} URIs: at most {MAX_REDIRECT_URIS} (MAX_REDIRECT_URIS)"
    )
    assert enough.status_code == 201 and answer.status_code == 302
    assert answer.headers["Location"].startswith(at_bound + "?code=")
    assert javascript.startswith(repr("javascript:" + "a" * 189) + " ... (311 characters): ")


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example/oauth/cb?x=1",
        "http://127.0.0.1:8765/cb",
        "http://localhost/cb",
        "http://[::1]:9/cb",
        "com.example.app:/oauth2redirect",  # RFC 8252 7.1
    ],
)
def test_an_accepted_redirect_uri_gets_the_code(uri: str) -> None:
    meta = {
        "redirect_uris": [uri],
        "grant_types": ["authorization_code"],
        "token_endpoint_auth_method": "none",
    }
    with Sidecar(era="session", auth="oauth") as sc:
        client_id = _register(sc, **meta).json()["client_id"]
        query = {
            "response_type": "code", "client_id": client_id, "redirect_uri": uri, "state": "s",
            "code_challenge": CHALLENGE, "code_challenge_method": "S256",
        }  # fmt: skip
        answer = httpx.get(f"{sc.url}{AUTHORIZE_PATH}?{urlencode(query)}", timeout=5)
    assert answer.status_code == 302
    location = answer.headers["Location"]
    assert location.startswith(uri) and "code=mcpf_code_" in urlsplit(location).query


# -- secrets ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["form", "basic"])
def test_a_secret_that_is_not_ascii_is_the_clients_401_not_a_sidecar_error(how: str) -> None:
    with Sidecar(era="session", auth="oauth") as sc:
        client = _register(sc, **SECRET_CLIENT).json()
        form, headers = {"grant_type": "client_credentials"}, {}
        if how == "form":
            form.update(client_id=client["client_id"], client_secret="é" * 8)
        else:
            pair = f"{client['client_id']}:{quote('ü' * 8)}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        wrong = httpx.post(sc.url + TOKEN_PATH, data=form, headers=headers, timeout=5)
        right = _token(sc, client, grant_type="client_credentials")
        sc.wait_idle(5)
        assert sc.errors == []
    status, error, why = _refused(wrong)
    assert (status, error) == (401, "invalid_client") and "its client_secret is missing or wrong" in why
    assert right.status_code == 200
    record = sc.requests[1]
    assert (record.status, record.auth and record.auth.client, record.error_by) == (401, "c1", "client")
