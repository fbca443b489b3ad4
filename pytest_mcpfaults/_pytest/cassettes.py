"""pytest glue for cassettes: ``--mcpfaults-record`` and the ``cassette`` key of the ``mcp_sidecar``
marker (and of ``mcp_sidecar_factory``) given beside an upstream: "this test talks to that server
through this cassette", the record mode saying which, as vcrpy's do (docs/cassettes.md). Without an
upstream, ``cassette=`` always replays; without ``cassette=`` the mode does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

OPTION = "--mcpfaults-record"
RECORD_MODES = ("none", "once", "new_episodes", "all")
_UPSTREAM_ONLY = ("upstream", "upstream_command", "upstream_serve", "upstream_health", "upstream_timeout",
                  "upstream_headers", "allow_remote_upstream")  # fmt: skip
_REPLAY_ONLY = ("cassette", "cassette_ignore", "cassette_order", "cassette_once")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpfaults")
    group.addoption(
        OPTION,
        choices=RECORD_MODES,
        default="once",
        dest="mcpfaults_record",
        help="How an mcp_sidecar marker naming both cassette=PATH and upstream=URL uses them: none (replay "
        "only), once (replay if the cassette exists, else record it; the default), new_episodes (record, "
        "adding to the cassette), all (record, overwriting it). See docs/cassettes.md.",
    )


def record_mode(config: pytest.Config) -> str:
    return str(config.getoption("mcpfaults_record", "once"))


def resolve(kwargs: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """``Sidecar`` keywords for ``kwargs`` under the record mode ``mode``: a replaying sidecar
    (``cassette=``, the upstream's keys dropped) or a recording one (``record=``, the replay's keys
    dropped). A ``ValueError`` when the mode cannot be followed."""
    out = dict(kwargs)
    path = out.get("cassette")
    upstream = out.get("upstream") or out.get("upstream_command")
    if path is None:
        return out
    if upstream is None:
        if mode in ("new_episodes", "all"):
            raise ValueError(
                f"{OPTION}={mode} records cassette {path}, but the marker names no upstream to record it "
                "from: add upstream='http://...' beside cassette="
            )
        return out
    replay = mode == "none" or (mode == "once" and os.path.exists(os.fspath(path)))
    for key in _UPSTREAM_ONLY if replay else _REPLAY_ONLY:
        out.pop(key, None)
    if not replay:
        out["record"] = path
        if mode == "new_episodes":
            out["record_mode"] = "new_episodes"
    return out
