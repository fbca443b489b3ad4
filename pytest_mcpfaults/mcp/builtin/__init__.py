"""The built-in sets a sidecar serves, by name (``tool_sets``): their tools and their surface
(resources, templates, prompts). The names are :data:`~pytest_mcpfaults.mcp.tools.TOOL_SETS`."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_mcpfaults.mcp.builtin.conformance import (
    conformance_prompts,
    conformance_resources,
    conformance_tools,
)
from pytest_mcpfaults.mcp.client_tools import CLIENT_TOOLS
from pytest_mcpfaults.mcp.surface import Prompt, Resource, ResourceTemplate, Surface
from pytest_mcpfaults.mcp.tools import BASIC_TOOLS, DEFAULT_TOOL_SETS, TOOL_SETS, BenchmarkSessions, Tool

__all__ = ["builtin_surface", "builtin_tools", "tool_sets_help"]


def builtin_tools(tool_sets: tuple[str, ...], benchmark: BenchmarkSessions) -> dict[str, Tool]:
    """The tools of ``tool_sets``, by name (``benchmark``: the benchmark set's state)."""
    made: dict[str, Callable[[], Iterable[Tool]]] = {
        "basic": lambda: BASIC_TOOLS,
        "benchmark": benchmark.tools,
        "client": lambda: CLIENT_TOOLS,
        "conformance": conformance_tools,
    }
    return {t.name: t for name in TOOL_SETS if name in tool_sets for t in made[name]()}


def builtin_surface(
    tool_sets: tuple[str, ...],
    resources: Iterable[Resource | ResourceTemplate] = (),
    prompts: Iterable[Prompt] = (),
) -> Surface:
    """A new surface holding those of ``tool_sets``, then a test's own ``resources`` and ``prompts``."""
    surface = Surface()
    if "conformance" in tool_sets:
        surface.add(conformance_resources(), conformance_prompts())
    surface.add(resources, prompts)
    return surface


def tool_sets_help() -> str:
    """Each built-in set and what it serves, for the ``tool_sets`` option's help."""
    parts = []
    for name in TOOL_SETS:
        tools = ", ".join(builtin_tools((name,), BenchmarkSessions()))
        surface = builtin_surface((name,))
        extra = [f"{len(v)} {what if len(v) != 1 else what[:-1]}" for what, v in
                 (("resources", surface.resources), ("resource templates", surface.templates),
                  ("prompts", surface.prompts)) if v]  # fmt: skip
        opt_in = "" if name in DEFAULT_TOOL_SETS else "opt-in: "
        parts.append(f"`{name!r}` ({opt_in}{'; '.join([tools, *extra])})")
    return ", ".join(parts)
