"""Explore's campaigns: planning (pure), findings and checks, the HTML page, its pytest items, summary,
re-runs and shards.

The names below (plan.py's) load on first use (``lazy.py``): importing one module does not load the others.
"""

# ruff: noqa: F405  (__all__ names plan.py's names, star-imported for type checkers only; plan.py
# reads this list as its own)
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mcpfaults.lazy import lazy_exports

if TYPE_CHECKING:
    from pytest_mcpfaults.explore.plan import *  # noqa: F403

__all__ = [
    "CLEAN",
    "MARKERS",
    "OPTIONS",
    "Campaign",
    "Options",
    "Pruned",
    "RequestLike",
    "Run",
    "Step",
    "applies_to",
    "cell_name",
    "cells",
    "explore_kinds",
    "fault_at",
    "faults_at",
    "footprint",
    "id_part",
    "new_steps",
    "parse_options",
    "plan_campaign",
    "plan_pairs",
    "regression_line",
    "same_outcome",
    "server_of",
]

__getattr__, __dir__ = lazy_exports(globals())
