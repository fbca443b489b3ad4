"""The mcp SDK's OAuth client helpers (1.x and 2.x alike): the ``TokenStorage`` the auth tests' clients
keep their tokens and client registration in, and the headless redirect that lets the SDK's default
``OAuthClientProvider`` run the authorization code grant without a browser."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx


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


class HeadlessRedirect:
    """The ``redirect_handler`` and ``callback_handler`` of the SDK's ``OAuthClientProvider``, without a
    browser: :meth:`redirect` GETs the authorization URL (the sidecar approves at once: a ``302`` to the
    redirect URI) and keeps the redirect's query, :meth:`code_and_state` hands back its code and state
    (mcp 1.x's callback; 2.x wants an ``AuthorizationCodeResult`` of :attr:`query`)."""

    def __init__(self) -> None:
        #: The last redirect's query: ``code``, ``state``, ``iss`` (or ``error``, ``error_description``).
        self.query: dict[str, str] = {}

    async def redirect(self, url: str) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            answer = await http.get(url)
        assert answer.status_code == 302, f"the authorization endpoint answered {answer.status_code}"
        self.query = dict(parse_qsl(urlsplit(answer.headers["Location"]).query))

    async def code_and_state(self) -> tuple[str, str | None]:
        return self.query.get("code", ""), self.query.get("state")
