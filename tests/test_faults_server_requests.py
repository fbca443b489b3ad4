"""The kinds on the server-request path (the requests a tool sends the client during its call, and
their answers), measured with plain httpx, the mcp 2.x ``Client`` and the mcp 1.x ``ClientSession``:
``malformed_server_request`` sends a malformed copy ahead of each request, ``duplicate_server_request``
sends each one ``copies`` times with one id, ``drop_client_answer`` loses the client's answer (session
era: the patience verdict says the sidecar dropped it; stateless era: the retry is refused as by a
server that lost the round). What each client saw is asserted, and what the journal observed.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp1_client import Mcp1Client
from pydantic import ValidationError

from pytest_mcpfaults import DropClientAnswer, DuplicateServerRequest, MalformedServerRequest, Sidecar, Tool
from pytest_mcpfaults.behaviour.server_requests import Outbound
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.faults.kinds import MALFORMED_FORMS
from pytest_mcpfaults.mcp.outbound import ServerMessages, ToolContext
from pytest_mcpfaults.verdicts.patience import PatienceError

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

SETS = ("basic", "client")
ASK = {"message": "proceed?"}
ACCEPTED = {"action": "accept", "content": {"answer": "yes"}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def _elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "yes"})


def _events(body: str) -> list[str]:
    """The ``data`` of each SSE event of ``body``."""
    return [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]


def _session(client: httpx.Client, url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {
            "name": "raw", "version": "0"}},
    }  # fmt: skip
    r = client.post(url, json=init, headers=HEADERS)
    headers = {**HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def _ask_raw(sc: Sidecar, answers: int) -> list[str]:
    """Call ``ask_user`` with plain httpx, answer the first ``answers`` requests carrying an id and a
    method (accepting), and return the call's event stream's events as sent."""
    with httpx.Client(timeout=5) as client:
        headers = _session(client, sc.mcp_url)
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "ask_user", "arguments": ASK},
        }
        events: list[str] = []
        with client.stream("POST", sc.mcp_url, json=call, headers=headers) as resp:
            for line in resp.iter_lines():
                if not line.startswith("data: "):
                    continue
                events.append(line.removeprefix("data: "))
                try:
                    message = json.loads(events[-1])
                except ValueError:
                    continue
                if "method" in message and "id" in message and answers > 0:
                    answers -= 1
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": ACCEPTED}
                    assert client.post(sc.mcp_url, json=answer, headers=headers).status_code == 202
        return events


# -- malformed_server_request ------------------------------------------------------------------------


def test_a_malformed_copy_goes_ahead_of_the_request_on_the_call_stream_in_each_form() -> None:
    for form in MALFORMED_FORMS:
        with Sidecar(era="session", tool_sets=SETS, faults=[MalformedServerRequest(form)]) as sc:
            events = _ask_raw(sc, answers=1)
            sc.wait_idle(5)
        first, request, result = events
        sent = json.loads(request)
        mid = sent["id"]
        assert sent["method"] == "elicitation/create" and re.fullmatch(r"mcpfaults-[0-9a-f]{32}", mid), form
        assert json.loads(result)["result"]["content"][0]["text"] == json.dumps(ACCEPTED)
        if form == "bad_json":  # the message with its own id, cut in half: no JSON
            whole = json.dumps({**sent, "id": f"{mid}-malformed"}, separators=(",", ":"))
            assert first == whole[: len(whole) // 2]
            with pytest.raises(json.JSONDecodeError):
                json.loads(first)
        elif form == "no_id":
            assert json.loads(first) == {k: v for k, v in sent.items() if k != "id"}
        else:
            assert json.loads(first) == {
                "jsonrpc": "2.0",
                "id": f"{mid}-malformed",
                "params": sent["params"],
            }
        original, copy = sc.journal.server_messages
        assert (original.outcome, original.result, original.fault) == ("answered", ACCEPTED, None)
        assert (copy.method, copy.outcome, copy.request_id) == (
            "elicitation/create",
            "malformed",
            original.request_id,
        )
        assert copy.fault == str(MalformedServerRequest(form)) and copy.answered_at is None
        assert copy.id == (f"{mid}-malformed" if form == "no_method" else None)
        assert sc.fired == {"malformed_server_request": 1} and sc.errors == []


def test_a_client_that_answers_neither_gets_a_verdict_naming_the_malformed_copy() -> None:
    fault = MalformedServerRequest("no_id")
    with Sidecar(era="session", tool_sets=SETS, faults=[fault], patience=0.5) as sc:
        with pytest.raises(httpx.HTTPError):  # patience resets the call's stream
            _ask_raw(sc, answers=0)
        sc.wait_idle(5)
        (v,) = sc.patience_violations
    sent = sc.journal.server_messages.records[0]
    assert v.describe().startswith(
        f"the client never answered the server's `elicitation/create` (sent at {sent.sent_at:.1f} s during "
        f"tools/call ask_user, after a malformed copy from `{fault}`): it waited 0.5 s (the whole budget)"
    ), v.describe()


@pytest.mark.parametrize("form", MALFORMED_FORMS)
async def test_mcp2_fails_the_call_on_a_malformed_request_it_cannot_parse_and_skips_one_without_an_id(
    form: str,
) -> None:
    with Sidecar(era="session", tool_sets=SETS, faults=[MalformedServerRequest(form)]) as sc:
        seen: list[str] = []
        async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
            try:
                result = await client.call_tool("ask_user", ASK)
                seen.append(result.content[0].text)  # type: ignore[union-attr]
            except MCPError as exc:
                seen.append(f"MCPError {exc.error.code}: {exc.error.message.splitlines()[0]}")
            after = await client.call_tool("echo", {"text": "still here"})  # the session goes on
        sc.wait_idle(5)
    assert after.content[0].text == "still here"  # type: ignore[union-attr]
    original = sc.journal.server_messages.records[0]
    if form == "no_id":  # a notification of an unknown method: ignored; the request is answered
        assert seen == [json.dumps(ACCEPTED)] and original.outcome == "answered"
    else:  # mcp 2.3 does not skip what it cannot parse: the call fails, the request is never answered
        errors = "1 validation error" if form == "bad_json" else "4 validation errors"
        assert seen == [
            f"MCPError -32700: Failed to parse SSE message: {errors} for union[JSONRPCRequest,"
            "JSONRPCNotification,JSONRPCResponse,JSONRPCError]"
        ]
        assert original.outcome == "unanswered"
    assert [m.outcome for m in sc.journal.server_messages][1:] == ["malformed"]
    assert sc.errors == []


@pytest.mark.parametrize("form", MALFORMED_FORMS)
def test_mcp1_skips_a_malformed_server_request_and_answers_the_request(
    mcp1_client: Mcp1Client, form: str
) -> None:
    with Sidecar(era="session", tool_sets=SETS, faults=[MalformedServerRequest(form)]) as sc:
        seen = mcp1_client.call(sc.mcp_url, "ask_user", ASK, elicit="yes", within=10)
        sc.wait_idle(5)
    assert (seen.texts, seen.is_error, seen.error, seen.exited) == ([json.dumps(ACCEPTED)], False, None, [])
    logged = {"bad_json": "Invalid JSON: EOF while parsing", "no_id": "Failed to validate notification"}
    assert logged.get(form, "JSONRPCResponse.result") in seen.log  # it logs what it skipped
    original, copy = sc.journal.server_messages
    assert (original.outcome, copy.outcome) == ("answered", "malformed")


STATELESS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
             "Mcp-Method": "tools/call", "Mcp-Name": "ask_user"}  # fmt: skip


def _rpc(body: str) -> Any:
    """The JSON-RPC message of an answer, framed as JSON or as one SSE event."""
    return json.loads(_events(body)[-1] if "data: " in body else body)


@pytest.mark.parametrize("form", ["bad_json", "no_method"])
def test_stateless_a_malformed_entry_goes_ahead_of_the_input_request_and_its_answer_is_journaled(
    form: str,
) -> None:
    with Sidecar(era="stateless", tool_sets=SETS, faults=[MalformedServerRequest(form)]) as sc:
        params: dict[str, Any] = {"name": "ask_user", "arguments": ASK}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        first = _rpc(httpx.post(sc.mcp_url, json=call, headers=STATELESS, timeout=5).text)["result"]
        assert first["resultType"] == "input_required"
        (bad, key), requests = list(first["inputRequests"]), first["inputRequests"]
        assert bad == f"{key}-malformed"  # first, beside the well-formed request
        real = requests[key]
        assert real["method"] == "elicitation/create"
        if form == "no_method":
            assert requests[bad] == {"params": real["params"]}
        else:  # a string where an object belongs: half the request's JSON text
            whole = json.dumps(real, separators=(",", ":"))
            assert requests[bad] == whole[: len(whole) // 2]
        retry = {**params, "requestState": first["requestState"], "inputResponses": {key: ACCEPTED, bad: {}}}
        done = httpx.post(sc.mcp_url, json={**call, "id": 2, "params": retry}, headers=STATELESS, timeout=5)
        sc.wait_idle(5)
    assert _rpc(done.text)["result"]["content"][0]["text"] == json.dumps(ACCEPTED)
    original, copy = sc.journal.server_messages
    assert (original.outcome, original.result) == ("answered", ACCEPTED)
    assert (copy.id, copy.outcome, copy.result, copy.fault) == (
        bad,
        "malformed",
        {},
        str(MalformedServerRequest(form)),
    )
    assert copy.answered_at is not None and sc.errors == []


async def test_stateless_mcp2_fails_the_call_on_a_malformed_entry_and_the_verdict_names_it() -> None:
    budget = 0.5
    with Sidecar(era="stateless", tool_sets=SETS, faults=[MalformedServerRequest()], patience=budget) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
            with pytest.raises(
                ValidationError,
                match=re.escape("validation errors for union[CallToolResult,InputRequiredResult]"),
            ):
                await client.call_tool("ask_user", ASK)  # pydantic's own error, not an MCPError
            after = await client.call_tool("echo", {"text": "still here"})  # the session-less client goes on
            wait = sc.journal.wait_for
            await asyncio.to_thread(wait, lambda: len(sc.patience_violations) == 1, budget + 5, "the verdict")
            (v,) = sc.patience_violations  # at the budget: the client never retried
    assert after.content[0].text == "still here"  # type: ignore[union-attr]
    sent = sc.journal.server_messages.records[0]
    assert v.describe() == (
        f"the client never answered the server's `elicitation/create` (sent at {sent.sent_at:.1f} s during "
        "tools/call ask_user, as an input request of its input_required result, beside a malformed entry "
        "from `malformed_server_request`): it did not retry the call with the answer within 0.5 s (the whole "
        "budget), and the tool is still waiting for it"
    )


# -- duplicate_server_request ------------------------------------------------------------------------


def test_a_duplicated_request_goes_out_copies_times_with_one_id_and_each_answer_is_journaled() -> None:
    with Sidecar(era="session", tool_sets=SETS, faults=[DuplicateServerRequest(copies=3)]) as sc:
        events = _ask_raw(sc, answers=3)
        sc.wait_idle(5)
    *copies, result = events
    assert len(copies) == 3 and len({c for c in copies}) == 1  # byte for byte the same, one id
    assert json.loads(result)["result"]["isError"] is False
    first, *dups = sc.journal.server_messages
    assert first.outcome == "answered" and first.id == json.loads(copies[0])["id"]
    assert [(d.id, d.outcome, d.result, d.fault) for d in dups] == [
        (first.id, "duplicate", ACCEPTED, "duplicate_server_request(copies=3)")
    ] * 2
    answers = [r for r in sc.requests if r.method == "POST" and r.mcp_method is None]
    assert [(r.status, r.error) for r in answers] == [(202, None)] * 3  # no answer is a client mistake


async def test_mcp2_answers_each_copy_of_a_duplicated_request() -> None:
    with Sidecar(era="session", tool_sets=SETS, faults=[DuplicateServerRequest()]) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
            result = await client.call_tool("ask_user", ASK)
        sc.wait_idle(5)
    assert not result.is_error and result.content[0].text == json.dumps(ACCEPTED)  # type: ignore[union-attr]
    first, dup = sc.journal.server_messages
    assert (first.outcome, dup.outcome, dup.result) == ("answered", "duplicate", ACCEPTED)
    assert dup.answered_at is not None and first.answered_at is not None  # it answered twice
    assert sc.errors == []


def test_mcp1_answers_each_copy_of_a_duplicated_request(mcp1_client: Mcp1Client) -> None:
    with Sidecar(era="session", tool_sets=SETS, faults=[DuplicateServerRequest()]) as sc:
        seen = mcp1_client.call(sc.mcp_url, "ask_user", ASK, elicit="yes", within=10)
        sc.wait_idle(5)
    assert (seen.texts, seen.error, seen.exited) == ([json.dumps(ACCEPTED)], None, [])
    first, dup = sc.journal.server_messages
    assert (first.outcome, dup.outcome, dup.result) == ("answered", "duplicate", ACCEPTED)


async def test_stateless_calls_are_not_faulted_by_the_session_era_only_kinds() -> None:
    faults = [DuplicateServerRequest(), MalformedServerRequest("no_id")]  # its keys are the ids
    with Sidecar(era="stateless", tool_sets=SETS, faults=faults) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
            result = await client.call_tool("ask_user", ASK)
        sc.wait_idle(5)
    assert not result.is_error and [m.outcome for m in sc.journal.server_messages] == ["answered"]
    assert sc.fired == {}


# -- drop_client_answer ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [202, 500])
async def test_mcp2_waits_for_a_dropped_answer_until_patience_and_the_headline_says_the_sidecar_dropped_it(
    status: int,
) -> None:
    budget = 0.5
    with Sidecar(era="session", tool_sets=SETS, faults=[DropClientAnswer(status)], patience=budget) as sc:
        start = time.monotonic()
        with pytest.raises(BaseExceptionGroup) as group:
            async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
                await client.call_tool("ask_user", ASK)
        took = time.monotonic() - start
        sc.wait_idle(5)
        (v,) = sc.patience_violations
        with pytest.raises(PatienceError) as err:
            sc.assert_no_patience_violations()
    assert budget <= took < budget + 2.0
    (leaf,) = group.value.exceptions[0].exceptions  # type: ignore[attr-defined]
    assert isinstance(leaf, MCPError) and str(leaf) == "SSE stream ended without a response"
    (sent,) = sc.journal.server_messages
    assert (sent.outcome, sent.result, sent.fault) == ("dropped", ACCEPTED, str(DropClientAnswer(status)))
    (posted,) = [r for r in sc.requests if r.method == "POST" and r.mcp_method is None]
    assert posted.status == status  # mcp 2.3 ignores a failed answer POST, even a 500
    assert v.describe() == (
        f"the sidecar dropped the client's answer to the server's `elicitation/create` (sent at "
        f"{sent.sent_at:.1f} s during tools/call ask_user): it came at {sent.answered_at:.1f} s and "
        f"`{DropClientAnswer(status)}` answered its POST {status} and never handed it to the tool; the "
        f"tool call waited 0.5 s (the whole budget) with its answer stream open ({v.request.bytes_sent} "
        "bytes sent); without the budget it would have waited for ever"
    )
    text = str(err.value)
    assert f"`{DropClientAnswer(status)}` lost the client's answer to the tool's `elicitation/create`" in text
    assert "the harness answered the server's `elicitation/create`, and the answer was lost" in text
    assert "never answered" not in text  # the client did answer: not the harness's hang


def test_mcp1_hangs_on_a_dropped_answer_and_fails_the_session_on_a_500(mcp1_client: Mcp1Client) -> None:
    for status in (202, 500):
        fault = DropClientAnswer(status)
        with Sidecar(era="session", tool_sets=SETS, faults=[fault], patience=0.5, expect_hang=True) as sc:
            seen = mcp1_client.call(sc.mcp_url, "ask_user", ASK, elicit="yes", within=2)
            sc.wait_idle(5)
        (sent,) = sc.journal.server_messages
        assert (sent.outcome, sent.result) == ("dropped", ACCEPTED)
        if status == 202:  # patience cut the stream at 0.5 s; mcp 1.x without a read timeout never returns
            assert seen.hung and seen.texts is None and seen.error is None
            (v,) = sc.patience_violations
            assert v.expected and v.describe().startswith("the sidecar dropped the client's answer")
        else:  # its answer POST raises HTTPStatusError inside the transport: the session is gone at once
            assert (seen.hung, seen.error) == (False, "Connection closed") and seen.seconds < 1.5
            assert "HTTPStatusError: Server error '500 Internal Server Error'" in seen.log
            assert sc.patience_violations == ()  # the client went away: nothing outlived the budget


async def test_stateless_a_dropped_answer_is_a_lost_round_the_retry_is_refused_for() -> None:
    with Sidecar(era="stateless", tool_sets=SETS, faults=[DropClientAnswer()], patience=1.0) as sc:
        with pytest.raises(BaseExceptionGroup) as group:
            async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
                await client.call_tool("ask_user", ASK)
        sc.wait_idle(5)
    (leaf,) = group.value.exceptions[0].exceptions  # type: ignore[attr-defined]
    assert isinstance(leaf, MCPError) and leaf.error.code == -32602
    assert "names no input round of this server" in leaf.error.message
    (sent,) = sc.journal.server_messages
    assert (sent.outcome, sent.result, sent.fault) == ("dropped", ACCEPTED, "drop_client_answer")
    first, retry = [r for r in sc.requests if r.mcp_method == "tools/call"]
    assert (first.status, retry.status, retry.error_by) == (200, 400, None)  # not the client's mistake
    assert sc.patience_violations == () and sc.errors == []  # the handler was cancelled, not left waiting


async def test_only_the_first_requests_answer_of_the_call_is_dropped() -> None:
    async def twice(ctx: ToolContext) -> str:
        # A tool that stops waiting for its first question, then asks again. It stops once the sidecar has
        # dropped the client's answer (bounded: 5 s), not after a fixed time a loaded machine can outrun.
        asked = asyncio.ensure_future(ctx.elicit("first?"))
        for _ in range(500):
            if asked.done() or [m.outcome for m in sc.journal.server_messages] == ["dropped"]:
                break
            await asyncio.sleep(0.01)
        first = "answered" if asked.done() else "lost"
        asked.cancel()
        second = await ctx.elicit("second?")
        return f"{first}, then {second['action']}"

    tool = Tool("twice", twice, {"type": "object", "properties": {}})
    with Sidecar(era="session", tools=[tool], faults=[DropClientAnswer(when="tool:twice")]) as sc:
        async with Client(sc.mcp_url, elicitation_callback=_elicit) as client:
            result = await client.call_tool("twice", {})
        sc.wait_idle(5)
    assert result.content[0].text == "lost, then accept"  # type: ignore[union-attr]
    assert [(m.params["message"], m.outcome) for m in sc.journal.server_messages] == [
        ("first?", "dropped"),
        ("second?", "answered"),
    ]
    assert sc.patience_violations == ()


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: MalformedServerRequest("garbage"),
            "form must be one of bad_json, no_id, no_method, got 'garbage'",
        ),
        (lambda: DuplicateServerRequest(copies=1), "copies must be"),
        (lambda: DropClientAnswer(200), "status must be 202 or an HTTP error status in 400..599, got 200"),
        (lambda: DropClientAnswer(when="health"), "when= must be 'tools/call', 'tool:<name>'"),
    ],
)
def test_bad_parameters_are_refused_naming_them_and_what_is_valid(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        make()


# -- the docs page's examples and its quoted verdict ---------------------------------------------------

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "server_request_faults_test.py"


def test_the_docs_examples_pass_and_the_unbounded_one_fails_with_the_quoted_headline(
    pytester: pytest.Pytester,
) -> None:
    path = pytester.path / "test_server_request_faults_doc.py"
    path.write_text(EXAMPLE.read_text())
    opts = ["-p", "mcpfaults", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto"]
    opts += ["-o", "asyncio_default_fixture_loop_scope=function", "--runxfail", str(path)]
    result = pytester.runpytest(*opts, "-W", "ignore::pytest.PytestAssertRewriteWarning")  # in-process
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_an_unbounded_harness_waits_for_a_lost_answer _*",
            "1. the sidecar dropped the client's answer to the server's `elicitation/create` (sent at *.* s "
            "during tools/call ask_user): it came at *.* s and `drop_client_answer@tool:ask_user` answered "
            "its POST 202 and never handed it to the tool; the tool call waited 1 s (the whole budget) with "
            "its answer stream open (* bytes sent); without the budget it would have waited for ever",
            "   `drop_client_answer@tool:ask_user` lost the client's answer to the tool's "
            "`elicitation/create`; when the 1 s budget (the sidecar's patience) ran out the sidecar aborted "
            "connection #* (RST)",
            "   hint: the harness answered the server's `elicitation/create`, and the answer was lost on its "
            "way (a lossy proxy)*",
            "FAILED *::test_an_unbounded_harness_waits_for_a_lost_answer*",
        ]
    )
    assert "never answered" not in result.stdout.str()


def test_a_proxying_sidecar_refuses_them_at_construction_and_at_inject() -> None:
    with pytest.raises(ValueError, match=r"Sidecar faults=: fault 'drop_client_answer' acts on the requests"):
        Sidecar(upstream="http://127.0.0.1:9/mcp", faults=[DropClientAnswer()])
    with Sidecar(tool_sets=SETS) as upstream, Sidecar(upstream=upstream.mcp_url) as proxy:
        with pytest.raises(
            ValueError, match=r"Sidecar inject\(\): fault 'duplicate_server_request' .* upstream"
        ):
            proxy.inject(DuplicateServerRequest())
        proxy.inject("hang@health")  # other kinds still go in


def test_the_copies_awaiting_an_answer_are_bounded() -> None:
    """A long-running sidecar (serve) keeps at most 256 unanswered copies, per id and in all: the
    malformed copies no client could answer share the id ``None``."""
    journal = Journal()
    messages = ServerMessages(journal.server_messages)
    effect = Outbound("malformed_server_request", malformed="bad_json")
    for _ in range(300):
        messages.copy_sent(None, "malformed", effect, method="ping", request_id=1, tool="t")
    for _ in range(300):  # a client answering id null each time
        assert messages.answer_status({"jsonrpc": "2.0", "id": None, "error": {"code": -32700}})[0] == 202
    answered = [m for m in journal.server_messages if m.answered_at is not None]
    assert len(answered) == 256 and answered[0].seq == 300 - 256  # the newest kept, oldest first
