"""``subscriptions/listen`` (2026-07-28, SEP-2575): the stateless era's change notices, on the answer
stream of the request that asks for them (a filter, ``params.notifications``). Pure: no I/O.

The stream's first event acknowledges the filter honored, then come the notices it selects, each
stamped with the listen request's id, and, when the server ends the stream gracefully, the request's
result. A stream that ends without it was dropped: the client re-listens (no ``Last-Event-ID``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LISTEN_METHOD = "subscriptions/listen"
#: The ``_meta`` key every frame of a listen stream carries: the listen request's JSON-RPC id.
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: The filter's flag that selects each ``list_changed`` notice.
LISTEN_FLAGS: Mapping[str, str] = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}
UPDATED = "notifications/resources/updated"
#: The filter's field naming the URIs whose ``notifications/resources/updated`` the client wants.
URIS = "resourceSubscriptions"


@dataclass(frozen=True)
class Listen:
    """One ``subscriptions/listen`` request: its JSON-RPC ``id`` and the filter the sidecar honors."""

    id: Any
    honored: Mapping[str, Any]

    def wants(self, method: str, params: Mapping[str, Any] | None) -> bool:
        flag = LISTEN_FLAGS.get(method)
        if flag is not None:
            return self.honored.get(flag) is True
        uri = (params or {}).get("uri")
        return method == UPDATED and uri in self.honored.get(URIS, ())

    def stamped(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": method, "params": {**(params or {}), "_meta": self._meta()}}

    def ack(self) -> dict[str, Any]:
        return self.stamped("notifications/subscriptions/acknowledged", {"notifications": dict(self.honored)})

    def closing(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.id, "result": {"resultType": "complete", "_meta": self._meta()}}

    def _meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID: self.id}


def listen_request(rpc_id: Any, params: Mapping[str, Any]) -> Listen | str:
    """The listen a request asks for, or what is wrong with its ``params``. Fields the sidecar does not
    serve are left out of the filter honored, as the spec asks; so is a flag that is false."""
    wanted = params.get("notifications")
    if not isinstance(wanted, Mapping):
        return f"subscriptions/listen needs notifications (an object), got {wanted!r}"
    honored: dict[str, Any] = {}
    for flag in LISTEN_FLAGS.values():
        value = wanted.get(flag)
        if value is not None and not isinstance(value, bool):
            return f"notifications.{flag} must be a boolean, got {value!r}"
        if value:
            honored[flag] = True
    uris = wanted.get(URIS)
    if uris is not None and (not isinstance(uris, list) or not all(isinstance(u, str) for u in uris)):
        return f"notifications.{URIS} must be a list of URI strings, got {uris!r}"
    if uris:
        honored[URIS] = list(dict.fromkeys(uris))
    return Listen(rpc_id, honored)
