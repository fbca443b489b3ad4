"""``--mcpfaults-shard=K/N``: run the K-th of N deterministic parts of a run (a CI matrix job each).

Every explored test's clean run is in every shard (its footprint plans the campaign), and its
campaign's runs are dealt out by a hash of the explored test and the run id (a pair's: its first run's,
from whose observation it is planned), whether collected from the cache or made once the clean run
passed; every other test by a hash of its node id. The same K/N
selects the same items on every machine and Python (``zlib.crc32``, not ``hash``). The shards' JSON
reports merge into one (``python -m pytest_mcpfaults merge-reports``): see docs/ci.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest

from pytest_mcpfaults._pytest.records import explore_run

OPTION = "--mcpfaults-shard"
_FORM = "K/N with whole numbers 1 <= K <= N (e.g. 2/4: the second of four shards)"


def addoption(group: pytest.OptionGroup) -> None:
    group.addoption(
        OPTION,
        metavar="K/N",
        dest="mcpfaults_shard",
        help="Run only the K-th of N deterministic shards of the run (explored tests' clean runs run in "
        "every shard, their campaigns are split); merge the shards' reports with "
        "'python -m pytest_mcpfaults merge-reports'.",
    )


def parse_shard(text: str) -> tuple[int, int]:
    """``'2/4'`` → ``(2, 4)``; a ``ValueError`` naming the option and the valid form otherwise."""
    k, slash, n = text.strip().partition("/")
    try:
        pair = (int(k), int(n)) if slash else None
    except ValueError:
        pair = None
    if pair is None or not 1 <= pair[0] <= pair[1]:
        raise ValueError(f"{OPTION}={text}: must be {_FORM}")
    return pair


def shard_of(name: str, shards: int) -> int:
    """The shard (from 1) that runs the item named ``name``."""
    return zlib.crc32(name.encode()) % shards + 1


class Shard:
    """Deselects the items of the other shards (also those explore makes during the run)."""

    def __init__(self, k: int, n: int, explored_test: Callable[[pytest.Item], str]) -> None:
        self.k, self.n, self.explored_test = k, n, explored_test

    def _mine(self, item: pytest.Item) -> bool:
        run = explore_run(item)
        if run is None:
            return shard_of(item.nodeid, self.n) == self.k
        if not run.plan:
            return True  # the clean run: every shard needs its footprint
        # a pair (depth 2) goes with its first run: it is planned from that run's observation
        return shard_of(f"{self.explored_test(item)}::{run.id.partition('+')[0]}", self.n) == self.k

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        other = [i for i in items if not self._mine(i)]
        if other:
            config.hook.pytest_deselected(items=other)
            items[:] = [i for i in items if self._mine(i)]


def configure(config: pytest.Config, explored_test: Callable[[pytest.Item], str]) -> None:
    """Register the shard's deselection when the option is given; a usage error when it is wrong."""
    raw = config.getoption("mcpfaults_shard", default=None)
    if raw is None:
        return
    try:
        k, n = parse_shard(str(raw))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(Shard(k, n, explored_test), "mcpfaults-shard")
