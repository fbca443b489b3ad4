"""The transport sessions of the session era (``initialize`` to ``DELETE``)."""

from __future__ import annotations

import uuid

from pytest_mcpfaults.mcp.outbound import level_problem
from pytest_mcpfaults.mcp.surface import Surface


class Sessions(dict[str, str]):
    """Live session id -> its negotiated protocol version (a proxy notes its upstream's here too).
    Loop thread only."""

    def __init__(self, surface: Surface) -> None:
        super().__init__()
        self.surface = surface
        self.owners: dict[str, str | None] = {}
        self.log_levels = surface.log_levels
        self.ended: set[str] = set()

    def open(self, version: str, principal: str | None) -> str:
        sid = uuid.uuid4().hex
        self[sid], self.owners[sid] = version, principal
        return sid

    def live(self, session_id: str, principal: str | None) -> bool:
        """Whether ``session_id`` is live and ``principal``'s (who opened it)."""
        return session_id in self and self.owners.get(session_id) == principal

    def set_level(self, session_id: str, level: object) -> str | None:
        """``logging/setLevel``; or what is wrong with ``level``."""
        problem = level_problem(level)
        if problem is not None or not isinstance(level, str):
            return problem
        self.log_levels[session_id] = level
        return None

    def end(self, session_id: str) -> None:
        self.pop(session_id, None)
        self.owners.pop(session_id, None)
        self.log_levels.pop(session_id, None)
        self.surface.subscriptions.pop(session_id, None)
        self.ended.add(session_id)

    def end_all(self) -> None:
        self.ended.update(self)
        self.clear()
        self.owners.clear()
        self.log_levels.clear()
        self.surface.subscriptions.clear()
