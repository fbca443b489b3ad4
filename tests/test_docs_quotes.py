"""tests/docs_quotes.py, the mask every docs-quote comparison goes through: what no quote can pin is
masked (a third party's release, ports, measured times, connection numbers), and nothing else is, so a
quote that says something the run does not still fails."""

from __future__ import annotations

import pytest
from docs_quotes import assert_quote_is_output, assert_quoted_lines_occur, masked, quoted_block

QUOTE = """\
PatienceError: 1 held request outlived the patience budget at http://127.0.0.1:42273:
   fired: `die@tool:delete_session` on `POST tools/call delete_session` (request #0), 0.334 s after
   client seen: User-Agent python-httpx2/<version>, MCP-Protocol-Version 2025-11-25
   journal of connection #2 (127.0.0.1:49748):
     #3   conn#2   POST tools/call echo                      status=200  bytes=91
     #5   conn#2   DELETE /mcp                               status=None  bytes=0  hold=patience waited=1.003s
  File "docs/examples/hangs_test.py", line 54 in test_wedged_client_after_die
the client never answered (sent at 0.3 s during tools/call ask_user) with 209 bytes (209 bytes sent)
======================== 16 failed, 9 passed in 25.44s ========================="""

RUN = """\
PatienceError: 1 held request outlived the patience budget at http://127.0.0.1:39001:
   fired: `die@tool:delete_session` on `POST tools/call delete_session` (request #1), 0.212 s after
   client seen: User-Agent python-httpx2/2.17.0, MCP-Protocol-Version 2026-06-30
   journal of connection #11 (127.0.0.1:50002):
     #12  conn#11  POST tools/call echo                      status=200  bytes=93
     #14  conn#11  DELETE /mcp                               status=None  bytes=0  hold=patience waited=1.204s
  File "/tmp/pytest-of-root/pytest-5/x0/test_hangs.py", line 55 in test_wedged_client_after_die
the client never answered (sent at 1.4 s during tools/call ask_user) with 209 bytes (310 bytes sent)
================== 16 failed, 9 passed in 104.30s (0:01:44) ==================="""


def test_a_new_release_ports_times_and_connection_numbers_change_nothing() -> None:
    assert_quote_is_output(QUOTE, RUN, "the quote")
    assert masked("User-Agent python-httpx/0.28.1") == masked("User-Agent python-httpx/0.29.0")
    assert masked("User-Agent python-httpx/<version>") == "User-Agent python-httpx/<version>"
    idle = "the test made no progress for {} s (the 1 s patience budget)"
    assert masked(idle.format("1.0")) == masked(idle.format("1.3"))
    assert masked("Python/3.11 aiohttp/3.10.5") == "Python/<version> aiohttp/<version>"
    assert (
        masked("measured with mcp 2.3.0 and httpx 0.28.1")
        == "measured with mcp <version> and httpx <version>"
    )


@pytest.mark.parametrize(
    ("quoted", "printed"),
    [
        ("it waited 1 s (the whole budget)", "it waited 2 s (the whole budget)"),  # a budget
        ("agent did not finish within 0.5 s", "agent did not finish within 1.5 s"),
        (
            "no progress for 1.0 s (the 1 s patience budget)",
            "no progress for 1.0 s (the 2 s patience budget)",
        ),
        ("explore:die@tool:delete_session#1", "explore:die@tool:delete_session#2"),  # an occurrence
        ("status=200  bytes=91", "status=500  bytes=91"),
        ("User-Agent python-httpx/0.28.1", "User-Agent python-httpx2/0.28.1"),  # another client family
        ("tool:echo#1             b  b  b", "tool:echo#1             b  V  b"),
        ("held by `freeze`", "held by `hang`"),
    ],
)
def test_what_the_quote_says_is_still_compared(quoted: str, printed: str) -> None:
    assert masked(quoted) != masked(printed)
    with pytest.raises(AssertionError, match="quotes what the run does not print"):
        assert_quote_is_output(quoted, printed, "the page")
    with pytest.raises(AssertionError, match="lines the page quotes that the run does not print"):
        assert_quoted_lines_occur(quoted, [printed], "the page")


def test_a_quote_is_found_by_its_first_and_last_lines() -> None:
    page = f"before\n\n```text\n{QUOTE}\n```\n\nafter"
    assert quoted_block(page, "PatienceError: 1 held", "=====") == QUOTE
    assert quoted_block(page, "PatienceError: the test made no", "=====") is None
