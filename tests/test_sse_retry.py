"""The official conformance suite's ``sse-retry`` *client* scenario (``@modelcontextprotocol/conformance``
0.1.16, from npm into the pytest cache as for tests/test_conformance.py) against real clients, side by
side with ``Sidecar.assert_client_resumed`` on the same clients against the sidecar's ``close_stream``:
the two verdicts agree, check by check, and docs/resumption.md's table is the one this test makes.

Each client is tests/sse_retry_client.py (``CLIENT URL``, as the suite runs a client command): the mcp
2.x ``Client``, mcp 1.x's ``ClientSession`` (the ``mcp1_path`` overlay), plain httpx reconnecting
without ``Last-Event-ID``, and plain httpx reconnecting at once (ignoring the ``retry``). Every run is
bounded (``RUN_TIMEOUT``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from conformance_run import SUITE, node_of, npm_install
from no_ca import REGISTRY_ENV
from test_conformance import cache  # noqa: F401  (the fixture: the suite's install in the pytest cache)

from pytest_mcpfaults import CloseStream, Sidecar, Tool

ROOT = Path(__file__).resolve().parent.parent
CLIENT = Path(__file__).resolve().parent / "sse_retry_client.py"
PAGE = ROOT / "docs" / "resumption.md"
BEGIN, END = (
    "<!-- sse-retry table: made by tests/test_sse_retry.py -->",
    "<!-- end of the sse-retry table -->",
)
#: One client run, against the suite's scenario server or the sidecar.
RUN_TIMEOUT = 40.0
#: The scenario server's retry (fixed by the suite), given to close_stream too.
RETRY_MS = 500
#: assert_client_resumed's bound: the suite's own "very late" threshold, twice the retry.
WITHIN = 2 * RETRY_MS / 1000
CLIENTS = {
    "mcp2": "mcp 2.x `Client`",
    "mcp1": "mcp 1.x `ClientSession`",
    "httpx-no-id": "httpx, reconnecting without `Last-Event-ID`",
    "httpx-eager": "httpx, reconnecting at once",
}
#: The suite's checks, each with what assert_client_resumed says when it fails the same thing.
CHECKS = {
    "client-sse-graceful-reconnect": ("comes back", "never came back"),
    "client-sse-retry-timing": ("waits the retry", "sooner than its retry|later than"),
    "client-sse-last-event-id": ("sends `Last-Event-ID`", "without Last-Event-ID"),
}


@dataclass(frozen=True)
class Verdicts:
    """One client's verdicts: the suite's status per check, and assert_client_resumed's (``None``:
    passed, else its message)."""

    client: str
    suite: dict[str, str]
    ours: str | None

    def suite_fails(self, check: str) -> bool:
        """A check the suite fails: a FAILURE, or the Last-Event-ID WARNING (a SHOULD: the suite's
        overall result counts it as failed); the timing's 'slightly late' WARNING the suite calls
        acceptable, so it passes."""
        status = self.suite.get(check, "MISSING")
        return status == "FAILURE" or (status != "SUCCESS" and check != "client-sse-retry-timing")

    def agree(self) -> bool:
        """Whether assert_client_resumed passes exactly when the suite fails no check, and names each
        check the suite fails."""
        failed = [check for check in CHECKS if self.suite_fails(check)]
        if (self.ours is None) != (not failed):
            return False
        ours = self.ours or ""
        return all(any(p in ours for p in CHECKS[check][1].split("|")) for check in failed)

    def row(self) -> str:
        cells = [CLIENTS[self.client]]
        for check in CHECKS:
            cells.append("no" if self.suite_fails(check) else "yes")
        cells.append("passes" if self.ours is None else f"fails: {self._ours_reason()}")
        return "| " + " | ".join(cells) + " |"

    def _ours_reason(self) -> str:
        assert self.ours is not None
        for check, (_, phrases) in CHECKS.items():
            for phrase in phrases.split("|"):
                if phrase in self.ours:
                    return f"{phrase} ({check.removeprefix('client-sse-')})"
        return self.ours.splitlines()[-1]


def _env(client: str, mcp1_path: str) -> dict[str, str]:
    env = dict(os.environ)
    if client == "mcp1":  # mcp 1.x first on the path; the rest from this environment
        env["PYTHONPATH"] = os.pathsep.join([mcp1_path, *filter(None, [env.get("PYTHONPATH")])])
    return env


def suite_verdicts(suite: Path, client: str, mcp1_path: str) -> dict[str, str]:
    """The suite's ``sse-retry`` checks for ``client``: check id -> status."""
    cli = suite / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    with tempfile.TemporaryDirectory() as out:
        command = f"{sys.executable} {CLIENT} {client}"  # the suite appends the server's URL
        cmd = [str(node_of(suite)), str(cli), "client", "--command", command, "--scenario", "sse-retry"]
        cmd += ["-o", out, "--timeout", str(int(RUN_TIMEOUT * 1000) // 2)]
        subprocess.run(cmd, env=_env(client, mcp1_path), capture_output=True, text=True, timeout=RUN_TIMEOUT)
        [checks] = Path(out).glob("*/checks.json")
        return {c["id"]: c["status"] for c in json.loads(checks.read_text()) if c["id"] in CHECKS}


def sidecar_verdict(client: str, mcp1_path: str) -> str | None:
    """``assert_client_resumed`` on ``client`` against ``close_stream`` (``None``: it passed)."""
    tool = Tool("test_reconnection", lambda: "Reconnection test completed successfully", {"type": "object"})
    closing = CloseStream(retry_ms=RETRY_MS, when="tool:test_reconnection")
    with Sidecar(era="session", tools=[tool], faults=[closing]) as sc:
        cmd = [sys.executable, str(CLIENT), client, sc.mcp_url]
        ran = subprocess.run(
            cmd, env=_env(client, mcp1_path), capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        try:
            sc.assert_client_resumed("tool:test_reconnection", within=WITHIN)
        except AssertionError as exc:
            # shown with a failure: once, under heavy load, mcp 2.x sent no request at all
            print(f"{client}: exit {ran.returncode}, printed: {(ran.stdout + ran.stderr)[-1500:]!r}")
            return str(exc)
    return None


def _measure(suite: Path, client: str, mcp1_path: str) -> Verdicts:
    """``client``'s two verdicts, its legs one after the other."""
    return Verdicts(client, suite_verdicts(suite, client, mcp1_path), sidecar_verdict(client, mcp1_path))


def table(rows: list[Verdicts]) -> str:
    head = ["client", *(f"suite: {what}" for what, _ in CHECKS.values()), "`assert_client_resumed`"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *(r.row() for r in rows)])


def test_the_suites_sse_retry_verdicts_and_assert_client_resumed_agree_client_by_client(
    cache: Path,  # noqa: F811
    mcp1_path: str,
) -> None:
    suite = npm_install(SUITE, cache, REGISTRY_ENV)
    with ThreadPoolExecutor(max_workers=2) as pool:  # each client against the suite and the sidecar at once
        runs = [
            (c, pool.submit(suite_verdicts, suite, c, mcp1_path), pool.submit(sidecar_verdict, c, mcp1_path))
            for c in CLIENTS
        ]
        rows = [Verdicts(c, theirs.result(), ours.result()) for c, theirs, ours in runs]
    # Each leg is its own run of the client, and the suite's timing check has a fixed line (late past
    # twice the 0.5 s retry): once, on a busy machine, mcp 1.x's reconnect crossed it against the suite
    # and not against the sidecar. A client whose two verdicts disagree is measured again, once, its
    # legs one after the other; what it does then is what is checked (both tables are printed).
    again = {r.client for r in rows if not r.agree()}
    if again:
        print(f"measured again ({', '.join(sorted(again))}); the first run made:\n{table(rows)}")
        rows = [_measure(suite, r.client, mcp1_path) if r.client in again else r for r in rows]
    made = table(rows)
    print(made)
    for r in rows:
        assert set(r.suite) == set(CHECKS), (r.client, r.suite)  # the suite ran every check
        assert r.agree(), (r, made)  # the same overall verdict, each failed check named
    by = {r.client: r for r in rows}
    assert by["mcp2"].ours is None and by["mcp1"].ours is None, made  # both SDKs resume right
    assert by["httpx-no-id"].ours is not None and by["httpx-eager"].ours is not None, made
    text = PAGE.read_text()
    assert BEGIN in text and END in text, f"{PAGE} has no sse-retry table between {BEGIN!r} and {END!r}"
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert shown == made, f"{PAGE}'s sse-retry table is stale; this run made:\n{made}"
