"""The official TypeScript SDK client (docs/examples/ts/parts.mjs, ``@modelcontextprotocol/sdk`` as the
recipe pins it) on each part of issue 29 where the client's behaviour matters: cancellation, server
requests, resumption, auth and progress. Each test runs the script (bounded) against a real ``Sidecar``
and asserts what the TypeScript client saw (its JSON line) and what the sidecar journaled; the docs
pages of each part quote what these tests measure.

The script runs from the recipe's one npm install (tests/npm_recipe.py), as tests/test_ts_recipe.py's
harness does.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from npm_recipe import NPM_CI_TIMEOUT, node_recipe
from test_cancellation import the
from test_ts_recipe import SESSION_ERA_VERSION

from pytest_mcpfaults import CloseStream, Sidecar
from pytest_mcpfaults.verdicts.patience import PatienceError

#: Bounds every wait of the script other than the request timeout measured (connect, the DELETE).
WAIT_MS = 5000
#: One run takes under 3 s; this bounds a wedged node.
RUN_TIMEOUT = 60.0
CLIENT_SETS = ("basic", "client")
DOCS = Path(__file__).resolve().parent.parent / "docs"
#: The page of each part, each with a "The TypeScript SDK" section quoting the tests of this module.
PAGES = ("cancellation.md", "server-requests.md", "resumption.md", "auth.md", "progress.md")
#: What the SDK's request timeout rejects with (its McpError, code -32001).
TIMED_OUT = "McpError: MCP error -32001: Request timed out"
#: How the SDK's transport reports a refused POST (the answer's body follows).
POST_REFUSED = "Error: Streamable HTTP error: Error POSTing to endpoint: "
#: What the SDK's McpError says when a call is given up at its ``timeout`` or by an ``AbortSignal.timeout``.
REASONS = {"timeout": "Request timed out", "abort": "TimeoutError: The operation was aborted due to timeout"}

pytestmark = pytest.mark.timeout(NPM_CI_TIMEOUT + 90)  # the first test that uses the recipe may install it


@pytest.fixture(scope="module")
def parts(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """``node`` and the recipe's install, holding a fresh copy of ``parts.mjs``."""
    return node_recipe(request.config, "parts.mjs")


