"""What a cassette never holds: secrets, by default-deny, and whatever the user's hook removes.

Cassettes are committed to repositories, so the default keeps only what is known not to be a secret,
and redacts by name and by shape wherever a secret could hide (docs/cassettes.md, "Redaction"). Each
becomes :data:`REDACTED`, which replay matches with any value.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

#: What a secret is replaced with (a recorded value that replay matches with any value).
REDACTED = "[REDACTED]"

Redactor = Callable[[dict[str, Any]], "dict[str, Any] | None"]
"""``record_redact``: the exchange's JSON object in, the object to write (or ``None``: drop it) out."""

#: The headers whose values a cassette keeps (lower case): the MCP transport's own and the HTTP ones
#: it needs to be read. ``Mcp-Session-Id`` is kept as its label (``session-1``), never the real id.
KEPT_HEADERS = frozenset(
    {
        "accept",
        "allow",
        "cache-control",
        "content-encoding",
        "content-type",
        "last-event-id",
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-session-id",
        "origin",
        "vary",
    }
)

# A key's words: split on anything not a letter or digit and at camelCase humps, lower-cased.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A word that is a secret's name alone, or ends in one (``accesstoken``, ``clientsecret``).
_SECRET_WORD = re.compile(
    r"(?:password|passwd|passphrase|secret|token|credentials?|cookie|authorization|apikey|accesskey"
    r"|sessionkey|privatekey|secretkey|signature)$"
    r"|^(?:auth|oauth|pwd|pass|passw|bearer|jwt|otp)$"
)
# Two words that name a secret together (``api_key``, ``private-key``, ``X-Session-Key``).
_KEY_PREFIXES = frozenset(
    {"api", "access", "session", "private", "secret", "signing", "encryption", "master", "client", "auth"}
)
#: Keys that look like a secret's name but are the protocol's own (an opaque id the client chose).
_PROTOCOL_KEYS = frozenset({"progressToken"})
#: Keys whose value is a JSON Schema: its ``properties`` are names, not values.
_SCHEMA_KEYS = frozenset({"inputSchema", "outputSchema", "requestedSchema"})
_SCHEMA_NAMES = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


@functools.lru_cache(maxsize=4096)
def secret_key(name: str, *, query: bool = False) -> bool:
    """Whether a key (a JSON key, a header, a parameter's name) says it holds a secret. ``query``:
    a ``name=value`` pair, where ``key`` and ``sig`` are secrets too (``?key=...&sig=...``)."""
    if name in _PROTOCOL_KEYS:
        return False
    words = [w.lower() for w in _WORDS.findall(name)]
    if query and any(w in ("key", "sig", "code") for w in words):
        return True
    if any(_SECRET_WORD.search(w) for w in words):
        return True
    return any(a in _KEY_PREFIXES and b == "key" for a, b in itertools.pairwise(words))


# Each credential shape, and the literals (lower case) one of which a text must hold for it to be
# looked for: a substring test is far cheaper than a regex over a long text that holds none.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (
        ("private key",),
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
    ),
    (
        ("bearer", "basic", "token", "digest"),
        re.compile(
            r"(?i:\b(?:bearer|basic|token|digest))[ \t]+"
            r"(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-]|[A-Za-z0-9._~+/=-]+[A-Z])[A-Za-z0-9._~+/=-]{8,}+"
        ),
    ),
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*+")),
    (
        ("sk-", "sk_", "pk-", "pk_", "rk-", "rk_"),
        re.compile(r"\b(?:sk|pk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}+"),
    ),
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "npm_", "xox", "aiza"),
        re.compile(
            r"\b(?:(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}+|glpat-[A-Za-z0-9_-]{16,}+"
            r"|npm_[A-Za-z0-9]{30,}+|xox[abprse]-[A-Za-z0-9-]{10,}+|AIza[0-9A-Za-z_-]{30,}+)"
        ),
    ),
    (
        ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva"),
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[0-9A-Z]{16}\b"),
    ),
)
# An AWS secret access key's shape: a run of exactly 40 characters of base64 (not followed by its
# padding), mixed case and digits.
_RUN40 = re.compile(r"[A-Za-z0-9/+]{40,}+(?!=)")


