"""Patience: the verdict a harness author reads when a client waited out a held request, and the
checks behind ``Sidecar.assert_client_gave_up`` / ``assert_client_released`` (and the wait the other
``assert_client_*`` checks share). A request held by a blocking fault may wait at most its patience
budget; then the sidecar aborts the connection (RST) and records a ``PatienceViolation``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.core.records import RequestRecord
from pytest_mcpfaults.core.routing import record_matches
from pytest_mcpfaults.faults.kinds import fault_kinds
from pytest_mcpfaults.options.validation import is_positive_seconds
from pytest_mcpfaults.verdicts.clients import answering, client_seen, patience_hint, server_request_hint
from pytest_mcpfaults.verdicts.stalls import StalledServer
from pytest_mcpfaults.verdicts.violation import PatienceViolation, hang_record, numbered_verdict

#: At most this many requests of one connection are quoted in a verdict.
_EXCERPT = 12
#: At most this many connections are named for a group of identical violations.
_GROUP_CONNS = 10
_T = TypeVar("_T")


class PatienceError(AssertionError):
    """A held request outlived its patience budget and the test did not say it expected that."""


class Watched(StalledServer, Protocol):
    """What the checks read of a sidecar besides its stall's: the paths a ``target`` names."""

    @property
    def health_path(self) -> str | None: ...
    @property
    def legacy_paths(self) -> tuple[str, ...]: ...


def _excerpt(sc: Watched, conn_id: int) -> list[str]:
    related = [r for r in sc.journal.requests if r.conn_id == conn_id]
    lines = []
    if len(related) > _EXCERPT:
        lines.append(f"… {len(related) - _EXCERPT} earlier request(s) on this connection")
        related = related[-_EXCERPT:]
    lines.extend(sc.journal.format(related).splitlines())
    conn = next((c for c in sc.journal.connections if c.id == conn_id), None)
    if conn is not None and conn.silent_at is not None:  # a blackhole: the connection's own event
        lines.append(
            f"conn#{conn_id} went silent at {conn.silent_at:.3f}s (no FIN, no RST): nothing more read "
            "from it or written to it"
        )
    return lines


def _peer(sc: Watched, conn_id: int) -> str:
    """By id: the journal drops its oldest closed connections."""
    return next((c.peer for c in sc.journal.connections if c.id == conn_id), "?")


def _hint(sc: Watched, v: PatienceViolation) -> str:
    if v.awaiting is not None and v.dropped is not None:  # a fault lost the harness's answer
        return (
            f"the harness answered the server's `{v.fault}`, and the answer was lost on its way (a lossy "
            "proxy): a harness cannot tell, so bound the call itself "
            f"({answering(v.request).bound}) and fail it cleanly when the bound runs out"
        )
    if v.awaiting is not None:  # the harness's own part: it never answered the tool's request
        return server_request_hint(v.request, v.fault)
    return patience_hint(v.request, mcp_path=sc.mcp_path, budget=v.budget)


def _groups(sc: Watched, violations: Sequence[PatienceViolation]) -> list[list[PatienceViolation]]:
    groups: dict[tuple[object, ...], list[PatienceViolation]] = {}
    for v in violations:
        key = (v.describe(), v.fault, v.budget, v.budget_from, v.expected, v.request.user_agent, _hint(sc, v))
        groups.setdefault(key, []).append(v)
    return list(groups.values())


def patience_verdict(sc: Watched, violations: Sequence[PatienceViolation]) -> str:
    """Identical violations (same headline, fault, budget, client and hint) are one entry, with a
    count and the connections (at most ``_GROUP_CONNS`` named)."""
    n = len(violations)
    where = sc.url if sc.state != "new" else "the sidecar"
    groups = _groups(sc, violations)
    head = f"{n} held request{'s' if n != 1 else ''} outlived the patience budget at {where}"
    if len(groups) < n:
        head += f" ({len(groups)} distinct)"
    entries = []
    for group in groups:
        v = group[0]
        cid = v.request.conn_id
        expected = " (expected by the test)" if v.expected else ""
        if len(group) == 1:
            entry = [v.describe(), f"{v.details()}{expected}"]
        else:
            source = "its fault's patience=" if v.budget_from == "fault" else "the sidecar's patience"
            cids = [g.request.conn_id for g in group[:_GROUP_CONNS]]
            named = ", ".join(f"#{c} ({_peer(sc, c)})" for c in cids)
            more = f" and {len(group) - _GROUP_CONNS} more" if len(group) > _GROUP_CONNS else ""
            entry = [
                f"{len(group)} times: {v.describe()}",
                f"held by `{v.fault}`; when the {v.budget:g} s budget ({source}) ran out the sidecar "
                f"aborted each of the {len(group)} connections (RST){expected}: {named}{more}",
            ]
        entry += [f"client seen: {client_seen(v.request)}", f"hint: {_hint(sc, v)}"]
        first = " (the first of them)" if len(group) > 1 else ""
        entry.append(f"journal of connection #{cid} ({_peer(sc, cid)}){first}:")
        entries.append(entry + ["  " + line for line in _excerpt(sc, cid)])
    return numbered_verdict(
        head,
        entries,
        "Bound the client (a timeout on that request, or abort it once you have what you need); or, if "
        "the test expects the client to wait it out, say so: @pytest.mark.mcp_expect_hang, "
        "@pytest.mark.mcp_sidecar(expect_hang=True), Sidecar(expect_hang=True) or expect_hang=True on "
        "the fault.",
    )


