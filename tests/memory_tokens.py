"""The mcp SDK's OAuth ``TokenStorage`` (1.x and 2.x alike), in memory: what the auth tests' clients keep
their tokens and client registration in."""

from __future__ import annotations

from typing import Any


class MemoryTokens:
    """The mcp SDK's ``TokenStorage``, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, info: Any) -> None:
        self.client = info
