"""pytest entry point (``pytest -p mcpfaults``).

Thin on purpose: each concern lives in its own module under ``pytest_mcpfaults._pytest`` and is
registered here. Those modules import the sidecar, span and report code lazily, so a run that never
uses the plugin pays only for option parsing.
"""

pytest_plugins = [
    "pytest_mcpfaults._pytest.records",
    "pytest_mcpfaults._pytest.cassettes",
    "pytest_mcpfaults._pytest.sidecar",
    "pytest_mcpfaults._pytest.harness",
    "pytest_mcpfaults._pytest.spans",
    "pytest_mcpfaults._pytest.report",
    "pytest_mcpfaults.explore.items",
    "pytest_mcpfaults._pytest.from_trace",
]