def run(parts: tuple[str, Path], sc: Sidecar, mode: str, **opts: Any) -> Any:
    """Run ``parts.mjs mode opts`` against ``sc``; its JSON line, with ``steps`` keyed by step name."""
    node, folder = parts
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MCPFAULTS_"))}
    env.update(MCPFAULTS_MCP_URL=sc.mcp_url, MCPFAULTS_TS_WAIT_MS=str(WAIT_MS))
    proc = subprocess.run(
        [node, str(folder / "parts.mjs"), mode, json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        cwd=folder,
    )
    assert proc.returncode == 0, f"parts.mjs exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["protocol_version"] == SESSION_ERA_VERSION, out  # the session era: all it speaks
    out["steps"] = {s["step"]: s for s in out["steps"]}
    return out


# -- cancellation (docs/cancellation.md) --------------------------------------------------------------


@pytest.mark.parametrize("how", ["timeout", "abort"])
def test_the_ts_sdk_cancels_at_its_timeout_but_a_harness_deleting_at_once_is_caught_cancelling_late(
    parts: tuple[str, Path], how: str
) -> None:
    """The SDK sends ``notifications/cancelled`` at its request ``timeout`` and at an ``AbortSignal``,
    without awaiting it; the harness's ``terminateSession()`` right after overtakes it (measured: in
    every run the DELETE arrives first, and the notification finds no session, 404)."""
    with Sidecar() as sc:
        out = run(parts, sc, "cancel", how=how, timeout_ms=300)
        sc.wait_idle(5)
        call, delete = the(sc, "POST tools/call sleep"), the(sc, "DELETE /mcp")
        [c] = sc.cancellations
        notification = sc.journal.request(c.notification)  # type: ignore[arg-type]
        if notification.id > delete.id:
            with pytest.raises(
                AssertionError, match=r"before cancelling tools/call sleep \(id 1\), still in"
            ):
                sc.assert_client_cancelled("tool:sleep", within=2.0)
            assert notification.status == 404 and call.cancel.outcome is None
        else:  # not seen here: the notification won the race
            sc.assert_client_cancelled("tool:sleep", within=2.0)
    gave_up = out["steps"]["tools/call sleep"]
    assert (gave_up["error"], gave_up["code"]) == (f"McpError: MCP error -32001: {REASONS[how]}", -32001)
    assert 300 <= gave_up["ms"] < 2000, gave_up
    assert (c.how, c.names, c.cancels, c.era, c.in_flight) == ("notification", 1, call.id, "session", True)
    assert call.rpc_id == 1
    assert c.reason == (TIMED_OUT if how == "timeout" else REASONS[how])  # String() of what it rejected with
    assert c.since_sent is not None and 0.25 < c.since_sent < 2.0


def test_a_ts_harness_that_lets_its_cancel_go_out_before_deleting_passes(parts: tuple[str, Path]) -> None:
    """One ``setTimeout(0)`` between the call's rejection and ``terminateSession()``: the cancel arrives
    first, is accepted and stops the call."""
    with Sidecar() as sc:
        out = run(parts, sc, "cancel", how="timeout", timeout_ms=300, settle_ms=0)
        sc.wait_idle(5)
        sc.assert_client_cancelled("tool:sleep", within=2.0)
    assert out["steps"]["tools/call sleep"]["error"] == TIMED_OUT and out["steps"]["terminateSession"]["ok"]
    [c] = sc.cancellations
    call, notification = the(sc, "POST tools/call sleep"), sc.journal.request(c.notification)  # type: ignore[arg-type]
    assert (notification.status, call.cancel.outcome) == (202, "stopped")
    assert notification.id < the(sc, "DELETE /mcp").id


def test_a_ts_harness_that_closes_the_client_at_once_never_sends_its_cancel(parts: tuple[str, Path]) -> None:
    """``client.close()`` right after the timeout aborts the SDK's own pending cancel with every other
    request of the transport: nothing reaches the sidecar but the closed connection."""
    with Sidecar() as sc:
        out = run(parts, sc, "cancel", how="timeout", timeout_ms=300, end="close")
        sc.wait_idle(5)
        with pytest.raises(
            AssertionError, match=r"the client closed the connection of tools/call sleep \(id 1\)"
        ):
            sc.assert_client_cancelled("tool:sleep", within=2.0)
    assert out["steps"]["tools/call sleep"]["error"] == TIMED_OUT and "terminateSession" not in out["steps"]
    assert sc.cancellations == () and "DELETE /mcp" not in sc.journal.sequence()


# -- server requests (docs/server-requests.md) ------------------------------------------------------------


def test_a_ts_client_with_an_elicitation_handler_answers_ask_user(parts: tuple[str, Path]) -> None:
    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        out = run(parts, sc, "elicit", handler="answer")
        sc.wait_idle(5)
        sc.assert_no_patience_violations()
    answered = out["steps"]["tools/call ask_user"]
    assert json.loads(answered["value"]) == {"action": "accept", "content": {"answer": "yes"}}, answered
    [asked] = sc.journal.server_messages
    assert (asked.method, asked.outcome, asked.request_id) == (
        "elicitation/create",
        "answered",
        the(sc, "POST tools/call ask_user").id,
    )
    assert asked.result == {"action": "accept", "content": {"answer": "yes"}}


def test_a_ts_client_without_the_elicitation_capability_answers_method_not_found(
    parts: tuple[str, Path],
) -> None:
    with Sidecar(era="session", tool_sets=CLIENT_SETS) as sc:
        out = run(parts, sc, "elicit", handler="none")
        sc.wait_idle(5)
    assert out["steps"]["tools/call ask_user"]["value"] == {
        "is_error": True,
        "text": "the client answered `elicitation/create` with error -32601: Method not found",
    }, out
    [asked] = sc.journal.server_messages
    assert asked.outcome == "error" and asked.error == {"code": -32601, "message": "Method not found"}
    call = the(sc, "POST tools/call ask_user")
    assert call.error_by == "client" and sc.errors == [] and sc.patience_violations == ()


def test_a_ts_handler_that_never_resolves_fails_in_the_patience_budget_with_the_headline(
    parts: tuple[str, Path],
) -> None:
    budget = 1.0
    with Sidecar(era="session", tool_sets=CLIENT_SETS, patience=budget) as sc:
        out = run(parts, sc, "elicit", handler="never", timeout_ms=2500)
        sc.wait_idle(5)
        with pytest.raises(PatienceError) as err:
            sc.assert_no_patience_violations()
    [asked] = sc.journal.server_messages
    assert asked.outcome == "unanswered" and asked.answered_at is None
    [v] = sc.patience_violations
    assert v.describe().startswith(
        f"the client never answered the server's `elicitation/create` (sent at {asked.sent_at:.1f} s during "
        "tools/call ask_user): it waited 1 s (the whole budget)"
    ), v.describe()
    assert "client seen: User-Agent node, MCP-Protocol-Version 2025-11-25" in str(err.value)
    verdict = str(err.value)
    [hint] = [line.strip() for line in verdict.splitlines() if line.strip().startswith("hint: ")]
    assert hint.startswith(
        "hint: the harness received the server's `elicitation/create` and never answered it: answer every "
        "request a server sends, within a bound of your own (if this is the TypeScript SDK (its fetch sends "
        "this User-Agent): a Client whose setRequestHandler(ElicitRequestSchema, ...) (with the "
        "`elicitation` capability in its ClientOptions) returns, or declines, in time;"
    ), hint
    assert hint.endswith(
        "and bound the call itself (client.callTool(params, undefined, { timeout }); 60 s by default)"
    )
    assert "_callback" not in hint, hint
    # The TS client saw its stream cut at the budget, but its call waited on to its own timeout.
    [cut, *_] = out["errors"]
    assert cut["error"] == "Error: SSE stream disconnected: TypeError: terminated", out["errors"]
    gave_up = out["steps"]["tools/call ask_user"]
    assert gave_up["error"] == TIMED_OUT and gave_up["ms"] >= 2500, gave_up
    assert budget * 1000 - 100 <= cut["at"] - gave_up["at"] <= gave_up["ms"] - 1000, (cut, gave_up)


# -- resumption (docs/resumption.md) ---------------------------------------------------------------------


@pytest.mark.parametrize("retry_ms", [300, 1500])
def test_the_ts_sdk_resumes_a_closed_stream_with_last_event_id_after_the_retry(
    parts: tuple[str, Path], retry_ms: int
) -> None:
    """1500 ms is above the SDK's own first reconnection delay (1000 ms): it waits the server's ``retry``."""
    with Sidecar(faults=[CloseStream(retry_ms=retry_ms)]) as sc:
        out = run(parts, sc, "resume", timeout_ms=retry_ms + 3000)
        sc.wait_idle(5)
        sc.assert_client_resumed("tool:echo", within=retry_ms / 1000 + 2.0)
    resumed = out["steps"]["tools/call echo"]
    assert resumed["value"] == "resumed" and resumed["ms"] >= retry_ms, resumed
    [s] = sc.closed_streams
    call = sc.journal.request(s.request_id)
    assert [t["token"] for t in out["resumption_tokens"]] == [f"{call.id}-0", f"{call.id}-1"], out
    get = sc.journal.request(s.resumed_by)  # type: ignore[arg-type]
    assert (get.method, get.last_event_id, get.status, s.replayed) == ("GET", f"{call.id}-0", 200, 1)
    assert s.resumed_at is not None and s.resumed_at - s.closed_at >= retry_ms / 1000


def test_with_no_event_id_the_ts_sdk_does_not_come_back_and_is_caught(parts: tuple[str, Path]) -> None:
    with Sidecar(faults=[CloseStream(after_events=0, retry_ms=50)]) as sc:
        out = run(parts, sc, "resume", timeout_ms=1500)
        sc.wait_idle(5)
        with pytest.raises(AssertionError, match=r"the client never came back for it \(no GET /mcp"):
            sc.assert_client_resumed("tool:echo", within=0.5)
    gave_up = out["steps"]["tools/call echo"]
    assert gave_up["error"] == TIMED_OUT and gave_up["ms"] >= 1500 and out["resumption_tokens"] == [], out
    assert [r.last_event_id for r in sc.journal.requests if r.method == "GET"] == [None]  # its opening GET


# -- auth (docs/auth.md) ------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["unauthorized@tool:echo[times=1]", "token_expired(calls=3)"])
def test_the_ts_client_credentials_provider_gets_a_new_token_after_a_401(
    parts: tuple[str, Path], fault: str
) -> None:
    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        out = run(parts, sc, "auth", provider="client_credentials", issuer=sc.url)
        sc.wait_idle(5)
        sc.assert_client_reauthorized(within=1.0)
    assert [out["steps"][f"tools/call echo {n}"]["value"] for n in ("one", "two")] == ["one", "two"], out
    assert out["steps"]["terminateSession"]["ok"], out
    # Its first 401 is initialize's (no token yet); the fault's is the mid-session one. It gets each
    # new token with the client_credentials grant again, not with the refresh token it was given.
    first, mid = sc.auth_follow_ups
    assert (first.failure.label, first.failure.auth.error, first.outcome) == (
        "POST initialize",
        "missing",
        "refreshed",
    )
    assert (mid.failure.label, mid.failure.auth.token, mid.failure.status) == (
        "POST tools/call echo",
        "t1",
        401,
    )
    assert (mid.outcome, mid.grant, mid.next and (mid.next.label, mid.next.auth.token)) == (
        "refreshed",
        "client_credentials",
        ("POST tools/call echo", "t2"),
    )
    assert [r.label for r in mid.between] == [
        "GET /.well-known/oauth-protected-resource/mcp",
        "GET /.well-known/oauth-authorization-server",
        "POST /oauth/token",
    ]


def test_the_ts_client_credentials_provider_does_not_step_up_on_insufficient_scope(
    parts: tuple[str, Path],
) -> None:
    """On a 403 ``insufficient_scope`` the SDK gets a new token, but with the scope its provider was
    configured with, not the challenge's: the new token is refused too, and it gives up the call. A
    provider configured with the scope up front is never refused."""
    fault = 'insufficient_scope(scope="tasks:write")'
    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        out = run(parts, sc, "auth", provider="client_credentials", issuer=sc.url)
        sc.wait_idle(5)
        refused = "the client did not come back with a new token after 2 of 4"
        with pytest.raises(AssertionError, match=refused):
            sc.assert_client_reauthorized(within=0.5)
    for n in ("one", "two"):
        refused = out["steps"][f"tools/call echo {n}"]
        assert (refused["error"], refused["code"]) == (
            "Error: Streamable HTTP error: Server returned 403 after trying upscoping",
            403,
        ), refused
    assert [(f.outcome, f.grant) for f in sc.auth_follow_ups] == [
        ("refreshed", "client_credentials"),  # initialize, without a token
        ("refreshed", "client_credentials"),  # the 403: a new token, t2, with no more scope than t1
        ("retried_same_token", None),
        ("deleted_session", None),
    ]
    assert [(r.auth.token, r.status) for r in sc.journal.requests if r.tool == "echo"] == [
        ("t1", 403),
        ("t2", 403),
        ("t2", 403),
    ]

    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        out = run(parts, sc, "auth", provider="client_credentials", issuer=sc.url, scope="mcp tasks:write")
        sc.wait_idle(5)
    assert [out["steps"][f"tools/call echo {n}"]["value"] for n in ("one", "two")] == ["one", "two"], out
    assert [(r.auth.token, r.status) for r in sc.journal.requests if r.tool == "echo"] == [
        ("t1", 200),
        ("t1", 200),
    ]


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ("unauthorized@tool:echo[times=1]", 401),
        ("token_expired(calls=3)", 401),
        ('insufficient_scope(scope="tasks:write")', 403),
    ],
)
def test_a_ts_harness_with_a_static_token_gives_up(parts: tuple[str, Path], fault: str, status: int) -> None:
    with Sidecar(era="session", auth=["s3cret"], faults=[fault]) as sc:
        out = run(parts, sc, "auth", provider="static", token="s3cret")
        sc.wait_idle(5)
    for n in ("one", "two"):
        refused = out["steps"][f"tools/call echo {n}"]
        assert refused["code"] == status, refused
        assert refused["error"].startswith(POST_REFUSED), refused
    terminate = out["steps"]["terminateSession"]
    if status == 401:  # the token is refused on the DELETE too: the session is left on the server
        assert terminate["error"] == "Error: Streamable HTTP error: Failed to terminate session: Unauthorized"
        assert [f.outcome for f in sc.auth_follow_ups] == ["retried_same_token", "deleted_session", "gave_up"]
    else:  # a 403 is for the call, not the token
        assert terminate["ok"], terminate
        assert [f.outcome for f in sc.auth_follow_ups] == ["retried_same_token", "deleted_session"]


