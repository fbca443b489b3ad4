"""The docs site's tables that list what the code defines, made when the site is built (a mkdocs hook,
``hooks:`` in mkdocs.yml): nothing of them is committed, so no page can go stale and the package
itself writes no Markdown.

A page marks a table with ``<!-- mcpfaults:NAME -->`` on a line of its own; :func:`fill` puts the table
there. The ``serve`` flags table of docs/cli.md is a block, ``<!-- mcpfaults:serve-flags -->`` …
``<!-- /mcpfaults:serve-flags -->``, holding the rows written by hand (a flag's meaning said better
than its ``help=``): each flag's row is the block's, else made from its option's field; a hand row for
a flag ``serve`` does not have fails the build. The tests call :func:`fill` on a page's text and read
the tables from what it gives (``tests/test_kind_tables.py``, ``tests/test_options.py``,
``tests/test_docs_api.py``); ``mkdocs build --strict`` is the real check.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_DIR = ROOT / "pytest_mcpfaults"  # fixtures are read from every module of the package

_MARK = re.compile(r"^<!-- mcpfaults:([a-z-]+) -->$", re.M)
_BLOCK = re.compile(r"^<!-- mcpfaults:serve-flags -->\n(.*?)^<!-- /mcpfaults:serve-flags -->$", re.M | re.S)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """mkdocs: the page's Markdown with its marked tables filled in."""
    return fill(markdown)


def fill(text: str) -> str:
    """``text`` (a docs page) with every marked table made from the code."""
    text = _BLOCK.sub(lambda m: serve_flags(_kept_rows(m.group(1))), text)

    def table(m: re.Match[str]) -> str:
        make = TABLES.get(m.group(1))
        if make is None:
            raise ValueError(f"unknown table marker {m.group(0)!r}; the tables: {', '.join(TABLES)}")
        return make().rstrip("\n")

    return _MARK.sub(table, text)


# -- the fault kinds (docs/faults.md), from the registry ------------------------------------------------

_BLOCKING = ("patience", "expect_hang")


def summary(cls: type) -> str:
    """The first sentence of the kind's docstring, on one line."""
    text = " ".join((cls.__doc__ or "").split("\n\n", 1)[0].split()).replace("``", "`")
    head = re.split(r"(?<=\.)\s(?=[A-Z(`])", text, maxsplit=1)[0]
    return head.replace("|", "\\|")


def _parameters(cls: type) -> str:
    from pytest_mcpfaults.faults.values import format_value

    fields = [f for f in dataclasses.fields(cls) if f.name != "when"]
    shown = []
    for f in sorted(fields, key=lambda f: f.name in _BLOCKING):  # patience, expect_hang last
        if f.name in _BLOCKING or f.default in (dataclasses.MISSING, None):
            shown.append(f"`{f.name}`")
        else:
            shown.append(f"`{f.name}={format_value(f.default)}`")
    return ", ".join(shown)


def kinds_text_form() -> str:
    """Every kind by its text-form name: its default target, its parameters and what it does."""
    from pytest_mcpfaults.faults import fault_kinds

    rows = ["| kind | default target | parameters | what it does |", "|---|---|---|---|"]
    for kind, cls in fault_kinds().items():
        rows.append(f"| `{kind}` | `{cls.default_target}` | {_parameters(cls)} | {summary(cls)} |")
    return "\n".join(rows)


def kinds_transports() -> str:
    """Every kind and the backends it applies to (``Fault.transports``, ``Fault.needs_sockets``)."""
    from pytest_mcpfaults.faults import fault_kinds

    rows = [
        "| kind | HTTP (`Sidecar`) | in-process (`mock_sidecar`) | stdio (`StdioServer`) |",
        "|---|---|---|---|",
    ]
    for kind, cls in fault_kinds().items():
        http = "http" in cls.transports
        cells = (http, http and cls.needs_sockets is None, "stdio" in cls.transports)
        rows.append(f"| `{kind}` | " + " | ".join("yes" if c else "no" for c in cells) + " |")
    return "\n".join(rows)


def _catalogue_parameters(cls: type) -> str:
    """A kind's parameters with their defaults as Python writes them, and its default target."""
    own = [f for f in dataclasses.fields(cls) if f.name not in ("when", *_BLOCKING)]
    shown = [f"`{f.name}={_python(f.default)}`" for f in own] + [f"`{n}`" for n in _BLOCKING if cls.blocking]
    text = ", ".join(shown) + ("; needs `auth=`" if cls.needs_auth else "")
    return f"{text} (`{cls.default_target}`)" if text else f"(`{cls.default_target}`)"


