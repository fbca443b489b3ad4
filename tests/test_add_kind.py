"""Adding a fault kind, as a contributor would: three files by hand (its class in ``faults/kinds.py``,
with its catalogue cells of what each client sees and its legacy-SSE cell, its behaviour in
``behaviour/connection.py``, its test in ``test_faults_answers.py`` — through httpx, the mcp 2.x
``Client`` and, with the ``mcp1_client`` fixture, mcp 1.x's ``ClientSession``, so the catalogue's
client columns are measured by that one test), and nothing else: the docs tables that list every kind
(the catalogue among them) and the API page are made when the site is built (docs/hooks.py,
mkdocstrings).

The kind is made up: ``slow_502``, a gateway that waits, then answers 502. It is written into a copy of
the repository (a git repository of its own, so the files it touches are counted by ``git status``), the
one tests/test_options.py's made-up option is written into first and committed
(``tests/contribution.py``: the copy and its docs site are made once for both). There, one Python
importing the copy's package checks what lists kinds directly: the registry and exports, the text form,
the report, the behaviour modules (each phase's dispatch), the strategies' shrink order (its place
checked against Hypothesis beside its neighbours), the matrix catalogue, the in-process backend, and the
suite's own pins of the docs against the registry (the catalogue rows, with every row's mcp 1.x cell
measured by a test, the tables the docs hook makes, the API page's fixtures, the transports tables),
called as functions from the copy's ``tests/``. The kind runs through real clients: its own test (httpx,
the mcp 2.x ``Client``, mcp 1.x's ``ClientSession``, in-process), the in-process parity case (a socket
sidecar and ``mock_sidecar`` side by side), and the worked example's teardown matrix cell it gets (the
README's main command, that one cell). The docs site builds, the kind in its tables and on the API page.
docs/architecture.md and CONTRIBUTING.md state the count.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from contribution import Contribution
from scratch_copy import ROOT, insert_after, run_in

CLASS = '''

@dataclass(frozen=True)
class SlowGateway(Fault):
    """A gateway whose upstream does not answer in time: wait ``seconds``, then answer 502."""

    kind: ClassVar[str] = "slow_502"
    phase: ClassVar[Phase] = "connection"
    shrink_rank: ClassVar[int] = 105
    draws: ClassVar[Mapping[str, Draw]] = {"seconds": (0.0, 0.01)}
    catalogue_params: ClassVar[Mapping[str, Any] | None] = {"seconds": 0.05}
    seen: ClassVar[tuple[Seen, ...]] = (
        Seen(
            examples='`SlowGateway(0.5, when="tools/call")`',
            httpx="502, late",
            mcp2='`MCPError("Server returned an error response")`, late',
            mcp1=(
                "no `McpError`: the call is cancelled, late; exit raises "
                "`ExceptionGroup[httpx.HTTPStatusError]`"
            ),
            proved=("test_faults_answers.py",),
        ),
    )
    legacy_sse: ClassVar[str] = "the matched request: late, a 502"
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

#: What the copy says about the kind, checked in one Python that imports the copy's package (its
#: ``tests/`` and ``docs/`` first on ``sys.path``, the mcp 1.x overlay's directory in ``argv[1]``).
CHECK = """
import asyncio, sys
sys.path[:0] = ["tests", "docs"]
import pytest_mcpfaults, pytest_mcpfaults.faults as F
from pytest_mcpfaults.inprocess import SUPPORTED_KINDS
from pytest_mcpfaults.matrix import catalogue
from pytest_mcpfaults.report import plan_kind
from pytest_mcpfaults.strategies import kind_order
assert pytest_mcpfaults.__file__.startswith({copy!r}), pytest_mcpfaults.__file__
fault, order = F.parse_fault("slow_502(seconds=0.01)@tools/call[nth=2]"), kind_order()
print("registered:", F.fault_kinds()["slow_502"] is F.SlowGateway is pytest_mcpfaults.SlowGateway)
print("exported:", "SlowGateway" in F.__all__, "SlowGateway" not in pytest_mcpfaults.__all__)
print("text form:", fault, F.fault_from_dict(fault.to_dict()) == fault)
print("report:", plan_kind(str(fault)))
print("shrinks between:", *order[order.index("slow_502") - 1 : order.index("slow_502") + 2])
print("matrix cell:", *map(str, catalogue(kinds=["slow_502"])))
print("in-process:", "slow_502" in SUPPORTED_KINDS)

