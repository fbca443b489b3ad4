"""Adding a fault kind, as a contributor would: four files by hand (its class in ``fault_types.py``, its
behaviour in ``sidecar/connection.py``, its test in ``test_faults_answers.py`` — through httpx, the mcp
2.x ``Client`` and, with the ``mcp1_client`` fixture, mcp 1.x's ``ClientSession``, so the catalogue's
client columns are measured by that one test — and two rows of ``docs/faults.md``) and two commands
that remake the generated docs (``python -m pytest_mcpfaults.kind_tables``, ``python docs/gen_api.py``).

The kind is made up: ``slow_502``, a gateway that waits, then answers 502. It is written into a copy of
the repository in ``tmp_path`` (a git repository of its own, so the files it touches are counted by
``git status``), and the suite's tests of everything that lists kinds run there with it: the registry
and exports, the text form, the behaviour modules, the strategies' shrink order (checked against
Hypothesis), the matrix, the in-process parity cases, the report, the docs tables (with the pin that
every catalogue row's mcp 1.x cell is measured by a test) and the docs build, the kind's own test
through real clients on both backends, and the README's main command (the worked example, whose
teardown matrix gets a slow_502 cell). docs/architecture.md and CONTRIBUTING.md state the count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scratch_copy import ROOT, copy_repository, insert_after, run_in, touched

CLASS = '''

@dataclass(frozen=True)
class SlowGateway(Fault):
    """A gateway whose upstream does not answer in time: wait ``seconds``, then answer 502."""

    kind: ClassVar[str] = "slow_502"
    phase: ClassVar[Phase] = "connection"
    shrink_rank: ClassVar[int] = 105
    draws: ClassVar[Mapping[str, Draw]] = {"seconds": (0.0, 0.01)}
    catalogue_params: ClassVar[Mapping[str, Any] | None] = {"seconds": 0.05}
    seconds: float = 0.05

    def _validate(self) -> None:
        check_seconds("SlowGateway", "seconds", self.seconds)
'''

BEHAVIOUR = """

@effect_of.register
def _slow_gateway(fault: F.SlowGateway, fired: int = 0) -> Effect | None:
    return Pausing(fault.seconds)


@answer_reply.register
def _slow_gateway_reply(
    fault: F.SlowGateway, info: RequestInfo, endpoint: McpEndpoint, service_url: str
) -> Reply | None:
    return Reply(502, {"error": "Bad Gateway: the upstream did not answer in time"}, sse=False)
