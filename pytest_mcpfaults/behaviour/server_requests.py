"""The server-request phase: what a server-request fault does to the requests a tool sends the client
during the call it fired on, and to their answers, as data (:class:`Outbound`): the core arms it for
the call and the call's ``ToolContext`` acts on it. Pure: no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.mcp.jsonrpc import sse_message


@dataclass(frozen=True)
class Outbound:
    """What a fault does to a call's requests to the client: ``fault``, its text (for the journal and
    the verdict); ``malformed``: a malformed copy of each request goes first, in this form (one of
    :data:`~pytest_mcpfaults.faults.kinds.MALFORMED_FORMS`); ``copies``: each request is sent this many
    times with its id; ``drop_status``: the client's answer to the first request is answered with
    this HTTP status and never handed to the tool (in the stateless era: its retry is refused)."""

    fault: str
    malformed: str | None = None
    copies: int = 1
    drop_status: int | None = None


@singledispatch
def outbound_effect(fault: F.Fault) -> Outbound | None:
    """What ``fault`` does to the requests the tool of the call it fired on sends the client (``None``:
    a fault of another phase). One function per server-request kind, ``@outbound_effect.register``."""
    return None


@outbound_effect.register
def _malformed(fault: F.MalformedServerRequest) -> Outbound | None:
    return Outbound(str(fault), malformed=fault.form)


@outbound_effect.register
def _duplicate(fault: F.DuplicateServerRequest) -> Outbound | None:
    return Outbound(str(fault), copies=fault.copies)


@outbound_effect.register
def _drop(fault: F.DropClientAnswer) -> Outbound | None:
    return Outbound(str(fault), drop_status=fault.status)


def check_outbound_plan(plan: Sequence[F.Fault], proxied: bool, who: str) -> None:
    """Refuse a server-request fault on a proxying sidecar, naming it: the upstream's tools send their
    own requests to the client, relayed as they come, so the fault would never act."""
    if not proxied:
        return
    for fault in plan:
        if outbound_effect(fault) is not None:
            raise ValueError(
                f"{who}: fault {str(fault)!r} acts on the requests the fake's own tools send the client; "
                "with an upstream (upstream= / upstream_command=) the tools are the upstream's and their "
                "requests are relayed as they come, so it would never act: use it without an upstream"
            )


def malformed_event(message: Mapping[str, Any], form: str, malformed_id: str) -> tuple[bytes, Any]:
    """The SSE event of a malformed copy of the request ``message`` (``form``, one of
    :data:`~pytest_mcpfaults.faults.kinds.MALFORMED_FORMS`) and the id a client could answer it with
    (``None``: none it could read)."""
    copy = {k: v for k, v in message.items() if k not in ("id", "method")}
    if form == "no_id":
        copy["method"] = message["method"]
        return sse_message(_json(copy).encode()), None
    if form == "no_method":
        copy["id"] = malformed_id
        return sse_message(_json(copy).encode()), malformed_id
    text = _json({**message, "id": malformed_id})
    return sse_message(text[: len(text) // 2].encode()), None  # bad_json: cut in half


def malformed_input(request: Mapping[str, Any], form: str) -> Any:
    """A malformed copy of the input request ``request`` (``{"method", "params"}``) for a stateless-era
    ``inputRequests`` entry: ``no_method`` its params alone, ``bad_json`` (where an object belongs)
    the request's JSON text cut in half."""
    if form == "no_method":
        return {k: v for k, v in request.items() if k != "method"}
    text = _json(request)
    return text[: len(text) // 2]


def _json(message: Mapping[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))
