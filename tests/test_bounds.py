"""docs/bounds.md, the table of every bound: each row names tests that exist (the tests that make the
bound bite and assert what the client saw), and each default it states is the code's. Plus the tests of
rows no other file has."""

from __future__ import annotations

import ast
import inspect
import logging
import re
import socket
from functools import cache
from pathlib import Path

import pytest
from aiohttp import web_protocol

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.auth.registration import MAX_REDIRECT_URI_CHARS, MAX_REDIRECT_URIS
from pytest_mcpfaults.auth.server import MAX_TOKENS
from pytest_mcpfaults.cli import DEFAULT_JOURNAL_LIMIT, DEFAULT_SPAN_LIMIT
from pytest_mcpfaults.core.resumption import MAX_ID_DIGITS, RETAINED_BYTES, RETAINED_EVENTS
from pytest_mcpfaults.faults.text import MAX_SPEC_CHARS
from pytest_mcpfaults.from_trace.classify import MAX_READ
from pytest_mcpfaults.from_trace.read import MAX_TRACE_BYTES
from pytest_mcpfaults.mcp.uri_template import MAX_URI_CHARS
from pytest_mcpfaults.options.checks import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_PATIENCE,
    DEFAULT_TOOL_TIMEOUT,
    DEFAULT_UPSTREAM_TIMEOUT,
)
from pytest_mcpfaults.options.validation import MAX_FAULT_SECONDS
from pytest_mcpfaults.otlp.control_routes import MAX_WAIT, MAX_WAITS
from pytest_mcpfaults.proxy.cassette.fileformat import MAX_DEPTH as CASSETTE_MAX_DEPTH
from pytest_mcpfaults.proxy.cassette.matching import MISS_SCAN
from pytest_mcpfaults.proxy.cassette.recorder import ANSWER_MAX_BYTES, EVENTS_MAX_BYTES
from pytest_mcpfaults.proxy.cassette.replay import MAX_TOOL_DEPTH
from pytest_mcpfaults.proxy.relay import REWRITE_MAX_BYTES
from pytest_mcpfaults.proxy.stdio_upstream import WRITE_BUFFER
from pytest_mcpfaults.stdio.wire import MAX_LINE as STDIO_MAX_LINE
from pytest_mcpfaults.transports.control import MAX_BODY_DEPTH
from pytest_mcpfaults.transports.http_io import LINGERING_TIME
from pytest_mcpfaults.transports.legacy_sse import OUTBOX_BYTES
from pytest_mcpfaults.transports.loop import WorkerPool
from pytest_mcpfaults.transports.notices import DORMANT_STREAMS

ROOT = Path(__file__).resolve().parent.parent
BOUNDS = ROOT / "docs" / "bounds.md"
_TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _default(fn: object, name: str) -> object:
    return inspect.signature(fn).parameters[name].default  # type: ignore[arg-type]


#: The row's bound (its first cell) -> the default as the code has it, written as the row writes it.
CODE_DEFAULTS: dict[str, str] = {
    "`max_body_bytes`": f"{_default(Sidecar, 'max_body_bytes')} bytes",
    "`max_body_bytes` (inflated)": f"{_default(Sidecar, 'max_body_bytes')} bytes",
    "`idle_timeout` (connection)": _seconds(DEFAULT_IDLE_TIMEOUT),
    "`idle_timeout` (body)": _seconds(DEFAULT_IDLE_TIMEOUT),
    "`lingering_time`": _seconds(LINGERING_TIME),
    "`max_line_size`, `max_field_size`": (
        f"{_default(web_protocol.RequestHandler, 'max_line_size')} bytes"
        if _default(web_protocol.RequestHandler, "max_line_size")
        == _default(web_protocol.RequestHandler, "max_field_size")
        else "the two differ"
    ),
    "`patience`": _seconds(DEFAULT_PATIENCE),
    "`tool_timeout`": _seconds(DEFAULT_TOOL_TIMEOUT),
    "tool handler threads": str(_default(WorkerPool, "max_workers")),
    "`upstream_timeout`": _seconds(DEFAULT_UPSTREAM_TIMEOUT),
    "`--journal-limit`": f"{DEFAULT_JOURNAL_LIMIT} under `serve`",
    "`--span-limit`": f"{DEFAULT_SPAN_LIMIT} under `serve`",
    "`MAX_WAITS`": str(MAX_WAITS),
    "`MAX_WAIT`": f"at most {_seconds(MAX_WAIT)}",
    "`OUTBOX_BYTES`": f"{OUTBOX_BYTES} bytes",
    "control body depth": f"{MAX_BODY_DEPTH} levels",
    "`stdio_max_line`": f"{STDIO_MAX_LINE} bytes",
    "`upstream_write_buffer`": f"{WRITE_BUFFER} bytes",
    "`rewrite_max_bytes`": f"{REWRITE_MAX_BYTES} bytes",
    "`max_fault_seconds`": _seconds(MAX_FAULT_SECONDS),
    "`max_spec_chars`": f"{MAX_SPEC_CHARS} characters",
    "`MAX_TRACE_BYTES`": f"{MAX_TRACE_BYTES} bytes",
    "`MAX_READ`": f"{MAX_READ} characters",
    "`MAX_TOKENS`": str(MAX_TOKENS),
    "`RETAINED_EVENTS`, `RETAINED_BYTES`": f"{RETAINED_EVENTS} events and {RETAINED_BYTES} bytes",
    "`DORMANT_STREAMS`": f"the last {DORMANT_STREAMS}",
    "`MAX_URI_CHARS`": f"{MAX_URI_CHARS} characters",
    "`MAX_ID_DIGITS`": f"{MAX_ID_DIGITS} digits",
    "`MAX_REDIRECT_URIS`, `MAX_REDIRECT_URI_CHARS`": (
        f"{MAX_REDIRECT_URIS} URIs, {MAX_REDIRECT_URI_CHARS} characters each"
    ),
    "`EVENTS_MAX_BYTES`": f"{EVENTS_MAX_BYTES} bytes",
    "`ANSWER_MAX_BYTES`": f"{ANSWER_MAX_BYTES} bytes",
    "cassette line depth": f"{CASSETTE_MAX_DEPTH} levels",
    "recorded tool depth": f"{MAX_TOOL_DEPTH} levels",
    "`MISS_SCAN`": str(MISS_SCAN),
}