#: What the authorization code provider's first sign-in sends, in order: discovery, registration, the
#: redirect, discovery again (``finishAuth``) and the code's exchange.
SIGN_IN = [
    "POST initialize",
    "GET /.well-known/oauth-protected-resource/mcp",
    "GET /.well-known/oauth-authorization-server",
    "POST /oauth/register",
    "GET /oauth/authorize",
    "GET /.well-known/oauth-protected-resource/mcp",
    "GET /.well-known/oauth-authorization-server",
    "POST /oauth/token",
    "POST initialize",
]


def _oauth_requests(sc: Sidecar) -> list[tuple[str, str | None, str | None, str | None]]:
    """Each request to the authorization server's registration, authorization and token endpoints:
    (label, client, grant, issued)."""
    return [
        (r.label, r.auth.client, r.auth.grant, r.auth.issued)
        for r in sc.journal.requests
        if r.label.startswith(("POST /oauth/", "GET /oauth/"))
    ]


def _signed_in_once(out: Any, sc: Sidecar) -> None:
    """The provider's first sign-in: ``connect`` refused (UnauthorizedError, the SDK's "redirect the
    user"), one headless redirect with an S256 challenge, ``finishAuth``, and a new connection."""
    steps = out["steps"]
    assert steps["connect"]["unauthorized"] and steps["connect"]["error"] == "Error: Unauthorized", steps
    assert steps["finishAuth connect"]["ok"] and steps["connect again"]["ok"], steps
    first = out["redirects"][0]
    assert (first["status"], first["method"], first["scope"], first["code"]) == (302, "S256", "mcp", True)
    assert sc.journal.sequence()[: len(SIGN_IN)] == SIGN_IN
    assert _oauth_requests(sc)[:3] == [
        ("POST /oauth/register", "c1", None, None),
        ("GET /oauth/authorize", "c1", None, None),
        ("POST /oauth/token", "c1", "authorization_code", "t1"),
    ]


