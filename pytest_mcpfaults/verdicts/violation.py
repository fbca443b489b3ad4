"""The patience verdict's wording: a held request that outlived its budget
(:class:`PatienceViolation`), told as a harness author names it. The journal stores the violations;
this module words them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_mcpfaults.core.records import BudgetSource, RequestRecord
from pytest_mcpfaults.faults.kinds import fault_kinds

Answered = Literal["none", "partial", "complete"]
"""What the client had received of a held request (:func:`answered`)."""


@dataclass(frozen=True)
class PatienceViolation:
    """A held request outlived its patience budget; the sidecar aborted the connection (RST).

    ``request`` is the record as it was when the budget ran out (``hold='patience'``, ``held.waited``
    set); ``fault`` the text form of the fault that held it; ``budget`` the budget in seconds and
    ``budget_from`` where it came from (``'fault'``: the fault's ``patience=``; ``'sidecar'``: the
    sidecar's, set by ``Sidecar(patience=)``, the marker or the ini option); ``expected`` whether the
    test said it expects the hang (then it is reported but does not fail the test).

    ``awaiting``: no fault held it, the tool did: it awaited the client's answer to a request of its own
    (the server's ``elicitation/create`` ...), worded for the headline, e.g. ``the server's
    `elicitation/create` (sent at 0.2 s during tools/call ask_user)``; ``fault`` is then that method.
    """

    request: RequestRecord
    fault: str
    budget: float
    expected: bool
    budget_from: BudgetSource = "sidecar"
    awaiting: str | None = None
    #: How a fault (``drop_client_answer``) lost the client's answer to ``awaiting`` (``None``: no answer
    #: came), e.g. ``it came at 0.3 s and `drop_client_answer` answered its POST 202 and never handed
    #: it to the tool``.
    dropped: str | None = None

    @property
    def waited(self) -> float:
        """Seconds the client waited on the held request before the sidecar aborted it."""
        held = self.request.held
        return held.waited if held is not None and held.waited is not None else self.budget

    @property
    def client_closed(self) -> bool:
        """Whether the client closed the held request itself before the abort (for a violation: no)."""
        return self.request.client_closed

    @property
    def answered(self) -> Answered:
        """What the client had received when the budget ran out (:func:`answered`)."""
        return answered(self.request)

    @property
    def kind(self) -> str:
        """The kind of the fault that held the request (``'freeze'`` for ``Sidecar.freeze()``)."""
        return self.request.fault_kind or self.fault.split("(", 1)[0].split("@", 1)[0]

    def what(self) -> str:
        """The held request as a harness author names it, e.g. ``a frozen `DELETE /mcp` (session era)``."""
        r = self.request
        req = f"`{r.method} {r.path}`"
        if r.mcp_method:
            req += f" ({r.mcp_method}{' ' + r.tool if r.tool else ''})"
        if r.era:
            req += f" ({r.era} era)"
        cls = fault_kinds().get(self.kind)
        if cls is not None and cls.held_wording is not None:
            return cls.held_wording.format(request=req)
        return f"a held {req}" if self.answered == "none" else f"the response to {req}"

    def describe(self) -> str:
        """The headline, from what the sidecar observed: what the client had received when the budget
        ran out (nothing: a request held and never answered; the status and part of the body: a
        stalled response; all of it: a connection kept open), and that it never closed the connection
        itself."""
        r, b = self.request, f"{self.budget:g} s"
        if self.awaiting is not None and r.hold != "patience":  # a stateless-era input round
            return (
                f"the client never answered {self.awaiting}: it did not retry the call with the answer "
                f"within {b} (the whole budget), and the tool is still waiting for it"
            )
        if self.awaiting is not None and self.dropped is not None:
            return (
                f"the sidecar dropped the client's answer to {self.awaiting}: {self.dropped}; the tool "
                f"call waited {b} (the whole budget) with its answer stream open ({r.bytes_sent} bytes "
                "sent); without the budget it would have waited for ever"
            )
        if self.awaiting is not None:
            return (
                f"the client never answered {self.awaiting}: it waited {b} (the whole budget) with the "
                f"tool call's answer stream open ({r.bytes_sent} bytes sent) and never closed it; without "
                "the budget the tool call would have waited for ever"
            )
        answered, what = self.answered, self.what()
        if answered == "complete":
            return (
                f"the client kept the connection open for {b} (the whole budget) after {what} was sent "
                f"in full (status {r.status}, all {r.bytes_sent} bytes of its Content-Length), and never "
                "released it (a connection leak, if it was done with it)"
            )
        cls = fault_kinds().get(self.kind)
        if cls is not None and cls.held_headline is not None:
            idle = f"{r.idle_before:.2f} s" if r.idle_before is not None else "for a time unknown"
            head = cls.held_headline.format(what=what, bytes_sent=r.bytes_sent, idle=idle)
        elif answered == "none":
            head = f"{what}, never answered (no status line was sent), and never closed the connection"
        else:
            head = (
                f"{what}, which stalled after the status line ({r.status}) and {r.bytes_sent} bytes of "
                "body, and never released the connection"
            )
        return (
            f"the client waited {b} (the whole budget) on {head}; without the budget it would have waited "
            f"as long as its own read timeout allows (if it has one, it is longer than {b})"
        )

    def details(self) -> str:
        """Which fault held it, which budget ran out, and what happened to the connection."""
        source = "its fault's patience=" if self.budget_from == "fault" else "the sidecar's patience"
        budget = f"the {self.budget:g} s budget ({source})"
        if self.awaiting is not None and self.request.hold != "patience":
            return (
                f"no fault: the tool awaited the client's answer to its `{self.fault}`, which the call's "
                f"input_required result asked for; {budget} ran out with nothing held (the client's retry "
                "never came), so nothing was aborted"
            )
        aborted = f"when {budget} ran out the sidecar aborted connection #{self.request.conn_id} (RST)"
        if self.awaiting is not None and self.dropped is not None:
            return f"`{self.request.fault}` lost the client's answer to the tool's `{self.fault}`; {aborted}"
        closed = "the client had closed it itself" if self.client_closed else "the client never closed it"
        if self.awaiting is not None:
            return (
                f"no fault: the tool awaited the client's answer to its `{self.fault}`; {aborted}; {closed}"
            )
        return f"held by `{self.fault}`; {aborted}; {closed}"


def answered(r: RequestRecord) -> Answered:
    """What the client has received of ``r``: ``'none'`` (no status line sent), ``'partial'`` (status
    and part of the body), ``'complete'`` (the whole announced ``Content-Length`` body)."""
    if r.status is None:
        return "none"
    if r.body_bytes is not None and r.bytes_sent >= r.body_bytes:
        return "complete"
    return "partial"


def hang_record(
    message: str,
    details: str,
    fault: str | None,
    budget: float,
    waited: float,
    r: RequestRecord | None,
    client: RequestRecord | None,
    sidecar: str | None,
) -> dict[str, Any]:
    """A JSON-ready dict of one hang (a patience violation, a stall, an idle test) for the per-test
    record and the CI report, as a stall has it: its other kinds replace fields (``|``), in place."""
    return {
        "message": message,
        "details": details,
        "fault": fault,
        "budget": budget,
        "budget_from": "sidecar",
        "waited": round(waited, 3),
        "request": r.label if r else None,
        **{k: None if r is None else getattr(r, k) for k in ("method", "path", "mcp_method", "tool", "era")},
        "answered": None,
        "user_agent": client.user_agent if client else None,
        "protocol_version": client.protocol_version if client else None,
        "connection": r.conn_id if r else None,
        "client_closed": None,
        "sidecar": sidecar,
        "expected": False,
    }


def numbered_verdict(head: str, entries: Iterable[Sequence[str]], advice: str) -> str:
    """The one layout of the HTTP and stdio patience verdicts: each entry's first line is numbered."""
    lines = [head + ":"]
    for i, (first, *rest) in enumerate(entries, 1):
        lines += ["", f"{i}. {first}", *(f"   {line}" for line in rest)]
    return "\n".join([*lines, "", advice])
