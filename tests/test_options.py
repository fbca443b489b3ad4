"""The socket sidecar's options are one frozen ``SidecarOptions`` (options/fields.py): the constructor,
the marker, the factory, ``serve``'s flags and the docs options table are read from its fields. Shown
with a made-up option, ``server_version`` (the ``serverInfo.version`` the sidecar's ``initialize``
answers): its field alone (here a subclass patched in before the package is imported, as if written in
``SidecarOptions``) puts it everywhere, the docs tables made at build included (docs/hooks.py:
docs/sidecar.md's options, docs/cli.md's ``serve`` flags). In a copy of the repository, a made-up option
the core reads (``hidden_tools``) is its field, its use by the core and its test, on every backend."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from contribution import Contribution
from scratch_copy import run_in

from pytest_mcpfaults.inprocess import InProcessSidecar
from pytest_mcpfaults.options.fields import SidecarOptions, option_fields

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import hooks  # noqa: E402

MADE_UP = textwrap.dedent(
    """
    import dataclasses, inspect, json, pydoc, sys
    import pytest_mcpfaults.options.fields as o
    sys.path.insert(0, sys.argv[2])  # the docs: its hook makes the tables
    import hooks

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithServerVersion(o.SidecarOptions):  # the field alone
        server_version: str | None = o.option(
            None, help="the `serverInfo.version` of `initialize`.", flag="--server-version", parse=str,
            metavar="TEXT",
        )

    o.SidecarOptions = WithServerVersion  # as if the field were written in SidecarOptions itself

    import pytest
    from pytest_mcpfaults import Sidecar, SidecarFactory
    from pytest_mcpfaults.cli import build_parser

    seen = {
        "constructor": "server_version" in inspect.signature(Sidecar).parameters
        and pydoc.render_doc(Sidecar).count("server_version: the ``serverInfo.version`` of ``initialize``")
        == 1,
        "factory": "server_version" in inspect.signature(SidecarFactory.__call__).parameters,
        "serve --help": "--server-version TEXT" in build_parser()._subparsers._group_actions[0]
        .choices["serve"].format_help(),
        "serve": o.options_from_args(build_parser().parse_args(["serve", "--server-version", "cli/1"]))
        ["server_version"] == "cli/1",
        "docs table": "| `server_version` | `None` | `--server-version` |"
        in hooks.fill(open(sys.argv[2] + "/sidecar.md").read()),
        "cli page": "\\n| `--server-version TEXT` | none | The `serverInfo.version` of `initialize`. |\\n"
        in hooks.fill(open(sys.argv[2] + "/cli.md").read()),
    }
    (test := __import__("pathlib").Path(sys.argv[1]) / "test_marker.py").write_text(
        "import pytest\\n"
        "@pytest.mark.mcp_sidecar(server_version='marker/1')\\n"
        "def test_it(mcp_sidecar):\\n"
        "    assert mcp_sidecar.options.server_version == 'marker/1'\\n"
    )
    seen["marker"] = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", sys.argv[1], str(test)]) == 0
    print("SEEN " + json.dumps(seen))
    """
)


def test_a_made_up_option_appears_everywhere_from_its_field_alone(tmp_path: Path) -> None:
    script = tmp_path / "made_up_option.py"
    script.write_text(MADE_UP)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(ROOT / "docs")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("SEEN ")]
    assert lines, out.stdout[-3000:] + out.stderr[-3000:]
    seen = json.loads(lines[-1].removeprefix("SEEN "))
    assert seen == dict.fromkeys(
        ("constructor", "factory", "serve --help", "serve", "docs table", "cli page", "marker"), True
    ), out.stdout[-3000:]


def _filled(page: str) -> str:
    """A docs page as the site shows it: its tables made by the hook (docs/hooks.py)."""
    return hooks.fill((ROOT / "docs" / page).read_text())


def test_the_docs_options_table_has_a_row_per_option_in_field_order() -> None:
    raw = (ROOT / "docs" / "sidecar.md").read_text()
    assert "\n<!-- mcpfaults:options-table -->\n" in raw and "| `host` |" not in raw  # made at build
    table = _filled("sidecar.md").split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \|", table, re.M)
    assert [name for name, _ in rows] == [f.name for f, _ in option_fields()]
    assert dict(rows)["max_body_bytes"] == "`1048576` (`1 << 20`)"


def test_the_in_process_column_is_what_mock_sidecar_takes() -> None:
    takes = set(inspect.signature(InProcessSidecar).parameters) - {"base_url"}
    assert takes == {f.name for f, opt in option_fields() if "in-process" in opt.backends}


def test_the_cli_pages_flags_table_has_every_serve_flag_in_help_order() -> None:
    """A row per flag, its hand-written row where docs/cli.md has one (kept as written), else the row
    made from its option's field."""
    raw = (ROOT / "docs" / "cli.md").read_text()
    hand = raw.split("<!-- mcpfaults:serve-flags -->\n", 1)[1].split("<!-- /mcpfaults:serve-flags -->", 1)[0]
    table = _filled("cli.md").split("\n## Options\n", 1)[1].split("\n\n`serve`'s own flags", 1)[0]
    flags = []
    for _, opt in option_fields():
        flags += [opt.flag, opt.none_flag[0]] if opt.none_flag else [opt.flag] if opt.flag else []
    assert re.findall(r"^\| `(--[a-z][a-z0-9-]*)", table, re.M) == flags
    assert set(hand.splitlines()) <= set(table.splitlines())  # every hand row, as written
    assert "| `--get-stream` | off | Answer `GET` on the MCP endpoint" in table  # one made from its field


