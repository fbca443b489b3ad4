"""Shared helpers for the plugin's own tests.

The project's addopts carry ``-p no:mcpfaults``: fixtures and hooks are tested only through
``pytester`` with ``-p mcpfaults``, the way users load the plugin. Library code (``Sidecar``,
faults, spans) is used directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import hypothesis.internal.observability  # noqa: F401  (imported once: in-process pytester runs reuse it)
import pytest

from pytest_mcpfaults import Sidecar


@pytest.fixture
def sidecar() -> Iterator[Sidecar]:
    """A default sidecar, used as a library (not through the plugin's fixture)."""
    with Sidecar() as sc:
        yield sc


@pytest.fixture
def run_plugin(pytester: pytest.Pytester):  # type: ignore[no-untyped-def]
    """Run pytest in-process on the pytester dir with the plugin loaded as users load it."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest(
            "-p",
            "mcpfaults",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            *args,
        )

    return run
