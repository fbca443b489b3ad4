"""Parameter values in the faults' text form: ``str(fault)`` writes them with :func:`format_value`,
the parser reads them back with :func:`parse_value` (``format_value`` relies on it to decide whether a
string can stand unquoted).
"""

from __future__ import annotations

import ast
import json


def format_value(value: object) -> str:
    """The text form of one parameter value: ``none``, ``true``/``false``, a number, a plain word, or a
    double-quoted JSON string where the bare word would read back as something else."""
    if isinstance(value, str):
        plain = value and not any(c in value for c in ",()[]@=;'\" \\") and parse_value(value) == value
        return value if plain else json.dumps(value, ensure_ascii=False)  # double-quoted, escaped
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def parse_value(text: str) -> object:
    """One parameter value of the text form: ``true``/``false``, ``none``/``null``, a quoted string
    (``"..."`` with JSON escapes, ``'...'`` a Python literal), an int, a float, or else the bare text."""
    text = text.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:  # "...": JSON string escapes (what str(fault) writes); '...': a Python literal
            value = json.loads(text) if text[0] == '"' else ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(f"badly quoted string {text}") from None
        return str(value)
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text
