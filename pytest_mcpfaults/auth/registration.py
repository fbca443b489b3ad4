"""Dynamic client registration and the authorization code grant with PKCE, for ``auth='oauth'``
(docs/auth.md). Pure: no I/O.

What the mcp SDK's default ``OAuthClientProvider`` does: it registers itself (RFC 7591), sends the
user to the authorization endpoint with a PKCE ``S256`` challenge (RFC 7636), and trades the code for
tokens. The fake approves at once (``302`` to the ``redirect_uri`` with ``code``, ``state`` and
``iss``, RFC 9207), so a harness's redirect handler needs no browser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from pytest_mcpfaults.mcp.jsonrpc import Reply

REGISTER_PATH = "/oauth/register"
AUTHORIZE_PATH = "/oauth/authorize"
#: The PKCE challenge methods the authorization endpoint takes (``plain`` is refused: OAuth 2.1).
CHALLENGE_METHODS = ("S256",)
#: How a registered client authenticates at the token endpoint (RFC 7591's default first).
CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
GRANTS = ("authorization_code", "client_credentials", "refresh_token")
#: Seconds an authorization code may be redeemed in (RFC 6749 4.1.2: short; once only).
CODE_LIFETIME = 60.0
#: How many registered clients, and codes, a sidecar keeps: past it the oldest is forgotten, so a client
#: registering (or authorizing) in a loop costs bounded memory.
MAX_CLIENTS = 1_000
MAX_CODES = 1_000
#: How many redirect URIs a client may register, and how long each may be: a longer one would not fit
#: aiohttp's 8190-byte request line anyway.
MAX_REDIRECT_URIS = 32
MAX_REDIRECT_URI_CHARS = 2_048

#: What the server says of a client, never taken from its registration request.
_SERVER_FIELDS = frozenset({"client_id", "client_secret", "client_id_issued_at", "client_secret_expires_at"})
_SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 3.3's scope-token
_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 4.1
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url of a SHA-256, unpadded
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")  # a space or a control character: never in a redirect URI


def oauth_error(error: str, description: str, status: int = 400) -> Reply:
    body = {"error": error, "error_description": description}
    return Reply(status, body, sse=False, error=f"{error}: {description}", error_by="client")


@dataclass(frozen=True)
class _Client:
    label: str
    secret: str | None
    method: str
    redirect_uris: tuple[str, ...]
    grant_types: frozenset[str]


@dataclass(frozen=True)
class _Code:
    client_id: str
    redirect_uri: str | None  # as the authorization request named it (the token request must too)
    challenge: str
    scopes: frozenset[str]
    expires_at: float


def _shown(uri: str) -> str:
    return repr(uri) if len(uri) <= 200 else repr(uri[:200]) + f" ... ({len(uri)} characters)"


def _redirect_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be a redirect URI, ``None`` when it can: ``https``, ``http`` on loopback, or a
    private-use scheme named by a reverse domain name (RFC 8252 7.1); absolute, without a fragment
    (RFC 6749 3.1.2) or user information."""
    if not isinstance(uri, str) or not uri:
        return f"a redirect URI must be a non-empty string, got {uri!r}"
    if len(uri) > MAX_REDIRECT_URI_CHARS:
        return (
            f"{_shown(uri)}: a redirect URI may be at most {MAX_REDIRECT_URI_CHARS} characters "
            "(MAX_REDIRECT_URI_CHARS)"
        )
    if _UNSAFE.search(uri):
        return f"{_shown(uri)}: a redirect URI must not hold spaces or control characters"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError as exc:
        return f"{_shown(uri)} is not a URI ({exc})"
    if not parts.scheme or parts.fragment or "#" in uri:
        return f"{_shown(uri)} must be an absolute URI without a fragment"
    if parts.scheme not in ("http", "https"):
        if "." in parts.scheme:
            return None  # a private-use scheme (RFC 8252 7.1)
        return (
            f"{_shown(uri)}: a redirect URI must be https, http on loopback (localhost, 127.0.0.1, [::1]) "
            f"or a private-use scheme named by a reverse domain name (com.example.app:/callback, RFC 8252 "
            f"7.1), got the scheme {parts.scheme!r}"
        )
    if not parts.hostname:
        return f"{_shown(uri)} has no host"
    if "@" in parts.netloc:
        return f"{_shown(uri)}: a redirect URI must not carry user information (user@host)"
    if parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        why = "an http redirect URI must be on loopback (localhost, 127.0.0.1, [::1]); use https"
        return f"{_shown(uri)}: {why}"
    return None


