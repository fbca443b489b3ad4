"""The checks of a sidecar's cassette options, run by ``SidecarOptions`` when it is built. A cassette to
replay is read here, so a bad file is refused when the sidecar (or the marker, at collection) is made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mcpfaults.proxy.cassette.fileformat import check_cassette

#: ``record_mode``: overwrite the cassette with this run's exchanges, or add the new ones to it.
RECORD_MODES = ("all", "new_episodes")


def _path(name: str, value: object) -> str:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"Sidecar: {name} must be a file path (a str or os.PathLike), got {value!r}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise ValueError(f"Sidecar: {name} must be a text path, got {value!r}")
    return path


def check_cassette_options(o: Mapping[str, Any], command: object, transport: object) -> dict[str, Any]:
    """Refuse bad cassette options among the options ``o`` (``command``, ``transport``: its checked
    ``upstream_command`` and ``transport``); the values normalised (paths as ``str``,
    ``cassette_ignore`` a tuple)."""
    out = _check_record(o, command)
    out["cassette_ignore"] = _check_rules(o)
    if o["cassette"] is not None:
        out["cassette"] = _check_replay(o, command, transport)
    return out


def _check_record(o: Mapping[str, Any], command: object) -> dict[str, Any]:  # record= and how it writes
    out: dict[str, Any] = {}
    record, record_mode, record_redact = o["record"], o["record_mode"], o["record_redact"]
    if record is not None:
        out["record"] = path = _path("record", record)
        if o["upstream"] is None and command is None:
            raise ValueError(
                f"Sidecar: record={path!r} records the answers of a real server: give its URL "
                "(upstream='http://127.0.0.1:9000/mcp') or its command (upstream_command=['python', "
                "'server.py']), or replay a cassette with cassette="
            )
    if record_mode not in RECORD_MODES:
        raise ValueError(
            f"Sidecar: record_mode must be one of {', '.join(RECORD_MODES)}, got {record_mode!r}"
        )
    if record_redact is not None:
        if not callable(record_redact):
            raise ValueError(
                "Sidecar: record_redact must be a callable (exchange dict -> dict | None), got "
                f"{record_redact!r}"
            )
        if record is None:
            raise ValueError("Sidecar: record_redact= redacts what record= writes; give record=PATH too")
    if record_mode != "all" and record is None:
        raise ValueError(f"Sidecar: record_mode={record_mode!r} is how record= writes; give record=PATH too")
    return out


def _check_rules(o: Mapping[str, Any]) -> tuple[str, ...]:  # replay's matching rules
    ignore = o["cassette_ignore"]
    if (
        isinstance(ignore, (str, bytes))
        or not isinstance(ignore, Sequence)
        or not all(isinstance(k, str) and k for k in ignore)
    ):
        raise ValueError(
            f"Sidecar: cassette_ignore must be a list of argument names (['timestamp']), got {ignore!r}"
        )
    for name in ("cassette_order", "cassette_once"):
        value = o[name]
        if not isinstance(value, bool):
            raise ValueError(f"Sidecar: {name} must be True or False, got {value!r}")
    given = [name for name in ("cassette_ignore", "cassette_order", "cassette_once") if o[name]]
    if o["cassette"] is None and given:
        raise ValueError(f"Sidecar: {given[0]}= is a matching rule of replay; give cassette=PATH too")
    return tuple(ignore)


def _check_replay(o: Mapping[str, Any], command: object, transport: object) -> str:
    path = _path("cassette", o["cassette"])
    for name, value in (("upstream", o["upstream"]), ("upstream_command", command), ("record", o["record"])):
        if value is not None:
            raise ValueError(
                f"Sidecar: cassette={path!r} replays a recording offline; {name}={value!r} talks to a real "
                "server: give one (record=PATH with upstream= records, cassette=PATH replays)"
            )
    if isinstance(o["tools"], Sequence) and o["tools"]:
        raise ValueError(
            "Sidecar: tools= are the fake's; with cassette= the tools are the recorded server's "
            f"(got {len(o['tools'])} tool(s))"
        )
    if transport != "streamable_http":
        raise ValueError(
            f"Sidecar: cassette= is replayed on Streamable HTTP only; transport={transport!r} "
            "is not supported with it"
        )
    check_cassette(path)  # refused now, naming the file and its line, not at the first request
    return path
