"""Cassettes: record a real MCP server once through proxy mode, replay it offline with faults
(docs/cassettes.md).
"""

from __future__ import annotations

from pytest_mcpfaults.proxy.cassette.fileformat import (
    FORMAT,
    Cassette,
    CassetteError,
    Exchange,
    read_cassette,
)
from pytest_mcpfaults.proxy.cassette.redact import REDACTED

__all__ = ["FORMAT", "REDACTED", "Cassette", "CassetteError", "Exchange", "read_cassette"]
