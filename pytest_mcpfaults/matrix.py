"""The standard fault catalogue for the fault matrix: one fault per kind (but ``error_payload``, see
:data:`NOT_IN_CATALOGUE`), aimed at teardown. Pure data.

``@pytest.mark.mcpfaults_matrix`` parametrizes a test over this catalogue (or a subset), one test ID
per fault, taken from the fault's text form::

    test_cleanup[die@tool:delete_session]
    test_cleanup[flap]
    test_cleanup[backend_gone]

Every fault that can aim at a tool call aims at the benchmark session's cleanup call
(``tool:delete_session``, :data:`TEARDOWN_TARGET`): a harness that creates a session, works, and
deletes it meets each fault exactly where real sidecars fail it, at teardown. The health kinds
(``flap``, ``absent``) aim at ``/health``, so they fire only for a harness that probes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from pytest_mcpfaults import faults as F

__all__ = [
    "NOT_IN_CATALOGUE",
    "STANDARD_CATALOGUE",
    "TEARDOWN_TARGET",
    "catalogue",
    "catalogue_kinds",
    "fault_id",
]

#: Where the catalogue aims every fault that can aim at a tool call: the session's cleanup call.
TEARDOWN_TARGET = "tool:delete_session"

_TD = F.Trigger(TEARDOWN_TARGET)

#: Kinds left out of the standard catalogue, with the reason its selection errors give. The matrix
#: stays one fault per failure mode: ``error_payload`` at the delete is the failed delete that
#: ``backend_gone`` already stages there, with another reason. Plan it yourself with
#: ``@pytest.mark.mcpfaults_matrix(faults=[...])`` or ``@pytest.mark.mcp_sidecar(faults=[...])``.
NOT_IN_CATALOGUE: dict[str, str] = {
    "error_payload": "at the delete it is the failed delete backend_gone already stages, with another reason",
}

#: One fault per kind but those of :data:`NOT_IN_CATALOGUE`, in :func:`pytest_mcpfaults.fault_kinds`
#: order.
STANDARD_CATALOGUE: tuple[F.Fault, ...] = (
    F.Die(when=_TD),  # the sidecar is reaped while the delete is in flight
    F.Freeze(when=_TD),  # the process stops answering (SIGSTOP) at the delete
    F.Hang(when=_TD),  # the delete is never answered
    F.Delay(seconds=0.2, when=_TD),  # a slow delete
    F.Status(503, when=_TD),  # the delete gets an HTTP 503
    F.Flap(),  # /health alternates 200 / 503
    F.Absent(),  # no /health route (404), as real exgentic sidecars
    F.Terminating(when=_TD),  # a terminating pod refuses the delete with 503 + Connection: close
    F.Stall(when=_TD),  # headers sent, the body never comes
    F.Drip(chunk_bytes=16, interval=0.01, when=_TD),  # the body trickles in
    F.Truncate(when=_TD),  # the body is cut short, connection closed (FIN)
    F.Reset(when=_TD),  # the connection is reset (RST) before any byte
    F.MalformedJson(when=_TD),  # the reply is not JSON
    F.EndlessSse(when=_TD),  # the reply's SSE stream never ends
    F.JsonRpcError(when=_TD),  # a JSON-RPC error instead of the result
    F.ToolError(when=_TD),  # a tool result with isError: true
    F.SessionExpired(when=_TD),  # the transport session is gone (404 Session not found)
    F.BackendGone(),  # "Error closing session <id>: Service at <url> is no longer alive"
)


def catalogue_kinds() -> tuple[str, ...]:
    """The kinds of the standard catalogue, in order (every fault kind once, but
    :data:`NOT_IN_CATALOGUE`)."""
    return tuple(f.kind for f in STANDARD_CATALOGUE)


def _check_kinds(argname: str, kinds: object) -> list[str]:
    valid = catalogue_kinds()
    if isinstance(kinds, str) or not isinstance(kinds, Iterable):
        raise ValueError(
            f"{argname} must be a list of fault kinds, got {kinds!r}; valid kinds: {', '.join(valid)}"
        )
    out = list(kinds)
    for kind in out:
        if kind in NOT_IN_CATALOGUE:
            raise ValueError(
                f"{argname}: fault kind {kind!r} is not in the standard catalogue ({NOT_IN_CATALOGUE[kind]});"
                f" give it as faults=[...] instead; catalogue kinds: {', '.join(valid)}"
            )
        if kind not in valid:
            raise ValueError(f"{argname}: unknown fault kind {kind!r}; valid kinds: {', '.join(valid)}")
    return out


def _retarget(fault: F.Fault, target: str) -> F.Fault:
    if fault.trigger.target != TEARDOWN_TARGET:
        return fault
    try:
        return dataclasses.replace(fault, when=dataclasses.replace(fault.trigger, target=target))
    except ValueError as exc:
        raise ValueError(f"target={target!r}: {exc}") from None


def catalogue(
    kinds: Sequence[str] | None = None, exclude: Sequence[str] = (), target: str | None = None
) -> tuple[F.Fault, ...]:
    """The standard catalogue, or the part of it whose kinds are in ``kinds`` and not in ``exclude``.

    ``target`` re-aims every fault that aims at :data:`TEARDOWN_TARGET` (e.g. ``'tools/call'`` or
    ``'DELETE /mcp'``). Raises ``ValueError`` naming an unknown kind (and listing the valid ones), a
    target a fault cannot take, or a selection that leaves nothing.
    """
    chosen = _check_kinds("kinds", kinds) if kinds is not None else list(catalogue_kinds())
    dropped = set(_check_kinds("exclude", exclude))
    out = [f for f in STANDARD_CATALOGUE if f.kind in chosen and f.kind not in dropped]
    if not out:
        raise ValueError(f"the fault matrix is empty (kinds={kinds!r}, exclude={list(exclude)!r})")
    if target is not None:
        F.check_target(target)
        out = [_retarget(f, target) for f in out]
    return tuple(out)


def fault_id(fault: F.Fault) -> str:
    """The test ID of a fault in the matrix: its text form (``die@tool:delete_session``, ``flap``)."""
    return str(fault)