import test_behaviour, test_cli, test_docs_api, test_fault_registry, test_faults_answers, test_faults_doc
import test_faults_triggers, test_inprocess, test_kind_tables, test_legacy_sse, test_matrix
import test_stdio_docs, test_strategies
from mcp1_client import Mcp1Client

(case,) = [c for c in test_inprocess.CASES if [f.kind for f in F.parse_plan(c[0])] == ["slow_502"]]
CHECKS = [
    ("test_fault_registry::test_every_built_in_kind_is_exported_from_the_package", ()),
    ("test_fault_registry::test_every_kind_declares_a_phase_and_a_bad_one_is_refused", ()),
    ("test_faults_triggers::test_every_kind_has_examples", ()),
    ("test_faults_triggers::test_text_form_and_dict_round_trip", (F.SlowGateway(),)),
    ("test_behaviour::test_every_kind_has_the_behaviour_of_its_phase", ("slow_502",)),
    ("test_strategies::test_kind_order_covers_every_kind_once", ()),
    ("test_strategies::test_kind_order_is_the_shrink_order", ("delay", "slow_502", ["tools/call"])),
    ("test_strategies::test_kind_order_is_the_shrink_order", ("slow_502", "die", ["tools/call"])),
    ("test_matrix::test_catalogue_has_one_fault_per_kind_in_kind_order", ()),
    ("test_inprocess::test_every_kind_is_either_supported_or_refused", ()),
    ("test_inprocess::test_the_parity_cases_cover_every_supported_kind", ()),
    ("test_inprocess::test_both_backends_give_the_client_the_same_outcome", case),
    ("test_faults_doc::test_every_built_in_kind_has_its_row_first_then_its_variants_in_registry_order", ()),
    ("test_faults_doc::test_each_row_names_its_modules_and_each_http_kind_its_legacy_sse_cell", ()),
    ("test_faults_doc::test_the_mcp1_column_is_measured_by_a_test_per_kind", ()),
    ("test_kind_tables::test_each_kind_table_has_a_row_for_every_registered_kind_in_registry_order", ()),
    ("test_stdio_docs::test_the_transports_table_matches_the_registry", ()),
    ("test_legacy_sse::test_every_built_in_http_kind_says_how_it_acts_on_legacy_sse", ()),
    ("test_strategies::test_the_plans_drawn_by_default_include_error_payloads", ()),
    ("test_cli::test_docs_fault_examples_parse_and_the_kinds_table_is_the_generated_one", ()),
    ("test_docs_api::test_every_fixture_has_its_heading_in_the_filled_page", ()),
    ("test_faults_answers::test_a_slow_gateway_answers_502_after_its_delay", (Mcp1Client(sys.argv[1]),)),
]
for name, args in CHECKS:
    module, test = name.split("::")
    outcome = getattr(sys.modules[module], test)(*args)
    if asyncio.iscoroutine(outcome):
        asyncio.run(outcome)
