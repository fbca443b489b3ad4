"""The package's import graph: no import cycle — module-level, inside a function, or under
``TYPE_CHECKING`` (a cycle only the type checker follows is still two modules that cannot be read,
typed or moved apart) — and no private name imported from another of its modules. The checker is
tried on made-up packages first, so it is known to find each."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _in_type_checking(parents: list[ast.AST]) -> bool:
    return any(isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test) for p in parents)


def _walk(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import of ``tree`` and whether it is under ``if TYPE_CHECKING``."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    stack: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
    while stack:
        node, parents = stack.pop()
        stack.extend((child, [*parents, node]) for child in ast.iter_child_nodes(node))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, _in_type_checking(parents)))
    return found


def _targets(mod: str, is_init: bool, node: ast.Import | ast.ImportFrom) -> list[tuple[str, list[str]]]:
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names]
    if node.level:
        base = mod.split(".") if is_init else mod.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return [(".".join(base + ([node.module] if node.module else [])), [a.name for a in node.names])]
    return [(node.module or "", [a.name for a in node.names])]


def import_graph(root: Path, pkg: str) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> the package modules it imports, private names imported across modules).

    A package ``__init__`` that loads its names on first use (``lazy.py``) declares them under
    ``TYPE_CHECKING``: those declarations are its face, not edges of their own; a module importing
    such a name from the package has an edge to the module the face names. An import run at import
    time (not under ``TYPE_CHECKING``) also runs the ``__init__`` of each package on the way."""
    paths = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((root / pkg).rglob("*.py"))
    }
    trees = {m: ast.parse(p.read_text()) for m, p in paths.items()}
    face: dict[str, dict[str, str]] = {}  # package -> name -> the module it is declared from
    for mod, path in paths.items():
        if path.name == "__init__.py":
            for node, typing_only in _walk(trees[mod]):
                if typing_only and isinstance(node, ast.ImportFrom):
                    for target, names in _targets(mod, True, node):
                        face.setdefault(mod, {}).update(dict.fromkeys(names, target))

    def through_face(target: str, name: str) -> str:
        seen: set[str] = set()
        while target in face and name in face[target] and target not in seen:
            seen.add(target)
            target = face[target][name]
        return target

    edges: dict[str, set[str]] = {m: set() for m in paths}
    private: list[str] = []
    for mod, path in paths.items():
        is_init = path.name == "__init__.py"
        for node, typing_only in _walk(trees[mod]):
            if is_init and typing_only:
                continue  # the package's lazy face
            for target, names in _targets(mod, is_init, node):
                for name in names or [""]:
                    t = f"{target}.{name}" if f"{target}.{name}" in paths else through_face(target, name)
                    while t and t not in paths:
                        t = t.rsplit(".", 1)[0] if "." in t else ""
                    if not t or t == mod:
                        continue
                    edges[mod].add(t)
                    if not typing_only:
                        # Importing a.b.c runs a/__init__ and a/b/__init__ first: an edge to each such
                        # package that is not already being imported as one of this module's own.
                        parts = t.split(".")
                        for i in range(1, len(parts)):
                            package = ".".join(parts[:i])
                            if package in paths and not (mod + ".").startswith(package + "."):
                                edges[mod].add(package)
                    if name.startswith("_") and not name.startswith("__") and f"{target}.{name}" not in paths:
                        private.append(f"{mod} <- {t}.{name}")
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles (strongly connected components of two or more modules), leaving out those that
    exist only because a package's ``__init__`` imports its own submodules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len([x for x in comp if not any(y.startswith(x + ".") for y in comp)]) > 1:
                found.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle_and_a_private_import(tmp_path: Path) -> None:
    pkg = tmp_path / "made_up"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from made_up.b import thing\n_secret = 1\n")
    (pkg / "b.py").write_text("thing = 1\n\ndef later():\n    from made_up import a\n")
    (pkg / "c.py").write_text("from made_up.a import _secret\n")
    edges, private = import_graph(tmp_path, "made_up")
    assert cycles(edges) == [["made_up.a", "made_up.b"]]  # the function-level import counts too
    assert private == ["made_up.c <- made_up.a._secret"]


