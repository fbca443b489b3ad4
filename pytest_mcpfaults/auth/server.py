"""The sidecar as an OAuth-protected resource (``Sidecar(auth=...)``, docs/auth.md). Pure: no I/O.

With ``auth='oauth'`` the sidecar issues the bearer tokens itself, through a minimal authorization
server on the same port (RFC 9728 resource metadata, RFC 8414 server metadata, a token endpoint); with
a list of tokens exactly those are accepted. Either way a request without an accepted token is
answered ``401`` with ``WWW-Authenticate: Bearer resource_metadata="..."``, as the MCP 2025-11-25
authorization spec asks. What a client did after a refusal (:func:`auth_follow_ups`) is read from the
journal: the next request to the MCP endpoint, and the requests to the authorization server before it.
"""

from __future__ import annotations

import re
import secrets
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl

from pytest_mcpfaults.auth.registration import (
    AUTHORIZE_PATH,
    CHALLENGE_METHODS,
    CLIENT_AUTH_METHODS,
    GRANTS,
    REGISTER_PATH,
    Clients,
    oauth_error,
)
from pytest_mcpfaults.core.records import AuthSeen, RequestRecord
from pytest_mcpfaults.mcp.jsonrpc import Reply

#: Where the protected resource metadata is served (and under it, the MCP path: RFC 9728's form).
PRM_PATH = "/.well-known/oauth-protected-resource"
#: Where the authorization server metadata is served.
ASM_PATH = "/.well-known/oauth-authorization-server"
#: The token endpoint (``POST``, form-encoded).
TOKEN_PATH = "/oauth/token"
AUTH_GRANTS = GRANTS
#: The scope a token is granted when its request names none (and every static token's scope).
DEFAULT_SCOPE = "mcp"
#: The ``expires_in`` of an issued token, seconds (long: the auth fault kinds expire tokens by count).
TOKEN_LIFETIME = 3600
#: How many issued tokens a sidecar keeps (then the oldest is forgotten): a client asking for tokens
#: in a loop costs bounded memory.
MAX_TOKENS = 10_000

_CHALLENGE_ERROR = re.compile(r'^Bearer (?:.*, )?error="([^"]*)"')


@dataclass(frozen=True)
class AuthInfo:
    """What a request to the MCP endpoint carried, as the authorization layer sees it.

    ``label``: the token's name in the journal (``'t1'`` ... as issued, ``'static1'`` ... as ``auth=``
    lists them, ``'unknown'``); ``calls``: how many earlier requests carried it; ``principal``: whom
    it stands for (a static token: its label; an issued one: its client id, kept by a refresh), to
    which a transport session and a stateless-era round are bound."""

    token: str | None
    label: str | None
    accepted: bool
    calls: int
    scopes: frozenset[str]
    metadata_url: str
    principal: str | None = None


@dataclass(frozen=True)
class AuthAnswer:
    """The authorization server's answer, and for the journal the ``grant``, the label of the token
    it ``issued`` and the registered ``client`` it named (``'c1'`` ...)."""

    reply: Reply
    grant: str | None = None
    issued: str | None = None
    client: str | None = None


