"""The socket sidecar's options are one frozen ``SidecarOptions`` (sidecar/options.py): the constructor,
the marker, the factory, ``serve``'s flags and the docs options table are read from its fields. Shown
with a made-up option added the way a contributor adds one — its field (here a subclass patched in
before the package is imported, as if written in ``SidecarOptions``), its use (``header=``: the one
stamp every socket answer passes) and this test — and nothing else: it appears everywhere."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from pytest_mcpfaults.inprocess import InProcessSidecar
from pytest_mcpfaults.sidecar.options import option_fields, with_options_table

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
        [sys.executable, str(script), str(tmp_path)],
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
        ("constructor", "factory", "serve --help", "serve", "docs table", "marker"), True
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

    with pytest.raises(TypeError, match=r"mock_sidecar: 'patience' is an option of the socket Sidecar only"):
        mock_sidecar(patience=1.0)
    with pytest.raises(
        TypeError, match=r"mock_sidecar: 'patiense' is not an option; the in-process backend "
    ):
        mock_sidecar(patiense=1.0)
