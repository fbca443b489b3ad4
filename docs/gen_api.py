"""Generate docs/api.md, the API reference, as plain Markdown from the code.

Signatures and docstrings of every name in ``pytest_mcpfaults.__all__`` and in the ``__all__`` of each
public module below, the pytest fixtures (read from the plugin's source) with the keyword arguments they
take, all derived: nothing here lists a public name. The page reads the same in a repository browser
and on the docs site. ``tests/test_docs_api.py`` fails when the committed page is stale.

    python docs/gen_api.py          # rewrite docs/api.md
    python docs/gen_api.py --check  # exit 1 if docs/api.md is stale
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"

# The modules a user imports by path (each documents its own ``__all__``); names already shown under an
# earlier module are not repeated. Optional dependencies: strategies and stateful need Hypothesis,
# inprocess needs respx.
MODULES = [
    ("pytest_mcpfaults", "Everything exported from `pytest_mcpfaults` (its `__all__`)."),
    ("pytest_mcpfaults.faults", "The rest of `pytest_mcpfaults.faults`: triggers, the registry, text forms."),
    ("pytest_mcpfaults.spans", "The rest of `pytest_mcpfaults.spans`: span queries and patterns."),
    ("pytest_mcpfaults.invariants", "The rest of `pytest_mcpfaults.invariants`."),
    ("pytest_mcpfaults.strategies", "Hypothesis strategies (needs `hypothesis`; imported only when you do)."),
    ("pytest_mcpfaults.stateful", "The session-lifecycle state machine (needs `hypothesis`)."),
    ("pytest_mcpfaults.inprocess", "The in-process backend (needs `respx`; imported only when you do)."),
    ("pytest_mcpfaults.report", "The CI report (`--mcpfaults-report`) and its baseline."),
    ("pytest_mcpfaults.matrix", "The fault matrix (`@pytest.mark.mcpfaults_matrix`) and its catalogue."),
    ("pytest_mcpfaults.explore", "Explore's campaign planning (`--mcpfaults-explore`; see explore.md)."),
]
PLUGIN_DIR = ROOT / "pytest_mcpfaults" / "_pytest"

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes|Example|Examples|Note):\s*$"
)
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][\w.]*(?:, \*{0,2}[A-Za-z_][\w.]*)*)(?: \(([^)]*)\))?: ?(.*)$")
_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):`([^`]+)`")


# -- docstrings (Google style, reST inline markup) to Markdown -------------------------------------------


def _role(match: re.Match[str]) -> str:
    target = match.group(1)
    if "<" in target and target.endswith(">"):  # :class:`text <target>`
        return f"`{target.split('<', 1)[0].strip()}`"
    if target.startswith("~"):
        return f"`{target[1:].rsplit('.', 1)[-1]}`"
    return f"`{target}`"


def _inline(text: str) -> str:
    """reST inline markup to Markdown: roles and ``literals`` to code spans; a bare ``<`` (outside code
    spans) escaped, so that ``<id>`` is not taken for an HTML tag."""
    text = _ROLE.sub(_role, text)
    text = re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in parts)


def _literal_blocks(lines: list[str]) -> Iterator[str]:
    """reST ``::`` literal blocks to fenced code; everything else through :func:`_inline`."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            head = line.rstrip()[:-2].rstrip()
            if head:
                yield _inline(head + ":")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
            yield ""
            yield "```python"
            yield from (b[indent:] for b in block)
            yield "```"
            yield ""
            continue
        yield _inline(line)
        i += 1


def _sections(lines: list[str]) -> Iterator[str]:
    """Google-style sections (``Args:`` and its indented entries) to a bold heading and a list."""
    i = 0
    while i < len(lines):
        m = _SECTION.match(lines[i])
        if not m:
            yield lines[i]
            i += 1
            continue
        yield ""
        yield f"**{m.group(1)}:**"
        yield ""
        i += 1
        entries: list[list[str]] = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
            line = lines[i]
            i += 1
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            if depth <= 4 or not entries:
                entries.append([line.strip()])
            else:
                entries[-1].append(line.strip())
        for entry in entries:
            first, rest = entry[0], " ".join(entry[1:])
            em = _ENTRY.match(first)
            if em and m.group(1) not in ("Example", "Examples", "Note"):
                kind = f" ({em.group(2)})" if em.group(2) else ""
                yield f"- `{em.group(1)}`{kind}: {' '.join(filter(None, [em.group(3), rest]))}".rstrip()
            else:
                yield f"- {' '.join(filter(None, [first, rest]))}"
        yield ""


def docstring(obj: Any) -> str:
    doc = inspect.getdoc(obj) if not isinstance(obj, str) else inspect.cleandoc(obj)
    if not doc:
        return ""
    lines = list(_sections(doc.splitlines()))
    out = "\n".join(_literal_blocks(lines))
    return re.sub(r"\n{3,}", "\n\n", out).strip()


