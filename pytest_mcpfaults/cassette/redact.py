"""What a cassette never holds: secrets, by default, and whatever the user's redaction hook removes.

By default (:func:`redact_exchange`): the values of the ``Authorization``, ``Proxy-Authorization``,
``Cookie`` and ``Set-Cookie`` headers and of any header whose name says it holds a secret (``token``,
``secret``, ``password``, ``api-key``, ``auth``); in the params and the answer, the value of any key
whose name says so (``token``, ``secret``, ``password``, ``api_key``, ``authorization``, ``cookie``,
``credential``, ``private_key``) when it is text, and any text that looks like a credential
(``Bearer ...``, a JWT, ``sk-...``, ``ghp_...``, ``xoxb-...``, ``AKIA...``), wherever it appears,
inside a tool's text result too. Each is replaced by :data:`REDACTED`, which replay matches with any value.

``record_redact``: a callable given each exchange as it is about to be written (its JSON object, after
the default redaction); it returns the object to write (changed as it likes) or ``None`` to leave the
exchange out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["REDACTED", "Redactor", "redact_exchange", "redact_headers", "redact_value"]

#: What a secret is replaced with (a recorded value that replay matches with any value).
REDACTED = "[REDACTED]"

Redactor = Callable[[dict[str, Any]], "dict[str, Any] | None"]
"""``record_redact``: the exchange's JSON object in, the object to write (or ``None``: drop it) out."""

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_SECRET_HEADER_NAME = re.compile(r"token|secret|passw|api-?key|auth", re.I)
_SECRET_KEY = re.compile(
    r"token|secret|passw|api[_-]?key|authori[sz]ation|cookie|credential|private[_-]?key", re.I
)
_CREDENTIAL = re.compile(
    r"\b(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"
    r"|\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
)


def _text(value: str) -> str:
    return _CREDENTIAL.sub(REDACTED, value) if value else value


def redact_value(value: Any) -> Any:
    """``value`` (params, a result, any JSON) with secret-named keys' values and credential-looking
    text replaced by :data:`REDACTED`."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {k: REDACTED if _secret(k, v) else redact_value(v) for k, v in value.items()}
    return value


def _secret(key: object, value: object) -> bool:
    return isinstance(value, str) and bool(value) and isinstance(key, str) and bool(_SECRET_KEY.search(key))


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Headers with every secret's value replaced by :data:`REDACTED`."""
    out = {}
    for name, value in headers.items():
        lower = name.lower()
        named = bool(_SECRET_HEADER_NAME.search(lower)) and not lower.startswith("mcp-")
        secret = lower in _SECRET_HEADERS or named
        out[name] = REDACTED if secret else _text(value)
    return out


def redact_exchange(data: dict[str, Any], hook: Redactor | None = None) -> dict[str, Any] | None:
    """An exchange's JSON object as it may be written: the default redaction, then ``hook``'s."""
    out = dict(data)
    for name in ("request_headers", "response_headers"):
        if name in out:
            out[name] = redact_headers(out[name])
    for name in ("params", "response", "events"):
        if name in out:
            out[name] = redact_value(out[name])
    if hook is not None:
        changed = hook(out)
        if changed is not None and not isinstance(changed, dict):
            raise TypeError(f"record_redact must return the exchange (a dict) or None, got {changed!r}")
        return changed
    return out
