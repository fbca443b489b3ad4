"""The socket sidecar's options are one frozen ``SidecarOptions`` (sidecar/options.py): the constructor,
the marker, the factory, ``serve``'s flags and the docs options table are read from its fields. Shown
with a made-up option added the way a contributor adds one — its field (here a subclass patched in
before the package is imported, as if written in ``SidecarOptions``), its use (``header=``: the one
stamp every socket answer passes) and this test — and nothing else: it appears everywhere, the docs
tables made at build (docs/hooks.py: docs/sidecar.md's options, docs/cli.md's ``serve`` flags) included."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scratch_copy import copy_repository, run_in, touched

from pytest_mcpfaults.inprocess import InProcessSidecar
from pytest_mcpfaults.sidecar.options import option_fields

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import hooks  # noqa: E402

MADE_UP = textwrap.dedent(
    """
    import dataclasses, inspect, json, socket, sys
    import pytest_mcpfaults.sidecar.options as o
    sys.path.insert(0, sys.argv[2])  # the docs: its hook makes the tables
    import hooks

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithServerHeader(o.SidecarOptions):  # the field ...
        server_header: str | None = o.option(
            None, help="the `Server` header of every answer.", flag="--server-header", parse=str,
            metavar="TEXT", header="Server",  # ... and its use: the stamp of every socket answer
        )

    o.SidecarOptions = WithServerHeader  # as if the field were written in SidecarOptions itself

    import httpx
    import pytest
    from pytest_mcpfaults import Sidecar, SidecarFactory
    from pytest_mcpfaults.cli import build_parser

    seen = {
        "constructor": "server_header" in inspect.signature(Sidecar).parameters
        and "server_header: the ``Server`` header" in (Sidecar.__doc__ or ""),
        "factory": "server_header" in inspect.signature(SidecarFactory.__call__).parameters,
        "serve --help": "--server-header TEXT" in build_parser()._subparsers._group_actions[0]
        .choices["serve"].format_help(),
        "serve": o.options_from_args(build_parser().parse_args(["serve", "--server-header", "cli/1"]))
        ["server_header"] == "cli/1",
        "docs table": "| `server_header` | `None` | `--server-header` |"
        in hooks.fill(open(sys.argv[2] + "/sidecar.md").read()),
        "cli page": "\\n| `--server-header TEXT` | none | The `Server` header of every answer. |\\n"
        in hooks.fill(open(sys.argv[2] + "/cli.md").read()),
    }
    with Sidecar(server_header="made-up/1", max_body_bytes=10, get_stream=True) as sc:
        servers = {
            "health": httpx.get(sc.health_url).headers.get("server"),
            "404": httpx.get(sc.url + "/nowhere").headers.get("server"),
            "413 (the adapter's own)": httpx.post(sc.mcp_url, content=b"x" * 100).headers.get("server"),
        }
        with httpx.stream("GET", sc.mcp_url, headers={"Accept": "text/event-stream"}) as stream:
            servers["event stream"] = stream.headers.get("server")
        with socket.create_connection((sc.host, sc.port), timeout=5) as raw:
            raw.sendall(b"NOT HTTP AT ALL\\r\\n\\r\\n")
            head = raw.recv(4096).decode("latin-1")
        stamped_400 = "\\r\\nServer: made-up/1\\r\\n" in head
        servers["400 (aiohttp's own)"] = "made-up/1" if stamped_400 else head[:200]
        servers["OTLP port"] = httpx.get(sc.otlp_url).headers.get("server")
    seen["stamped"] = servers

    (test := __import__("pathlib").Path(sys.argv[1]) / "test_marker.py").write_text(
        "import httpx, pytest\\n"
        "@pytest.mark.mcp_sidecar(server_header='marker/1')\\n"
        "def test_it(mcp_sidecar):\\n"
        "    assert httpx.get(mcp_sidecar.health_url).headers['server'] == 'marker/1'\\n"
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
    stamped = seen.pop("stamped")
    assert seen == dict.fromkeys(
        ("constructor", "factory", "serve --help", "serve", "docs table", "cli page", "marker"), True
    ), out.stdout[-3000:]
    assert stamped == dict.fromkeys(stamped, "made-up/1") and len(stamped) == 6, stamped


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

    with pytest.raises(TypeError, match=r"mock_sidecar: 'patience' is an option of the socket Sidecar only"):
        mock_sidecar(patience=1.0)
    with pytest.raises(
        TypeError, match=r"mock_sidecar: 'patiense' is not an option; the in-process backend "
    ):
        mock_sidecar(patiense=1.0)


FIELD = """    server_header: str | None = option(
        None, help="the `Server` header of every answer.", flag="--server-header", parse=str,
        metavar="TEXT", header="Server",  # its use: the one stamp every socket answer passes
    )  # fmt: skip
"""

OPTION_TEST = '''

def test_server_header(pytester: pytest.Pytester, run_plugin) -> None:  # type: ignore[no-untyped-def]
    import httpx

    from pytest_mcpfaults import Sidecar

    with Sidecar(server_header="made-up/1") as sc:
        assert httpx.post(sc.mcp_url, content=b"{").headers["server"] == "made-up/1"
    pytester.makepyfile(
        """
        import httpx, pytest

        @pytest.mark.mcp_sidecar(server_header="marker/1")
        def test_marker_and_factory(mcp_sidecar, mcp_sidecar_factory):
            assert httpx.get(mcp_sidecar.health_url).headers["server"] == "marker/1"
            made = mcp_sidecar_factory(server_header="factory/1")
            assert httpx.get(made.health_url).headers["server"] == "factory/1"
        """
    )
    run_plugin().assert_outcomes(passed=1)
'''

#: What the derived surfaces say about the option, checked in one Python that imports the copy's
#: package (its ``tests/`` and ``docs/`` first on ``sys.path``): the surfaces, this module's and the API
#: page's pins of the docs against the options (fixture-free tests of the copy's ``tests/``, called as
#: functions) and the option's own test (a real sidecar; the marker and the factory through pytester),
#: run by ``pytest.main`` there.
OPTION_SHOWN = """
import inspect, sys
sys.path[:0] = ["tests", "docs"]
import pytest
import pytest_mcpfaults
from pytest_mcpfaults import Sidecar, SidecarFactory
from pytest_mcpfaults.cli import build_parser
from pytest_mcpfaults.sidecar.options import options_from_args
assert pytest_mcpfaults.__file__.startswith({copy!r}), pytest_mcpfaults.__file__
serve = build_parser()._subparsers._group_actions[0].choices["serve"]
print("constructor:", "server_header" in inspect.signature(Sidecar).parameters)
print("factory:", "server_header" in inspect.signature(SidecarFactory.__call__).parameters)
print("serve --help:", "--server-header TEXT" in serve.format_help())
given = ([], ["--server-header", "x/1"])
parsed = [options_from_args(build_parser().parse_args(["serve", *args])) for args in given]
print("serve:", parsed[0].get("server_header"), parsed[1].get("server_header"))

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
own.append("tests/test_options.py::test_server_header")
print("its test:", pytest.main(own))
"""


@pytest.mark.timeout(300)
def test_a_made_up_option_in_a_copy_of_the_repository_is_three_places(tmp_path: Path) -> None:
    """The made-up option of the test above, written into a copy of the repository as a contributor
    would: its field and its use (``header=``) in sidecar/options.py, its test in this module, and
    nothing else (the docs tables are made when the site is built). ``git status`` counts the files; in
    the copy the option is on every surface, this module's and the API page's pins of the docs hold, its
    own test passes (a real sidecar, the marker, the factory) and the docs site (Sidecar's docstring and
    both tables with the option) builds."""
    copy = copy_repository(tmp_path)
    options = copy / "pytest_mcpfaults" / "sidecar" / "options.py"
    source = options.read_text()
    at = source.index("    def __post_init__(self) -> None:")  # SidecarOptions' last field comes before
    options.write_text(source[:at] + FIELD + "\n" + source[at:])
    tests = copy / "tests" / "test_options.py"
    tests.write_text(tests.read_text() + OPTION_TEST)
    assert touched(copy) == [
        "pytest_mcpfaults/sidecar/options.py",  # the field and its use
        "tests/test_options.py",  # its test
    ]
    shown = run_in(copy, "-c", OPTION_SHOWN.format(copy=str(copy)), timeout=180)
    lines = shown.stdout.splitlines()
    assert lines[:5] == [
        "constructor: True",
        "factory: True",
        "serve --help: True",
        "serve: None x/1",
        "checked: 8",
    ], shown.stdout[-4000:] + shown.stderr[-4000:]
    assert "PASSED tests/test_options.py::test_server_header" in shown.stdout, shown.stdout[-3000:]
    assert lines[-1] == "its test: 0", shown.stdout[-3000:] + shown.stderr[-3000:]
    build = ["-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")]
    site = run_in(copy, *build, timeout=240, env={"NO_MKDOCS_2_WARNING": "1"})
    assert site.returncode == 0 and "WARNING" not in site.stderr, site.stdout + site.stderr
    cli, sidecar = ((tmp_path / "site" / page / "index.html").read_text() for page in ("cli", "sidecar"))
    assert "<td><code>--server-header TEXT</code></td>" in cli
    assert "<td><code>server_header</code></td>" in sidecar