# -- signatures ------------------------------------------------------------------------------------------


def _stable_repr(value: Any) -> str:
    """``repr``, with set elements sorted (a set's order changes with the hash seed of each run)."""
    if isinstance(value, (set, frozenset)):
        inner = ", ".join(sorted(_stable_repr(v) for v in value))
        if isinstance(value, frozenset):
            return f"frozenset({{{inner}}})" if value else "frozenset()"
        return f"{{{inner}}}" if value else "set()"
    if isinstance(value, tuple) and type(value) is tuple:
        inner = ", ".join(_stable_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list) and type(value) is list:
        return "[" + ", ".join(_stable_repr(v) for v in value) + "]"
    if isinstance(value, dict) and type(value) is dict:
        return "{" + ", ".join(f"{_stable_repr(k)}: {_stable_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _default(value: Any) -> str:
    text = _stable_repr(value)
    if " at 0x" in text or len(text) > 80:
        return "…"
    return text


def _ann(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def signature(obj: Callable[..., Any], *, skip_self: bool = False) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(…)"
    params = []
    star_done = False
    for p in sig.parameters.values():
        if skip_self and p.name in ("self", "cls") and not params:
            continue
        if p.name.startswith("_"):  # a dataclass's private field
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            params.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        text = prefix + p.name
        if p.annotation is not p.empty:
            text += f": {_ann(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {_default(p.default)}"
        params.append(text)
        if p.kind is p.POSITIONAL_ONLY and (
            list(sig.parameters.values()).index(p) + 1 == len(sig.parameters)
            or list(sig.parameters.values())[list(sig.parameters.values()).index(p) + 1].kind
            is not p.POSITIONAL_ONLY
        ):
            params.append("/")
    ret = ""
    if sig.return_annotation is not sig.empty:
        ann = sig.return_annotation
        ret = f" -> {ann if isinstance(ann, str) else inspect.formatannotation(ann)}"
    flat = f"({', '.join(params)}){ret}"
    if len(flat) <= 90:
        return flat
    return "(\n" + "".join(f"    {p},\n" for p in params) + f"){ret}"  # one parameter a line


# -- one name --------------------------------------------------------------------------------------------


def _members(cls: type, documented: set[type]) -> Iterator[tuple[str, Any]]:
    """Public members defined on ``cls`` or on its undocumented bases from this package (a documented
    base's members are shown under it), in source order."""
    seen: set[str] = set()
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("pytest_mcpfaults") or (klass is not cls and klass in documented):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen or name in fields:
                continue
            seen.add(name)
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property) or inspect.isfunction(value):
                yield name, value


def _block(title: str, sig: str, doc: str) -> list[str]:
    out = [f"#### `{title}`", ""]
    if sig:
        out += ["```python", sig, "```", ""]
    if doc:
        out += [doc, ""]
    return out


def document(qualname: str, obj: Any, documented: set[type]) -> list[str]:
    name = qualname.rsplit(".", 1)[-1]
    if inspect.isclass(obj):
        bases = [b for b in obj.__bases__ if b is not object]
        head = f"class {name}" + (f"({', '.join(b.__name__ for b in bases)})" if bases else "")
        init = signature(obj).removesuffix(" -> None")
        out = [f"### `{qualname}`", "", "```python", head, name + init, "```", ""]
        if doc := docstring(obj):
            out += [doc, ""]
        inherited = [b.__name__ for b in obj.__mro__[1:] if b in documented]
        if inherited:
            out += [f"Also has the members of {', '.join(f'`{b}`' for b in inherited)}.", ""]
        for mname, member in _members(obj, documented):
            if isinstance(member, property):
                kind = "property"
                sig = f"{name}.{mname}"
                ann = (
                    inspect.signature(member.fget).return_annotation
                    if member.fget
                    else inspect.Signature.empty
                )
                if ann is not inspect.Signature.empty:
                    sig += f": {ann}"
                out += _block(f"{name}.{mname}", f"{kind} {sig}", docstring(member))
            else:
                out += _block(
                    f"{name}.{mname}()",
                    f"{name}.{mname}{signature(member, skip_self=True)}",
                    docstring(member),
                )
        return out
    if callable(obj):
        return [
            f"### `{qualname}()`",
            "",
            "```python",
            f"{name}{signature(obj)}",
            "```",
            "",
            docstring(obj),
            "",
        ]
    return [f"### `{qualname}`", "", "```python", f"{name} = {_constant(obj)}", "```", ""]


def _constant(value: Any) -> str:
    """A module constant's value; a long tuple, list or set one element a line."""
    text = _stable_repr(value)
    if len(text) <= 90 or not isinstance(value, (tuple, list, set, frozenset)):
        return text if " at 0x" not in text else "…"
    items = [_stable_repr(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items.sort()
    opener, closer = {tuple: ("(", ")"), list: ("[", "]")}.get(type(value), ("frozenset({", "})"))
    if type(value) is set:
        opener, closer = "{", "}"
    return opener + "\n" + "".join(f"    {item},\n" for item in items) + closer


# -- fixtures, from the plugin's source ------------------------------------------------------------------


def fixtures() -> Iterator[tuple[str, str, str, str]]:
    """``(name, scope, yielded type, docstring)`` of every ``@pytest.fixture`` in the plugin's modules."""
    for path in sorted(PLUGIN_DIR.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                target = call.func if call else dec
                if ast.unparse(target) not in ("pytest.fixture", "fixture"):
                    continue
                scope = "function"
                for kw in call.keywords if call else []:
                    if kw.arg == "scope" and isinstance(kw.value, ast.Constant):
                        scope = str(kw.value.value)
                ret = ast.unparse(node.returns) if node.returns else ""
                yielded = re.sub(r"^(?:Iterator|Generator)\[([\w.]+).*\]$", r"\1", ret)
                yield node.name, scope, yielded, ast.get_docstring(node) or ""


def _kwargs_table(cls: type) -> list[str]:
    """The keyword arguments of ``cls``'s constructor, with their defaults and the docstring's words."""
    doc = inspect.getdoc(cls) or ""
    described: dict[str, str] = {}
    args = re.search(r"^Args:\n((?:[ \t]+.*\n?|\n)+)", doc, re.M)
    if args:
        current = None
        for line in args.group(1).splitlines():
            m = re.match(r"^ {4}(\w+)(?: \([^)]*\))?: ?(.*)$", line)
            if m:
                current = m.group(1)
                described[current] = m.group(2)
            elif current and line.strip():
                described[current] += " " + line.strip()
    out = ["| keyword | default | meaning |", "|---|---|---|"]
    for p in inspect.signature(cls).parameters.values():
        if p.kind is not p.KEYWORD_ONLY and p.kind is not p.POSITIONAL_OR_KEYWORD:
            continue
        default = "" if p.default is p.empty else f"`{_default(p.default)}`"
        meaning = _inline(described.get(p.name, "")).replace("|", "\\|")
        out.append(f"| `{p.name}` | {default} | {meaning} |")
    return out


def fixture_section() -> list[str]:
    import pytest_mcpfaults

    out = [
        "## Fixtures",
        "",
        "Registered by the plugin (`pytest -p mcpfaults`, or auto-loaded once installed).",
        "",
    ]
    tabled: dict[type, str] = {}
    for name, scope, yielded, doc in fixtures():
        out += [f"### `{name}`", "", f"Scope: `{scope}`." + (f" Value: `{yielded}`." if yielded else ""), ""]
        out += [docstring(doc), ""]
        cls = getattr(pytest_mcpfaults, yielded, None)
        if not inspect.isclass(cls) or not re.search(r"kwargs|keyword arguments", doc):
            continue  # configured by no keyword arguments
        # a factory's calls take the keyword arguments of what its __call__ returns
        builds = getattr(pytest_mcpfaults, _built_by(cls), cls)
        if builds in tabled:
            out += [f"Keyword arguments: those of `{builds.__name__}`, as for `{tabled[builds]}` above.", ""]
            continue
        tabled[builds] = name
        out += [f"Keyword arguments (those of `{builds.__name__}`):", "", *_kwargs_table(builds), ""]
    return out


def _built_by(cls: type) -> str:
    """The class a factory's ``__call__`` returns (its return annotation), else the class itself."""
    if "__call__" not in vars(cls):
        return cls.__name__
    return str(inspect.signature(cls.__call__).return_annotation)


# -- the page --------------------------------------------------------------------------------------------


def render() -> str:
    out = [
        "# API reference",
        "",
        "<!-- Generated by docs/gen_api.py from the code: do not edit; run `python docs/gen_api.py`. -->",
        "",
        "Signatures and docstrings of the public API, generated from the code (`python docs/gen_api.py`;",
        "`tests/test_docs_api.py` fails when this page is stale). Everything in the first section is",
        "exported from `pytest_mcpfaults`; the later sections are the modules you import by path.",
        "",
    ]
    out += fixture_section()
    shown: set[int] = set()
    documented = {
        obj
        for modname, _ in MODULES
        for n in importlib.import_module(modname).__all__
        if inspect.isclass(obj := getattr(importlib.import_module(modname), n))
    }
    for modname, intro in MODULES:
        module = importlib.import_module(modname)
        names = [n for n in module.__all__ if id(getattr(module, n)) not in shown]  # each object once
        if not names:
            continue
        out += [f"## `{modname}`", "", intro, ""]
        for name in names:
            obj = getattr(module, name)
            shown.add(id(obj))
            out += document(f"{modname}.{name}" if modname != "pytest_mcpfaults" else name, obj, documented)
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE.name} is stale: run `python docs/gen_api.py` and commit it", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
