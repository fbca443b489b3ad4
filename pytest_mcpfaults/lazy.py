"""A package ``__init__`` that loads its public names on first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _type_checking_imports(source: str) -> tuple[dict[str, str], list[str]]:
    where: dict[str, str] = {}
    stars: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module is not None:
                    for alias in imp.names:
                        if alias.name == "*":
                            stars.append(imp.module)
                        else:
                            where[alias.asname or alias.name] = imp.module
    return where, stars


def lazy_exports(namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose globals are ``namespace``.

    The names it exports are those its ``__init__`` imports under ``if TYPE_CHECKING:`` (where type
    checkers see them), read from that file's source on first use: the imports are the one list of
    where each name lives, imported on first access and kept in the namespace. A module star-imported
    there (the fault kinds' ``pytest_mcpfaults.faults``) exports every name of its ``__all__`` too,
    without their being listed; any other name is an ``AttributeError`` naming the package."""
    package = namespace["__name__"]
    found: list[tuple[dict[str, str], list[str]]] = []

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # dunders (``__wrapped__``, ``__path__`` …) are never lazy
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if not found:
            found.append(_type_checking_imports(Path(namespace["__file__"]).read_text(encoding="utf-8")))
        where, stars = found[0]
        module = where.get(name)
        # ``from pytest_mcpfaults import events`` asks here first: a submodule never costs a star import
        submodule = module is None and importlib.util.find_spec(f"{package}.{name}") is not None
        for star in stars if module is None and not submodule else ():
            if name in importlib.import_module(star).__all__:
                module = star
                break
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