def test_a_hand_row_for_a_flag_serve_does_not_have_fails_the_build() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    stale = page.replace(
        "<!-- /mcpfaults:serve-flags -->", "| `--old-flag` | | Gone. |\n<!-- /mcpfaults:serve-flags -->"
    )
    with pytest.raises(ValueError, match=r"a hand row for a flag `serve` does not have: --old-flag"):
        hooks.fill(stale)


def test_the_constructor_and_the_factory_take_exactly_the_options() -> None:
    from pytest_mcpfaults import Sidecar, SidecarFactory

    names = [f.name for f, _ in option_fields()]
    assert list(inspect.signature(Sidecar).parameters) == names
    assert list(inspect.signature(SidecarFactory.__call__).parameters)[1:] == names
    assert all(
        p.kind is inspect.Parameter.KEYWORD_ONLY for p in inspect.signature(Sidecar).parameters.values()
    )


def test_an_unknown_option_is_named_with_the_valid_ones() -> None:
    import pytest

    from pytest_mcpfaults import Sidecar

    with pytest.raises(
        TypeError, match=r"Sidecar: unknown argument 'patiense'; valid arguments: host, port, "
    ):
        Sidecar(patiense=1.0)  # type: ignore[call-arg]


def test_mock_sidecar_names_an_option_it_does_not_take() -> None:
    import pytest

    from pytest_mcpfaults.inprocess import mock_sidecar

    with pytest.raises(
        TypeError, match=r"mock_sidecar: 'idle_timeout' is an option of the socket Sidecar only"
    ):
        mock_sidecar(idle_timeout=1.0)
    with pytest.raises(
        TypeError, match=r"mock_sidecar: 'patience' is an option of the socket Sidecar and StdioServer only"
    ):
        mock_sidecar(patience=1.0)
    with pytest.raises(
        TypeError, match=r"mock_sidecar: 'patiense' is not an option; the in-process backend "
    ):
        mock_sidecar(patiense=1.0)


#: The made-up option the core reads, written into the copy as a contributor would (file -> (what is
#: there, what replaces it), each once): its field in ``SidecarOptions``, taken by every backend, with
#: a repeatable ``serve`` flag, and its use where the core builds its tools (it reads ``self.options``).
#: No backend maps it by hand: that is what the test counts.
_TOOLS = "        self.tools = builtin_tools(tool_sets, self.benchmark)\n"
EDITS: dict[str, list[tuple[str, str]]] = {
    "pytest_mcpfaults/options/fields.py": [
        (
            "    def __post_init__(self) -> None:",  # SidecarOptions' last field comes before it
            "    hidden_tools: Sequence[str] = option(\n"
            '        (), help="built-in tools not served.", flag="--hide-tool", parse=str, metavar="NAME",\n'
            "        repeat=True, collect=tuple, backends=BACKENDS,\n"
            "    )\n\n"
            "    def __post_init__(self) -> None:",
        )
    ],
    "pytest_mcpfaults/core/core.py": [
        (
            _TOOLS,
            _TOOLS + "        for name in self.options.hidden_tools:\n            del self.tools[name]\n",
        )
    ],
}

