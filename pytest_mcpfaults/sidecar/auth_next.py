"""What a client did after the sidecar refused its token (``auth=``, docs/auth.md): pure functions over
the journal's records.

An auth failure is a request to the MCP endpoint answered with a bearer challenge (``401``, or ``403``
``insufficient_scope``; :attr:`~pytest_mcpfaults.sidecar.records.AuthSeen.error` set), whether the sidecar
refused a missing or revoked token or an auth fault kind fired. What the client did next is read from
the next request to the MCP endpoint, in arrival order, and the requests to the authorization server
in between (metadata, the token endpoint):

* ``'refreshed'``: it came back with another token (``grant`` says how it got it: ``'refresh_token'``,
  ``'client_credentials'``; ``None`` when no token request in between issued it);
* ``'deleted_session'``: it went to ``DELETE`` without a new token (it gave up the session);
* ``'retried_same_token'``: it sent the refused token again;
* ``'retried_without_token'``: it sent no token;
* ``'gave_up'``: nothing more reached the MCP endpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults.sidecar.records import AuthSeen, RequestRecord

__all__ = ["AuthFollowUp", "AuthOutcome", "auth_follow_ups", "reauthorization_problems"]

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
