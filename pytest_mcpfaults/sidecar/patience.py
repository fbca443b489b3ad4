"""Patience: the verdict a harness author reads when a client waited out a held request, and the
positive-case checks behind ``Sidecar.assert_client_gave_up`` / ``assert_client_released``.

A request held by a blocking fault (freeze, hang, stall, endless SSE) may wait at most its patience
budget; then the sidecar aborts the connection (RST: the client unblocks at once, as if the peer had
died) and records a :class:`~pytest_mcpfaults.sidecar.journal.PatienceViolation`. This module turns
violations into text (:func:`patience_verdict`) and report records (:func:`violation_record`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_mcpfaults.sidecar.journal import PatienceViolation, RequestRecord

if TYPE_CHECKING:
    from pytest_mcpfaults.sidecar.waits import SidecarWaits

__all__ = ["PatienceError", "check_client_closed", "patience_verdict", "violation_record"]

#: How long past ``within`` the assertions wait for the sidecar to learn of a client's hang-up.
_SETTLE = 1.0
#: At most this many requests of one connection are quoted in a verdict.
_EXCERPT = 12
_EXPECT_HOW = (
    "@pytest.mark.mcp_expect_hang, @pytest.mark.mcp_sidecar(expect_hang=True), "
    "Sidecar(expect_hang=True) or expect_hang=True on the fault"
)


class PatienceError(AssertionError):
    """A held request outlived its patience budget and the test did not say it expected that."""


def _hint(sc: SidecarWaits, r: RequestRecord) -> str:
    if r.path == sc.mcp_path and r.method == "DELETE":
        return (
            "mcp 2.x sends this DELETE when the client closes, through its transport's httpx2 client "
            "(read timeout 300 s by default; Client(read_timeout_seconds=...) does not bound it): pass "
            "streamable_http_client(url, http_client=<an httpx2.AsyncClient with a short read timeout>) "
            "as the Client's server"
        )
    if r.path == sc.mcp_path:
        return (
            "mcp 2.x waits for this reply up to its httpx2 read timeout (300 s by default): bound it "
            "with Client(read_timeout_seconds=...) or call_tool(..., read_timeout_seconds=...)"
        )
    return "httpx: timeout=None waits forever (its default is 5 s); give the request a timeout"


def _excerpt(sc: SidecarWaits, conn_id: int) -> list[str]:
    related = [r for r in sc.journal.requests if r.conn_id == conn_id]
    lines = []
    if len(related) > _EXCERPT:
        lines.append(f"… {len(related) - _EXCERPT} earlier request(s) on this connection")
        related = related[-_EXCERPT:]
    lines.extend(sc.journal.format(related).splitlines())
    return lines


def _peer(sc: SidecarWaits, conn_id: int) -> str:
    conns = sc.journal.connections
    return conns[conn_id].peer if 0 <= conn_id < len(conns) else "?"


def patience_verdict(sc: SidecarWaits, violations: Sequence[PatienceViolation]) -> str:
    """The failure message for patience violations of one sidecar: per violation the headline
    (:meth:`PatienceViolation.describe`), which fault and budget, a hint for common clients, and the
    journal excerpt of that connection; then how to fix the client or declare the hang expected."""
    n = len(violations)
    where = sc.url if sc.state != "new" else "the sidecar"
    lines = [f"{n} held request{'s' if n != 1 else ''} outlived the patience budget at {where}:"]
    for i, v in enumerate(violations, 1):
        cid = v.request.conn_id
        lines.append("")
        lines.append(f"{i}. {v.describe()}")
        lines.append(f"   {v.details()}" + (" (expected by the test)" if v.expected else ""))
        lines.append(f"   hint: {_hint(sc, v.request)}")
        lines.append(f"   journal of connection #{cid} ({_peer(sc, cid)}):")
        lines.extend("     " + line for line in _excerpt(sc, cid))
    lines.append("")
    lines.append(
        "Bound the client (a timeout on that request, or abort it once you have what you need); or, "
        f"if the test expects the client to wait it out, say so: {_EXPECT_HOW}."
    )
    return "\n".join(lines)


def violation_record(v: PatienceViolation, *, expected: bool, sidecar_url: str | None) -> dict[str, Any]:
    """A JSON-ready dict of one violation for the per-test record and the CI report."""
    r = v.request
    return {
        "message": v.describe(),
        "details": v.details(),
        "fault": v.fault,
        "budget": v.budget,
        "budget_from": v.budget_from,
        "waited": round(v.waited, 3),
        "request": r.label,
        "method": r.method,
        "path": r.path,
        "mcp_method": r.mcp_method,
        "tool": r.tool,
        "era": r.era,
        "connection": r.conn_id,
        "client_closed": v.client_closed,
        "sidecar": sidecar_url,
        "expected": expected,
    }


def _fate(r: RequestRecord, within: float, now: float) -> str:
    if r.hold is None:
        return f"still held after {now - r.started_at:.2f} s: the client kept it open"
    waited = f"{r.waited or 0.0:.2f} s"
    if r.hold == "client_closed":
        return f"the client closed it only after {waited}, later than {within:g} s"
    if r.hold == "patience":
        return (
            f"the client never closed it; the sidecar aborted it after {waited}, when the patience "
            "budget ran out"
        )
    if r.hold == "released":
        return f"the test released it after {waited} (release()/revive()); the client never closed it"
    return f"the sidecar stopped or died after {waited} while it was held; the client never closed it"


def check_client_closed(sc: SidecarWaits, within: float, target: str | None, who: str) -> None:
    """The check behind ``assert_client_gave_up`` and ``assert_client_released`` (``who``): every
    held request matching ``target`` ended with the client closing its connection at most
    ``within`` seconds after the hold began. Raises ``AssertionError`` naming each one that did not."""
    if isinstance(within, bool) or not isinstance(within, (int, float)) or not within > 0:
        raise ValueError(f"Sidecar.{who}: within must be a positive number of seconds, got {within!r}")
    sc._held(target)  # validates target before waiting

    from pytest_mcpfaults.sidecar.routing import record_matches

    def settled() -> bool:  # every matching request has ended, or been held longer than `within`
        now = sc.journal.now()
        return all(
            r.done or r.hold is not None or now - r.started_at > within + _SETTLE
            for r in sc.journal.requests
            if target is None or record_matches(r, target, mcp_path=sc.mcp_path, health_path=sc.health_path)
        )

    # the loop thread learns of a hang-up a moment after the client's call returned; still held
    # after that: reported below
    with contextlib.suppress(AssertionError):
        sc.journal.wait_for(settled, within + 2 * _SETTLE, "held requests to end")
    held = sc._held(target)
    matching = f" matching {target!r}" if target is not None else ""
    if not held:
        seen = ", ".join(sc.journal.sequence()) or "none"
        raise AssertionError(
            f"Sidecar.{who}: no held request{matching} was recorded (only freeze, hang, stall and "
            f"endless_sse faults hold requests); requests seen: {seen}"
        )
    bad = [r for r in held if not (r.hold == "client_closed" and r.waited is not None and r.waited <= within)]
    if not bad:
        return
    now = sc.journal.now()
    conns = sorted({r.conn_id for r in bad})
    names = ", ".join(f"connection #{c} ({_peer(sc, c)})" for c in conns)
    if who == "assert_client_released":
        head = f"the client did not release {names} within {within:g} s of the response being held:"
    else:
        head = (
            f"the client did not give up within {within:g} s on {len(bad)} of {len(held)} "
            f"held request(s){matching}:"
        )
    lines = [head]
    for r in bad:
        fault = r.fault or "freeze (Sidecar.freeze())"
        lines.append(f"  `{r.label}` on connection #{r.conn_id}, held by `{fault}`: {_fate(r, within, now)}")
    lines.append("journal of " + ("that connection:" if len(conns) == 1 else "those connections:"))
    for c in conns:
        lines.extend("  " + line for line in _excerpt(sc, c))
    raise AssertionError("\n".join(lines))