OPTION_TEST = '''

LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def listed(mcp_url: str) -> list[str]:
    import httpx

    answer = httpx.post(mcp_url, json=LIST, headers=HEADERS, timeout=5).json()
    return sorted(tool["name"] for tool in answer["result"]["tools"])


def listed_by_a_child(server) -> list[str]:  # type: ignore[no-untyped-def]
    import os

    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, LIST]
    child = subprocess.run(
        [server.command, *server.args], env={**os.environ, **server.env}, capture_output=True, text=True,
        input="".join(json.dumps(m) + "\\n" for m in lines), timeout=30,
    )
    answer = next(r for r in map(json.loads, child.stdout.splitlines()) if r.get("id") == 2)
    return sorted(tool["name"] for tool in answer["result"]["tools"])


def test_hidden_tools(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    from pytest_mcpfaults import Sidecar
    from pytest_mcpfaults.inprocess import mock_sidecar
    from pytest_mcpfaults.stdio.server import StdioServer

    with Sidecar() as sc:
        assert "echo" in listed(sc.mcp_url)
    with Sidecar(hidden_tools=["echo"]) as sc:
        seen = {"Sidecar": listed(sc.mcp_url)}
    with mock_sidecar(hidden_tools=["echo"]) as side:
        seen["mock_sidecar"] = listed(side.mcp_url)
    with StdioServer(hidden_tools=["echo"]) as server:
        seen["StdioServer"] = listed_by_a_child(server)
    assert [name for name, tools in seen.items() if "echo" in tools or not tools] == [], seen
    pytester.makeconftest("from test_options import listed")
    pytester.makepyfile(
        """
        import pytest
        from conftest import listed

        @pytest.mark.mcp_sidecar(hidden_tools=["echo"])
        def test_marker_and_factory(mcp_sidecar, mcp_sidecar_factory):
            assert "echo" not in listed(mcp_sidecar.mcp_url)
            assert "echo" not in listed(mcp_sidecar_factory(hidden_tools=["echo"]).mcp_url)
        """
    )
    run_plugin().assert_outcomes(passed=1)
'''

#: What the derived surfaces say about the option, checked in one Python that imports the copy's
#: package (its ``tests/`` and ``docs/`` first on ``sys.path``): the surfaces, this module's and the API
#: page's pins of the docs against the options (fixture-free tests of the copy's ``tests/``, called as
#: functions) and the option's own test (a real sidecar, ``mock_sidecar``, ``StdioServer``'s child; the
#: marker and the factory through pytester), run by ``pytest.main`` there.
OPTION_SHOWN = """
import inspect, sys
sys.path[:0] = ["tests", "docs"]
import pytest
import pytest_mcpfaults
from pytest_mcpfaults import Sidecar, SidecarFactory
from pytest_mcpfaults.cli import build_parser
from pytest_mcpfaults.inprocess import InProcessSidecar
from pytest_mcpfaults.options.fields import options_from_args
from pytest_mcpfaults.stdio.server import StdioServer
assert pytest_mcpfaults.__file__.startswith({copy!r}), pytest_mcpfaults.__file__
serve = build_parser()._subparsers._group_actions[0].choices["serve"]
for name, made in (("constructor", Sidecar), ("factory", SidecarFactory.__call__),
                   ("mock_sidecar", InProcessSidecar), ("StdioServer", StdioServer)):
    print(name + ":", "hidden_tools" in inspect.signature(made).parameters)
print("serve --help:", "--hide-tool NAME" in serve.format_help())
given = ([], ["--hide-tool", "echo", "--hide-tool", "add"])
parsed = [options_from_args(build_parser().parse_args(["serve", *args])) for args in given]
print("serve:", parsed[0].get("hidden_tools"), parsed[1].get("hidden_tools"))

import test_docs_api, test_options
CHECKS = [
    test_options.test_the_docs_options_table_has_a_row_per_option_in_field_order,
    test_options.test_the_in_process_column_is_what_mock_sidecar_takes,
    test_options.test_the_cli_pages_flags_table_has_every_serve_flag_in_help_order,
    test_options.test_the_constructor_and_the_factory_take_exactly_the_options,
    test_options.test_an_unknown_option_is_named_with_the_valid_ones,
    test_options.test_mock_sidecar_names_an_option_it_does_not_take,
    test_docs_api.test_every_fixture_has_its_heading_in_the_filled_page,
    test_docs_api.test_the_fixtures_keyword_arguments_are_every_sidecar_parameter,
]
for check in CHECKS:
    check()
print("checked:", len(CHECKS))
own = ["-q", "-rA", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
own.append("tests/test_options.py::test_hidden_tools")
print("its test:", pytest.main(own))
"""


