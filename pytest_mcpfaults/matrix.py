"""The standard fault catalogue for the fault matrix: one fault per kind (but those of
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
from collections.abc import Sequence

from pytest_mcpfaults import faults as F

__all__ = [
    "NOT_IN_CATALOGUE",
    "STANDARD_CATALOGUE",
    "TEARDOWN_TARGET",
    "catalogue",
    "catalogue_kinds",
    "not_in_catalogue",
    "standard_catalogue",
]

#: Where the catalogue aims every fault that can aim at a tool call: the session's cleanup call.
TEARDOWN_TARGET = "tool:delete_session"


def standard_catalogue() -> tuple[F.Fault, ...]:
    """One fault per registered kind (but those whose ``catalogue_params`` is ``None``), in
    :func:`pytest_mcpfaults.fault_kinds` order: a kind defined after import is included."""
    return tuple(
        cls(**cls.catalogue_params, when=None if cls.default_target == "health" else TEARDOWN_TARGET)
        for cls in F.fault_kinds().values()
        if cls.catalogue_params is not None
    )


def not_in_catalogue() -> dict[str, str]:
    """Registered kinds left out of the standard catalogue, each with the reason its selection errors
    give (a kind's ``not_in_catalogue``)."""
    return {k: cls.not_in_catalogue for k, cls in F.fault_kinds().items() if cls.catalogue_params is None}


#: Kinds left out of the standard catalogue, with the reason its selection errors give. The matrix
#: stays one fault per failure mode: ``error_payload`` at the delete is the failed delete that
#: ``backend_gone`` already stages there, with another reason. Plan it yourself with
#: ``@pytest.mark.mcpfaults_matrix(faults=[...])`` or ``@pytest.mark.mcp_sidecar(faults=[...])``.
#: The built-in kinds' (see :func:`not_in_catalogue`).
NOT_IN_CATALOGUE: dict[str, str] = not_in_catalogue()

#: One fault per built-in kind but those of :data:`NOT_IN_CATALOGUE`, in
#: :func:`pytest_mcpfaults.fault_kinds` order (see :func:`standard_catalogue`). Each kind's cell comes
#: from its class: ``Die(when=tool:delete_session)`` (the sidecar is reaped while the delete is in
#: flight), ``Delay(seconds=0.2)`` (a slow delete), ``Drip(chunk_bytes=16, interval=0.01)`` (the body
#: trickles in), ``Flap()`` and ``Absent()`` on ``/health``, ``BackendGone()`` ("Error closing
#: session <id>: Service at <url> is no longer alive"), and so on.
STANDARD_CATALOGUE: tuple[F.Fault, ...] = standard_catalogue()


def catalogue_kinds() -> tuple[str, ...]:
    """The kinds of the standard catalogue, in order (every registered kind once, but those of
    :func:`not_in_catalogue`)."""
    return tuple(f.kind for f in standard_catalogue())


def _check_kinds(argname: str, kinds: object) -> list[str]:
    return F.check_kind_names(argname, kinds, catalogue_kinds(), left_out=not_in_catalogue())


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
    out = [f for f in standard_catalogue() if f.kind in chosen and f.kind not in dropped]
    if not out:
        raise ValueError(f"the fault matrix is empty (kinds={kinds!r}, exclude={list(exclude)!r})")
    if target is not None:
        F.check_target(target)
        out = [_retarget(f, target) for f in out]
    return tuple(out)
