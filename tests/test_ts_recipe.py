"""The TypeScript recipe (docs/examples/ts/): a harness on the official TypeScript MCP SDK client,
exporting its spans over OTLP/HTTP, driven against the real ``serve`` command.

Its npm dependencies are installed once per lock file (tests/npm_recipe.py). The harness runs as
``node`` with the environment ``serve`` prints; the tests assert what the TypeScript client saw (its
JSON line), what the sidecar observed (the journal) and the span verdict (``GET /_mcpfaults/check``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from npm_recipe import NPM_CI_TIMEOUT, RECIPE, node_recipe
from test_cli import Served, labels, serve

ROOT = Path(__file__).resolve().parent.parent
#: One harness run takes under a second; every wait inside it is bounded by MCPFAULTS_TS_WAIT_MS.
HARNESS_TIMEOUT = 30.0
WAIT_MS = 2000
#: ``GET /_mcpfaults/check`` waits (bounded) until the harness's session span has arrived.
BARRIER = {"wait_for": "Agent.Session", "timeout": "5"}
#: The protocol version the TypeScript SDK 1.32.2 negotiates (it speaks only the session era).
SESSION_ERA_VERSION = "2025-11-25"
#: What its connect raises against a stateless-only sidecar (``--era stateless``).
STATELESS_ERROR = (
    "McpError: MCP error -32022: Unsupported protocol version: this server speaks only the stateless era"
)
#: The faults at delete the recipe is run under. After ``die`` the sidecar's port refuses everything,
#: but its OTLP port still takes the harness's spans and answers the control endpoint.
DELETE_FAULTS = {
    "backend_gone": "backend_gone",
    "die": "die@tool:delete_session",
}
#: What the harness's ``delete_session`` step reports under each fault.
DELETE_ERRORS = {
    "backend_gone": r"^Error: delete_session failed: Error closing session [0-9a-f-]+: Service at "
    r"http://127\.0\.0\.1:\d+ is no longer alive$",
    "die": r"^TypeError: fetch failed \(ECONNRESET\)$",
}


@pytest.fixture(scope="module")
def recipe(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """``node`` and the installed recipe directory, holding a fresh copy of ``harness.mjs``."""
    return node_recipe(request.config, "harness.mjs")


def run_harness(
    recipe: tuple[str, Path], served: Served, mode: str, wait_ms: int = WAIT_MS, **env_overrides: str
) -> Any:
    """Run the harness in ``mode`` with the environment ``serve`` printed; its JSON line."""
    node, folder = recipe
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MCPFAULTS_"))}
    env.update({k: v for k, v in served.info.items() if k.startswith(("OTEL_", "MCPFAULTS_"))})
    env["MCPFAULTS_TS_WAIT_MS"] = str(wait_ms)
    env.update(env_overrides)
    proc = subprocess.run(
        [node, str(folder / "harness.mjs"), mode],
        capture_output=True,
        text=True,
        timeout=HARNESS_TIMEOUT,
        env=env,
        cwd=folder,
    )
    assert proc.returncode == 0, f"harness exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def otlp_control(served: Served, method: str, sub: str, **kw: Any) -> httpx.Response:
    """A control request through the OTLP port, which outlives a ``die`` of the sidecar's own port."""
    side = served.info["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].removesuffix("/v1/traces") + "/_mcpfaults"
    return httpx.request(method, side + sub, headers=served.auth, timeout=10, **kw)


def mcp_only(journal: dict[str, Any]) -> dict[str, Any]:
    """The journal with only the MCP endpoint's requests (the harness's OTLP exports are journaled too)."""
    return {**journal, "requests": [r for r in journal["requests"] if r["path"] == "/mcp"]}


#: The hardened harness's deadline in the stalled-call test (``MCPFAULTS_TS_WAIT_MS``).
HELD_WAIT_MS = 1500


def steps(out: Any) -> dict[str, Any]:
    return {s["step"]: s for s in out["steps"]}


def verdict_of(served: Served, out: Any, r: httpx.Response) -> Any:
    """The JSON of a ``GET /_mcpfaults/check`` answer, once the harness's export was accepted."""
    endpoint = served.info["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1/traces", endpoint), served.info
    assert out["export"]["ok"], out["export"]
    assert r.status_code == 200, r.text
    return r.json()


# -- interop: the TypeScript SDK client in each era -----------------------------------------------


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)
@pytest.mark.parametrize("era", ["auto", "session"])
def test_the_ts_sdk_client_speaks_the_session_era(recipe: tuple[str, Path], era: str) -> None:
    with serve("--era", era) as served:
        out = run_harness(recipe, served, "interop")
        journal = served.journal()
    assert "error" not in out, out
    ok = [s["step"] for s in out["steps"] if s["ok"]]
    assert ok == ["connect", "tools/list", "echo", "terminateSession"], out
    assert out["protocol_version"] == SESSION_ERA_VERSION and out["echo"] == "hi"
    assert {"echo", "create_session", "delete_session"} <= set(out["tools"])
    # It never probes server/discover: it initializes straight away, in either era setting.
    seen = labels(mcp_only(journal))
    assert seen[:2] == ["POST initialize", "POST notifications/initialized"], seen
    assert "POST server/discover" not in seen and seen[-1] == "DELETE /mcp", seen
    assert {"POST tools/list", "POST tools/call echo"} <= set(seen), seen
    mcp = mcp_only(journal)["requests"]
    assert {r["era"] for r in mcp} == {"session"}, mcp
    assert {r["session_id"] for r in mcp[1:]} == {out["session_id"]}, mcp
    assert journal["sessions"] == [] and journal["ended_sessions"] == [out["session_id"]]


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)
def test_the_ts_sdk_client_against_a_stateless_only_sidecar_fails_with_32022(
    recipe: tuple[str, Path],
) -> None:
    with serve("--era", "stateless") as served:
        out = run_harness(recipe, served, "interop")
        journal = served.journal()
    assert out["error_code"] == -32022, out
    assert out["error"] == STATELESS_ERROR
    assert [s["step"] for s in out["steps"]] == ["connect"]
    assert labels(mcp_only(journal)) == ["POST initialize"]
    assert journal["sessions"] == [] and journal["ended_sessions"] == []


