"""The patience verdict: the message a harness author reads when a client waited out a held request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_mcpfaults.sidecar.journal import PatienceViolation

if TYPE_CHECKING:
    from pytest_mcpfaults.sidecar.server import Sidecar

__all__ = ["patience_verdict"]


def patience_verdict(sc: Sidecar, violations: Sequence[PatienceViolation]) -> str:
    """The failure message for patience violations, with the journal excerpt of each connection."""
    lines = []
    for v in violations:
        lines.append(v.describe())
        lines.append("  journal of that connection:")
        related = [r for r in sc.journal.requests if r.conn_id == v.request.conn_id]
        lines.extend("    " + line for line in sc.journal.format(related).splitlines())
    lines.append(
        "If the test expects the client to wait it out, say so: Sidecar(expect_hang=True), "
        "@pytest.mark.mcp_sidecar(expect_hang=True), or expect_hang=True on the fault."
    )
    return "\n".join(lines)
