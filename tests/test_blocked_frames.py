"""Where a verdict says the test is blocked: the frames of the code under test, even when the harness
is pip-installed (issue 36). Before, anything with a ``.dist-info`` beside it was library code, so a
harness installed into site-packages (or with ``pip --target``) vanished from "blocked at" and only the
test's line was left. The standard library, the MCP SDKs, pytest, this plugin and what they require are
still left out; the ini key ``mcpfaults_harness_packages`` narrows installed code to the harness's."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_mcpfaults._pytest import blocked

RUNNER = """
import threading

def run(stop: threading.Event, entered: threading.Event) -> None:
    entered.set()
    stop.wait(30)  # where the harness is blocked
"""


@pytest.fixture
def installed_harness(tmp_path: Path) -> Iterator[Path]:
    """``my_runner`` installed as pip installs it: a package beside its ``.dist-info`` on ``sys.path``."""
    site = tmp_path / "site-packages"
    (site / "my_runner").mkdir(parents=True)
    (site / "my_runner" / "__init__.py").write_text(RUNNER)
    info = site / "my_runner-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-runner\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("my_runner\n")
    sys.path.insert(0, str(site))
    blocked.own_code.cache_clear()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("my_runner", None)
        blocked.set_harness_packages(())


def _blocked_in_runner() -> tuple[str, threading.Event, threading.Thread]:
    import my_runner  # type: ignore[import-not-found]

    stop, entered = threading.Event(), threading.Event()
    thread = threading.Thread(target=my_runner.run, args=(stop, entered), daemon=True)
    thread.start()
    assert entered.wait(5)
    return blocked.blocked_at(thread.ident), stop, thread


def test_a_pip_installed_harness_is_shown(installed_harness: Path) -> None:
    where, stop, thread = _blocked_in_runner()
    stop.set()
    thread.join(5)
    assert f'File "{installed_harness / "my_runner" / "__init__.py"}", line 6 in run' in where, where
    assert "stop.wait(30)  # where the harness is blocked" in where
    assert "threading.py" not in where  # the standard library's Event.wait is left out


def test_the_sdk_pytest_and_their_requirements_are_not_the_code_under_test() -> None:
    import aiohttp
    import anyio
    import httpx
    import mcp.client.session
    import pluggy

    for module in (mcp.client.session, httpx, anyio, aiohttp, pluggy, pytest, threading):
        assert not blocked.own_code(str(module.__file__)), module.__name__
    assert blocked.own_code(__file__)  # the test itself


def test_the_ini_key_narrows_installed_code_to_the_harness(installed_harness: Path) -> None:
    blocked.set_harness_packages(["another_harness"])
    where, stop, thread = _blocked_in_runner()
    stop.set()
    thread.join(5)
    assert "my_runner" not in where
    assert blocked.own_code(__file__)  # code outside any installed distribution is still shown
    blocked.set_harness_packages(["my_runner"])
    assert blocked.own_code(str(installed_harness / "my_runner" / "__init__.py"))


def test_a_bad_ini_name_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("-p", "mcpfaults", "-o", "mcpfaults_harness_packages=my_runner, my-agent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini option mcpfaults_harness_packages takes top-level package names*got 'my-agent'*"]
    )