# -- the recipe: unhardened caught, hardened passes -----------------------------------------------


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)
@pytest.mark.parametrize("fault", DELETE_FAULTS)
def test_the_unhardened_ts_harness_is_caught_flipping_its_session(
    recipe: tuple[str, Path], fault: str
) -> None:
    with serve("--fault", DELETE_FAULTS[fault]) as served:
        out = run_harness(recipe, served, "unhardened")
        journal = otlp_control(served, "GET", "/journal").json()
        checked = otlp_control(served, "GET", "/check", params=BARRIER)
    # What the client saw: the delete failed, the error escaped, so terminateSession never ran.
    assert "error" not in out, out
    done = steps(out)
    assert not done["delete_session"]["ok"] and "terminateSession" not in done, out
    assert re.match(DELETE_ERRORS[fault], done["delete_session"]["error"]), done["delete_session"]
    assert journal["fired"] == {fault: 1}, journal["fired"]
    verdict = verdict_of(served, out, checked)
    # The verdict: one flip, on the harness's session span, blamed on its MCP.DeleteSession.
    assert verdict["ok"] is False, verdict
    flips = [v for v in verdict["violations"] if v["invariant"] == "cleanup_never_flips"]
    assert len(flips) == 1, verdict
    assert flips[0]["span"]["name"] == "Agent.Session", flips[0]
    assert flips[0]["span"]["span_id"] == out["session_span"]["span_id"], (flips[0], out["session_span"])
    assert flips[0]["span"]["trace_id"] == out["session_span"]["trace_id"], (flips[0], out["session_span"])
    message = flips[0]["message"]
    assert message.startswith("Agent.Session is ERROR with description "), message
    assert "comes from a cleanup failure (cause: MCP.DeleteSession" in message, message
    assert message in verdict["text"] and "Span tree:" in verdict["text"], verdict["text"]


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)
@pytest.mark.parametrize(
    ("fault", "protocol"),
    [("backend_gone", "http/json"), ("die", None)],
    ids=["backend_gone-json", "die"],
)
def test_the_hardened_ts_harness_passes(recipe: tuple[str, Path], fault: str, protocol: str | None) -> None:
    """``protocol``: ``None`` exports as serve says (protobuf); ``http/json``: with the JSON exporter,
    so the span tree below is checked as decoded from either encoding."""
    with serve("--fault", DELETE_FAULTS[fault]) as served:
        overrides = {} if protocol is None else {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": protocol}
        out = run_harness(recipe, served, "hardened", **overrides)
        journal = otlp_control(served, "GET", "/journal").json()
        checked = otlp_control(served, "GET", "/check", params=BARRIER)
        tree = otlp_control(served, "GET", "/spans", params={"format": "json"})
    assert "error" not in out, out
    done = steps(out)
    assert re.match(DELETE_ERRORS[fault], done["delete_session"]["error"]), done["delete_session"]
    # Cleanup goes on after the failed delete: terminateSession() runs too (refused by a dead sidecar).
    terminate, seen = done["terminateSession"], labels(mcp_only(journal))
    if fault == "die":
        assert terminate["error"] == "TypeError: fetch failed (ECONNREFUSED)", terminate
        assert seen[-1] == "POST tools/call delete_session" and journal["state"] == "dead", seen
    else:
        assert terminate["ok"], terminate
        assert seen[-1] == "DELETE /mcp", seen
    assert journal["fired"] == {fault: 1}, journal["fired"]
    verdict = verdict_of(served, out, checked)
    assert verdict["ok"] is True and verdict["violations"] == [], verdict
    # The spans did arrive (a pass is not a vacuous one): the cleanup span carries the failure, the
    # session span does not, and both keep the harness's resource.
    assert tree.status_code == 200, tree.text
    spans = {s["name"]: s for s in tree.json()["spans"]}
    assert set(spans) == {"Agent.Session", "MCP.CreateSession", "Evaluator.Evaluate", "MCP.DeleteSession"}
    assert spans["Agent.Session"]["status_code"] == "UNSET", spans["Agent.Session"]
    cleanup = spans["MCP.DeleteSession"]
    assert cleanup["status_code"] == "ERROR", cleanup
    assert re.match(DELETE_ERRORS[fault], cleanup["status_description"]), cleanup
    assert cleanup["parent_id"] == spans["Agent.Session"]["span_id"] == out["session_span"]["span_id"]
    assert {s["resource"].get("service.name") for s in spans.values()} == {"mcpfaults-ts-recipe"}


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)
def test_the_hardened_ts_harness_gives_up_on_a_stalled_call_and_a_hung_delete_by_itself(
    recipe: tuple[str, Path],
) -> None:
    """On its own the TypeScript client waits 60 s for a stalled call and for ever on a hung DELETE
    (``terminateSession()`` has no timeout); the recipe's deadlines end both, and the sidecar, which
    holds them for ever (patience none), sees the client close each one."""
    faults = ("--fault", "stall@tool:evaluate_session", "--fault", "hang@DELETE /mcp")
    with serve(*faults, "--patience", "none") as served:
        # 1.5 s: each healthy step must fit in it on a loaded machine (500 ms did not, beside six busy
        # processes and more); the held two end at it, and the sidecar would hold them for ever.
        out = run_harness(recipe, served, "hardened", wait_ms=HELD_WAIT_MS)
        journal = served.wait_journal(
            lambda j: all(r["held"]["outcome"] for r in mcp_only(j)["requests"] if r["held"]),
            "the held requests to end",
        )
        checked = served.control("GET", "/check", params=BARRIER)
        tree = served.control("GET", "/spans", params={"format": "json"})
    done = steps(out)
    assert {"evaluate_session", "delete_session", "terminateSession"} <= set(done), out
    assert done["evaluate_session"]["error"] == "McpError: MCP error -32001: Request timed out", done
    assert done["delete_session"]["ok"], done
    assert done["terminateSession"]["error"] == "TimeoutError: The operation was aborted due to timeout", done
    for name in ("evaluate_session", "terminateSession"):
        assert done[name]["ms"] >= HELD_WAIT_MS, done[name]  # the client's own deadline ended it
    held = [
        (r["method"], r["tool"], r["held"]["outcome"]) for r in mcp_only(journal)["requests"] if r["held"]
    ]
    assert held == [("POST", "evaluate_session", "client_closed"), ("DELETE", None, "client_closed")], held
    assert journal["patience_violations"] == []
    # The session failed on its own (the stalled call), not because of its failed cleanup: no flip.
    assert verdict_of(served, out, checked)["ok"] is True, checked.text
    spans = {s["name"]: s for s in tree.json()["spans"]}
    session = spans["Agent.Session"]
    assert (session["status_code"], session["status_description"]) == (
        "ERROR",
        "McpError: MCP error -32001: Request timed out",
    ), session
    assert spans["MCP.DeleteSession"]["status_description"] == (
        "TimeoutError: The operation was aborted due to timeout"
    ), spans["MCP.DeleteSession"]