print("checked:", len(CHECKS))
"""

#: The worked example's teardown matrix cell the kind gets (the README's main command, that cell).
CELL = "examples/test_example_matrix.py::test_cleanup_under_every_fault[slow_502@tool:delete_session]"


def add_the_kind(copy: Path) -> None:
    """The kind written into ``copy`` (tests/contribution.py makes the copy): three files by hand."""
    # 1. the class, and its name in the module's __all__ (next to it)
    fault_types = copy / "pytest_mcpfaults" / "faults" / "kinds.py"
    fault_types.write_text(fault_types.read_text() + CLASS)
    insert_after(fault_types, '    "Fault",', '    "SlowGateway",\n')
    # 2. the behaviour: a pause, then the reply
    connection = copy / "pytest_mcpfaults" / "behaviour" / "connection.py"
    source = connection.read_text().replace(
        "from pytest_mcpfaults.core.routing import jitter",
        "from pytest_mcpfaults.mcp.endpoint import McpEndpoint, Reply\n"
        "from pytest_mcpfaults.core.routing import RequestInfo, answer_reply, jitter",
    )
    connection.write_text(source + BEHAVIOUR)
    # 3. its test (every client the catalogue has a column for); its catalogue cells are on its class
    answers = copy / "tests" / "test_faults_answers.py"  # the answer kinds' tests, through real clients
    source = answers.read_text().replace(
        "from pytest_mcpfaults import Sidecar\n",
        "from mcp1_client import Mcp1Client\n\nfrom pytest_mcpfaults import Sidecar\n",
    )
    answers.write_text(source + TEST)


@pytest.mark.timeout(300)
def test_a_new_kind_touches_three_files_and_every_list_picks_it_up(
    contribution: Contribution, mcp1_path: str
) -> None:
    copy = contribution.copy
    assert contribution.touched["kind"] == [
        "pytest_mcpfaults/behaviour/connection.py",
        "pytest_mcpfaults/faults/kinds.py",
        "tests/test_faults_answers.py",
    ]
    by_hand = contribution.touched["kind"]
    assert len(by_hand) <= 3  # issue 37: its class (with its catalogue cells), its behaviour, its test
    count = ["no", "one", "two", "three", "four", "five", "six"][len(by_hand)]
    assert f"**{count.capitalize()} files by hand**" in (ROOT / "docs" / "architecture.md").read_text()
    assert f"**{count} by hand**" in (ROOT / "CONTRIBUTING.md").read_text()

    shown = run_in(copy, "-c", CHECK.format(copy=str(copy)), mcp1_path, timeout=180)
    assert shown.returncode == 0, shown.stdout[-4000:] + shown.stderr[-6000:]
    assert shown.stdout.splitlines() == [
        "registered: True",
        "exported: True True",
        "text form: slow_502(seconds=0.01)@tools/call[nth=2] True",
        "report: slow_502",
        "shrinks between: delay slow_502 die",
        "matrix cell: slow_502@tool:delete_session",
        "in-process: True",
        "checked: 22",
    ], shown.stdout + shown.stderr[-3000:]
    # the README's main command, the cell it now has: the worked example's cleanup under slow_502
    args = ["-m", "pytest", "-p", "mcpfaults", "-p", "no:cacheprovider", "-q", "-rA", CELL]
    main = run_in(copy, *args, timeout=120)
    assert main.returncode == 0 and f"PASSED {CELL}" in main.stdout, main.stdout[-4000:] + main.stderr[-2000:]
    assert contribution.build_returncode == 0 and "WARNING" not in contribution.build_stderr, (
        contribution.build_stdout + contribution.build_stderr
    )
    built = (contribution.site / "faults" / "index.html").read_text()
    assert "<td><code>slow_502</code></td>\n<td><code>*</code></td>\n<td><code>seconds=0.05</code>" in built
    assert "<td><code>slow_502</code></td>\n<td>yes</td>\n<td>yes</td>\n<td>no</td>" in built
    assert "<td><code>SlowGateway</code></td>\n<td><code>seconds=0.05</code> (<code>*</code>)</td>" in built
    assert "<td><code>slow_502</code></td>\n<td>yes</td>\n<td>the matched request: late, a 502</td>" in built
    assert (
        'id="pytest_mcpfaults.faults.SlowGateway"' in (contribution.site / "api" / "index.html").read_text()
    )