@pytest.mark.parametrize("fault", ["unauthorized@tool:echo[times=1]", "token_expired(calls=3)"])
def test_the_ts_code_provider_signs_in_with_s256_then_refreshes_after_a_401(
    parts: tuple[str, Path], fault: str
) -> None:
    """Registered once, signed in once by the redirect; the mid-session 401 is answered with the
    ``refresh_token`` grant (no second redirect) and the call retried inside ``callTool``."""
    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        out = run(parts, sc, "code")
        sc.wait_idle(5)
        sc.assert_client_reauthorized(within=1.0)
    _signed_in_once(out, sc)
    assert [out["steps"][f"tools/call echo {n}"]["value"] for n in ("one", "two")] == ["one", "two"], out
    assert len(out["redirects"]) == 1 and out["steps"]["terminateSession"]["ok"], out
    first, mid = sc.auth_follow_ups
    assert (first.failure.label, first.failure.auth.error, first.outcome, first.grant) == (
        "POST initialize",
        "missing",
        "refreshed",
        "authorization_code",
    )
    assert (mid.failure.label, mid.failure.auth.token, mid.failure.status, mid.outcome, mid.grant) == (
        "POST tools/call echo",
        "t1",
        401,
        "refreshed",
        "refresh_token",
    )
    assert mid.next is not None and (mid.next.label, mid.next.auth.token, mid.next.status) == (
        "POST tools/call echo",
        "t2",
        200,
    )
    assert _oauth_requests(sc)[3:] == [("POST /oauth/token", "c1", "refresh_token", "t2")]


