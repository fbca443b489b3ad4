"""The socket sidecar's options are one frozen ``SidecarOptions`` (sidecar/options.py): the constructor,
the marker, the factory, ``serve``'s flags and the docs options table are read from its fields. Shown
with a made-up option added the way a contributor adds one — its field (here a subclass patched in
before the package is imported, as if written in ``SidecarOptions``), its use (``header=``: the one
stamp every socket answer passes) and this test — and nothing else: it appears everywhere, the
generated docs tables included (docs/sidecar.md's options, docs/cli.md's ``serve`` flags)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scratch_copy import copy_repository, run_in, touched

from pytest_mcpfaults.inprocess import InProcessSidecar
from pytest_mcpfaults.sidecar.options import option_fields, with_flags_table, with_options_table

ROOT = Path(__file__).resolve().parent.parent

MADE_UP = textwrap.dedent(
    """
    import dataclasses, inspect, json, socket, sys
    import pytest_mcpfaults.sidecar.options as o

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
        "docs table": "| `server_header` | `None` | `--server-header` |" in o.options_table(),
        "cli page": "\\n| `--server-header TEXT` | none | The `Server` header of every answer. |\\n"
        in o.with_flags_table(open(sys.argv[2]).read()),
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
        [sys.executable, str(script), str(tmp_path), str(ROOT / "docs" / "cli.md")],
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


def test_the_docs_options_table_is_the_generated_one() -> None:
    page = (ROOT / "docs" / "sidecar.md").read_text()
    assert with_options_table(page) == page, (
        "docs/sidecar.md's options table is stale: run "
        "`.venv/bin/python -m pytest_mcpfaults.sidecar.options docs/sidecar.md`"
    )


def test_the_in_process_column_is_what_mock_sidecar_takes() -> None:
    takes = set(inspect.signature(InProcessSidecar).parameters) - {"base_url"}
    assert takes == {f.name for f, opt in option_fields() if "in-process" in opt.backends}


def test_the_cli_pages_flags_table_is_the_generated_one() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    assert with_flags_table(page) == page, (
        "docs/cli.md's serve flags table is stale: run `.venv/bin/python -m pytest_mcpfaults.sidecar.options`"
    )


def test_every_serve_flag_has_its_row_in_the_cli_page() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    flags = [opt.flag for _, opt in option_fields() if opt.flag] + [
        opt.none_flag[0] for _, opt in option_fields() if opt.none_flag
    ]
    assert flags
    assert [f for f in flags if f"| `{f}" not in page] == []


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
    test_options.test_the_docs_options_table_is_the_generated_one,
    test_options.test_the_in_process_column_is_what_mock_sidecar_takes,
    test_options.test_the_cli_pages_flags_table_is_the_generated_one,
    test_options.test_every_serve_flag_has_its_row_in_the_cli_page,
    test_options.test_the_constructor_and_the_factory_take_exactly_the_options,
    test_options.test_an_unknown_option_is_named_with_the_valid_ones,
    test_options.test_mock_sidecar_names_an_option_it_does_not_take,
    test_docs_api.test_the_committed_page_is_what_the_code_generates,
    test_docs_api.test_every_public_name_and_fixture_has_its_heading,
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
    would: its field and its use (``header=``) in sidecar/options.py, its test in this module; then the
    commands that remake the generated docs. ``git status`` counts the files; in the copy the option is
    on every surface, this module's and the API page's pins of the docs hold, its own test passes (a
    real sidecar, the marker, the factory) and the docs site (Sidecar's docstring with the option)
    builds."""
    copy = copy_repository(tmp_path)
    options = copy / "pytest_mcpfaults" / "sidecar" / "options.py"
    source = options.read_text()
    at = source.index("    def __post_init__(self) -> None:")  # SidecarOptions' last field comes before
    options.write_text(source[:at] + FIELD + "\n" + source[at:])
    tests = copy / "tests" / "test_options.py"
    tests.write_text(tests.read_text() + OPTION_TEST)
    made = run_in(copy, "-m", "pytest_mcpfaults.sidecar.options")  # docs/sidecar.md and docs/cli.md
    assert made.returncode == 0, made.stdout + made.stderr
    api = run_in(copy, "docs/gen_api.py")  # the API page shows Sidecar's arguments
    assert api.returncode == 0, api.stdout + api.stderr
    assert touched(copy) == [
        "docs/api.md",  # generated
        "docs/cli.md",  # generated: the serve flags table
        "docs/sidecar.md",  # generated: the options table
        "pytest_mcpfaults/sidecar/options.py",  # by hand: the field and its use
        "tests/test_options.py",  # by hand: its test
    ]
    assert (
        "| `--server-header TEXT` | none | The `Server` header of every answer. |"
        in (copy / "docs" / "cli.md").read_text()
    )
    assert "| `server_header` | `None` | `--server-header` |" in (copy / "docs" / "sidecar.md").read_text()
    shown = run_in(copy, "-c", OPTION_SHOWN.format(copy=str(copy)), timeout=180)
    lines = shown.stdout.splitlines()
    assert lines[:5] == [
        "constructor: True",
        "factory: True",
        "serve --help: True",
        "serve: None x/1",
        "checked: 10",
    ], shown.stdout[-4000:] + shown.stderr[-4000:]
    assert "PASSED tests/test_options.py::test_server_header" in shown.stdout, shown.stdout[-3000:]
    assert lines[-1] == "its test: 0", shown.stdout[-3000:] + shown.stderr[-3000:]
    build = ["-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")]
    site = run_in(copy, *build, timeout=240, env={"NO_MKDOCS_2_WARNING": "1"})
    assert site.returncode == 0 and "WARNING" not in site.stderr, site.stdout + site.stderr


CORE_FIELD = """    hidden_tools: Sequence[str] = option(
        (), help="built-in tools not served.", backends=BACKENDS
    )  # fmt: skip
"""

#: The core-read option on every backend, checked in one Python that imports the copy's package: the
#: constructor, ``mock_sidecar``, ``StdioServer`` (its child spawned, the requests written to its
#: stdin), the marker and the factory (``pytest.main``), each listing its tools without the hidden one.
CORE_OPTION_SHOWN = """
import json, os, subprocess, sys
import httpx, pytest
import pytest_mcpfaults
from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.inprocess import mock_sidecar
from pytest_mcpfaults.stdio.server import StdioServer
assert pytest_mcpfaults.__file__.startswith({copy!r}), pytest_mcpfaults.__file__
LIST = {{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}}
HEADERS = {{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}}
def names(answer):
    return sorted(t["name"] for t in answer["result"]["tools"])
seen = {{}}
with Sidecar(hidden_tools=["echo"]) as sc:
    seen["constructor"] = names(httpx.post(sc.mcp_url, json=LIST, headers=HEADERS).json())
with mock_sidecar(hidden_tools=["echo"]) as side:
    seen["mock_sidecar"] = names(httpx.post(side.mcp_url, json=LIST, headers=HEADERS).json())
with StdioServer(hidden_tools=["echo"]) as server:
    init = {{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{"protocolVersion": "2025-11-25",
            "capabilities": {{}}, "clientInfo": {{"name": "t", "version": "1"}}}}}}
    lines = [init, {{"jsonrpc": "2.0", "method": "notifications/initialized"}}, LIST]
    child = subprocess.run([server.command, *server.args], env={{**os.environ, **server.env}},
                           input="".join(json.dumps(m) + "\\n" for m in lines), capture_output=True,
                           text=True, timeout=30)
    seen["StdioServer"] = names(next(r for r in map(json.loads, child.stdout.splitlines()) if r["id"] == 2))
