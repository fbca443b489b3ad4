"""Cassettes: record a real MCP server once through proxy mode, replay it offline with faults.

* :mod:`.fileformat`: the file (JSON Lines, versioned), :class:`Cassette`, :class:`Exchange`;
* :mod:`.redact`: what is never written;
* :mod:`.recorder`: recording in proxy mode (``Sidecar(upstream=..., record=PATH)``);
* :mod:`.matching`: which recorded exchange answers a request, and the nearest miss;
* :mod:`.replay`: the recorded server as the sidecar's source of tools and answers
  (``Sidecar(cassette=PATH)``).

docs/cassettes.md is the user's page.
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