def _python(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def kinds_catalogue() -> str:
    """What clients see of each kind (``Fault.seen``, measured by the test modules each row names), in
    registry order, a kind's variants after its own row; the parameters cell is the class's."""
    from pytest_mcpfaults.faults.kinds import catalogue_rows

    rows = [
        "| kind | parameters (default target) | trigger examples | what httpx sees | what the mcp 2.x "
        "`Client` sees | what the mcp 1.x `ClientSession` sees | proved in |",
        "|---|---|---|---|---|---|---|",
    ]
    for cls, seen in catalogue_rows():
        params = "" if seen.variant else _catalogue_parameters(cls)
        proved = ", ".join(f"`{m}`" for m in seen.proved)
        cells = [f"`{seen.variant or cls.__name__}`", params, seen.examples, seen.httpx, seen.mcp2, seen.mcp1]
        rows.append("| " + " | ".join([*cells, proved]) + " |")
    return "\n".join(rows)


def kinds_legacy_sse() -> str:
    """How each kind acts on each HTTP transport of the socket sidecar (``Fault.legacy_sse``)."""
    from pytest_mcpfaults.faults import fault_kinds

    rows = ["| kind | Streamable HTTP | legacy SSE |", "|---|---|---|"]
    for kind, cls in fault_kinds().items():
        http = "http" in cls.transports
        rows.append(
            f"| `{kind}` | {'yes' if http else 'no'} | {cls.legacy_sse if http else 'no (stdio only)'} |"
        )
    return "\n".join(rows)


# -- the sidecar's options (docs/sidecar.md, docs/cli.md), from SidecarOptions' fields ------------------


def _option_default(f: dataclasses.Field[Any]) -> str:
    value = f.default
    if value == () or value is None:
        return "`None`" if value is None else "none"
    if isinstance(value, tuple):
        return "`" + repr(list(value)) + "`"
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value >= 1 << 10
        and value & (value - 1) == 0
    ):
        return f"`{value}` (`1 << {value.bit_length() - 1}`)"
    return f"`{value!r}`"


def options_table() -> str:
    """One row per option of ``SidecarOptions``: its default, its ``serve`` flag, whether the
    in-process backend takes it, its ``help=``."""
    from pytest_mcpfaults.options.fields import option_fields

    rows = ["| option | default | `serve` flag | in-process | meaning |", "|---|---|---|---|---|"]
    for f, opt in option_fields():
        flag = f"`{opt.flag}`" if opt.flag else ""
        if opt.none_flag is not None:
            flag += f", `{opt.none_flag[0]}`"
        inproc = "yes" if "in-process" in opt.backends else ""
        rows.append(f"| `{f.name}` | {_option_default(f)} | {flag} | {inproc} | {opt.help} |")
    return "\n".join(rows)


def _flag_rows(f: dataclasses.Field[Any], opt: Any) -> list[tuple[str, str]]:
    """The option's flags (``--flag``, then its ``none_flag``) and the rows made from the field."""
    usage = opt.flag
    if opt.choices is not None:
        usage += " {" + ",".join(opt.choices) + "}"
    elif not opt.switch:
        usage += f" {opt.metavar or opt.flag.removeprefix('--').replace('-', '_').upper()}"
    value = f.default
    if opt.switch:
        default = "off"
    elif value is None or value == ():
        default = "none"
    else:
        default = "`" + (",".join(map(str, value)) if isinstance(value, tuple) else str(value)) + "`"
    rows = [(opt.flag, f"| `{usage}` | {default} | {opt.help[:1].upper() + opt.help[1:]} |")]
    if opt.none_flag is not None:
        flag, text = opt.none_flag
        rows.append((flag, f"| `{flag}` | | {text[:1].upper() + text[1:]}. |"))
    return rows


def _kept_rows(block: str) -> dict[str, str]:
    return {
        m.group(1): line for line in block.splitlines() if (m := re.match(r"\| `(--[a-z][a-z0-9-]*)", line))
    }


def serve_flags(kept: Mapping[str, str] | None = None) -> str:
    """``serve``'s flags that set options, in ``serve --help``'s order: each flag's row from ``kept``
    (by flag: a row written by hand) or else made from its option's field."""
    from pytest_mcpfaults.options.fields import option_fields

    kept = dict(kept or {})
    rows = ["| flag | default | meaning |", "|---|---|---|"]
    for f, opt in option_fields():
        if opt.flag is not None:
            rows += [kept.pop(flag, made) for flag, made in _flag_rows(f, opt)]
    if kept:
        raise ValueError(f"docs/cli.md: a hand row for a flag `serve` does not have: {', '.join(kept)}")
    return "\n".join(rows)