#: A 401 on the session's cleanup call (docs/auth.md): the token the harness holds is refused and revoked.
AUTH_DELETE_FAULT = "unauthorized@tool:delete_session[times=1]"


@pytest.mark.timeout(NPM_CI_TIMEOUT + 60)
@pytest.mark.parametrize(
    ("mode", "auth"),
    [("unhardened", "bearer:s3cret"), ("hardened", "bearer:s3cret"), ("unhardened", "client_credentials")],
    ids=["unhardened-static-token", "hardened-static-token", "unhardened-client-credentials"],
)
def test_a_401_on_the_ts_harness_s_cleanup_flips_only_the_unhardened_one_with_a_fixed_token(
    recipe: tuple[str, Path], mode: str, auth: str
) -> None:
    """``serve --auth``: with one fixed token the 401 fails ``delete_session`` (the unhardened harness
    copies it onto its session span: caught by the gate; the hardened one keeps it on its cleanup
    span); with the SDK's ``ClientCredentialsProvider`` the harness gets a new token and the retried
    call is answered."""
    static = auth.startswith("bearer:")
    with serve(
        "--auth", auth.removeprefix("bearer:") if static else "oauth", "--fault", AUTH_DELETE_FAULT
    ) as served:
        out = run_harness(recipe, served, mode, MCPFAULTS_TS_AUTH=auth)
        journal = otlp_control(served, "GET", "/journal").json()
        checked = otlp_control(served, "GET", "/check", params=BARRIER)
    assert "error" not in out, out
    done, verdict = steps(out), verdict_of(served, out, checked)
    deletes = [
        (r["auth"]["token"], r["status"])
        for r in mcp_only(journal)["requests"]
        if r["tool"] == "delete_session"
    ]
    if not static:
        assert done["delete_session"]["ok"] and done["terminateSession"]["ok"], done
        assert deletes == [("t1", 401), ("t2", 200)], deletes  # a new token, and the call retried with it
        assert verdict["ok"] is True and verdict["violations"] == [], verdict
        return
    refused = done["delete_session"]
    assert refused["code"] == 401 and refused["error"].startswith(
        "Error: Streamable HTTP error: Error POSTing to endpoint: "
    ), refused
    assert deletes == [("static1", 401)], deletes
    flips = [v for v in verdict["violations"] if v["invariant"] == "cleanup_never_flips"]
    if mode == "unhardened":
        assert verdict["ok"] is False and len(flips) == 1, verdict
        assert flips[0]["span"]["span_id"] == out["session_span"]["span_id"], flips[0]
        assert "comes from a cleanup failure (cause: MCP.DeleteSession" in flips[0]["message"], flips[0]
    else:
        assert verdict["ok"] is True and flips == [], verdict
        # its terminateSession() ran too, refused with the revoked token
        assert done["terminateSession"]["error"] == (
            "Error: Streamable HTTP error: Failed to terminate session: Unauthorized"
        ), done


