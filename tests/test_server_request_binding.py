"""An answer to a tool's request to the client (``elicitation/create`` ...) is taken only from the
client the request went to: in the session era from its transport session, which is bound to the
principal that opened it (``auth=``); in the stateless era only through the call's retry carrying the
round's own ``requestState`` (of the call's principal). Any other answer is refused with the
protocol's error, journaled as refused (``ServerMessageRecord.refused``, the POST's ``error``), and the
tool keeps waiting: the real client's answer still completes the call. Request ids are unguessable.

The victim is the mcp 2.x client; the attacker is raw httpx, POSTing from inside the victim's callback
(the request is then outstanding, and its id is the callback's ``context.request_id``)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import httpx2
from mcp import types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.core.records import ServerMessageRecord

SETS = ("basic", "client")
OLD, NEW = "2025-11-25", "2026-07-28"
MID = re.compile(r"mcpfaults-[0-9a-f]{32}")
REAL = {"action": "accept", "content": {"answer": "from the real client"}}
FORGED = {"action": "accept", "content": {"answer": "forged"}}


def _headers(version: str = OLD, sid: str | None = None, token: str | None = None) -> dict[str, str]:
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
    if sid is not None:
        headers["Mcp-Session-Id"] = sid
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def _session(http: httpx.AsyncClient, sc: Sidecar, token: str | None = None) -> str:
    """A session-era session of the attacker's own (initialize, initialized); its id."""
    client = {"name": "other", "version": "1"}
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": OLD, "capabilities": {}, "clientInfo": client},
    }  # fmt: skip
    resp = await http.post(sc.mcp_url, json=init, headers=_headers(token=token))
    assert resp.status_code == 200, resp.text
    sid = resp.headers["Mcp-Session-Id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(sc.mcp_url, json=done, headers=_headers(sid=sid, token=token))).status_code == 202
    return sid


def _forged(mid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": mid, "result": FORGED}


def _error(code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answering no request (``id: null``)."""
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _awaited(sc: Sidecar) -> ServerMessageRecord:
    (sent,) = sc.journal.server_messages.requests()
    return sent


def _text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


def _refused_posts(sc: Sidecar) -> list[tuple[int | None, str]]:
    """The status and journaled error of each POSTed response refused."""
    posts = [r for r in sc.requests if r.method == "POST" and r.mcp_method is None and r.error_by == "client"]
    return [(r.status, r.error or "") for r in posts]


async def test_session_era_only_the_calls_own_session_answers_its_request() -> None:
    seen: list[tuple[str, int, Any, str | None, int]] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        mid = context.request_id
        async with httpx.AsyncClient(timeout=5) as http:
            other = await _session(http, sc)
            for label, headers in (
                ("another session", _headers(sid=other)),
                ("no session", _headers()),
                ("an unknown session", _headers(sid="f" * 32)),
            ):
                resp = await http.post(sc.mcp_url, json=_forged(mid), headers=headers)
                body = resp.json() if resp.content else None
                sent = _awaited(sc)  # the POST was handled: still awaited, and counted
                seen.append((label, resp.status_code, body, sent.outcome, sent.refused))
        return types.ElicitResult(**REAL)  # type: ignore[arg-type]

    with Sidecar(era="session", tool_sets=SETS) as sc:
        async with Client(sc.mcp_url, elicitation_callback=elicit) as client:
            result = await client.call_tool("ask_user", {"message": "yours?"})
        sc.wait_idle(5)
    assert json.loads(_text(result)) == REAL  # the real client's answer, not the forged one
    assert seen == [
        ("another session", 202, None, None, 1),  # accepted as the mcp SDK's transport does, not handed over
        ("no session", 400, _error(-32600, "Bad Request: Missing session ID"), None, 2),
        ("an unknown session", 404, _error(-32600, "Session not found"), None, 3),
    ]
    sent = _awaited(sc)
    assert MID.fullmatch(sent.id or ""), sent.id
    assert (sent.outcome, sent.result, sent.refused) == ("answered", REAL, 3)
    refused = _refused_posts(sc)
    assert [status for status, _ in refused] == [202, 400, 404]
    assert all(error.startswith("refused: ") for _, error in refused), refused
    assert "a request the sidecar sent another session" in refused[0][1]
    assert sc.errors == []


async def test_request_ids_are_unguessable_and_never_repeat() -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(**REAL)  # type: ignore[arg-type]

    with Sidecar(era="session", tool_sets=SETS) as sc:
        async with Client(sc.mcp_url, elicitation_callback=elicit) as client:
            for _ in range(3):
                await client.call_tool("ask_user", {"message": "again"})
        sc.wait_idle(5)
    ids = [m.id or "" for m in sc.journal.server_messages.requests()]
    assert len(set(ids)) == 3 and all(MID.fullmatch(mid) for mid in ids), ids


async def test_with_auth_a_session_is_bound_to_its_principal_and_answers_only_its_own_requests() -> None:
    seen: dict[str, int] = {}

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        mid = context.request_id
        (victim,) = {r.session_id for r in sc.requests if r.tool == "ask_user"}
        async with httpx.AsyncClient(timeout=5) as http:
            own = await _session(http, sc, token="tokB")
            attempts = {
                "tokB, its own session": _headers(sid=own, token="tokB"),
                "tokB, tokA's session": _headers(sid=victim, token="tokB"),
                "no token": _headers(sid=victim),
                "an unknown token": _headers(sid=victim, token="forged"),
            }
            for label, headers in attempts.items():
                seen[label] = (await http.post(sc.mcp_url, json=_forged(mid), headers=headers)).status_code
            # tokA's session is not tokB's to use for anything: as if it did not exist
            call = {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {}},
            }
            seen["tokB calls in tokA's session"] = (
                await http.post(sc.mcp_url, json=call, headers=_headers(sid=victim, token="tokB"))
            ).status_code
            gone = await http.delete(sc.mcp_url, headers=_headers(sid=victim, token="tokB"))
            seen["tokB ends tokA's session"] = gone.status_code
        assert _awaited(sc).outcome is None
        return types.ElicitResult(**REAL)  # type: ignore[arg-type]

    with Sidecar(era="session", tool_sets=SETS, auth=["tokA", "tokB"]) as sc:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer tokA"}, timeout=5) as http,
            Client(
                streamable_http_client(sc.mcp_url, http_client=http), elicitation_callback=elicit
            ) as client,
        ):
            result = await client.call_tool("ask_user", {"message": "yours?"})
            again = await client.call_tool("echo", {"text": "still mine"})  # the session lives on
        sc.wait_idle(5)
    assert json.loads(_text(result)) == REAL and _text(again) == "still mine"
    assert seen == {
        "tokB, its own session": 202,  # accepted, not handed over: not a request of that session
        "tokB, tokA's session": 404,  # Session not found, as the mcp SDK answers another credential
        "no token": 401,
        "an unknown token": 401,
        "tokB calls in tokA's session": 404,
        "tokB ends tokA's session": 404,
    }
    sent = _awaited(sc)
    assert (sent.outcome, sent.result, sent.refused) == ("answered", REAL, 2)  # 401s never reach the endpoint
    assert [status for status, _ in _refused_posts(sc)] == [202, 404]
    assert sc.errors == []


async def test_stateless_only_the_retry_with_the_rounds_request_state_answers_it() -> None:
    seen: list[tuple[str, int, Any]] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        key = context.request_id  # the input request's key
        async with httpx.AsyncClient(timeout=5) as http:
            bare = await http.post(sc.mcp_url, json=_forged(key), headers=_headers(NEW))
            seen.append(("a bare response", bare.status_code, bare.json()))
            other = await _session(http, sc)  # a session-era client of the same sidecar
            in_session = await http.post(sc.mcp_url, json=_forged(key), headers=_headers(sid=other))
            seen.append(("from a session", in_session.status_code, None))
        return types.ElicitResult(**REAL)  # type: ignore[arg-type]

    with Sidecar(tool_sets=SETS) as sc:
        async with Client(sc.mcp_url, elicitation_callback=elicit) as client:
            result = await client.call_tool("ask_user", {"message": "yours?"})
        sc.wait_idle(5)
    assert json.loads(_text(result)) == REAL
    message = (
        "Invalid Request: a POSTed JSON-RPC response answers nothing in the stateless era (2026-07-28): "
        "an input request is answered by retrying the call with its inputResponses and requestState"
    )
    assert seen == [
        ("a bare response", 400, _error(-32600, message)),
        ("from a session", 202, None),
    ]
    sent = _awaited(sc)
    assert MID.fullmatch(sent.id or "") and (sent.outcome, sent.result, sent.refused) == ("answered", REAL, 2)
    refused = _refused_posts(sc)
    assert [status for status, _ in refused] == [400, 202]
    assert "an input request of a stateless-era round" in refused[1][1]
    assert sc.errors == []


def test_stateless_with_auth_a_round_is_resumed_only_by_its_own_principal() -> None:
    call = {"name": "ask_user", "arguments": {"message": "yours?"}}
    with Sidecar(tool_sets=SETS, auth=["tokA", "tokB"]) as sc:
        first = httpx.post(
            sc.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
            headers=_headers(NEW, token="tokA"), timeout=5,
        )  # fmt: skip
        asked = first.json()["result"]
        assert asked["resultType"] == "input_required", asked
        (key,) = asked["inputRequests"]
        state = asked["requestState"]

        def retry(token: str, answer: dict[str, Any]) -> httpx.Response:
            params = {**call, "requestState": state, "inputResponses": {key: answer}}
            message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
            return httpx.post(sc.mcp_url, json=message, headers=_headers(NEW, token=token), timeout=5)

        stolen = retry("tokB", FORGED)
        assert _awaited(sc).outcome is None  # the round is still open for tokA
        own = retry("tokA", REAL)
        sc.wait_idle(5)
    assert stolen.status_code == 400
    assert stolen.json()["error"] == {
        "code": -32602,
        "message": f"Invalid params: requestState {state!r} names no input round of this server "
        "(unknown, or answered already)",
    }  # word for word what an unknown requestState gets: nothing says the round exists
    assert own.status_code == 200
    assert json.loads(own.json()["result"]["content"][0]["text"]) == REAL
    sent = _awaited(sc)
    assert (sent.id, sent.outcome, sent.result, sent.refused) == (key, "answered", REAL, 1)
    assert sc.errors == []


def test_a_posted_response_gets_each_eras_refusal_where_no_session_is_named() -> None:
    """The stateless era's own refusal where that era is served; a session-only sidecar answers it as it
    answers any stateless-era POST, and a stateless-only one any session-era POST."""
    stray = _forged("mcpfaults-" + "0" * 32)
    got = {}
    for era in ("auto", "session", "stateless"):
        with Sidecar(era=era) as sc:
            for version in (NEW, OLD):
                resp = httpx.post(sc.mcp_url, json=stray, headers=_headers(version), timeout=5)
                got[era, version] = (resp.status_code, resp.json()["error"]["message"].split(":")[0])
            sc.wait_idle(5)
        assert all(r.error_by == "client" for r in sc.requests) and sc.errors == []
    assert got == {
        ("auto", NEW): (400, "Invalid Request"),
        ("auto", OLD): (400, "Bad Request"),  # Missing session ID
        ("session", NEW): (400, "Bad Request"),
        ("session", OLD): (400, "Bad Request"),
        ("stateless", NEW): (400, "Invalid Request"),
        ("stateless", OLD): (400, "Bad Request"),  # this server is stateless (no sessions)
    }