# -- the fixtures (docs/api.md), from the plugin's source ------------------------------------------------

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):`(~?)([^`]+)`")


def _inline(text: str) -> str:
    """reST inline markup to Markdown: roles and ``literals`` to code spans; a bare ``<`` (outside code
    spans) escaped, so that ``<id>`` is not taken for an HTML tag."""
    text = _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    text = re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in parts)


def _markdown(doc: str) -> str:
    """A docstring to Markdown: its ``::`` literal blocks fenced, the rest through :func:`_inline`."""
    out: list[str] = []
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.rstrip().endswith("::"):
            out.append(_inline(line))
            continue
        out += [_inline(line.rstrip()[:-2].rstrip() + ":"), "", "```python"]
        while i < len(lines) and not lines[i].strip():
            i += 1
        block = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
        out += [b[indent:] for b in block]
        out += ["```", ""]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def fixtures() -> Iterator[tuple[str, str, str, str]]:
    """``(name, scope, yielded type, docstring)`` of every ``@pytest.fixture`` in the plugin's modules."""
    for path in sorted(PLUGIN_DIR.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                if ast.unparse(call.func if call else dec) not in ("pytest.fixture", "fixture"):
                    continue
                scopes = [
                    ast.literal_eval(k.value) for k in (call.keywords if call else []) if k.arg == "scope"
                ]
                ret = ast.unparse(node.returns) if node.returns else ""
                yielded = re.sub(r"^(?:Iterator|Generator)\[([\w.]+).*\]$", r"\1", ret)
                yield (
                    node.name,
                    str(scopes[0]) if scopes else "function",
                    yielded,
                    ast.get_docstring(node) or "",
                )


def _kwargs_table(cls: type) -> list[str]:
    """The keyword arguments of ``cls``'s constructor, with their defaults and the docstring's words."""
    described: dict[str, str] = {}
    args = re.search(r"^Args:\n((?:[ \t]+.*\n?|\n)+)", inspect.getdoc(cls) or "", re.M)
    current = None
    for line in args.group(1).splitlines() if args else []:
        if m := re.match(r"^ {4}(\w+)(?: \([^)]*\))?: ?(.*)$", line):
            current = m.group(1)
            described[current] = m.group(2)
        elif current and line.strip():
            described[current] += " " + line.strip()
    out = ["| keyword | default | meaning |", "|---|---|---|"]
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            default = "" if p.default is p.empty else f"`{p.default!r}`"
            meaning = _inline(described.get(p.name, "")).replace("|", "\\|")
            out.append(f"| `{p.name}` | {default} | {meaning} |")
    return out


def fixtures_section() -> str:
    """A heading per fixture: its scope, its value, its docstring and, for a fixture configured by
    keyword arguments, the table of those (the constructor's of what it yields or its calls return)."""
    import pytest_mcpfaults

    out: list[str] = []
    tabled: dict[type, str] = {}
    for name, scope, yielded, doc in fixtures():
        out += [f"### `{name}`", "", f"Scope: `{scope}`." + (f" Value: `{yielded}`." if yielded else ""), ""]
        out += [_markdown(doc), ""]
        cls = getattr(pytest_mcpfaults, yielded, None) if yielded.isidentifier() else None
        if not inspect.isclass(cls) or not re.search(r"kwargs|keyword arguments", doc):
            continue  # configured by no keyword arguments
        call = vars(cls).get("__call__")  # a factory: its calls take what its __call__ returns takes
        builds = getattr(pytest_mcpfaults, str(inspect.signature(call).return_annotation)) if call else cls
        if builds in tabled:
            out += [f"Keyword arguments: those of `{builds.__name__}`, as for `{tabled[builds]}` above.", ""]
            continue
        tabled[builds] = name
        out += [f"Keyword arguments (those of `{builds.__name__}`):", "", *_kwargs_table(builds), ""]
    return "\n".join(out)


#: Each table by its marker name.
TABLES: dict[str, Callable[[], str]] = {
    "kinds-catalogue": kinds_catalogue,
    "kinds-text-form": kinds_text_form,
    "kinds-transports": kinds_transports,
    "kinds-legacy-sse": kinds_legacy_sse,
    "options-table": options_table,
    "fixtures": fixtures_section,
}
