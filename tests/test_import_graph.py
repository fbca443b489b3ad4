"""The package's import graph: no import cycle (module- or function-level; ``TYPE_CHECKING`` imports
aside) and no private name imported from another of its modules. The checker is tried on a made-up
package first, so it is known to find both."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _in_type_checking(parents: list[ast.AST]) -> bool:
    return any(isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test) for p in parents)


def import_graph(root: Path, pkg: str) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> the package modules it imports, private names imported across modules)."""
    mods = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((root / pkg).rglob("*.py"))
    }
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private: list[str] = []
    for mod, path in mods.items():
        stack: list[tuple[ast.AST, list[ast.AST]]] = [(ast.parse(path.read_text()), [])]
        while stack:
            node, parents = stack.pop()
            stack.extend((child, [*parents, node]) for child in ast.iter_child_nodes(node))
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or _in_type_checking(parents):
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [(target, [a.name for a in node.names])]
            else:
                targets = [(a.name, []) for a in node.names]
            for target, names in targets:
                t = target
                while t and t not in mods:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if not t or t == mod:
                    continue
                edges[mod].add(t)
                # Importing a.b.c runs a/__init__ and a/b/__init__ first: an edge to each such package
                # that is not already being imported as one of this module's own packages.
                parts = t.split(".")
                for i in range(1, len(parts)):
                    package = ".".join(parts[:i])
                    if package in mods and not (mod + ".").startswith(package + "."):
                        edges[mod].add(package)
                for name in names:
                    if f"{target}.{name}" in mods:
                        edges[mod].add(f"{target}.{name}")
                    elif name.startswith("_") and not name.startswith("__"):
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