def _metadata_problem(meta: Mapping[str, object]) -> tuple[str, str] | None:
    uris = meta.get("redirect_uris", [])
    if not isinstance(uris, list):
        return "invalid_redirect_uri", f"redirect_uris must be a list of URIs, got {uris!r}"
    if len(uris) > MAX_REDIRECT_URIS:
        many = f"redirect_uris holds {len(uris)} URIs: at most {MAX_REDIRECT_URIS} (MAX_REDIRECT_URIS)"
        return "invalid_redirect_uri", many
    for uri in uris:
        if (why := _redirect_problem(uri)) is not None:
            return "invalid_redirect_uri", why
    grants = meta.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or not grants or not all(g in GRANTS for g in grants):
        return "invalid_client_metadata", f"grant_types must be a list of {list(GRANTS)}, got {grants!r}"
    if "authorization_code" in grants and not uris:
        return "invalid_redirect_uri", "the authorization_code grant needs redirect_uris (at least one)"
    kinds = meta.get("response_types", ["code"])
    if not isinstance(kinds, list) or not all(k == "code" for k in kinds):
        return "invalid_client_metadata", f"response_types must be ['code'] (or empty), got {kinds!r}"
    if ("code" in kinds) != ("authorization_code" in grants):  # RFC 7591 2.1: consistent
        return "invalid_client_metadata", f"response_types {kinds!r} do not match grant_types {grants!r}"
    method = meta.get("token_endpoint_auth_method", CLIENT_AUTH_METHODS[0])
    if method not in CLIENT_AUTH_METHODS:
        return "invalid_client_metadata", (
            f"token_endpoint_auth_method must be one of {', '.join(CLIENT_AUTH_METHODS)}, got {method!r}"
        )
    scope = meta.get("scope")
    if scope is not None and not (isinstance(scope, str) and all(map(_SCOPE_TOKEN.match, scope.split()))):
        return "invalid_client_metadata", f"scope must be space-separated OAuth scope tokens, got {scope!r}"
    return None