def test_a_ts_code_provider_without_a_refresh_token_signs_in_again_after_a_401(
    parts: tuple[str, Path],
) -> None:
    """A provider that keeps no refresh token: the 401 rejects ``callTool`` with UnauthorizedError after
    a second redirect; the harness's ``finishAuth`` and its own retry of the call are what recover."""
    with Sidecar(era="session", auth="oauth", faults=["token_expired(calls=3)"]) as sc:
        out = run(parts, sc, "code", refresh=False)
        sc.wait_idle(5)
        sc.assert_client_reauthorized(within=1.0)
    _signed_in_once(out, sc)
    steps = out["steps"]
    assert steps["tools/call echo one"]["unauthorized"] and steps["finishAuth tools/call echo one"]["ok"]
    assert [steps[s]["value"] for s in ("tools/call echo one again", "tools/call echo two")] == ["one", "two"]
    assert [(r["method"], r["scope"]) for r in out["redirects"]] == [("S256", "mcp"), ("S256", "mcp")]
    assert [(f.outcome, f.grant) for f in sc.auth_follow_ups] == [
        ("refreshed", "authorization_code"),
        ("refreshed", "authorization_code"),
    ]
    assert _oauth_requests(sc)[3:] == [
        ("GET /oauth/authorize", "c1", None, None),
        ("POST /oauth/token", "c1", "authorization_code", "t2"),
    ]