"""

TEST = '''

async def test_a_slow_gateway_answers_502_after_its_delay(mcp1_client: Mcp1Client) -> None:
    """slow_502 through real clients: httpx, the mcp 2.x ``Client`` and mcp 1.x's ``ClientSession`` on
    the socket sidecar (the catalogue's three client columns), httpx on the in-process backend."""
    import time

    from pytest_mcpfaults import SlowGateway, parse_fault
    from pytest_mcpfaults.inprocess import mock_sidecar

    assert str(parse_fault("slow_502(seconds=0.2)@health")) == "slow_502(seconds=0.2)@health"
    with Sidecar(faults=[SlowGateway(0.2, when="health")]) as sidecar:
        started = time.monotonic()
        response = httpx.get(sidecar.health_url, timeout=5)
        assert response.status_code == 502 and time.monotonic() - started >= 0.2
        assert sidecar.fired == {"slow_502": 1}
        assert httpx.get(sidecar.health_url, timeout=5).status_code == 502  # every matching request
    with Sidecar(faults=["slow_502(seconds=0.2)@tools/call"]) as sidecar:
        async with Client(sidecar.mcp_url, read_timeout_seconds=5) as client:
            started = time.monotonic()
            with pytest.raises(MCPError, match="Server returned an error response"):
                await client.call_tool("echo", {"text": "hi"})
            assert time.monotonic() - started >= 0.2  # late
        # mcp 1.x: no McpError; the call is cancelled and leaving `async with` raises the 502
        seen = await asyncio.to_thread(mcp1_client.call, sidecar.mcp_url, "echo", {"text": "hi"})
        assert seen.cancelled and seen.exited == ["HTTPStatusError"] and seen.seconds >= 0.2, seen
        assert sidecar.fired == {"slow_502": 2}
        await asyncio.to_thread(sidecar.wait_idle, 3)
        calls = [r for r in sidecar.requests if r.mcp_method == "tools/call"]
        assert [(r.status, r.fault_kind) for r in calls] == [(502, "slow_502")] * 2
    with mock_sidecar(faults=["slow_502(seconds=0.01)@health[times=1]"]) as fake:
        assert [httpx.get(fake.health_url).status_code for _ in range(2)] == [502, 200]
'''

DOCS = {
    "| `StdoutNoise` |": '| `SlowGateway` | `seconds=0.05` (`*`) | `SlowGateway(0.5, when="tools/call")` | '
    '502, late | `MCPError("Server returned an error response")`, late | no `McpError`: the call is '
    "cancelled, late; exit raises `ExceptionGroup[httpx.HTTPStatusError]` | `test_faults_answers.py` |",
    "| `stdout_noise` | no | no (stdio only) |": "| `slow_502` | yes | the matched request: late, a 502 |",
}

#: The suite's tests of what lists or counts kinds, run in the copy with the kind added.
CHECKS = [
    "tests/test_faults_answers.py::test_a_slow_gateway_answers_502_after_its_delay",
    "tests/test_fault_registry.py",
    "tests/test_behaviour.py",
    "tests/test_faults_triggers.py",
    "tests/test_matrix.py",
    "tests/test_inprocess.py",
    "tests/test_report.py",
    "tests/test_faults_doc.py",
    "tests/test_kind_tables.py",
    "tests/test_docs_api.py",
    "tests/test_stdio_docs.py",
    "tests/test_cli.py::test_docs_fault_examples_parse_and_the_kinds_table_is_the_generated_one",
    "tests/test_legacy_sse.py::test_the_faults_by_transport_table_has_a_legacy_sse_cell_for_every_built_in_kind",
    "tests/test_docs.py::test_docs_site_builds_with_warnings_as_errors",
    "tests/test_strategies.py::test_kind_order_is_the_order_hypothesis_shrinks_to",
    "tests/test_strategies.py::test_kind_order_covers_every_kind_once",
]

#: What the derived lists say about the kind, printed from the copy.
SHOW = """
import pytest_mcpfaults, pytest_mcpfaults.faults as F
from pytest_mcpfaults.inprocess import SUPPORTED_KINDS
from pytest_mcpfaults.matrix import catalogue
from pytest_mcpfaults.strategies import kind_order
assert pytest_mcpfaults.__file__.startswith({copy!r}), pytest_mcpfaults.__file__
print("exported:", "SlowGateway" in pytest_mcpfaults.__all__, "SlowGateway" in F.__all__)
print("text form:", F.parse_fault("slow_502(seconds=0.01)@tools/call[nth=2]"))
print("shrinks after:", kind_order()[kind_order().index("slow_502") - 1])
print("matrix cell:", *map(str, catalogue(kinds=["slow_502"])))
print("in-process:", "slow_502" in SUPPORTED_KINDS)
"""


@pytest.mark.timeout(720)
def test_a_new_kind_touches_four_files_and_every_list_picks_it_up(tmp_path: Path) -> None:
    copy = copy_repository(tmp_path)

    # 1. the class, and its name in the module's __all__ (next to it)
    fault_types = copy / "pytest_mcpfaults" / "fault_types.py"
    fault_types.write_text(fault_types.read_text() + CLASS)
    insert_after(fault_types, '    "Fault",', '    "SlowGateway",\n')
    # 2. the behaviour: a pause, then the reply
    connection = copy / "pytest_mcpfaults" / "sidecar" / "connection.py"
    source = connection.read_text().replace(
        "from pytest_mcpfaults.sidecar.routing import jitter",
        "from pytest_mcpfaults.sidecar.mcp import McpEndpoint, Reply\n"
        "from pytest_mcpfaults.sidecar.routing import RequestInfo, answer_reply, jitter",
    )
    connection.write_text(source + BEHAVIOUR)
    # 3. its test (every client the catalogue has a column for), 4. its rows on the one docs page (the
    # catalogue and the legacy SSE table by hand, the generated tables by python -m
    # pytest_mcpfaults.kind_tables)
    answers = copy / "tests" / "test_faults_answers.py"  # the answer kinds' tests, through real clients
    source = answers.read_text().replace(
        "from pytest_mcpfaults import Sidecar\n",
        "from mcp1_client import Mcp1Client\n\nfrom pytest_mcpfaults import Sidecar\n",
    )
    answers.write_text(source + TEST)
    page = copy / "docs" / "faults.md"
    for marker, row in DOCS.items():
        insert_after(page, marker, row + "\n")

    made = run_in(copy, "-m", "pytest_mcpfaults.kind_tables")
    assert made.returncode == 0, made.stdout + made.stderr  # the page's generated tables, made afresh
    api = run_in(copy, "docs/gen_api.py")
    assert api.returncode == 0, api.stdout + api.stderr  # the generated API page, made afresh
    assert "\n### `SlowGateway`\n" in (copy / "docs" / "api.md").read_text()
    assert "| `slow_502` | `*` | `seconds=0.05` | A gateway whose upstream" in page.read_text()
    assert "| `slow_502` | yes | yes | no |" in page.read_text()

    assert touched(copy) == [
        "docs/api.md",  # regenerated (docs/gen_api.py)
        "docs/faults.md",  # by hand: two rows; its generated tables: python -m pytest_mcpfaults.kind_tables
        "pytest_mcpfaults/fault_types.py",
        "pytest_mcpfaults/sidecar/connection.py",
        "tests/test_faults_answers.py",
    ]
    by_hand = [name for name in touched(copy) if name != "docs/api.md"]
    assert len(by_hand) <= 4  # issue 26: its class, its behaviour, its test, one docs page
    count = ["no", "one", "two", "three", "four", "five", "six"][len(by_hand)]
    assert f"**{count.capitalize()} files by hand**" in (ROOT / "docs" / "architecture.md").read_text()
    assert f"**{count} by hand**" in (ROOT / "CONTRIBUTING.md").read_text()

    shown = run_in(copy, "-c", SHOW.format(copy=str(copy)))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.splitlines() == [
        "exported: True True",
        "text form: slow_502(seconds=0.01)@tools/call[nth=2]",
        "shrinks after: delay",
        "matrix cell: slow_502@tool:delete_session",
        "in-process: True",
    ]
    run = run_in(copy, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *CHECKS, timeout=400)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    # the README's main command: the worked example, whose teardown matrix now has a slow_502 cell
    main = run_in(
        copy, "-m", "pytest", "-p", "mcpfaults", "-p", "no:cacheprovider", "examples/", "-q", timeout=300
    )
    assert main.returncode == 0, main.stdout[-4000:] + main.stderr[-2000:]
    assert "test_cleanup_under_every_fault[slow_502@tool:delete_session]" in main.stdout or re.search(
        r"^slow_502 +1 +1 +1 +0$", main.stdout, re.M
    ), main.stdout[-4000:]
