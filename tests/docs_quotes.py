"""The docs quote real output; the tests that compare a quote with a real run compare it through this
module, the one place that says which text is not the project's to pin: a third party's release (a
User-Agent's ``python-httpx/0.29.0``, ``mcp 2.3.0``, the protocol version the SDK speaks), ports, times
measured in the run, ids, addresses, the order numbers of connections and requests, byte counts, the
path of a temporary copy. Each is masked on both sides, so a quote may show the real value or the
placeholder (``python-httpx/<version>``) alike, and a dependency's new release changes nothing.

Everything else is compared as it is: a budget (``1 s``, ``within 0.5 s``), a kind, a verdict's words,
a plan's ``tool:echo#1`` (an occurrence, not a connection number)."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: (pattern, placeholder), applied in this order to each line.
MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # ids and addresses the run made up
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\bsession (?:[0-9a-f]{12}|<id>)…"), "session <id>…"),  # a session id, shortened
    (re.compile(r"127\.0\.0\.1:(?:\d+|<port>)"), "127.0.0.1:<port>"),
    (re.compile(r"\b0x[0-9a-f]+\b"), "0x<addr>"),
    (re.compile(r'File "[^"]*", line \d+'), 'File "<file>", line <n>'),  # a temporary copy's path
    # a third party's release: a product token (User-Agent python-httpx/0.29.0, aiohttp/3.10.5), a
    # distribution named with its version (mcp 2.3.0), the protocol version the client's SDK sends
    (re.compile(r"\b([A-Za-z][\w.-]*)/(?:\d[\w.+-]*|<version>)"), r"\1/<version>"),
    (re.compile(r"\b([A-Za-z][\w-]*) (?:\d+\.\d+\.\d+(?![\d.])[\w+-]*|<version>)"), r"\1 <version>"),
    (re.compile(r"MCP-Protocol-Version(:?) [\w<>-]+"), r"MCP-Protocol-Version\1 <version>"),
    # times measured in the run (a budget is written "1 s", "1.0 s" or "0.5 s", and stays)
    (re.compile(r"(?<![\w.])(?:\d+\.\d{2,}|<t>)( ?s)\b"), r"<t>\1"),  # 0.334 s, waited=1.003s
    (re.compile(r"\bat (?:\d+\.\d+|<t>) s\b"), "at <t> s"),  # a moment: "sent at 0.3 s"
    # how long the watcher (polling every 50 ms) saw a test idle: the budget, or more on a loaded machine
    (re.compile(r"\bno progress for (?:\d+\.\d+|<t>) s\b"), "no progress for <t> s"),
    (re.compile(r"(?<=<t>s) \(\d+:\d\d:\d\d\)"), ""),  # pytest's "in 84.80s (0:01:24)", past a minute
    (re.compile(r"^=+ (.*?) =+$"), r"== \1 =="),  # a centred line: its width follows the duration's
    # how many connections, requests and bytes a client's transport used, which its release decides
    (re.compile(r"(?<!\w)#(?:\d+|<n>)"), "#<n>"),  # connection #2, request #0, a journal's "#3"
    (re.compile(r"\bconn#(?:\d+|<n>)"), "conn#<n>"),
    (re.compile(r"(#<n>) {2,}"), r"\1 "),  # a journal's columns: their width follows the numbers'
    (re.compile(r"\bbytes=(?:\d+|<n>)"), "bytes=<n>"),
    (re.compile(r"\((?:\d+|<n>) bytes sent\)"), "(<n> bytes sent)"),
)


def masked(text: str) -> str:
    """``text`` with what no quote can pin masked, line by line (trailing blanks dropped)."""
    lines = []
    for line in text.splitlines():
        for pattern, placeholder in MASKS:
            line = pattern.sub(placeholder, line)
        lines.append(line.rstrip())
    return "\n".join(lines)


def quoted_block(page_text: str, first: str, last: str) -> str | None:
    """The ```` ```text ```` block of ``page_text`` that starts with ``first`` and ends with the line
    starting ``last`` (None when there is none)."""
    found = re.search(rf"```text\n({re.escape(first)}.*?\n{re.escape(last)}[^\n]*)\n```", page_text, re.S)
    return found.group(1) if found else None


def assert_quote_is_output(quote: str, output: str, where: str) -> None:
    """The quote is the output, line for line, but for the masked text."""
    want, got = masked(quote).splitlines(), masked(output).splitlines()
    differ = [f"  {where}: {q!r}\n  the run:  {o!r}" for q, o in zip(want, got, strict=False) if q != o]
    assert want == got, f"{where} quotes what the run does not print:\n" + "\n".join(
        differ or [f"  {len(want)} quoted lines, {len(got)} printed"]
    )


def assert_quoted_lines_occur(quote: str, output: Iterable[str], where: str) -> None:
    """Each non-blank line of the quote is a line of the output, but for the masked text."""
    printed = {masked(line) for line in output}
    missing = [line for line in quote.splitlines() if line.strip() and masked(line) not in printed]
    assert not missing, f"lines {where} quotes that the run does not print:\n" + "\n".join(missing)
