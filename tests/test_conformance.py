"""The official MCP conformance suite's server scenarios against ``serve`` with the conformance tool
set, compared with the suite's own reference server scenario by scenario (tests/conformance_run.py,
which ``tox -e conformance`` runs as a script).

Slow (two ``npm ci`` on a cold cache, about 15 s; then about 10 s of Node per run) and it needs npm:
skipped without it. The installs go to the pytest cache, keyed by their lock files, so a warm run
downloads nothing; each step is bounded (``conformance_run.NPM_TIMEOUT``, ``RUN_TIMEOUT``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conformance_run import NEEDS, REPLAY_CANNOT, compare, measure, measure_cassette, table
from no_ca import REGISTRY_ENV


@pytest.fixture(scope="module")
def cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None:
        pytest.skip("the conformance suite needs npm on PATH")
    config_cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    if config_cache is None:
        return tmp_path_factory.mktemp("conformance")
    return Path(config_cache.mkdir("mcpfaults-conformance"))


#: On a fresh clone the first run installs the conformance suite with npm (cached after): beside six busy
#: processes that and the scenarios took over the suite's 120 s.
@pytest.mark.timeout(300)
def test_serve_passes_every_scenario_the_reference_server_passes(
    cache: Path,
) -> None:
    serve, reference = measure(cache, env=REGISTRY_ENV)
    print(table(serve, reference))
    assert len(reference) >= 30, f"the suite ran {len(reference)} scenarios: {sorted(reference)}"
    assert all(s.ok for s in reference.values()), table(serve, reference)
    assert compare(serve, reference) == [], table(serve, reference)
    # The surface this branch serves: every scenario of resources, prompts, completion and logging.
    surface = [n for n in serve if n.split("-")[0] in ("resources", "prompts", "completion", "logging")]
    assert len(surface) == 13 and all(serve[n].ok for n in surface), table(serve, reference)
    # NEEDS names only scenarios that exist and still fail (a stale entry is removed when its item lands).
    stale = [n for n in NEEDS if n not in serve or serve[n].ok]
    assert stale == [], (
        f"NEEDS in tests/conformance_run.py names scenarios that pass or do not exist: {stale}"
    )


#: A racing scenario that loses (conformance_run.STANDALONE_RACE) costs the suite client's 60 s request
#: timeout before it is run again: two losses in one recording are rare but seen.
@pytest.mark.timeout(400)
def test_a_cassette_of_the_reference_server_replays_its_scenarios_offline(
    cache: Path, tmp_path: Path
) -> None:
    """Issue 28: the reference server recorded through proxy mode, then replayed with it stopped: every
    scenario that passed while recording passes replayed, but those a replay cannot pass
    (``REPLAY_CANNOT``, each with its reason), which fail."""
    cassette = tmp_path / "conformance.jsonl"
    recorded, replayed = measure_cassette(cache, cassette, env=REGISTRY_ENV)
    shown = table(replayed, recorded)  # the replay in the "serve" column, the recording beside it
    print(shown)
    assert len(recorded) >= 30 and set(replayed) == set(recorded), shown
    # Every scenario passed while recording (those racing the GET stream run again alone when they
    # lost the race: conformance_run.STANDALONE_RACE says why).
    assert all(s.ok for s in recorded.values()), shown
    failing = {n for n, s in replayed.items() if not s.ok}
    assert failing == set(REPLAY_CANNOT), shown
    assert cassette.read_text().count("\n") > 30  # one exchange per line, the header first