def add_the_option(copy: Path) -> None:
    """The option written into ``copy`` (tests/contribution.py makes the copy): :data:`EDITS` and its
    test appended to this module."""
    for name, edits in EDITS.items():
        path = copy / name
        source = path.read_text()
        for there, then in edits:
            assert source.count(there) == 1, (name, there)
            source = source.replace(there, then)
        path.write_text(source)
    tests = copy / "tests" / "test_options.py"
    tests.write_text(tests.read_text() + OPTION_TEST)


@pytest.mark.timeout(300)
def test_an_option_the_core_reads_is_its_field_and_its_use_on_every_backend(
    contribution: Contribution,
) -> None:
    """A made-up option the core reads (``hidden_tools``: built-in tools it does not serve), written
    into a copy of the repository as a contributor would (:func:`add_the_option`): its field in
    options/fields.py (``backends=``: every backend), its use in core/core.py, which reads
    ``self.options``, and its test in this module, nothing else: no backend maps options by hand, and
    the docs tables are made when the site is built. ``git status`` counts the files: two by hand, and
    the test. In the copy the option is on every surface, this module's and the API page's pins of the
    docs hold, its own test passes (the socket ``Sidecar``, ``mock_sidecar`` and ``StdioServer``'s child
    list their tools without the hidden one, and so do the marker's and the factory's sidecars) and the
    docs site (both tables with the option) builds. The copy also holds tests/test_add_kind.py's kind,
    added after the option and counted apart: the two share the copy and its site build
    (tests/contribution.py)."""
    copy = contribution.copy
    assert contribution.touched["option"] == [
        "pytest_mcpfaults/core/core.py",  # by hand: its use
        "pytest_mcpfaults/options/fields.py",  # by hand: the field
        "tests/test_options.py",  # its test
    ]
    shown = run_in(copy, "-c", OPTION_SHOWN.format(copy=str(copy)), timeout=180)
    lines = shown.stdout.splitlines()
    assert lines[:6] == [
        "constructor: True",
        "factory: True",
        "mock_sidecar: True",
        "StdioServer: True",
        "serve --help: True",
        "serve: () ('echo', 'add')",
    ], shown.stdout[-4000:] + shown.stderr[-4000:]
    assert "checked: 8" in lines, shown.stdout[-4000:] + shown.stderr[-4000:]
    assert "PASSED tests/test_options.py::test_hidden_tools" in shown.stdout, shown.stdout[-3000:]
    assert lines[-1] == "its test: 0", shown.stdout[-3000:] + shown.stderr[-3000:]
    assert contribution.build_returncode == 0 and "WARNING" not in contribution.build_stderr, (
        contribution.build_stdout + contribution.build_stderr
    )
    cli, sidecar = ((contribution.site / page / "index.html").read_text() for page in ("cli", "sidecar"))
    assert "<td><code>--hide-tool NAME</code></td>" in cli
    assert "<td><code>hidden_tools</code></td>" in sidecar


def test_a_one_shot_iterable_option_is_kept_whole_not_consumed_by_its_check() -> None:
    """An option that takes a list takes any iterable; a generator is read once, so its check must not be
    the read that empties it (``allowed_origins`` was ``()`` after a generator passed its check, and every
    browser ``Origin`` was then refused)."""
    opts = SidecarOptions(
        allowed_origins=(o for o in ["http://a.example", "http://b.example"]),
        tool_sets=(s for s in ["benchmark"]),
    )
    assert opts.allowed_origins == ("http://a.example", "http://b.example")
    assert list(opts.tool_sets) == ["benchmark"]
    with pytest.raises(ValueError, match="allowed_origins takes origins as a client sends them"):
        SidecarOptions(allowed_origins=(o for o in ["a.example"]))