def _aws_secret(m: re.Match[str]) -> str:
    run = m.group(0)
    if len(run) != 40 or not any(c.isdigit() for c in run) or run.islower() or run.isupper():
        return run
    return REDACTED


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]++@")
# ``name=value``, ``name: value``, ``"name": "value"`` inside text: the name starts where no name
# character comes before it (so each run of name characters is tried once), and only the name and its
# separator are consumed (the value, looked ahead at, may hold pairs of its own: a JSON text's
# ``"text": "password=..."``); an unquoted value ends at a separator: linear in the text.
_PAIR = re.compile(
    r"(?<![A-Za-z0-9_.$-])(?=[A-Za-z0-9_.-]*?(?i:pass|pwd|secret|token|auth|key|cred|cookie|sig|jwt|otp|bearer|code))"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*+)[\"']?+[ \t]*+(?P<sep>[:=])[ \t]*+(?!//)"
    r"(?=(?P<value>\[REDACTED\]|\"(?:[^\"\\\n]|\\.)*+\"|'[^'\n]*+'|[^\s,;&\"'}\]<>)=:]++))"
)


def _pairs(text: str) -> str:
    out: list[str] = []
    done = 0  # text[:done] is in out
    for m in _PAIR.finditer(text):
        value = m.group("value")
        if (
            m.start() < done
            or value == REDACTED
            or not secret_key(m.group("name"), query=m.group("sep") == "=")
        ):
            continue
        quote = value[0] if value[0] in "\"'" else ""
        out += (text[done : m.end()], f"{quote}{REDACTED}{quote}")
        done = m.end() + len(value)
    return "".join(out) + text[done:] if out else text


def redact_text(value: str) -> str:
    """``value`` with every credential-shaped part replaced by :data:`REDACTED` (see the module
    docstring): linear in its length."""
    if len(value) < 8:
        return value
    low = value.lower()
    for literals, shape in _SHAPES:
        if any(literal in low for literal in literals):
            value = shape.sub(REDACTED, value)
    value = _RUN40.sub(_aws_secret, value)
    if "@" in value and "://" in value:
        value = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", value)
    if "=" in value or ":" in value:
        value = _pairs(value)
    return value


def redact_value(value: Any) -> Any:
    """``value`` (params, a result, any JSON) with secret-named keys' values and credential-shaped
    text replaced by :data:`REDACTED`, at any depth (walked without recursion)."""
    root: list[Any] = [value]
    # (its container, its key there, what it is: _PLAIN JSON, a _SCHEMA, or a schema's _NAMES map)
    stack: list[tuple[Any, Any, int]] = [(root, 0, _PLAIN)]
    while stack:
        holder, key, mode = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key] = redact_text(item)
        elif isinstance(item, list):
            items = holder[key] = list(item)
            stack.extend((items, i, mode) for i in range(len(items)))
        elif isinstance(item, dict):
            copied = holder[key] = dict(item)
            for k, v in item.items():
                if mode == _PLAIN and isinstance(k, str) and _secret_value(k, v):
                    copied[k] = REDACTED
                else:
                    stack.append((copied, k, _child(mode, k)))
    return root[0]


_PLAIN, _SCHEMA, _NAMES = 0, 1, 2


def _child(mode: int, key: object) -> int:
    if mode == _PLAIN:
        return _SCHEMA if key in _SCHEMA_KEYS else _PLAIN
    if mode == _SCHEMA:
        return _NAMES if key in _SCHEMA_NAMES else _SCHEMA
    return _SCHEMA  # a property's schema


def _secret_value(key: str, value: object) -> bool:
    return not (value is None or isinstance(value, bool) or value == "") and secret_key(key)


def redact_command(argv: Sequence[str]) -> str:
    """A command line as a cassette's header names it: the value of each secret-named option
    (``--api-key X``, ``--password=X``, ``-token X``) or variable (``API_KEY=X``) and every
    credential-shaped argument replaced by :data:`REDACTED`."""
    out: list[str] = []
    secret_next = False  # the argument after a secret-named option is its value
    for arg in argv:
        name, eq, _value = arg.lstrip("-").partition("=")
        named = bool(name) and secret_key(name, query=True)
        if secret_next:
            out.append(REDACTED)
        elif named and eq:
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(arg if named and arg.startswith("-") else redact_text(arg))
        secret_next = not secret_next and named and not eq and arg.startswith("-")
    return " ".join(out)


def redact_exchange(data: dict[str, Any], hook: Redactor | None = None) -> dict[str, Any] | None:
    """An exchange's JSON object as it may be written: the default redaction, then ``hook``'s."""
    out = dict(data)
    for name in ("request_headers", "response_headers"):  # every value but the protocol's own
        if name in out:
            out[name] = {k: v if k.lower() in KEPT_HEADERS else REDACTED for k, v in out[name].items()}
    for name in ("params", "response", "events"):
        if name in out:
            out[name] = redact_value(out[name])
    if hook is not None:
        changed = hook(out)
        if changed is not None and not isinstance(changed, dict):
            raise TypeError(f"record_redact must return the exchange (a dict) or None, got {changed!r}")
        return changed
    return out
