"""Which area of the package each test module covers, and which modules are slow: the one place
``conftest.py`` reads to mark every collected test (``pytest -m stdio``, ``pytest -m 'not slow'``;
CONTRIBUTING.md). Each area is a marker registered in pyproject.toml's ``markers`` (``--strict-markers``
refuses any other); a test module in none of the areas below is a collection error, so a new module is
given its area here when it is added."""

from __future__ import annotations

import json
from pathlib import Path

#: area marker -> the test modules (file stems) that cover it. One area per module.
AREAS: dict[str, tuple[str, ...]] = {
    "faults": (
        "test_add_kind",
        "test_auth",
        "test_auth_code",
        "test_auth_rules",
        "test_quoted_bools",
        "test_behaviour",
        "test_cancellation",
        "test_cancellation_sync",
        "test_cancellation_transports",
        "test_core",
        "test_records",
        "test_fault_registry",
        "test_faults_answers",
        "test_faults_blackhole",
        "test_faults_bodies",
        "test_faults_health",
        "test_faults_notifications",
        "test_faults_process",
        "test_faults_server_requests",
        "test_faults_triggers",
        "test_incidents",
        "test_resumption",
        "test_resumption_streams",
        "test_tools",
        "test_validation",
    ),
    "hypothesis": ("test_fuzz_example", "test_matrix", "test_stateful", "test_strategies"),
    "mcp": (
        "test_compat",
        "test_conformance",
        "test_faults_mcp1",
        "test_flip_real_client",
        "test_flip_sse",
        "test_interop",
        "test_interop_mcp1",
        "test_interop_sse",
        "test_legacy_sse",
        "test_listen",
        "test_mcp1_env",
        "test_sse_retry",
        "test_progress",
        "test_server_requests",
        "test_server_request_binding",
        "test_surface",
        "test_surface_mcp1",
        "test_ts_parts",
        "test_uri_template",
    ),
    "inprocess": ("test_inprocess",),
    "proxy": (
        "test_cassettes",
        "test_cassette_hostile",
        "test_cassettes_plugin",
        "test_cli_proxy",
        "test_proxy",
        "test_proxy_surfaces",
        "test_proxy_plugin",
        "test_sse_notes",
        "test_sse_parse",
        "test_stdio_upstream",
        "test_upstream",
        "test_upstream_lifecycle",
    ),
    "stdio": ("test_stdio", "test_stdio_flip", "test_stdio_interop", "test_stdio_plugin"),
    "patience": (
        "test_bounds",
        "test_hostile",
        "test_patience",
        "test_patience_cancelled",
        "test_patience_interrupt",
        "test_patience_plugin",
        "test_patience_verdict",
        "test_stall_verdict",
        "test_idle_verdict",
        "test_wait_for",
        "test_session_hygiene",
        "test_blocked_frames",
        "test_hints_measured",
        "test_harness_process",
        "test_reliability",
        "test_teardown",
        "test_teardown_interrupt",
    ),
    "spans": (
        "test_invariants",
        "test_otlp",
        "test_otlp_control",
        "test_otlp_gate",
        "test_span_links",
        "test_spans",
        "test_spans_gate",
    ),
    "report": ("test_hostile_ci", "test_report", "test_report_plugin", "test_xdist"),
    "explore": (
        "test_explore",
        "test_explore_example",
        "test_explore_findings",
        "test_explore_fixtures",
        "test_explore_html",
        "test_explore_oracles",
        "test_explore_plugin",
        "test_from_trace",
        "test_from_trace_cli",
        "test_from_trace_plugin",
    ),
    "plugin": ("test_markers", "test_options", "test_plugin_fixtures"),
    "cli": ("test_cli",),
    "docs": (
        "test_docs",
        "test_docs_api",
        "test_docs_fuzzing",
        "test_docs_install",
        "test_docs_outside_timeout",
        "test_docs_quotes",
        "test_example_suite",
        "test_faults_doc",
        "test_frameworks_doc",
        "test_kind_tables",
        "test_lock",
        "test_performance_doc",
        "test_quickstart_venv",
        "test_readme",
        "test_stdio_docs",
        "test_ts_recipe",
    ),
    "shape": ("test_areas", "test_import_graph", "test_public_face", "test_quality"),
}

#: The slow tests, as a module stem (all its tests) or ``stem::test_name``: those that build a virtual
#: environment, run Node, run the example suite end to end or fuzz the example, start pytest-xdist
#: workers, type-check with mypy or build the docs site. Each costs seconds to minutes of CPU (the
#: slowest of a whole-suite run's ``--durations``: the doc examples 190 s, the example suite 155 s, the
#: docs site 22 s, fuzzing the example 4-18 s each).
SLOW: frozenset[str] = frozenset(
    {
        "test_add_kind",
        "test_example_suite",
        "test_explore_example",
        "test_from_trace_plugin::test_the_unhardened_runner_fails_each_replay_with_the_invariants_its_trace_broke",
        "test_from_trace_plugin::test_the_hardened_runner_passes_each_replay",
        "test_from_trace_plugin::test_the_page_quotes_what_the_unhardened_run_prints",
        "test_explore_plugin::test_the_cached_campaign_runs_on_xdist_workers_with_the_same_findings",
        "test_explore_findings::test_each_known_bug_is_one_finding_stable_across_runs_shards_and_the_page",
        "test_proxy_plugin::test_the_example_matrix_against_the_proxied_sdk_server_gives_the_fakes_verdicts",
        "test_from_trace_cli::test_the_written_regression_test_fails_on_the_unhardened_runner_and_passes_on_the_hardened",
        "test_quickstart_venv",
        "test_cassettes_plugin::test_the_example_matrix_replayed_from_a_cassette_gives_the_live_servers_verdicts",
        "test_fuzz_example::test_fuzzing_the_unhardened_runner_finds_the_flip_and_shrinks_it_to_backend_gone_at_delete",
        "test_fuzz_example::test_the_hardened_runner_never_flips_under_fuzzed_plans",
        "test_fuzz_example::test_the_state_machine_finds_the_flip_in_the_unhardened_example_runner",
        "test_fuzz_example::test_the_state_machine_passes_the_hardened_example_runner",
        "test_ts_recipe",
        "test_ts_parts",
        "test_uri_template",
        "test_conformance",
        "test_sse_retry",
        "test_xdist",
        "test_mcp1_env::test_the_mcp1_files_pass_with_the_mcp1_client",
        "test_options::test_an_option_the_core_reads_is_its_field_and_its_use_on_every_backend",
        "test_quality::test_typed_user_code_passes_mypy_strict",
        "test_docs::test_docs_site_builds_with_warnings_as_errors",
        "test_docs::test_doc_examples_pass",
    }
)


#: Each test module's wall seconds in a whole-suite run (its tests' summed), as
#: ``benchmarks/suite_time.py --write-durations`` measured them on a quiet machine: xdist deals the
#: modules longest first (tests/conftest.py), so the short ones fill the workers' ends.
DURATIONS = Path(__file__).with_name("durations.json")


def module_walls() -> dict[str, float]:
    """:data:`DURATIONS`: module stem → wall seconds."""
    walls: dict[str, float] = json.loads(DURATIONS.read_text(encoding="utf-8"))
    return walls


def area_of(module: str) -> str | None:
    """The area of the test module named ``module`` (its file stem), or None."""
    return next((area for area, modules in AREAS.items() if module in modules), None)


def is_slow(module: str, test: str) -> bool:
    """Whether the test function ``test`` (its name without parameters) of ``module`` is slow."""
    return module in SLOW or f"{module}::{test}" in SLOW
