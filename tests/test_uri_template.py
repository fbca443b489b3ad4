"""Resource templates (RFC 6570 level 1) matched without a backtracking regular expression, and the bound on
the URI a resources/read or subscribe may name (``MAX_URI_CHARS``): what a client sees at the bound and
past it, and what the sidecar's journal says. The matcher's speed is ``benchmarks/hostile_rtt.py``'s."""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pytest_mcpfaults import ResourceTemplate, Sidecar
from pytest_mcpfaults.mcp.uri_template import MAX_URI_CHARS, UriTemplate

STATELESS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
FILES = "file:///{dir}/{name}.{ext}"
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


def _regex_match(template: str, uri: str) -> dict[str, str] | None:
    """What the matcher replaced did (a variable is one or more characters but ``/?#``): the reference
    the new one must agree with, on URIs too short to make it backtrack for long."""
    pattern, last = "", 0
    for m in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template):
        pattern += re.escape(template[last : m.start()]) + f"(?P<{m[1]}>[^/?#]+)"
        last = m.end()
    found = re.fullmatch(pattern + re.escape(template[last:]), uri)
    return found.groupdict() if found else None


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        (FILES, "file:///docs/report.txt", {"dir": "docs", "name": "report", "ext": "txt"}),
        (FILES, "file:///d/archive.tar.gz", {"dir": "d", "name": "archive.tar", "ext": "gz"}),  # greedy
        (FILES, "file:///d/noext", None),
        (FILES, "file:///d/a.b/", None),  # a variable never takes a '/'
        (FILES, "file:///a/b/c.d", None),
        (FILES, "file:///d/.x", None),  # a variable is never empty
        ("x:{a}.{b}.{c}", "x:p.q.r.s", {"a": "p.q", "b": "r", "c": "s"}),
        ("x:{a}{b}", "x:xyz", {"a": "xy", "b": "z"}),
        ("t://{id}?q={q}#{f}", "t://1?q=2#3", {"id": "1", "q": "2", "f": "3"}),
        ("t://{id}?q={q}#{f}", "t://1#q=2?3", None),  # the delimiters in the template's order
        ("t://{id}/data", "t://a/b/data", None),
        ("t://{id}", "t://", None),
        ("{scheme}://x", "s3://x", {"scheme": "s3"}),
    ],
)
def test_a_template_matches_as_the_regular_expression_it_replaces(
    template: str, uri: str, expected: dict[str, str] | None
) -> None:
    assert UriTemplate(template).match(uri) == expected == _regex_match(template, uri)
    if expected is not None:
        assert list(UriTemplate(template).match(uri) or ()) == list(expected)  # in the template's order


def test_every_template_over_a_small_alphabet_agrees_with_the_regular_expression() -> None:
    """Exhaustive over short templates and URIs of ``a . / -``: the same variables or the same miss."""
    uris = ["".join(chars) for n in range(6) for chars in itertools.product("a./-", repeat=n)]
    templates = [
        f"{p}{{x}}{m}{{y}}{s}"
        for p in ("", "a", "/")
        for m in ("", ".", "-", "/", "a.")
        for s in ("", ".", "/a")
    ]
    for template in templates:
        matcher = UriTemplate(template)
        for uri in uris:
            assert matcher.match(uri) == _regex_match(template, uri), (template, uri)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("a://b", "ResourceTemplate 'a://b': uri_template must hold at least one {variable}"),
        ("a://{x}/{y}/{x}", "'a://{x}/{y}/{x}': uri_template names variable(s) x more than once"),
    ],
)
def test_a_template_without_a_variable_or_with_one_twice_is_refused(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ResourceTemplate(template, "t", str)


def _read(http: httpx.Client, sc: Sidecar, uri: str, method: str = "resources/read") -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"uri": uri}}
    answer = http.post(sc.mcp_url, json=body, headers=STATELESS)
    assert answer.status_code == 200, answer.text[:300]
    return dict(answer.json())


def test_a_hostile_uri_at_the_bound_is_not_found_and_one_past_it_is_invalid_params() -> None:
    """The URI that made the regular expression backtrack (dotted segments ending where no ``.{ext}`` can
    follow), at exactly ``MAX_URI_CHARS``: -32002 ``Resource not found``; one character more: -32602
    naming the limit, the template never consulted. Both are the client's in the journal; a good read
    of the same template still answers."""
    calls: list[dict[str, str]] = []

    def read(**variables: str) -> str:
        calls.append(variables)
        return "content"

    head = "file:///d/"
    at_bound = head + ("a." * MAX_URI_CHARS)[: MAX_URI_CHARS - len(head) - 1] + "/"
    assert len(at_bound) == MAX_URI_CHARS
    with Sidecar(resources=[ResourceTemplate(FILES, "files", read)], tool_sets=[]) as sc:
        with httpx.Client(timeout=30) as http:
            missed = _read(http, sc, at_bound)
            over = _read(http, sc, at_bound + "x")
            good = _read(http, sc, "file:///d/" + "a." * 2000 + "txt")
        sc.wait_idle(5)
        records = [r for r in sc.requests if r.mcp_method == "resources/read"]
        assert sc.errors == []
    assert missed["error"]["code"] == -32002 and missed["error"]["message"].startswith("Resource not found: ")
    assert over["error"] == {
        "code": -32602,
        "message": f"Invalid params: resources/read uri of {MAX_URI_CHARS + 1} characters is over the "
        f"limit of {MAX_URI_CHARS} (MAX_URI_CHARS)",
    }
    assert good["result"]["contents"][0]["text"] == "content"
    assert calls == [{"dir": "d", "name": "a." * 1999 + "a", "ext": "txt"}]
    assert [(r.error_by, r.error is not None) for r in records] == [
        ("client", True),
        ("client", True),
        (None, False),
    ]


async def test_subscribing_to_a_uri_past_the_bound_is_invalid_params_and_nothing_is_kept() -> None:
    """The session era's subscriptions are kept per session: a URI past the bound is refused, so a
    client subscribing in a loop cannot keep megabytes of URIs in the sidecar."""
    with Sidecar(resources=[ResourceTemplate(FILES, "files", str)], tool_sets=[], era="session") as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            await client.subscribe_resource("file:///d/ok.txt")
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource("file:///d/" + "x" * MAX_URI_CHARS + ".txt")
            (sid,) = sc.sessions
            assert sc.surface.subscriptions == {sid: {"file:///d/ok.txt"}}
        assert sc.errors == []
    assert refused.value.error.code == -32602
    assert "resources/subscribe uri of" in refused.value.error.message