@dataclass
class _Grant:
    label: str
    scopes: frozenset[str]
    refresh: str | None
    principal: str = ""
    client_id: str | None = None  # its refresh token is that client's only
    registered: bool = False  # the client was a registered one (it must still be, to refresh)
    refreshed: bool = False  # its refresh token was used (rotated: refused from then on)
    revoked: bool = False
    calls: int = 0  # the requests that carried it


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(
    metadata_url: str | None,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """A ``WWW-Authenticate`` value with the parameters given."""
    params = [
        f"{name}={_quoted(value)}"
        for name, value in (
            ("error", error), ("scope", scope), ("resource_metadata", metadata_url),
            ("error_description", description),
        )
        if value is not None
    ]  # fmt: skip
    return "Bearer " + ", ".join(params) if params else "Bearer"


def challenge_error(reply: Reply) -> str | None:
    """The ``error`` of a reply's bearer challenge, ``'missing'`` for a challenge without one (no token
    was sent), ``None`` when it has no challenge."""
    value = reply.headers.get("WWW-Authenticate")
    if reply.status not in (401, 403) or value is None or not value.startswith("Bearer"):
        return None
    found = _CHALLENGE_ERROR.match(value)
    return found[1] if found else "missing"


def refusal(status: int, www_authenticate: str, error: str, description: str) -> Reply:
    body = {"error": error, "error_description": description}
    return Reply(status, body, {"WWW-Authenticate": www_authenticate}, sse=False)


class AuthServer:
    """The tokens of one sidecar and its authorization server's answers (on the core's thread).
    ``base_url``: the sidecar's, known once it is bound."""

    def __init__(self, auth: str | Sequence[str], *, mcp_path: str, base_url: Callable[[], str]) -> None:
        self.issues = auth == "oauth"
        self.mcp_path = mcp_path
        self.base_url = base_url
        statics = () if isinstance(auth, str) else tuple(auth)
        self._grants: dict[str, _Grant] = {
            token: _Grant(f"static{i}", frozenset({DEFAULT_SCOPE}), None, f"static{i}")
            for i, token in enumerate(statics, 1)
        }
        self._refresh: dict[str, str] = {}  # refresh token -> access token
        self._issued = 0
        self._issued_tokens: deque[str] = deque()  # oldest first, for MAX_TOKENS
        self.clients = Clients(base_url)  # the issuer identifier is the sidecar's base URL
        paths = [PRM_PATH, PRM_PATH + mcp_path]
        if self.issues:
            paths += [ASM_PATH, TOKEN_PATH, AUTHORIZE_PATH, REGISTER_PATH]
        self.paths = frozenset(paths)

    @property
    def metadata_url(self) -> str:
        """The protected resource metadata URL the challenges name (RFC 9728's path-suffixed form)."""
        return self.base_url() + PRM_PATH + self.mcp_path

    def observe(self, headers: Mapping[str, str]) -> AuthInfo:
        """What this MCP request carried; counts it as a call of its token."""
        value = headers.get("Authorization") or ""
        scheme, _, token = value.partition(" ")
        bearer = token.strip() if scheme.lower() == "bearer" and token.strip() else None
        if bearer is None:
            return AuthInfo(None, None, False, 0, frozenset(), self.metadata_url)
        grant = self._grants.get(bearer)
        if grant is None:  # not counted: a client sending made-up tokens costs nothing
            return AuthInfo(bearer, "unknown", False, 0, frozenset(), self.metadata_url)
        calls, grant.calls = grant.calls, grant.calls + 1
        accepted = not grant.revoked
        principal = grant.principal if accepted else None
        return AuthInfo(bearer, grant.label, accepted, calls, grant.scopes, self.metadata_url, principal)

    def refusal(self, info: AuthInfo) -> Reply | None:
        """``401`` for a request without an accepted token, ``None`` to let it through."""
        if info.accepted:
            return None
        if info.token is None:
            return refusal(
                401, challenge(info.metadata_url), "invalid_request",
                "this MCP server requires a bearer token (Authorization: Bearer <token>)",
            )  # fmt: skip
        why = "the access token was revoked" if info.label != "unknown" else "the access token is not known"
        return refusal(401, challenge(info.metadata_url, "invalid_token", why), "invalid_token", why)

    def revoke(self, token: str) -> None:
        if token in self._grants:
            self._grants[token].revoked = True

    def answer(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, query: str = ""
    ) -> AuthAnswer | None:
        """The answer on one of :attr:`paths`, ``None`` for any other path."""
        if path not in self.paths:
            return None
        allowed = "POST" if path in (TOKEN_PATH, REGISTER_PATH) else "GET"
        if method != allowed:
            return AuthAnswer(Reply(405, {"error": "method not allowed"}, {"Allow": allowed}, sse=False))
        if path == TOKEN_PATH:
            return self._token(headers, body)
        if path in (REGISTER_PATH, AUTHORIZE_PATH):
            reply, client = (
                self.clients.register(body) if path == REGISTER_PATH else self.clients.authorize(query)
            )
            return AuthAnswer(reply, client=client)
        base = self.base_url()
        if path != ASM_PATH:
            prm = {
                "resource": base + self.mcp_path,
                "authorization_servers": [base] if self.issues else [],
                "scopes_supported": [DEFAULT_SCOPE],
                "bearer_methods_supported": ["header"],
            }
            return AuthAnswer(Reply(200, prm, sse=False))
        asm = {
            "issuer": base,
            "authorization_endpoint": base + AUTHORIZE_PATH,
            "token_endpoint": base + TOKEN_PATH,
            "registration_endpoint": base + REGISTER_PATH,
            "grant_types_supported": list(AUTH_GRANTS),
            "token_endpoint_auth_methods_supported": list(CLIENT_AUTH_METHODS),
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": list(CHALLENGE_METHODS),
            "authorization_response_iss_parameter_supported": True,
            "scopes_supported": [DEFAULT_SCOPE],
        }
        return AuthAnswer(Reply(200, asm, sse=False))

    def _token(self, headers: Mapping[str, str], body: bytes) -> AuthAnswer:
        try:
            form = dict(parse_qsl(body.decode(), keep_blank_values=True))
        except UnicodeDecodeError:
            return AuthAnswer(oauth_error("invalid_request", "the token request is not form-encoded text"))
        grant = form.get("grant_type")
        if grant not in AUTH_GRANTS:
            return AuthAnswer(
                oauth_error("unsupported_grant_type", f"grant_type must be one of {', '.join(AUTH_GRANTS)}, "
                            f"got {grant!r}"), grant,
            )  # fmt: skip
        client_id, refused = self.clients.authenticate(form, headers)
        client = self.clients.label(client_id)
        if refused is not None:
            return AuthAnswer(refused, grant, client=client)
        if client_id is None:
            why = "no client_id (in the form or HTTP Basic)"
            return AuthAnswer(oauth_error("invalid_client", why, 401), grant)
        requested = frozenset(form.get("scope", "").split())
        if grant == "authorization_code":
            redeemed = self.clients.redeem(form, client_id, self.revoke)
            if isinstance(redeemed, Reply):
                return AuthAnswer(redeemed, grant, client=client)
            code, scopes = redeemed
            answer, token = self._issue(scopes or frozenset({DEFAULT_SCOPE}), grant, client, client_id)
            self.clients.issued(code, token)
            return answer
        if grant == "refresh_token":
            return self._refresh_grant(form.get("refresh_token", ""), requested, client_id, client)
        return self._issue(requested or frozenset({DEFAULT_SCOPE}), grant, client, client_id)[0]

    def _refresh_grant(
        self, refresh: str, requested: frozenset[str], client_id: str, client: str | None
    ) -> AuthAnswer:
        """The ``refresh_token`` grant (OAuth 2.1 4.3): each refresh token is good once, for its client,
        for no more scope than it had."""
        access = self._refresh.get(refresh)
        old = self._grants[access] if access is not None else None
        why = _refresh_problem(old, client_id, client)
        if old is None or why is not None:
            return AuthAnswer(oauth_error("invalid_grant", str(why)), "refresh_token", client=client)
        if not requested <= old.scopes:  # RFC 6749 6: no scope beyond the original grant
            why = "a refresh cannot widen the scope"
            return AuthAnswer(oauth_error("invalid_scope", why), "refresh_token", client=client)
        old.refreshed = True
        return self._issue(requested or old.scopes, "refresh_token", client, client_id)[0]

    def _issue(
        self, scopes: frozenset[str], grant: str, client: str | None, client_id: str
    ) -> tuple[AuthAnswer, str]:
        self._issued += 1
        label = f"t{self._issued}"
        token, refresh = "mcpf_at_" + secrets.token_urlsafe(18), "mcpf_rt_" + secrets.token_urlsafe(18)
        principal = f"client_id {client_id}"  # a refresh goes on with it: refresh tokens are the client's own
        self._grants[token] = _Grant(label, scopes, refresh, principal, client_id, client is not None)
        self._refresh[refresh] = token
        self._issued_tokens.append(token)
        if len(self._issued_tokens) > MAX_TOKENS:  # the oldest issued token is forgotten
            oldest = self._grants.pop(self._issued_tokens.popleft())
            if oldest.refresh is not None:
                self._refresh.pop(oldest.refresh, None)
        payload = {
            "access_token": token, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME,
            "refresh_token": refresh, "scope": " ".join(sorted(scopes)),
        }  # fmt: skip
        reply = Reply(200, payload, {"Cache-Control": "no-store"}, sse=False)
        return AuthAnswer(reply, grant, label, client), token


def _refresh_problem(old: _Grant | None, client_id: str, client: str | None) -> str | None:
    if old is None:
        return "the refresh token is not known"
    if old.refreshed:
        return "the refresh token was used already (it is rotated: use the one its token response carried)"
    if old.client_id != client_id:
        return "the refresh token was issued to another client"
    if old.registered and client is None:
        return "the refresh token was issued to a client that is no longer registered"
    return None


def check_auth(auth: object, who: str = "Sidecar") -> str | tuple[str, ...] | None:
    """``auth=`` as the sidecar keeps it, or a ``ValueError`` naming what is valid."""
    valid = "None, 'oauth' (the sidecar issues tokens) or a list of accepted bearer tokens"
    if auth is None or auth == "oauth":
        return auth
    if isinstance(auth, (str, bytes)) or not isinstance(auth, Sequence) or not auth:
        raise ValueError(f"{who}: auth must be {valid}, got {auth!r}")
    for token in auth:
        if not isinstance(token, str) or not token or any(c.isspace() or not c.isprintable() for c in token):
            raise ValueError(
                f"{who}: auth tokens must be non-empty strings without spaces or control characters, "
                f"got {token!r} in {auth!r}"
            )
    return tuple(auth)


def check_auth_plan(plan: Sequence[object], auth: object, who: str) -> None:
    """Refuse a fault whose kind needs ``auth=`` on a sidecar without it, naming the fault and the option."""
    if auth is not None:
        return
    for fault in plan:
        if getattr(fault, "needs_auth", False):
            raise ValueError(
                f"{who}: fault {str(fault)!r} needs a sidecar with auth= (it answers a bearer token): "
                "pass auth='oauth' (the sidecar issues tokens) or auth=[<accepted tokens>]"
            )


AuthOutcome = Literal[
    "refreshed", "deleted_session", "retried_same_token", "retried_without_token", "gave_up"
]
"""What a client did after an auth failure (:attr:`AuthFollowUp.outcome`)."""

_NOTHING = AuthSeen()  # what a request the auth= layer saw nothing of shows
_DOING = {
    "refreshed": "came back with a new token",
    "deleted_session": "went to DELETE without a new token (it gave up the session)",
    "retried_same_token": "retried with the same token",
    "retried_without_token": "retried without a token",
    "gave_up": "sent nothing more to the MCP endpoint",
}


@dataclass(frozen=True)
class AuthFollowUp:
    """One auth failure (a request answered with a bearer challenge) and what the client did next:
    ``next``, its next request to the MCP endpoint; ``between``, its requests to the authorization
    server before that; ``grant``, the grant that issued the token ``next`` carried, if one did."""

    failure: RequestRecord
    outcome: AuthOutcome
    next: RequestRecord | None
    between: tuple[RequestRecord, ...]
    grant: str | None = None

    def describe(self) -> str:
        """E.g. ``#7 POST tools/call echo (token t1) was refused (401 invalid_token); the client then
        retried with the same token: #8 POST tools/call echo (token t1, 401)``."""
        f = self.failure
        why = f"{f.status} {_seen(f).error}" + (f", fault {f.fault}" if f.fault else "")
        head = f"#{f.id} {f.label} ({_token(f)}) was refused ({why}); the client then {_DOING[self.outcome]}"
        if self.between:
            head += " after " + ", ".join(
                f"#{r.id} {r.label}" + (f" (grant {g})" if (g := _seen(r).grant) else "")
                for r in self.between
            )
        if self.next is not None:
            n = self.next
            head += f": #{n.id} {n.label} ({_token(n)}, {n.status})"
        return head


def _seen(r: RequestRecord) -> AuthSeen:
    return r.auth if r.auth is not None else _NOTHING


def _token(r: RequestRecord) -> str:
    return f"token {token}" if (token := _seen(r).token) else "no token"


def auth_follow_ups(requests: Iterable[RequestRecord], mcp_path: str) -> tuple[AuthFollowUp, ...]:
    """Every auth failure of the journal's ``requests`` with what followed it."""
    records = sorted(requests, key=lambda r: r.id)
    out: list[AuthFollowUp] = []
    for i, failure in enumerate(records):
        if failure.path != mcp_path or _seen(failure).error is None:
            continue
        rest = records[i + 1 :]
        at = next((j for j, r in enumerate(rest) if r.path == mcp_path), len(rest))
        between, following = tuple(rest[:at]), rest[at] if at < len(rest) else None
        token = _seen(following).token if following is not None else None
        if following is None:
            out.append(AuthFollowUp(failure, "gave_up", None, between))
        elif token is not None and token != _seen(failure).token:
            grant = next((_seen(r).grant for r in between if _seen(r).issued == token), None)
            out.append(AuthFollowUp(failure, "refreshed", following, between, grant))
        elif following.method == "DELETE":
            out.append(AuthFollowUp(failure, "deleted_session", following, between))
        else:
            outcome: AuthOutcome = "retried_same_token" if token is not None else "retried_without_token"
            out.append(AuthFollowUp(failure, outcome, following, between))
    return tuple(out)


def reauthorization_problems(follow_ups: Iterable[AuthFollowUp]) -> list[str]:
    """The auth failures the client did not answer with a new token, described."""
    return [f.describe() for f in follow_ups if f.outcome != "refreshed"]
