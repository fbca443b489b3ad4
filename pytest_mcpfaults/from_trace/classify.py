"""What a failed span recorded, as the fault kinds that could have caused it: :func:`classify`. Pure.

The first rule the span's text meets picks the kinds, likeliest first, in the order docs/from-trace.md
lists them ("How a span becomes a fault"). ``error_payload`` and ``tool_error`` answer ``tools/call``
only: at another request a text maps to ``jsonrpc_error``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.spans.records import RecordedSpan

#: Characters of a span's text kept in a fault's message.
MAX_TEXT = 300
#: Characters of a span's text read: a longer one is read at its start and its end, half each (the
#: exception type and what went wrong; what it quotes between them, a body say, is not read).
MAX_READ = 65536

_TIMEOUT = re.compile(r"timed? ?out|timeout|deadline exceeded", re.I)
_REFUSED = re.compile(
    r"connection refused|connecterror|econnrefused|connect call failed|all connection attempts", re.I
)
_RESET = re.compile(
    r"connection reset|econnreset|reset by peer|remoteprotocolerror|server disconnected|peer closed|"
    r"incomplete chunked read|connection aborted|broken pipe",
    re.I,
)
_EXPIRED = re.compile(r"\b404\b|session not found|unknown session|no such session", re.I)
_CODE = re.compile(r"(?<![\d.])(-32[0-9]{3})(?!\d)")
_STATUS = re.compile(
    r"server returned an error response|\b(5\d\d) (?:internal server error|bad gateway|service unavailable|"
    r"gateway timeout)|server error '(5\d\d)|\bstatus(?: code)?[ =:]+(5\d\d)\b",
    re.I,
)
_MCP_ERROR = re.compile(r"\bMcpError:\s*(.*)", re.I)
# a backslash is an escape only (never a character too): one way to read a run of them, not 2**n
_WRAPPED = re.compile(r"""['"]error['"]\s*:\s*(['"])(?P<text>(?:\\.|(?!\1)[^\\])*)\1""")
_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


@dataclass(frozen=True)
class Candidate:
    """One fault kind that fits a span's failure, its parameters, and why it fits."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    why: str = ""


def span_text(span: RecordedSpan) -> str:
    """The span's failure as recorded: its exceptions (``Type: message``), else its status description."""
    texts = [f"{t.rsplit('.', 1)[-1]}: {m}" if t else m for t, m in span.exceptions]
    if span.status_description and not any(span.status_description in t for t in texts):
        texts.insert(0, span.status_description)
    return "; ".join(texts)


def read_text(text: str) -> str:
    """``text`` as :func:`classify` reads it: its start and its end when over :data:`MAX_READ`."""
    if len(text) <= MAX_READ:
        return text
    return text[: MAX_READ // 2] + " … " + text[-(MAX_READ // 2) :]


def template(text: str) -> str:
    """``text`` as an ``error_payload`` message: braces doubled, each URL's scheme and host as
    ``{service_url}`` and each UUID as ``{session_id}`` (the run's own, filled in by the sidecar)."""
    out = text.replace("{", "{{").replace("}", "}}")
    out = _URL.sub("{service_url}", out)
    return _UUID.sub("{session_id}", out)[:MAX_TEXT]


def classify(span: RecordedSpan, tool_call: bool, budget: float) -> list[Candidate]:
    """The kinds that fit ``span``'s failure at a request (``tool_call``: a ``tools/call``), likeliest
    first; a held request is held for ``budget`` seconds."""
    text = read_text(span_text(span))
    if not span.end_time:
        why = f"the span never ended: held for the patience budget ({budget:g} s)"
        return [Candidate("hang", {"patience": budget}, why), Candidate("stall", {"patience": budget}, why)]
    wrapped = _WRAPPED.search(text)
    if wrapped:  # the server's own answer to a tools/call: whatever it says, it said it, and only there
        if not tool_call:
            return []
        said = wrapped.group("text")
        return [Candidate("error_payload", {"message": template(said)}, "the error text the server returned")]
    if _TIMEOUT.search(text):
        # Held for the budget, not the span's duration: the trace's harness gave up after its own
        # timeout, the harness under test must give up within the budget, whatever its own timeout is.
        took = max(0.0, ((span.end_time or 0) - (span.start_time or 0)) / 1e9)
        why = f"a timeout after {took:.3g} s: held for the patience budget ({budget:g} s)"
        return [Candidate("hang", {"patience": budget}, why), Candidate("stall", {"patience": budget}, why)]
    if _REFUSED.search(text):
        return [
            Candidate("die", {}, "the connection was refused: the server was dead"),
            Candidate("reset", {}, ""),
        ]
    if _RESET.search(text):
        return [Candidate("reset", {}, "the connection was cut mid-answer"), Candidate("die", {}, "")]
    if _EXPIRED.search(text):
        return [Candidate("session_expired", {}, "the server no longer knew the session (404)")]
    code = _CODE.search(text)
    if code:
        msg = text[:MAX_TEXT]
        return [
            Candidate("jsonrpc_error", {"code": int(code.group(1)), "message": msg}, "a JSON-RPC error code")
        ]
    status = _STATUS.search(text)
    if status:
        number = next((int(g) for g in status.groups() if g), 500)
        return [Candidate("status", {"code": number}, f"an HTTP error status ({number})")]
    sdk = _MCP_ERROR.search(text)
    if sdk:  # the MCP SDK's error for a JSON-RPC error answer; the harness did not record the code
        why = "the MCP SDK's McpError: a JSON-RPC error answer (no code recorded: -32603 assumed)"
        return [Candidate("jsonrpc_error", {"code": -32603, "message": sdk.group(1)[:MAX_TEXT]}, why)]
    return _text(text, tool_call)


def _text(text: str, tool_call: bool) -> list[Candidate]:
    said = text.split(": ", 1)[-1]  # the message without its exception type (a wrapped text returned)
    if not tool_call:
        return [Candidate("jsonrpc_error", {"code": -32603, "message": said[:MAX_TEXT]}, "an error answer")]
    payload = Candidate("error_payload", {"message": template(said)}, "the error text the server returned")
    return [payload, Candidate("tool_error", {"text": said[:MAX_TEXT]}, "or a tool result with isError")]
