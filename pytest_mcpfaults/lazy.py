"""A package ``__init__`` that loads its public names on first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any],
    exports: Mapping[str, str],
    *,
    public: Sequence[str] | None = None,
    more: str | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose globals are ``namespace``: a name of
    ``exports`` (name -> the module defining it) is imported on first access and kept in the
    namespace; any other name is an ``AttributeError`` naming the package.

    ``more``: a module whose ``__all__`` the package exports too without listing it (the fault
    kinds: classes), imported on first access of a capitalised name not in ``exports`` or of
    ``__all__``, which is then ``public`` and the module's ``__all__``, sorted."""
    package = namespace["__name__"]

    def _more() -> list[str]:
        return list(importlib.import_module(more).__all__) if more is not None else []

    def __getattr__(name: str) -> Any:
        if name == "__all__" and public is not None:
            value = sorted({*public, *_more()})
            namespace["__all__"] = value
            return value
        module = exports.get(name)
        if module is None and more is not None and name[:1].isupper() and name in _more():
            module = more  # a class of that module (a fault kind): no other name costs its import
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        names = namespace.get("__all__") if public is None else __getattr__("__all__")
        return sorted([*namespace, *(names or ())])

    return __getattr__, __dir__