def _basic(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """The client id and secret of an ``Authorization: Basic`` header (RFC 6749 2.3.1)."""
    scheme, _, value = (headers.get("Authorization") or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        client_id, _, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return (unquote(client_id), unquote(secret)) if client_id else None


def _same_secret(given: str, expected: str) -> bool:
    """In constant time over UTF-8 bytes: ``compare_digest`` raises on a non-ASCII ``str`` (a 500 for
    the client's typo)."""
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


class Clients:
    """The registered clients and the outstanding codes of one sidecar (on the core's thread)."""

    def __init__(self, issuer: Callable[[], str]) -> None:
        self.issuer = issuer
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._codes: OrderedDict[str, _Code] = OrderedDict()
        self._redeemed: OrderedDict[str, str | None] = OrderedDict()  # code -> the token it became
        self._registered = 0

    def label(self, client_id: str | None) -> str | None:
        """The journal's name of a registered client (``'c1'`` ...)."""
        client = self._clients.get(client_id) if client_id else None
        return client.label if client is not None else None

    def register(self, body: bytes) -> tuple[Reply, str | None]:
        """RFC 7591: ``201`` with the client's id (and secret), or the error; the new client's label."""
        try:
            meta = json.loads(body)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            meta = None
        if not isinstance(meta, dict):
            return oauth_error("invalid_client_metadata", "the registration body must be a JSON object"), None
        problem = _metadata_problem(meta)
        if problem is not None:
            return oauth_error(*problem), None
        self._registered += 1
        label = f"c{self._registered}"
        method = meta.get("token_endpoint_auth_method", CLIENT_AUTH_METHODS[0])
        secret = None if method == "none" else "mcpf_cs_" + secrets.token_urlsafe(18)
        client_id = "mcpf_client_" + secrets.token_urlsafe(12)
        grants = meta.get("grant_types", ["authorization_code"])
        self._clients[client_id] = _Client(
            label, secret, method, tuple(meta.get("redirect_uris", [])), frozenset(grants)
        )
        if len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)
        asked = {k: v for k, v in meta.items() if k not in _SERVER_FIELDS}
        info: dict[str, object] = {
            **asked, "client_id": client_id, "client_id_issued_at": int(time.time()),
            "token_endpoint_auth_method": method, "grant_types": grants,
            "response_types": meta.get("response_types", ["code"]),
        }  # fmt: skip
        if secret is not None:
            info.update(client_secret=secret, client_secret_expires_at=0)  # 0: it does not expire
        return Reply(201, info, {"Cache-Control": "no-store"}, sse=False), label

    def authorize(self, query: str) -> tuple[Reply, str | None]:
        """``302`` to the client's redirect URI with a code or the error; ``400`` when the client or its
        redirect URI is not known (never redirected: RFC 6749 4.1.2.1). The client's label."""
        pairs = parse_qsl(query, keep_blank_values=True)
        params = dict(pairs)
        if len(params) != len(pairs):
            return oauth_error("invalid_request", "a parameter is repeated (RFC 6749 3.1)"), None
        client_id = params.get("client_id", "")
        client = self._clients.get(client_id)
        if client is None:
            why = f"client_id {client_id!r} is not registered: register at {REGISTER_PATH} first"
            return oauth_error("invalid_request", why), None
        asked = params.get("redirect_uri")
        if asked is None and len(client.redirect_uris) != 1:
            why = "redirect_uri is required: the client registered more than one"
            return oauth_error("invalid_request", why), client.label
        if asked is not None and asked not in client.redirect_uris:
            why = f"redirect_uri {asked!r} is not one the client registered ({list(client.redirect_uris)})"
            return oauth_error("invalid_request", why), client.label
        target = asked if asked is not None else client.redirect_uris[0]
        state = params.get("state")
        problem = self._authorization_problem(params, client)
        if problem is not None:
            return _redirect(target, {"error": problem[0], "error_description": problem[1]}, state,
                             self.issuer(), f"{problem[0]}: {problem[1]}"), client.label  # fmt: skip
        code = "mcpf_code_" + secrets.token_urlsafe(24)
        scopes = frozenset(params.get("scope", "").split())
        self._codes[code] = _Code(
            client_id, asked, params["code_challenge"], scopes, time.monotonic() + CODE_LIFETIME
        )
        if len(self._codes) > MAX_CODES:
            self._codes.popitem(last=False)
        return _redirect(target, {"code": code}, state, self.issuer(), None), client.label

    @staticmethod
    def _authorization_problem(params: Mapping[str, str], client: _Client) -> tuple[str, str] | None:
        kind = params.get("response_type")
        if kind != "code":
            return "unsupported_response_type", f"response_type must be 'code', got {kind!r}"
        if "authorization_code" not in client.grant_types:
            return "unauthorized_client", "the client did not register the authorization_code grant"
        challenge = params.get("code_challenge")
        if challenge is None:
            return "invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256"
        method = params.get("code_challenge_method", "plain")
        if method not in CHALLENGE_METHODS:
            return "invalid_request", f"code_challenge_method must be S256, got {method!r}"
        if not _CHALLENGE.match(challenge):
            return "invalid_request", "code_challenge must be an unpadded base64url SHA-256 (43 characters)"
        scope = params.get("scope", "")
        if not all(map(_SCOPE_TOKEN.match, scope.split())):
            return "invalid_scope", f"scope must be space-separated OAuth scope tokens, got {scope!r}"
        return None

    def authenticate(
        self, form: Mapping[str, str], headers: Mapping[str, str]
    ) -> tuple[str | None, Reply | None]:
        """The token request's client id and, for a registered client, the ``401`` its bad credentials
        earn. A client id the fake did not register is taken on trust (``client_credentials``)."""
        basic = _basic(headers)
        client_id = basic[0] if basic is not None else form.get("client_id") or None
        client = self._clients.get(client_id) if client_id else None
        if client is None or client.secret is None:
            return client_id, None
        secret = basic[1] if basic is not None else form.get("client_secret")
        if secret is None or not _same_secret(secret, client.secret):
            why = f"client {client.label} registered {client.method}: its client_secret is missing or wrong"
            return client_id, oauth_error("invalid_client", why, 401)
        return client_id, None

    def redeem(
        self, form: Mapping[str, str], client_id: str | None, revoke: Callable[[str], None]
    ) -> tuple[str, frozenset[str]] | Reply:
        """The ``authorization_code`` grant's checks (RFC 6749 4.1.3, RFC 7636 4.6): the code and the
        scopes it grants; a code used twice: the token it became (:meth:`issued`) is ``revoke``d (RFC
        6749 4.1.2)."""
        code = form.get("code")
        if not code:
            return oauth_error("invalid_request", "the authorization_code grant needs code")
        if (became := self._redeemed.get(code)) is not None:
            revoke(became)
        verifier = form.get("code_verifier")
        if verifier is None:
            return oauth_error("invalid_request", "PKCE: the authorization_code grant needs code_verifier")
        if code in self._redeemed:
            return oauth_error("invalid_grant", "the authorization code was used already")
        grant = self._codes.pop(code, None)
        if grant is None:
            return oauth_error("invalid_grant", "the authorization code is not known")
        self._redeemed[code] = None
        if len(self._redeemed) > MAX_CODES:
            self._redeemed.popitem(last=False)
        if time.monotonic() > grant.expires_at:
            return oauth_error("invalid_grant", f"the authorization code expired ({CODE_LIFETIME:g} s)")
        if client_id != grant.client_id:
            return oauth_error("invalid_grant", "the authorization code was issued to another client")
        if grant.redirect_uri is not None and form.get("redirect_uri") != grant.redirect_uri:
            return oauth_error("invalid_grant", "redirect_uri does not match the authorization request's")
        s256 = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        if not _VERIFIER.match(verifier) or not secrets.compare_digest(s256, grant.challenge):
            return oauth_error("invalid_grant", "code_verifier does not match the code_challenge (S256)")
        return code, grant.scopes

    def issued(self, code: str, token: str) -> None:
        if code in self._redeemed:
            self._redeemed[code] = token


def _redirect(target: str, params: dict[str, str], state: str | None, iss: str, error: str | None) -> Reply:
    if state is not None:
        params["state"] = state
    params["iss"] = iss  # RFC 9207
    location = target + ("&" if urlsplit(target).query else "?") + urlencode(params)
    return Reply(302, None, {"Location": location, "Cache-Control": "no-store"}, sse=False, error=error,
                 error_by="client" if error else None)  # fmt: skip
