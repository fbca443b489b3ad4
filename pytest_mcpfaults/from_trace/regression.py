"""The clean test, replayed under a plan: what a written regression test module calls (:func:`replay`).

The replay is judged as explore judges a run (``own_asserts=behaviour``): the clean test's own
assertions state what a clean run does, so one failing under the incident's faults is behaviour under
fault; a span invariant, a patience verdict or an exception fails it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import pytest


def replay(
    module: str, test: str, plan: Sequence[str], namespace: MutableMapping[str, Any]
) -> Callable[..., Any]:
    """``module``'s test function ``test`` (wrapped, its markers kept) under ``plan``; ``namespace``
    (the regression module's globals) gets the clean module's fixtures."""
    mod = importlib.import_module(module)
    clean = getattr(mod, test, None)
    if not callable(clean):
        raise pytest.UsageError(f"from-trace regression: {module} has no test function {test!r}")
    for key, value in vars(mod).items():  # its fixtures, not its tests (they would be collected twice)
        if not key.startswith("test") and _is_fixture(value):
            namespace.setdefault(key, value)
    if inspect.iscoroutinefunction(clean):

        @functools.wraps(clean)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await clean(*args, **kwargs)
            except AssertionError as exc:
                _judge(exc)

    else:

        @functools.wraps(clean)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return clean(*args, **kwargs)
            except AssertionError as exc:
                _judge(exc)

    wrapper.pytestmark = list(getattr(clean, "pytestmark", []))  # type: ignore[attr-defined]
    marked: Callable[..., Any] = pytest.mark.mcp_sidecar(faults=list(plan))(wrapper)
    return marked


def _is_fixture(value: Any) -> bool:
    """Whether ``value`` is a ``@pytest.fixture`` (pytest 8.4+'s definition object, or older)."""
    return type(value).__name__ == "FixtureFunctionDefinition" or hasattr(value, "_pytestfixturefunction")


def _judge(exc: AssertionError) -> None:
    """Re-raise a span invariant's failure; let the clean test's own assertions go (behaviour)."""
    from pytest_mcpfaults.invariants import SpanInvariantError

    if isinstance(exc, SpanInvariantError):
        raise exc
