"""Session hygiene: what a client owes the sessions it opened, read from the journal at the end of a test.

Two duties, both from the MCP spec's session management (transports, 2025-06-18 and later):

- **End what you open.** A session-era session the sidecar gave out is ended by the client with a
  ``DELETE`` on the MCP endpoint (the request counts whatever became of it: a held or reset
  ``DELETE`` was still sent). A stateless client owes nothing; a session the sidecar lost (it died,
  restarted, expired the session) is not owed either, nor is one a fault fired on: the fault may
  have cut the client's transport, and the SDK clients send no ``DELETE`` after that (mcp 2.x's
  ``Client`` leaves ``async with`` raising the transport's error). A session opened after a fault is
  owed as any other. Nor is a session its client never learned of: an ``initialize`` the client gave
  up on (it closed the connection before the answer ended, as a client whose ``initialize`` timed out
  does) may still have opened a session, whose id never reached it. The journal does not tie a
  session to its ``initialize`` (the id is the answer's), so as many sessions with no request of
  their own as there are such abandoned ``initialize`` requests are excused. A CLI that opened 287
  sessions and closed none, a framework whose cross-task cleanup error skips the ``DELETE``: each
  leaves live sessions behind.
- **Start over when told.** After the sidecar answered ``404`` to a request carrying a session id
  (the session is gone: expired, lost in a restart), the client "MUST start a new session by sending a
  new ``InitializeRequest`` without a session ID": a later call on the dead id (other than its
  ``DELETE``) is the bug of a client that keeps calling a lost session.

:func:`session_problems` finds them; :func:`hygiene_verdict` words them for the test's failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_mcpfaults.core.records import RequestRecord

__all__ = ["SessionHygieneError", "SessionProblem", "hygiene_verdict", "session_problems"]

#: How many of a session's requests a verdict lists.
SHOWN = 6


class SessionHygieneError(AssertionError):
    """A client did not end a session it opened, or kept calling one the sidecar had lost."""


@dataclass(frozen=True)
class SessionProblem:
    """One session a client mistreated: ``never_ended`` (``requests``: the session's requests) or
    ``used_after_lost`` (``lost``: the ``404`` that told the client; ``requests``: the calls on the
    dead id after it)."""

    session_id: str
    kind: Literal["never_ended", "used_after_lost"]
    requests: tuple[RequestRecord, ...]
    lost: RequestRecord | None = None

    def describe(self) -> str:
        sid = self.session_id[:12] + ("…" if len(self.session_id) > 12 else "")
        shown = ", ".join(f"`{r.label}` (#{r.id})" for r in self.requests[:SHOWN])
        more = f" and {len(self.requests) - SHOWN} more" if len(self.requests) > SHOWN else ""
        if self.kind == "never_ended":
            used = f"its requests: {shown}{more}" if self.requests else "no request after its `initialize`"
            return (
                f"session {sid} was never ended: no `DELETE` came for it ({used}); "
                "it was still open when the test's fixtures were done"
            )
        assert self.lost is not None
        return (
            f"session {sid} was lost (`{self.lost.label}` #{self.lost.id} was answered 404) and the "
            f"client kept calling it instead of sending a new `initialize`: {shown}{more}"
        )


def session_problems(
    requests: Sequence[RequestRecord], live: Iterable[str], *, owed: bool = True
) -> list[SessionProblem]:
    """The problems in a sidecar's ``requests`` (its journal, in order), given the session ids still
    ``live`` at the end; ``owed=False`` (the test keeps its sessions) skips the ``never_ended`` duty."""
    problems: list[SessionProblem] = []
    if owed:
        deleted = {r.session_id for r in requests if r.method == "DELETE" and r.session_id}
        faulted = {r.session_id for r in requests if r.fault is not None and r.session_id}
        abandoned = sum(1 for r in requests if r.mcp_method == "initialize" and r.client_closed)
        for sid in live:
            if sid not in deleted and sid not in faulted:
                mine = tuple(r for r in requests if r.session_id == sid)
                if not mine and abandoned:
                    abandoned -= 1  # maybe the session an abandoned initialize opened
                    continue
                problems.append(SessionProblem(sid, "never_ended", mine))
    told: dict[str, RequestRecord] = {}
    for r in requests:
        if r.status == 404 and r.session_id and r.session_id not in told:
            told[r.session_id] = r
    for sid, lost in told.items():
        since = lost.ended_at if lost.ended_at is not None else lost.started_at
        later = tuple(
            r for r in requests
            if r.session_id == sid and r.id != lost.id and r.method != "DELETE" and r.started_at > since
        )  # fmt: skip
        if later:
            problems.append(SessionProblem(sid, "used_after_lost", later, lost))
    return problems


def hygiene_verdict(url: str, problems: Sequence[SessionProblem]) -> str:
    """The failure text for ``problems`` found at the sidecar at ``url``."""
    lines = [f"mcpfaults: session hygiene at {url}:", ""]
    lines += [f"   {p.describe()}" for p in problems]
    hints = []
    if any(p.kind == "never_ended" for p in problems):
        hints.append(
            "end every session the client opens: mcp 2.x: leave `async with Client(...)`; mcp 1.x: "
            "leave `streamable_http_client(...)` (terminate_on_close=True, the default), on the error "
            "path too; or, when the test keeps its sessions on purpose, mark it "
            "`@pytest.mark.mcp_keep_sessions` (ini `mcpfaults_session_hygiene = off` turns the check off)"
        )
    if any(p.kind == "used_after_lost" for p in problems):
        hints.append(
            "on a 404 for its session id, open a new session (a new `initialize` without the id) "
            "instead of calling the lost one"
        )
    lines += ["", *(f"   hint: {h}" for h in hints)]
    return "\n".join(lines)
