"""The sidecar as an OAuth-protected resource (``Sidecar(auth=...)``, docs/auth.md). Pure: no I/O.

With ``auth='oauth'`` the MCP endpoint asks for a bearer token that the sidecar issues itself, through
a minimal authorization server on the same port: its protected resource metadata (RFC 9728) at
:data:`PRM_PATH` (and the path-suffixed form, ``/.well-known/oauth-protected-resource/mcp``), its
authorization server metadata (RFC 8414) at :data:`ASM_PATH`, and a token endpoint at
:data:`TOKEN_PATH` with the grants of :data:`AUTH_GRANTS`: ``authorization_code`` with PKCE, for a
client registered at the registration endpoint and approved at once by the authorization endpoint
(``auth/registration.py``), ``client_credentials`` (any client id and secret are accepted unless the id is a
registered client's) and ``refresh_token``. With a list of tokens (``auth=['t0k3n']``)
exactly those are accepted and none is issued. Either way a request to the MCP endpoint without an
accepted token is answered ``401`` with ``WWW-Authenticate: Bearer resource_metadata="..."``, as the
MCP 2025-11-25 authorization spec asks.

:class:`AuthServer` holds the tokens; the core asks it what a request carried (:meth:`AuthServer.observe`,
an :class:`AuthInfo` the auth fault kinds read), whether to refuse it (:meth:`AuthServer.refusal`), and
to answer the authorization server's paths (:meth:`AuthServer.answer`).

What a client did after the sidecar refused its token (:func:`auth_follow_ups`) is read from the
journal's records. An auth failure is a request to the MCP endpoint answered with a bearer challenge
(``401``, or ``403`` ``insufficient_scope``; :attr:`~pytest_mcpfaults.core.records.AuthSeen.error` set),
whether the sidecar refused a missing or revoked token or an auth fault kind fired. What the client did
next is read from the next request to the MCP endpoint, in arrival order, and the requests to the
authorization server in between (metadata, the token endpoint):

* ``'refreshed'``: it came back with another token (``grant`` says how it got it: ``'refresh_token'``,
  ``'client_credentials'``; ``None`` when no token request in between issued it);
* ``'deleted_session'``: it went to ``DELETE`` without a new token (it gave up the session);
* ``'retried_same_token'``: it sent the refused token again;
* ``'retried_without_token'``: it sent no token;
* ``'gave_up'``: nothing more reached the MCP endpoint.
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
    Redeemed,
    oauth_error,
)
from pytest_mcpfaults.core.records import AuthSeen, RequestRecord
from pytest_mcpfaults.mcp.endpoint import Reply

__all__ = [
    "ASM_PATH",
    "AUTH_GRANTS",
    "DEFAULT_SCOPE",
    "MAX_TOKENS",
    "PRM_PATH",
    "TOKEN_LIFETIME",
    "TOKEN_PATH",
    "AuthAnswer",
    "AuthFollowUp",
    "AuthInfo",
    "AuthOutcome",
    "AuthServer",
    "auth_follow_ups",
    "challenge",
    "challenge_error",
    "check_auth",
    "check_auth_plan",
    "reauthorization_problems",
    "refusal",
]

#: Where the protected resource metadata is served (and under it, the MCP path: RFC 9728's form).
PRM_PATH = "/.well-known/oauth-protected-resource"
#: Where the authorization server metadata is served.
ASM_PATH = "/.well-known/oauth-authorization-server"
#: The token endpoint (``POST``, form-encoded).
TOKEN_PATH = "/oauth/token"
#: The grants the token endpoint takes (and the metadata advertises).
AUTH_GRANTS = GRANTS
#: The scope a token is granted when its request names none (and every static token's scope).
DEFAULT_SCOPE = "mcp"
#: The ``expires_in`` of an issued token, seconds (long: the auth fault kinds expire tokens by count).
TOKEN_LIFETIME = 3600
#: How many issued tokens a sidecar keeps: past it the oldest is forgotten (it, and its refresh token,
#: are then refused as unknown), so a client asking for tokens in a loop costs bounded memory.
MAX_TOKENS = 10_000

_CHALLENGE_ERROR = re.compile(r'^Bearer (?:.*, )?error="([^"]*)"')


@dataclass(frozen=True)
class AuthInfo:
    """What a request to the MCP endpoint carried, as the authorization layer sees it.

    ``token``: the bearer token (``None``: no ``Authorization: Bearer`` header); ``label`` its name in
    the journal (``'t1'``, ``'t2'`` ... in the order the sidecar issued them, ``'static1'`` ... in the
    order ``auth=`` lists them, ``'unknown'`` for one the sidecar never issued nor accepts); ``accepted``
    whether it is good (known and not revoked); ``calls`` how many earlier requests carried it;
    ``scopes`` what it was granted; ``metadata_url`` the protected resource metadata URL the
    challenges name; ``principal`` whom the token stands for (a static token: itself, ``'static1'``
    ...; an issued one: the ``client_id`` it was issued to, ``'client_id <id>'``, kept by a refresh), to
    which a transport session and a stateless-era round are bound (``None``: no accepted token)."""

    token: str | None
    label: str | None
    accepted: bool
    calls: int
    scopes: frozenset[str]
    metadata_url: str
    principal: str | None = None


@dataclass(frozen=True)
class AuthAnswer:
    """The authorization server's answer to a request on one of its paths: the reply, and for the
    journal the token request's ``grant`` (``grant_type``), the label of the token it ``issued`` and
    the registered ``client`` the request registered or named (``'c1'`` ...)."""

    reply: Reply
    grant: str | None = None
    issued: str | None = None
    client: str | None = None


@dataclass
class _Grant:
    label: str
    scopes: frozenset[str]
    refresh: str | None
    principal: str = ""  # whom it stands for (see AuthInfo.principal)
    client_id: str | None = None  # the client it was issued to (its refresh token is that client's only)
    registered: bool = False  # whether that client was a registered one (it must still be, to refresh)
    refreshed: bool = False  # its refresh token was used (rotated: refused from then on)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(
    metadata_url: str | None,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """A ``WWW-Authenticate`` value: ``Bearer error="...", scope="...", resource_metadata="...",
    error_description="..."`` (the parameters given)."""
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
    """The ``error`` of a reply's bearer challenge (``'invalid_token'``, ``'insufficient_scope'``),
    ``'missing'`` for a challenge without one (no token was sent), ``None`` when it has none."""
    value = reply.headers.get("WWW-Authenticate")
    if reply.status not in (401, 403) or value is None or not value.startswith("Bearer"):
        return None
    found = _CHALLENGE_ERROR.match(value)
    return found[1] if found else "missing"


def refusal(status: int, www_authenticate: str, error: str, description: str) -> Reply:
    """A ``401``/``403`` with its challenge and an OAuth error body."""
    body = {"error": error, "error_description": description}
    return Reply(status, body, {"WWW-Authenticate": www_authenticate}, sse=False)


class AuthServer:
    """The tokens of one sidecar and its authorization server's answers (on the core's thread).

    ``auth``: ``'oauth'`` (issue tokens) or the static tokens accepted; ``mcp_path``; ``base_url``:
    the sidecar's ``http://127.0.0.1:<port>`` (known once it is bound)."""

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
        self._revoked: set[str] = set()
        self._calls: dict[str, int] = {}
        self._issued = 0
        self._issued_tokens: deque[str] = deque()  # oldest first, for MAX_TOKENS
        #: The registered clients and their authorization codes (``auth='oauth'``).
        self.clients = Clients(lambda: self.issuer)
        paths = [PRM_PATH, PRM_PATH + mcp_path]
        if self.issues:
            paths += [ASM_PATH, TOKEN_PATH, AUTHORIZE_PATH, REGISTER_PATH]
        #: The paths the authorization layer answers itself.
        self.paths = frozenset(paths)

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def issuer(self) -> str:
        """The authorization server's issuer identifier: the sidecar's base URL."""
        return self.base_url()

    @property
    def metadata_url(self) -> str:
        """The protected resource metadata URL the challenges name (RFC 9728's path-suffixed form)."""
        return self.base_url() + PRM_PATH + self.mcp_path

    # -- the resource ------------------------------------------------------------------------------
    def observe(self, headers: Mapping[str, str]) -> AuthInfo:
        """What this MCP request carried; counts it as a call of its token."""
        value = headers.get("Authorization") or ""
        scheme, _, token = value.partition(" ")
        bearer = token.strip() if scheme.lower() == "bearer" and token.strip() else None
        if bearer is None:
            return AuthInfo(None, None, False, 0, frozenset(), self.metadata_url)
        grant = self._grants.get(bearer)
        calls = self._calls.get(bearer, 0)
        if grant is not None:  # only tokens it knows: a client sending made-up ones costs nothing
            self._calls[bearer] = calls + 1
        accepted = grant is not None and bearer not in self._revoked
        label = grant.label if grant is not None else "unknown"
        scopes = grant.scopes if grant is not None else frozenset()
        principal = grant.principal if grant is not None and accepted else None
        return AuthInfo(bearer, label, accepted, calls, scopes, self.metadata_url, principal)

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
        """The token is refused from now on."""
        if token in self._grants:
            self._revoked.add(token)

    def _forget(self, token: str) -> None:
        grant = self._grants.pop(token)
        if grant.refresh is not None:
            self._refresh.pop(grant.refresh, None)
        self._calls.pop(token, None)
        self._revoked.discard(token)

    # -- the authorization server ------------------------------------------------------------------
    def answer(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, query: str = ""
    ) -> AuthAnswer | None:
        """The answer on one of :attr:`paths` (``query``: the URL's, without the ``?``), ``None`` for
        any other path."""
        if path not in self.paths:
            return None
        if path in (TOKEN_PATH, REGISTER_PATH):
            if method != "POST":
                return AuthAnswer(Reply(405, {"error": "method not allowed"}, {"Allow": "POST"}, sse=False))
            if path == REGISTER_PATH:
                reply, client = self.clients.register(body)
                return AuthAnswer(reply, client=client)
            return self._token(headers, body)
        if method != "GET":
            return AuthAnswer(Reply(405, {"error": "method not allowed"}, {"Allow": "GET"}, sse=False))
        if path == AUTHORIZE_PATH:
            reply, client = self.clients.authorize(query)
            return AuthAnswer(reply, client=client)
        if path == ASM_PATH:
            return AuthAnswer(Reply(200, self._server_metadata(), sse=False))
        servers = [self.issuer] if self.issues else []
        prm = {
            "resource": self.base_url() + self.mcp_path,
            "authorization_servers": servers,
            "scopes_supported": [DEFAULT_SCOPE],
            "bearer_methods_supported": ["header"],
        }
        return AuthAnswer(Reply(200, prm, sse=False))

    def _server_metadata(self) -> dict[str, object]:
        base = self.base_url()
        return {
            "issuer": self.issuer,
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
            if (reused := self.clients.reused(form)) is not None:
                self.revoke(reused)  # a code used twice: what it became is revoked (RFC 6749 4.1.2)
            redeemed = self.clients.redeem(form, client_id)
            if not isinstance(redeemed, Redeemed):
                return AuthAnswer(redeemed, grant, client=client)
            scopes = redeemed.scopes or frozenset({DEFAULT_SCOPE})
            answer, token = self._issue(scopes, grant, client, client_id)
            self.clients.issued(redeemed.code, token)
            return answer
        if grant == "refresh_token":
            return self._refresh_grant(form.get("refresh_token", ""), requested, client_id, client)
        return self._issue(requested or frozenset({DEFAULT_SCOPE}), grant, client, client_id)[0]

    def _refresh_grant(
        self, refresh: str, requested: frozenset[str], client_id: str, client: str | None
    ) -> AuthAnswer:
        """The ``refresh_token`` grant (OAuth 2.1 4.3): the token known, unused (each is good once: the
        answer carries the next one), presented by the client it was issued to (still registered, if it
        was), for no more scope than it had."""
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
            self._forget(self._issued_tokens.popleft())
        payload = {
            "access_token": token, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME,
            "refresh_token": refresh, "scope": " ".join(sorted(scopes)),
        }  # fmt: skip
        reply = Reply(200, payload, {"Cache-Control": "no-store"}, sse=False)
        return AuthAnswer(reply, grant, label, client), token


def _refresh_problem(old: _Grant | None, client_id: str, client: str | None) -> str | None:
    """Why the refresh token of ``old`` (``None``: not known) cannot be redeemed by ``client_id``
    (``client``: its label, ``None`` when it is not registered), ``None`` when it can."""
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
    """``auth=`` as the sidecar keeps it: ``None``, ``'oauth'`` or a tuple of static tokens; a
    ``ValueError`` naming the argument and what is valid otherwise."""
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
    """One auth failure and what the client did next: ``failure`` (the refused request), ``outcome``,
    ``next`` (its next request to the MCP endpoint, ``None`` when none came), ``between`` (its requests
    to the authorization server before that) and ``grant`` (the grant that issued the token ``next``
    carried, when a token request in between issued it)."""

    failure: RequestRecord
    outcome: AuthOutcome
    next: RequestRecord | None
    between: tuple[RequestRecord, ...]
    grant: str | None = None

    def describe(self) -> str:
        """E.g. ``#7 POST tools/call echo (token t1) was refused (401 invalid_token, fault
        unauthorized@tool:echo); the client then retried with the same token: #8 POST tools/call echo
        (token t1, 401)``."""
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
    """Every auth failure of ``requests`` (the journal's, in arrival order) with what followed it."""
    records = sorted(requests, key=lambda r: r.id)
    out: list[AuthFollowUp] = []
    for i, failure in enumerate(records):
        if failure.path != mcp_path or _seen(failure).error is None:
            continue
        between: list[RequestRecord] = []
        following: RequestRecord | None = None
        for r in records[i + 1 :]:
            if r.path == mcp_path:
                following = r
                break
            between.append(r)
        out.append(_follow_up(failure, following, tuple(between)))
    return tuple(out)


def _follow_up(
    failure: RequestRecord, following: RequestRecord | None, between: tuple[RequestRecord, ...]
) -> AuthFollowUp:
    if following is None:
        return AuthFollowUp(failure, "gave_up", None, between)
    token = _seen(following).token
    if token is not None and token != _seen(failure).token:
        grant = next((_seen(r).grant for r in between if _seen(r).issued == token), None)
        return AuthFollowUp(failure, "refreshed", following, between, grant)
    if following.method == "DELETE":
        return AuthFollowUp(failure, "deleted_session", following, between)
    if token is not None:
        return AuthFollowUp(failure, "retried_same_token", following, between)
    return AuthFollowUp(failure, "retried_without_token", following, between)


def reauthorization_problems(follow_ups: Iterable[AuthFollowUp]) -> list[str]:
    """The auth failures the client did not answer with a new token, described."""
    return [f.describe() for f in follow_ups if f.outcome != "refreshed"]