def test_the_checker_finds_a_cycle_under_type_checking(tmp_path: Path) -> None:
    """``b`` imports ``a`` only for the type checker: still a cycle. And a name imported from a lazy
    package face is an edge to the module that defines it."""
    pkg = tmp_path / "made_up"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from made_up.b import thing\nclass A: pass\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from made_up.a import A\nthing = 1\n"
    )
    (pkg / "sub" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from made_up.sub.deep import Deep as Deep\n"
    )
    (pkg / "sub" / "deep.py").write_text("from made_up.c import see\nclass Deep: pass\n")
    (pkg / "c.py").write_text("def see():\n    from made_up.sub import Deep\n")
    edges, _ = import_graph(tmp_path, "made_up")
    assert cycles(edges) == [["made_up.a", "made_up.b"], ["made_up.c", "made_up.sub.deep"]]


def test_the_checker_finds_a_cycle_through_a_package_init(tmp_path: Path) -> None:
    """Importing ``made_up.sub.leaf`` runs ``made_up/sub/__init__``, which imports ``made_up.sub.heavy``,
    which imports ``made_up.other``, which imported ``made_up.sub.leaf``: a cycle Python meets at import
    time although no module imports another that imports it back directly."""
    pkg = tmp_path / "made_up"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from made_up.sub.heavy import Heavy\n")
    (pkg / "sub" / "heavy.py").write_text("from made_up.other import thing\nclass Heavy: pass\n")
    (pkg / "sub" / "leaf.py").write_text("leaf = 1\n")
    (pkg / "other.py").write_text("from made_up.sub.leaf import leaf\nthing = leaf\n")
    edges, _ = import_graph(tmp_path, "made_up")
    assert cycles(edges) == [["made_up.other", "made_up.sub", "made_up.sub.heavy"]]
    (pkg / "sub" / "__init__.py").write_text("")  # a lazy package __init__: no cycle
    edges, _ = import_graph(tmp_path, "made_up")
    assert cycles(edges) == []


def test_the_package_has_no_import_cycle_and_imports_no_private_name_across_modules() -> None:
    edges, private = import_graph(ROOT, "pytest_mcpfaults")
    assert len(edges) > 40
    assert cycles(edges) == []
    assert private == []


#: The transport-free core (docs/architecture.md "The parts": Core, MCP, Journal) and the modules of
#: the transports it must never import, even for the type checker.
CORE = (
    "core.core",
    "core.routing",
    "mcp.endpoint",
    "mcp.tools",
    "mcp.schema",
    "core.journal",
    "core.records",
    "verdicts.violation",
)
TRANSPORTS = (
    "transports.loop",
    "transports.server",
    "transports.inject",
    "transports.http_io",
    "transports.sse_stream",
)


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in edges[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_core_imports_no_transport() -> None:
    edges, _ = import_graph(ROOT, "pytest_mcpfaults")
    for core in CORE:
        reached = _reachable(edges, f"pytest_mcpfaults.{core}")
        assert not {f"pytest_mcpfaults.{t}" for t in TRANSPORTS} & reached, core


def test_every_folder_of_the_package_has_its_row_in_the_architecture_map() -> None:
    """docs/architecture.md's map has a row per folder, its sentence the folder's own docstring (the
    page is written from them): a folder added, renamed or re-described without its row fails here."""
    import ast
    import re

    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)/`[^|]*\| (.+) \|$", page, re.M))
    folders = sorted(p.parent for p in (ROOT / "pytest_mcpfaults").glob("*/__init__.py"))
    assert {f.name for f in folders} == set(rows)
    for folder in folders:
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        sentence = " ".join(doc.split("\n\n", 1)[0].split())
        sentence = re.sub(r":(?:mod|class|func|data|attr|meth):`~?([^`]+)`", r"`\1`", sentence)
        assert rows[folder.name] == re.sub(r"``(.+?)``", r"`\1`", sentence), folder.name