def violation_record(v: PatienceViolation, *, expected: bool, sidecar_url: str | None) -> dict[str, Any]:
    r = v.request
    record = hang_record(v.describe(), v.details(), v.fault, v.budget, v.waited, r, r, sidecar_url)
    return record | {
        "budget_from": v.budget_from,
        "answered": v.answered,
        "client_closed": v.client_closed,
        "expected": expected,
    }


def _closed_after(r: RequestRecord) -> float | None:
    """``None``: the client did not close it while it was held."""
    h = r.held
    if not r.client_closed or r.client_closed_at is None or h is None:
        return None
    if r.hold not in (None, "client_closed"):
        return None  # released, aborted at the budget or torn down first
    return r.client_closed_at - h.at


def _fate(r: RequestRecord, within: float, now: float) -> str:
    closed = _closed_after(r)
    if closed is not None:
        return f"the client closed it only after {closed:.2f} s, later than {within:g} s"
    h = r.held
    if h is None or h.outcome is None:
        return f"still held after {now - (h.at if h else r.started_at):.2f} s: the client kept it open"
    waited = f"{h.waited or 0.0:.2f} s"
    if r.hold == "patience":
        return (
            f"the client never closed it; the sidecar aborted it after {waited}, when the patience "
            "budget ran out"
        )
    if r.hold == "cancelled":
        return f"the client cancelled it after {waited} (and was answered then); it never closed it"
    if r.hold == "released":
        return f"the test released it after {waited} (release()/revive()); the client never closed it"
    return f"the sidecar stopped or died after {waited} while it was held; the client never closed it"


def _judged_at(r: RequestRecord, within: float) -> float:
    return (r.held.at if r.held is not None else r.started_at) + within


def judged(
    sc: Watched,
    who: str,
    target: str | None,
    within: float,
    items: Callable[[Callable[[RequestRecord], bool]], Sequence[_T]],
    known: Callable[[_T], bool],
    deadline: Callable[[_T], float],
) -> tuple[Sequence[_T], str]:
    """The scaffold of an ``assert_client_*`` check (``who``): its ``within`` and ``target`` checked
    before any wait; then a wait until the outcome of each of ``items(matches)`` is ``known`` or its
    ``deadline`` has passed (the journal's time), at most until the latest of those deadlines. Returns
    the items then (what is still pending is the check's to judge) and `` matching <target>``."""
    if not is_positive_seconds(within):
        raise ValueError(f"{who}: within must be a positive number of seconds, got {within!r}")
    matches = target_matcher(sc, target)
    journal, now = sc.journal, sc.journal.now

    def done(x: _T) -> bool:
        return known(x) or now() >= deadline(x)

    pending = [x for x in items(matches) if not done(x)]
    if pending:
        end = max(deadline(x) for x in pending)
        with contextlib.suppress(AssertionError):
            journal.wait_for(lambda: all(done(x) for x in items(matches)), end - now(), who)
    return items(matches), f" matching {target!r}" if target is not None else ""


def _blocking_kinds() -> str:
    kinds = [k for k, cls in fault_kinds().items() if cls.blocking]
    return ", ".join(kinds[:-1]) + " and " + kinds[-1] if len(kinds) > 1 else "".join(kinds)


def target_matcher(sc: Watched, target: str | None) -> Callable[[RequestRecord], bool]:
    """A bad ``target`` raises ``ValueError`` naming it, before any check waits."""
    if target is None:
        return lambda r: True
    F.check_target(target)
    return lambda r: record_matches(
        r, target, mcp_path=sc.mcp_path, health_path=sc.health_path, legacy_paths=sc.legacy_paths
    )


def check_client_closed(sc: Watched, within: float, target: str | None, who: str) -> None:
    """The check behind ``assert_client_gave_up`` and ``assert_client_released`` (``who``). The moment
    of a close is when the sidecar's loop saw the connection drop (its ``connection_lost``), so no
    settling time is added: a close the loop sees later than ``within`` after the hold began is
    "later than within"."""
    journal = sc.journal
    matching, matching_text = judged(
        sc,
        f"Sidecar.{who}",
        target,
        within,
        lambda matches: [r for r in journal.requests if matches(r)],
        lambda r: r.client_closed or r.hold is not None or (r.done and not r.held),
        lambda r: _judged_at(r, within),
    )
    held = [r for r in matching if r.held]
    if not held:
        seen = ", ".join(journal.sequence()) or "none"
        raise AssertionError(
            f"Sidecar.{who}: no held request{matching_text} was recorded (only {_blocking_kinds()} "
            f"faults hold requests); requests seen: {seen}"
        )
    bad = [r for r in held if (c := _closed_after(r)) is None or c > within]
    if not bad:
        return
    now = journal.now()
    conns = sorted({r.conn_id for r in bad})
    names = ", ".join(f"connection #{c} ({_peer(sc, c)})" for c in conns)
    if who == "assert_client_released":
        head = f"the client did not release {names} within {within:g} s of the response being held:"
    else:
        head = (
            f"the client did not give up within {within:g} s on {len(bad)} of {len(held)} "
            f"held request(s){matching_text}:"
        )
    lines = [head]
    for r in bad:
        fault = r.fault or "freeze (Sidecar.freeze())"
        lines.append(f"  `{r.label}` on connection #{r.conn_id}, held by `{fault}`: {_fate(r, within, now)}")
    lines.append("journal of " + ("that connection:" if len(conns) == 1 else "those connections:"))
    for c in conns:
        lines.extend("  " + line for line in _excerpt(sc, c))
    raise AssertionError("\n".join(lines))
