"""Where a failing explore run left the harness's own code: the frame a finding is grouped by.

The harness's own code is what :func:`pytest_mcpfaults._pytest.blocked.own_code` says, but for the
packages of :data:`NOT_HARNESS` wherever they are installed from. For a verdict the plugin raised after
the test (a patience verdict), the exception it was raised from is looked into, through causes,
contexts and exception groups.
"""

from __future__ import annotations

import os
import sys
import traceback
from types import TracebackType
from typing import Any

from pytest_mcpfaults._pytest.blocked import own_code

#: Top-level packages that are never the harness, wherever they are installed from.
NOT_HARNESS = frozenset(
    {
        "mcp",
        "pytest",
        "_pytest",
        "pluggy",
        "pytest_mcpfaults",
        "anyio",
        "httpx",
        "httpcore",
        "aiohttp",
        "asyncio",
        "exceptiongroup",
        "sniffio",
        "h11",
        "opentelemetry",
    }
)


def _harness(filename: str, module: object) -> bool:
    top = str(module or "").split(".", 1)[0]
    return top not in NOT_HARNESS and own_code(filename)


def _own_frame(tb: TracebackType | None, root: str) -> str:
    """The innermost harness frame of a traceback, ``file:line in function``, or ``""``."""
    found = ""
    for frame, line in traceback.walk_tb(tb):
        code = frame.f_code
        if _harness(code.co_filename, frame.f_globals.get("__name__")):
            path = os.path.abspath(code.co_filename)
            rel = os.path.relpath(path, root) if path.startswith(os.path.join(root, "")) else path
            found = f"{rel.replace(os.sep, '/')}:{line} in {code.co_name}"
    return found


def harness_frame(exc: BaseException | None, root: str) -> str:
    """Where ``exc`` (or, when it has no harness frame, what it came from) left the harness's code."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        where = _own_frame(e.__traceback__, root)
        if where:
            return where
        todo += [e.__cause__, e.__context__, *(getattr(e, "exceptions", None) or ())]
    return ""


def where_of(exc: BaseException, root: str) -> dict[str, Any]:
    """What a run's record keeps of its failure for its finding: ``where``, and ``own_exception``: its
    class is defined in the harness's own code (a candidate for ``raises=``)."""
    filename = getattr(sys.modules.get(type(exc).__module__), "__file__", None)
    own = bool(filename) and _harness(str(filename), type(exc).__module__)
    return {"where": harness_frame(exc, root), "own_exception": own}