def test_the_recipe_pins_its_dependencies_and_ignores_node_modules() -> None:
    package = json.loads((RECIPE / "package.json").read_text())
    lock = json.loads((RECIPE / "package-lock.json").read_text())
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), (name, version)  # exact pins, no ranges
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name
    assert package["dependencies"]["@modelcontextprotocol/sdk"].startswith("1.32.")
    assert "node_modules/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_interop_table_shows_what_these_tests_pin() -> None:
    sdk = json.loads((RECIPE / "package.json").read_text())["dependencies"]["@modelcontextprotocol/sdk"]
    passes = f"passes (session era, {SESSION_ERA_VERSION})"
    row = (
        f"| TypeScript SDK: `@modelcontextprotocol/sdk` {sdk}, Node 20 | {passes} | {passes} "
        f"| connect raises `{STATELESS_ERROR}` |"
    )
    assert row in (ROOT / "docs" / "frameworks.md").read_text().splitlines()


def test_without_node_the_recipe_is_skipped_saying_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This module under another name (test_cli, which it imports, is already loaded in this process).
    pytester.makepyfile(test_copy=Path(__file__).read_text())
    monkeypatch.setenv("PATH", str(pytester.path / "no-bin"))  # neither node nor npm
    result = pytester.runpytest(
        "-p", "no:mcpfaults", "-o", "asyncio_default_fixture_loop_scope=function", "-rs", "-k", "stateless"
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*SKIPPED*the TypeScript recipe needs node and npm on PATH (node: None, npm: None)*"]
    )