def test_the_ts_code_provider_steps_up_on_insufficient_scope_only_without_a_refresh_token(
    parts: tuple[str, Path],
) -> None:
    """On a 403 ``insufficient_scope`` the SDK runs its auth again with the challenge's scope, but a
    provider holding a refresh token refreshes, and the ``refresh_token`` grant carries no scope: the
    new token has the old one's, is refused too, and both calls fail. The client metadata's ``scope``
    does not help (the resource's ``scopes_supported`` wins). Without a refresh token it redirects
    asking for the challenge's scope alone, and the harness's retry passes."""
    fault = 'insufficient_scope(scope="tasks:write")'
    for scope in (None, "mcp tasks:write"):
        with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
            out = run(parts, sc, "code", **({"scope": scope} if scope else {}))
            sc.wait_idle(5)
            refused = "the client did not come back with a new token after 2 of 4"
            with pytest.raises(AssertionError, match=refused):
                sc.assert_client_reauthorized(within=0.5)
        _signed_in_once(out, sc)
        for n in ("one", "two"):
            refused = out["steps"][f"tools/call echo {n}"]
            assert (refused["error"], refused["code"]) == (
                "Error: Streamable HTTP error: Server returned 403 after trying upscoping",
                403,
            ), refused
        assert len(out["redirects"]) == 1, out["redirects"]
        assert [(f.outcome, f.grant) for f in sc.auth_follow_ups] == [
            ("refreshed", "authorization_code"),
            ("refreshed", "refresh_token"),  # t2, with t1's scope
            ("retried_same_token", None),
            ("deleted_session", None),
        ]
        assert [(r.auth.token, r.status) for r in sc.journal.requests if r.tool == "echo"] == [
            ("t1", 403),
            ("t2", 403),
            ("t2", 403),
        ]

    with Sidecar(era="session", auth="oauth", faults=[fault]) as sc:
        out = run(parts, sc, "code", refresh=False)
        sc.wait_idle(5)
        sc.assert_client_reauthorized(within=1.0)
    _signed_in_once(out, sc)
    steps = out["steps"]
    assert steps["tools/call echo one"]["unauthorized"], steps
    assert [steps[s]["value"] for s in ("tools/call echo one again", "tools/call echo two")] == ["one", "two"]
    assert [r["scope"] for r in out["redirects"]] == ["mcp", "tasks:write"]
    [_, step_up] = sc.auth_follow_ups
    assert (step_up.failure.auth.error, step_up.outcome, step_up.grant) == (
        "insufficient_scope",
        "refreshed",
        "authorization_code",
    )
    assert [(r.auth.token, r.status) for r in sc.journal.requests if r.tool == "echo"] == [
        ("t1", 403),
        ("t2", 200),
        ("t2", 200),
    ]


# -- progress (docs/progress.md) ---------------------------------------------------------------------------