with Sidecar() as sc:
    seen["default"] = names(httpx.post(sc.mcp_url, json=LIST, headers=HEADERS).json())
for name, tools in seen.items():
    print(name + ":", "echo" in tools, len(tools) > 1)
test = {tmp!r} + "/test_marker_and_factory.py"
open(test, "w").write(
    "import httpx, pytest\\n"
    f"LIST, HEADERS = {{LIST!r}}, {{HEADERS!r}}\\n"
    "@pytest.mark.mcp_sidecar(hidden_tools=['echo'])\\n"
    "def test_it(mcp_sidecar, mcp_sidecar_factory):\\n"
    "    for sc in (mcp_sidecar, mcp_sidecar_factory(hidden_tools=['echo'])):\\n"
    "        tools = httpx.post(sc.mcp_url, json=LIST, headers=HEADERS).json()['result']['tools']\\n"
    "        assert 'echo' not in [t['name'] for t in tools] and tools\\n"
)
print("marker and factory:", pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", {tmp!r}, test]))
"""


@pytest.mark.timeout(300)
def test_an_option_the_core_reads_is_its_field_and_its_use_on_every_backend(tmp_path: Path) -> None:
    """A made-up option the core reads (``hidden_tools``: built-in tools it does not serve), written into
    a copy of the repository as a contributor would: its field in sidecar/options.py (``backends=``:
    every backend) and its use in sidecar/core.py, which reads ``self.options``. ``git status`` counts
    the files edited by hand: those two (the option's own test and the generated docs tables, which the
    recipe's generators remake, are not counted). No backend maps options by hand: the constructor,
    ``mock_sidecar``, ``StdioServer``, the marker and the factory all take it and serve without it."""
    copy = copy_repository(tmp_path)
    options = copy / "pytest_mcpfaults" / "sidecar" / "options.py"
    source = options.read_text()
    at = source.index("    def __post_init__(self) -> None:")  # SidecarOptions' last field comes before
    options.write_text(source[:at] + CORE_FIELD + "\n" + source[at:])
    core = copy / "pytest_mcpfaults" / "sidecar" / "core.py"
    anchor = "        self.tools = builtin_tools(tool_sets, self.benchmark)\n"
    use = "        for name in self.options.hidden_tools:\n            del self.tools[name]\n"
    assert core.read_text().count(anchor) == 1
    core.write_text(core.read_text().replace(anchor, anchor + use))
    assert touched(copy) == ["pytest_mcpfaults/sidecar/core.py", "pytest_mcpfaults/sidecar/options.py"]
    shown = run_in(copy, "-c", CORE_OPTION_SHOWN.format(copy=str(copy), tmp=str(tmp_path)), timeout=180)
    names = ("constructor:", "mock_sidecar:", "StdioServer:", "default:", "marker and factory:")
    assert [line for line in shown.stdout.splitlines() if line.startswith(names)] == [
        "constructor: False True",
        "mock_sidecar: False True",
        "StdioServer: False True",
        "default: True True",
        "marker and factory: 0",
    ], shown.stdout[-4000:] + shown.stderr[-4000:]