@cache
def rows() -> list[list[str]]:
    """The cells of each row of the table under '## The bounds'."""
    text = BOUNDS.read_text()
    table = text.split("## The bounds", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| bound | what it bounds | default |"), lines[0]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]


@cache
def _functions(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def test_every_row_names_tests_that_exist() -> None:
    assert len(rows()) >= len(CODE_DEFAULTS)
    for cells in rows():
        assert len(cells) == 5, cells
        refs = _TEST_REF.findall(cells[4])
        assert refs, f"row {cells[0]!r} names no test (`tests/<file>.py::<test>`)"
        for path, name in refs:
            assert (ROOT / path).is_file(), f"row {cells[0]!r}: no file {path}"
            assert name.startswith("test_") and name in _functions(path), (
                f"row {cells[0]!r}: no {path}::{name}"
            )


def test_every_default_the_table_states_is_the_codes() -> None:
    by_bound = {cells[0]: cells[2] for cells in rows()}
    assert len(by_bound) == len(rows()), "two rows name the same bound"
    missing = sorted(set(CODE_DEFAULTS) - set(by_bound))
    assert not missing, f"bounds with no row in docs/bounds.md: {missing}"
    for bound, default in CODE_DEFAULTS.items():
        assert default in by_bound[bound], (
            f"{bound}: the code's default is {default!r}, the table says {by_bound[bound]!r}"
        )


def test_the_page_is_in_the_nav_and_the_index() -> None:
    assert "bounds.md" in (ROOT / "mkdocs.yml").read_text()
    assert "(bounds.md)" in (ROOT / "docs" / "index.md").read_text()


# -- rows no other file tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["request line", "header"])
def test_a_header_line_over_the_parsers_limit_is_400_and_never_logged(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A line over aiohttp's 8190 bytes is refused by its parser (400, the connection closed) before
    any handler runs; the sidecar's log says so in one line and never quotes the line (it may carry a
    bearer token)."""
    caplog.set_level(logging.DEBUG)
    limit = _default(web_protocol.RequestHandler, "max_line_size")
    assert isinstance(limit, int)
    secret = "SECRET" + "s" * (limit + 100)
    head = (
        f"GET /health?{secret} HTTP/1.1\r\nHost: x\r\n\r\n"
        if where == "request line"
        else f"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}\r\n\r\n"
    )
    with Sidecar() as sc:
        with socket.create_connection(("127.0.0.1", sc.port), timeout=5) as s:
            s.sendall(head.encode())
            answer = b""
            while chunk := s.recv(65536):  # until the sidecar closes it
                answer += chunk
        sc.wait_idle()
        assert sc.requests == () and len(sc.journal.connections) == 1
        assert sc.journal.connections[0].closed_at is not None
        assert sc.errors == []
    assert answer.startswith(b"HTTP/1.0 400 Bad Request"), answer[:200]
    logged = [r for r in caplog.records if r.name.startswith(("aiohttp", "pytest_mcpfaults"))]
    assert [r.levelname for r in logged] == ["WARNING"], [r.getMessage()[:200] for r in logged]
    assert "refused with 400" in logged[0].getMessage() and "SECRET" not in logged[0].getMessage()
    assert logged[0].exc_info is None