@pytest.mark.parametrize("reset", [False, True], ids=["default", "resetTimeoutOnProgress"])
def test_the_ts_sdk_resets_its_timeout_on_progress_only_when_asked(
    parts: tuple[str, Path], reset: bool
) -> None:
    """``progress`` reports every 0.1 s for 0.8 s; the call's timeout is 0.35 s."""
    with Sidecar(tool_sets=CLIENT_SETS) as sc:
        out = run(parts, sc, "progress", arguments={"steps": 8, "interval": 0.1}, timeout_ms=350, reset=reset)
        sc.wait_idle(5)
    call = out["steps"]["tools/call progress"]
    sent = [m for m in sc.journal.server_messages if m.method == "notifications/progress"]
    if reset:
        assert call["value"] == "done after 8 steps" and call["ms"] >= 700, call
        assert [p["progress"] for p in out["progress"]] == list(range(1, 9)) and len(sent) == 8
        assert sc.cancellations == ()
    else:
        assert call["error"] == TIMED_OUT and 350 <= call["ms"] < 700, call
        # the progress came on, the timeout did not move
        assert 1 <= len(out["progress"]) <= 5, out["progress"]
        [c] = sc.cancellations
        assert c.cancels == the(sc, "POST tools/call progress").id


@pytest.mark.parametrize("reset", [False, True], ids=["default", "resetTimeoutOnProgress"])
def test_progress_then_stall_costs_the_ts_sdk_its_timeout_after_the_last_progress_at_most(
    parts: tuple[str, Path], reset: bool
) -> None:
    stall = "progress_then_stall(count=3, interval=0.1)"
    with Sidecar(tool_sets=CLIENT_SETS, faults=[stall], patience=5) as sc:
        # settle_ms=0: its cancel goes out before the DELETE (test_a_ts_harness_that_lets_its_cancel_...)
        args = {"steps": 8, "interval": 0.1}
        out = run(parts, sc, "progress", arguments=args, timeout_ms=350, reset=reset, settle_ms=0)
        sc.wait_idle(5)
        sc.assert_client_cancelled("tool:progress", within=2.0)
    call = out["steps"]["tools/call progress"]
    assert call["error"] == TIMED_OUT, call
    assert [p["progress"] for p in out["progress"]] == [1, 2, 3], out["progress"]
    last = out["progress"][-1]["at"] - call["at"]  # the last progress, from the call's start
    if reset:  # the timeout runs from the last progress
        assert call["ms"] >= last + 350 - 50, (call, last)
    else:
        assert 350 <= call["ms"] < last + 350 - 50, (call, last)
    stalled = the(sc, "POST tools/call progress")
    assert stalled.fault == "progress_then_stall(interval=0.1)" and sc.patience_violations == ()


def test_the_ts_sdk_s_max_total_timeout_gives_up_on_endless_progress_without_cancelling(
    parts: tuple[str, Path],
) -> None:
    """``maxTotalTimeout`` is checked when progress arrives; past it the SDK rejects the call, but not
    through its cancel: no ``notifications/cancelled`` is sent, and the call runs on until the DELETE."""
    with Sidecar(tool_sets=CLIENT_SETS) as sc:
        args = {"steps": 30, "interval": 0.1}
        out = run(
            parts, sc, "progress", arguments=args, timeout_ms=350, reset=True, max_total_ms=600, settle_ms=0
        )
        sc.wait_idle(5)
        with pytest.raises(
            AssertionError, match=r"the client sent DELETE /mcp at .* without cancelling tools/call progress"
        ):
            sc.assert_client_cancelled("tool:progress", within=0.5)
    call = out["steps"]["tools/call progress"]
    assert call["error"] == "McpError: MCP error -32001: Maximum total timeout exceeded", call
    assert 600 <= call["ms"] < 1500 and len(out["progress"]) < 15, (call, out["progress"])
    assert sc.cancellations == ()


def test_each_part_s_page_says_what_the_ts_sdk_did_quoting_tests_that_exist() -> None:
    """Each page's "The TypeScript SDK" section names this module and only tests it defines, and every
    test here that runs node (takes ``parts``) is quoted by one of them."""
    tests = {name: f for name, f in globals().items() if name.startswith("test_") and callable(f)}
    defined = set(tests)
    quoted: set[str] = set()
    for page in PAGES:
        text = (DOCS / page).read_text()
        section = re.search(r"^#+ The TypeScript SDK\n(.*?)(?=^#+ |\Z)", text, re.S | re.M)
        assert section is not None, f"docs/{page} has no 'The TypeScript SDK' section"
        assert "tests/test_ts_parts.py" in section[1], page
        names = set(re.findall(r"`(test_\w+)`", section[1]))
        assert names and names <= defined, (page, names - defined)
        quoted |= names
    assert quoted == {name for name, f in tests.items() if "parts" in inspect.signature(f).parameters}
