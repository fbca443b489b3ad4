"""The README's matrix command (``pytest -p mcpfaults examples/test_example_matrix.py``) run for both
runner variants at once with one more plugin that gives every sidecar its server (``-p PLUGIN`` with
``tests/`` on ``sys.path``: ``proxied_upstream``, ``replayed_upstream``), and its outcomes by fault.
Used by the proxy and the cassette tests, which compare them with the fake's verdicts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
#: Each variant's run may take this long (two runs of about 30 s each alone; more on a loaded machine).
RUN_TIMEOUT = 300


#: The installed plugins the matrix needs (the project's ``asyncio_*`` and ``timeout`` settings): the
#: others are not loaded (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), as in the suite's pytester runs
#: (tests/conftest.py's ``PYTESTER_PLUGINS``). Importing them all (respx, anyio, xdist, Hypothesis' plugin)
#: was about 40 % of each child's start-up CPU (5.2 s against 3.4 s to collect the matrix, under load).
PLUGINS = ("-p", "pytest_asyncio.plugin", "-p", "pytest_timeout")  # by module: any pytest loads these


def _matrix(plugin: str, variant: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "pytest", "-p", "mcpfaults", *PLUGINS, "-p", "no:cacheprovider", "-p", plugin,
        "examples/test_example_matrix.py", f"--runner-variant={variant}", "-rA",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_matrices(plugin: str) -> dict[str, tuple[str, str]]:
    """The matrix under ``-p plugin`` for the hardened and the unhardened runner, side by side (they
    overlap well): each variant's stdout and stderr. A run past :data:`RUN_TIMEOUT` is killed and
    fails with what it printed."""
    runs = {variant: _matrix(plugin, variant) for variant in ("hardened", "unhardened")}
    out: dict[str, tuple[str, str]] = {}
    for variant, proc in runs.items():
        try:
            out[variant] = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            raise AssertionError(
                f"the {variant} matrix did not end within {RUN_TIMEOUT} s:\n{stdout}\n{stderr}"
            ) from None
    return out


def outcomes(stdout: str) -> dict[str, str]:
    """Each matrix cell's outcome (``PASSED`` / ``FAILED``) by its fault, from ``-rA``'s summary."""
    pattern = r"^(PASSED|FAILED) examples/test_example_matrix\.py::test_cleanup_under_every_fault\[([^\]]+)\]"
    return {fault: outcome for outcome, fault in re.findall(pattern, stdout, re.M)}
