"""Triggers (nth, after, times, probability+seed, every target form), plan order, bad input at
construction and through the marker at collection, and the text/dict forms of every kind."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

# pytester's in-process runs drop the modules they import, and hypothesis's pytest plugin imports
# hypothesis in every run's terminal summary (seconds on a busy machine): import it once, up front.
import hypothesis.internal.observability  # noqa: F401
import pytest
from mcp.client import Client

from pytest_mcpfaults import Sidecar
from pytest_mcpfaults.faults import (
    BackendGone,
    Delay,
    Die,
    Drip,
    EndlessSse,
    ErrorPayload,
    Fault,
    Flap,
    Freeze,
    Hang,
    IgnoreEof,
    IgnoreSigterm,
    JsonRpcError,
    Reset,
    Stall,
    Status,
    StderrFlood,
    StdoutNoise,
    ToolError,
    Trigger,
    Truncate,
    fault_from_dict,
    fault_kinds,
    format_plan,
    parse_fault,
    parse_plan,
)
from pytest_mcpfaults.faults.text import MAX_SPEC_CHARS
from pytest_mcpfaults.faults.triggers import Target, parse_target
from pytest_mcpfaults.faults.values import parse_value


def rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


HEADERS = {"MCP-Protocol-Version": "2026-07-28"}


def fired_on(fault: Fault, n: int = 10, *, path: str = "health") -> list[int]:
    """Send ``n`` health probes through a sidecar with ``fault``; the 1-based numbers that got it."""
    with Sidecar(faults=[fault]) as sc, httpx.Client(timeout=2.0) as client:
        codes = [client.get(sc.health_url).status_code for _ in range(n)]
        assert [r.fault_kind is not None for r in sc.requests] == [c == 503 for c in codes]
        return [i + 1 for i, r in enumerate(sc.requests) if r.fault_kind]


# -- counting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trigger", "want"),
    [
        (Trigger("health"), list(range(1, 11))),
        (Trigger("health", nth=3), [3]),
        (Trigger("health", after=7), [8, 9, 10]),
        (Trigger("health", times=2), [1, 2]),
        (Trigger("health", after=2, times=3), [3, 4, 5]),
        (Trigger("health", nth=4, after=1), [4]),
        (Trigger("health", nth=2, after=5), []),
    ],
    ids=lambda v: v.describe() if isinstance(v, Trigger) else None,
)
def test_counting_triggers(trigger: Trigger, want: list[int]) -> None:
    assert fired_on(Status(503, when=trigger)) == want


def test_probability_with_a_seed_is_deterministic() -> None:
    fault = Status(503, when=Trigger("health", probability=0.5, seed=42))
    first, second = fired_on(fault, 20), fired_on(fault, 20)
    assert first == second
    assert 0 < len(first) < 20
    assert fired_on(Status(503, when=Trigger("health", probability=0.5, seed=43)), 20) != first
    assert fired_on(Status(503, when=Trigger("health", probability=0.0)), 5) == []


def test_first_matching_fault_in_plan_order_wins_and_the_loser_keeps_its_budget() -> None:
    plan = [Status(502, when=Trigger("health", times=1)), Status(503, when=Trigger("health", times=1))]
    with Sidecar(faults=plan) as sc, httpx.Client(timeout=2.0) as client:
        assert [client.get(sc.health_url).status_code for _ in range(3)] == [502, 503, 200]
    assert [r.fault for r in sc.requests] == [
        "status(code=502)@health[times=1]", "status@health[times=1]", None
    ]  # fmt: skip
    # nth/after count every matching request, even those an earlier fault answered
    plan = [Status(502, when=Trigger("health", times=1)), Status(503, when=Trigger("health", nth=1))]
    with Sidecar(faults=plan) as sc, httpx.Client(timeout=2.0) as client:
        assert [client.get(sc.health_url).status_code for _ in range(2)] == [502, 200]


# -- targets -----------------------------------------------------------------------------------------


def test_targets_over_plain_http() -> None:
    plan = [
        Status(501, when="/other"),
        Status(502, when="DELETE /mcp"),
        Status(503, when="method:resources/list"),
        Status(504, when="tool:list_tasks"),
        Status(505, when="tools/list"),
        Status(506, when="health"),
    ]
    with Sidecar(faults=plan, era="stateless") as sc, httpx.Client(timeout=2.0) as c:
        got = {
            "/other": c.get(sc.url + "/other").status_code,
            "DELETE": c.delete(sc.mcp_url).status_code,
            "resources/list": c.post(sc.mcp_url, json=rpc("resources/list"), headers=HEADERS).status_code,
            "list_tasks": c.post(
                sc.mcp_url, json=rpc("tools/call", name="list_tasks", arguments={}), headers=HEADERS
            ).status_code,
            "echo": c.post(
                sc.mcp_url, json=rpc("tools/call", name="echo", arguments={"text": "x"}), headers=HEADERS
            ).status_code,
            "tools/list": c.post(sc.mcp_url, json=rpc("tools/list"), headers=HEADERS).status_code,
            "health": c.get(sc.health_url).status_code,
            "/elsewhere": c.get(sc.url + "/elsewhere").status_code,
        }
    assert got == {
        "/other": 501, "DELETE": 502, "resources/list": 503, "list_tasks": 504, "echo": 200,
        "tools/list": 505, "health": 506, "/elsewhere": 404,
    }  # fmt: skip


async def test_mcp_target_spares_health_and_star_hits_everything() -> None:
    with Sidecar(faults=[Status(500, when="mcp")]) as sc:
        assert httpx.get(sc.health_url, timeout=2.0).status_code == 200
        assert httpx.post(sc.mcp_url, json=rpc("tools/list"), timeout=2.0).status_code == 500
    with Sidecar(faults=[Status(500)]) as sc:
        assert httpx.get(sc.health_url, timeout=2.0).status_code == 500
        assert httpx.get(sc.url + "/nowhere", timeout=2.0).status_code == 500


async def test_delete_target_with_the_legacy_client(caplog: pytest.LogCaptureFixture) -> None:
    with Sidecar(faults=[Status(500, when="DELETE /mcp")]) as sc:
        async with Client(sc.mcp_url, mode="legacy") as client:
            await client.call_tool("echo", {"text": "x"})
        assert sc.requests[-1].label == "DELETE /mcp"
        assert sc.requests[-1].fault_kind == "status"
        assert sc.fired == {"status": 1}
    assert any("Session termination failed: 500" in r.getMessage() for r in caplog.records)


async def test_tool_target_with_the_stateless_client() -> None:
    with Sidecar(faults=[ToolError(text="nope", when="tool:evaluate_session")]) as sc:
        async with Client(sc.mcp_url, mode="auto") as client:
            created = await client.call_tool("create_session", {"task_id": "task-1"})
            sid = json.loads(created.content[0].text)["session_id"]  # type: ignore[union-attr]
            evaluated = await client.call_tool("evaluate_session", {"session_id": sid})
        assert not created.is_error
        assert evaluated.is_error
        assert [r.tool for r in sc.requests if r.fault] == ["evaluate_session"]


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "names"),
    [
        (lambda: Trigger("health", nth=0), ("nth", "0")),
        (lambda: Trigger("health", nth=-1), ("nth", "-1")),
        (lambda: Trigger("health", after=-2), ("after", "-2")),
        (lambda: Trigger("health", times=-1), ("times", "-1")),
        (lambda: Trigger("health", probability=1.5), ("probability", "1.5")),
        (lambda: Trigger("health", probability=-0.1), ("probability", "-0.1")),
        (lambda: Trigger("health", seed=-3), ("seed", "-3")),
        (lambda: Trigger("nowhere"), ("target", "'nowhere'")),
        (lambda: Trigger("tool:"), ("target", "'tool:'")),
        (lambda: Hang(when="GET mcp"), ("target", "'GET mcp'")),
        (lambda: Stall(after_bytes=-1), ("after_bytes", "-1")),
        (lambda: Stall(after_bytes=1.5), ("after_bytes", "1.5")),  # type: ignore[arg-type]
        (lambda: Stall(after_bytes="10"), ("after_bytes", "'10'")),  # type: ignore[arg-type]
        (lambda: Truncate(after_bytes=-5), ("after_bytes", "-5")),
        (lambda: Reset(after_bytes=True), ("after_bytes", "True")),
        (lambda: Drip(chunk_bytes=0), ("chunk_bytes", "0")),
        (lambda: Delay(-1), ("seconds", "-1")),
        (lambda: Flap(every=0), ("every", "0")),
        (lambda: Status(200), ("code", "200")),
        (lambda: Hang(patience=0), ("patience", "0")),
        (lambda: ToolError(when="health"), ("when=", "'health'")),
        (lambda: Die(when=42), ("when", "42")),  # type: ignore[arg-type]
        (lambda: ErrorPayload(when="health"), ("ErrorPayload: answers tools/call only", "'health'")),
        (lambda: ErrorPayload(when="DELETE /mcp"), ("when=", "'DELETE /mcp'")),
        (lambda: ErrorPayload(reason=42), ("reason must be a string", 'quote it: reason="..."', "42")),  # type: ignore[arg-type]
        (lambda: ErrorPayload(reason=None), ("reason must be a string", "None")),  # type: ignore[arg-type]
        (lambda: ErrorPayload(message=7), ("message must be a string or None", "7")),  # type: ignore[arg-type]
        (lambda: ErrorPayload(message="{0}"), ("message placeholders must be plain names", "'{0}'")),
        (lambda: ErrorPayload(message="{session_id!r}"), ("message placeholders", "'{session_id!r}'")),
        (lambda: ErrorPayload(message="{x.y} {reason}"), ("message placeholders", "'{x.y}'")),
        (lambda: ErrorPayload(message="{reason:>9}"), ("message placeholders", "'{reason:>9}'")),
        (lambda: ErrorPayload(message="oops {"), ("message is not a valid template", "{{ and }}")),
        (
            lambda: ErrorPayload(reason="backend down", message="Error closing session {session_id}"),
            ("reason='backend down' would be dropped", "has no {reason} placeholder"),
        ),
    ],
)
def test_bad_input_names_the_argument_and_the_value(make: Any, names: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match=names[0]) as exc_info:
        make()
    msg = str(exc_info.value)
    assert all(n in msg for n in names), msg


# -- non-finite numbers ------------------------------------------------------------------------------

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Delay(INF), "Delay: seconds must be a finite non-negative number of seconds, got inf"),
        (lambda: Delay(-INF), "Delay: seconds must be a finite non-negative number of seconds, got -inf"),
        (lambda: Delay(NAN), "Delay: seconds must be a finite non-negative number of seconds, got nan"),
        (lambda: Delay(10**400), "Delay: seconds must be a finite non-negative number of seconds, got 1000"),
        (lambda: Delay(jitter=INF), "Delay: jitter must be a finite non-negative number of seconds, got inf"),
        (
            lambda: Drip(interval=INF),
            "Drip: interval must be a finite non-negative number of seconds, got inf",
        ),
        (
            lambda: Drip(interval=NAN),
            "Drip: interval must be a finite non-negative number of seconds, got nan",
        ),
        (
            lambda: Hang(patience=INF),
            "Hang: patience must be a finite positive number of seconds or None, got inf",
        ),
        (
            lambda: Stall(patience=NAN),
            "Stall: patience must be a finite positive number of seconds or None, got nan",
        ),
        (lambda: Freeze(patience=INF), "Freeze: patience must be a finite positive number"),
        (lambda: EndlessSse(patience=INF), "EndlessSse: patience must be a finite positive number"),
        (lambda: Stall(after_bytes=INF), "Stall: after_bytes must be a non-negative integer, got inf"),  # type: ignore[arg-type]
        (
            lambda: Status(retry_after=INF),
            "Status: retry_after must be a non-negative integer or None, got inf",
        ),  # type: ignore[arg-type]
        (
            lambda: Trigger("health", probability=NAN),
            "Trigger: probability must be a number in [0, 1], got nan",
        ),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_parameter(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        make()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("delay(seconds=inf)", "Delay: seconds must be a finite non-negative number of seconds, got inf"),
        ("delay(seconds=nan)", "Delay: seconds must be a finite non-negative number of seconds, got nan"),
        ("delay(seconds=1e999)", "Delay: seconds must be a finite non-negative number of seconds, got inf"),
        ("delay(jitter=-inf)", "Delay: jitter must be a finite non-negative number of seconds, got -inf"),
        ("drip(interval=inf)", "Drip: interval must be a finite non-negative number of seconds, got inf"),
        ("hang(patience=inf)@health", "Hang: patience must be a finite positive number of seconds or None"),
        ("stall(patience=infinity)", "Stall: patience must be a finite positive number of seconds or None"),
        ("hang@health[p=nan]", "Trigger: probability must be a number in [0, 1], got nan"),
    ],
)
def test_non_finite_numbers_are_refused_in_the_text_and_dict_forms(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_fault(spec)
    kind, _, rest = spec.partition("(")
    if rest:  # the same value through the dict form (JSON has no inf: a dict built in Python)
        name, _, value = rest.split(")")[0].partition("=")
        with pytest.raises(ValueError, match=re.escape(message)):
            fault_from_dict({"kind": kind, name: float(value)})


@pytest.mark.parametrize(
    ("spec", "make"),
    [
        ("delay(seconds=1e308)", lambda: Delay(1e308)),
        ("delay(seconds=3600.5)", lambda: Delay(3600.5)),
        ("delay(jitter=86400)", lambda: Delay(jitter=86400)),
        ("drip(interval=1e9)", lambda: Drip(interval=1e9)),
        ("hang(patience=1e308)@health", lambda: Hang(patience=1e308)),
        ("stall(patience=7200)", lambda: Stall(patience=7200)),
    ],
)
def test_a_wait_over_an_hour_is_refused_naming_the_range(spec: str, make: Any) -> None:
    """A client with no timeout of its own would wait for ever with no verdict: every seconds parameter
    of a fault is bounded by ``MAX_FAULT_SECONDS`` (one hour)."""
    owner, name = spec.split("(")[0].capitalize(), spec.split("(")[1].split("=")[0]
    message = f"{owner}: {name} must be at most 3600 seconds (max_fault_seconds; valid: a finite"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        parse_fault(spec)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        make()
    assert parse_fault(spec.replace(spec.split("=")[1].split(")")[0], "3600")).params()[name] == 3600


@pytest.mark.parametrize("value", ['"false"', "'true'", "0", "1", "none", "yes"])
@pytest.mark.parametrize(("kind", "name"), [("die", "restart"), ("delay", "after"), ("hang", "expect_hang")])
def test_every_bool_parameter_refuses_anything_but_a_bool(kind: str, name: str, value: str) -> None:
    """``die(restart="false")`` used to mean restart: a quoted bool is a string, refused like any other
    non-bool, in the text form, the dict form and the constructor."""
    cls = type(parse_fault(kind))
    given = parse_value(value)
    message = f"{cls.__name__}: {name} must be True or False, got {given!r}"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        parse_fault(f"{kind}({name}={value})")
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        fault_from_dict({"kind": kind, name: given})
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        cls(**{name: given})


def test_a_fault_spec_over_the_length_limit_is_refused_and_one_at_it_parses() -> None:
    """How fast (linear, no Python loop per character) is measured in benchmarks/spec_parse.py: a timed
    assertion here failed under load (62 ms against 50 ms for a parse whose median is 1.6 ms)."""
    long = "status(body='" + "b" * MAX_SPEC_CHARS + "')@tool:none"
    with pytest.raises(
        ValueError, match=f"is {len(long)} characters long, over the limit of 65536 \\(max_spec_chars\\)"
    ):
        parse_fault(long)
    at_limit = "status(body='" + "b\\'," * ((MAX_SPEC_CHARS - 40) // 4) + "')@tool:none"
    assert len(parse_fault(at_limit).params()["body"]) == 3 * ((MAX_SPEC_CHARS - 40) // 4)


def test_bad_fault_spec_strings() -> None:
    with pytest.raises(ValueError, match=r"unknown kind 'explode'"):
        parse_fault("explode@health")
    with pytest.raises(ValueError, match=r"stall has no parameter 'bytes'"):
        parse_fault("stall(bytes=3)")
    with pytest.raises(ValueError, match=r"unknown trigger key 'every'"):
        parse_fault("hang@health[every=2]")
    with pytest.raises(ValueError, match=r"after_bytes must be a non-negative integer, got -4"):
        parse_fault("stall(after_bytes=-4)@tools/call")
    with pytest.raises(ValueError, match=r"probability must be a number in \[0, 1\], got 2"):
        parse_fault("hang@health[p=2]")
    with pytest.raises(ValueError, match=r"faults\[1\] must be a Fault"):
        Sidecar(faults=[Hang(), 3])  # type: ignore[list-item]


def test_a_spec_that_reads_as_a_plan_is_refused_and_blanks_around_its_parts_are_not_read() -> None:
    """`delay@tool:a; hang@health` was one delay on a tool named `a; hang@health` (never called), which
    format_plan wrote back as two faults: a `;` separates a plan's faults. A target may still hold one
    where what follows is no fault (`tool:a;b`, a `data:` URI). Blanks around the kind, the parameters,
    the target and the options are not part of them (faults.md: `[nth=…, times=…]`)."""
    for spec, plan in (
        ("delay@tool:a; hang@health", "delay@tool:a; hang@health"),
        ("hang@/x;die", "hang@/x; die"),
    ):
        target = spec.partition("@")[2]
        with pytest.raises(ValueError, match="reads as a plan of 2 faults") as info:
            parse_fault(spec)
        assert str(info.value) == (
            f"fault spec {spec!r} reads as a plan of 2 faults ({plan}): ';' separates a plan's faults; "
            "give each as a spec of its own (parse_plan reads a plan), or a target holding ';' as "
            f"Trigger({target!r})"
        )
    assert parse_plan("delay@tool:a; hang@health") == (Delay(when="tool:a"), Hang(when="health"))
    for target in ("tool:a;b", "resource:data:text/plain;base64,eA=="):
        assert parse_fault(f"delay@{target}") == Delay(when=target)
    assert parse_fault("delay ") == Delay()
    assert parse_fault("delay @tools/call") == Delay(when="tools/call")
    assert parse_fault(" delay ( seconds = 1 ) @ tools/call [ times = 1 ] ") == Delay(
        seconds=1, when=Trigger("tools/call", times=1)
    )


@pytest.mark.parametrize(
    ("faults", "expect"),
    [
        ('["stall(after_bytes=-1)@tools/call"]', "after_bytes must be a non-negative integer, got -1"),
        ('["hang@nowhere"]', "target 'nowhere' is unknown"),
        ('["hang@health[times=-2]"]', "times must be a non-negative integer or None, got -2"),
        ('["status@health[p=1.5]"]', "probability must be a number in [0, 1], got 1.5"),
        ('["delay(seconds=inf)"]', "Delay: seconds must be a finite non-negative number of seconds, got inf"),
        ('["error_payload@health"]', "ErrorPayload: answers tools/call only"),
    ],
)
def test_bad_faults_in_the_marker_fail_at_collection(
    run_plugin: Any, pytester: pytest.Pytester, faults: str, expect: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.mcp_sidecar(faults={faults})
        def test_never_runs(mcp_sidecar):
            raise AssertionError("must not run")
        """
    )
    result = run_plugin()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the module's collection failed
    assert expect in result.stdout.str()
    result.stdout.no_fnmatch_line("*must not run*")


# -- text form and dicts -----------------------------------------------------------------------------

#: Written by hand: parameters, targets and triggers worth a round trip; then every registered kind
#: with its defaults (a kind added later gets one without an edit here).
EXAMPLES: list[Fault] = [
    Die(), Die(restart=True, when=Trigger("tools/call", nth=2)),
    Freeze(), Freeze(patience=0.5, expect_hang=True, when="mcp"),
    Hang(when="health"), Hang(when=Trigger("DELETE /mcp", after=1, times=2)),
    Delay(), Delay(0.5, jitter=0.1, seed=7, when=Trigger("/x", probability=0.25, seed=3)),
    Status(), Status(429, retry_after=3, body="slow, down (really)", when=Trigger("health", times=3)),
    Flap(), Flap(every=3, code=502),
    fault_kinds()["absent"](), fault_kinds()["absent"](when="mcp"),
    fault_kinds()["terminating"](), fault_kinds()["terminating"](when="method:x/y"),
    Stall(), Stall(after_bytes=10, patience=1.5, when="tools/call"),
    Drip(), Drip(chunk_bytes=4, interval=0.02, when="tool:echo"),
    Truncate(), Truncate(after_bytes=7),
    Reset(), Reset(after_bytes=3, when="health"),
    fault_kinds()["malformed_json"](), fault_kinds()["malformed_json"](when="tools/list"),
    EndlessSse(), EndlessSse(expect_hang=True, when="tools/call"),
    JsonRpcError(), JsonRpcError(-32001, 'it\'s "bad"; really [x] @y', when="tools/call"),
    ToolError(), ToolError(text="42", when="tool:echo"), ToolError(text=""), ToolError(text="a\\b\nc"),
    fault_kinds()["session_expired"](), fault_kinds()["session_expired"](when=Trigger("tools/call", nth=2)),
    BackendGone(), BackendGone(service_url="http://127.0.0.1:59685", when="tool:evaluate_session"),
    ErrorPayload(), ErrorPayload(reason="backend timed out", when=Trigger("tool:delete_session", times=1)),
    ErrorPayload(reason="it's 'down'; (really) @x=1", when="tools/call"), ErrorPayload(reason=""),
    ErrorPayload(reason="gone", message="Unknown task_id {task_id}: {reason} {{literal}}", when="mcp"),
    IgnoreEof(), IgnoreSigterm(), IgnoreSigterm(when=Trigger(times=1)),
    StderrFlood(), StderrFlood(bytes=100, when="tools/call"),
    StdoutNoise(), StdoutNoise(text="Listening on stdio (v1.0) [debug]", lines=3, when="initialize"),
    Hang(when="tool:a[b]"), Die(when=Trigger("tool:a[b]", nth=1)), Hang(when="resource:file:///a[1].txt"),
    Hang(when="tool:a[b"), Hang(when=Trigger("prompt:p[0][1]", times=2)),
]  # fmt: skip
EXAMPLES += [cls() for cls in fault_kinds().values() if cls() not in EXAMPLES]


def test_every_kind_has_examples() -> None:
    assert {f.kind for f in EXAMPLES} == set(fault_kinds())


@pytest.mark.parametrize("fault", EXAMPLES, ids=str)
def test_text_form_and_dict_round_trip(fault: Fault) -> None:
    assert parse_fault(str(fault)) == fault
    data = json.loads(json.dumps(fault.to_dict()))  # JSON-ready
    assert fault_from_dict(data) == fault
    assert type(parse_fault(str(fault))) is type(fault)


def test_plans_round_trip() -> None:
    assert parse_plan(format_plan(EXAMPLES)) == tuple(EXAMPLES)
    assert parse_plan("") == ()
    assert parse_plan(" ; ") == ()


def test_known_text_forms() -> None:
    assert str(Status(503, when=Trigger("health", times=3))) == "status@health[times=3]"
    assert str(Stall(after_bytes=0, when="tools/call")) == "stall@tools/call"
    assert str(BackendGone()) == "backend_gone"
    assert str(Die(when=Trigger("tools/call", nth=2))) == "die@tools/call[nth=2]"
    assert str(Hang(when=Trigger("health", probability=0.5, seed=1))) == "hang@health[p=0.5,seed=1]"
    assert parse_fault("status(code=502)@health[times=3]") == Status(502, when=Trigger("health", times=3))


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("*", Target("any")),
        ("health", Target("endpoint", "health")),
        ("tools/call", Target("method", "tools/call")),
        ("method:x/y", Target("method", "x/y")),
        ("tool:delete_session", Target("tool", "delete_session")),
        ("DELETE /mcp", Target("request", "/mcp", "DELETE")),
        ("/any/path", Target("path", "/any/path")),
    ],
)
def test_a_target_is_parsed_once_into_what_it_names(text: str, parsed: Target) -> None:
    """One grammar (triggers.parse_target): the trigger validates with it and the sidecar matches with
    its result (Trigger.selector), so the two can never disagree about what a target means."""
    assert parse_target(text) == parsed
    assert Trigger(text).selector == parsed
    with pytest.raises(ValueError, match=r"target 'FETCH /mcp' is unknown"):
        parse_target("FETCH /mcp")


def test_the_text_forms_trigger_options_in_a_when_string_are_refused_naming_both_ways() -> None:
    """``when="tool:x[times=1]"`` once made a trigger on a tool literally named ``x[times=1]`` (it never
    fired): the text form's options belong to the text form, so the target is refused, naming it and
    the two right ways to write it; the text form itself still parses them."""
    from pytest_mcpfaults import BackendGone, Trigger, parse_fault

    with pytest.raises(ValueError, match=re.escape("target 'tool:x[times=1]' ends in '[times=1]'")) as info:
        BackendGone(when="tool:x[times=1]")
    assert "Trigger('tool:x', times=...)" in str(info.value) and "parse_fault(" in str(info.value)
    with pytest.raises(ValueError, match="ends in '\\[nth = 2\\]'"):
        Trigger("DELETE /mcp[nth = 2]")
    parsed = parse_fault("backend_gone@tool:x[times=1]")
    assert parsed.trigger == Trigger("tool:x", times=1)
    assert Trigger("resource:file:///a[1].txt").target == "resource:file:///a[1].txt"  # not trigger options
    for target in ("tool:a[x=1]", "tool:a[]"):  # what the text form would read as (empty) trigger options
        with pytest.raises(ValueError, match=re.escape(f"target {target!r} ends in")):
            Trigger(target)


def test_a_target_with_blanks_at_its_ends_is_refused_naming_the_stripped_form() -> None:
    """``Delay(when="tool:x ")`` made a trigger on a tool literally named ``x `` (it never fired), where the
    text form strips the blanks around its target: refused, naming the value and the form to write."""
    from pytest_mcpfaults import Delay
    from pytest_mcpfaults.matrix import catalogue

    for make, given in [
        (lambda: Delay(when="tool:x "), "tool:x "),
        (lambda: Trigger(target=" tools/call"), " tools/call"),
        (lambda: Trigger("DELETE /mcp\t"), "DELETE /mcp\t"),
        (lambda: catalogue(kinds=["delay"], target="/x "), "/x "),  # the matrix's, too
    ]:
        with pytest.raises(ValueError, match="has blanks at its ends") as info:
            make()
        assert str(info.value) == (
            f"Trigger: target {given!r} has blanks at its ends (the text form strips them): "
            f"write {given.strip()!r}"
        )
    assert parse_fault("delay@ tool:x ").trigger == Trigger("tool:x")  # the text form's own, as before


def test_a_from_trace_plan_on_a_tool_whose_name_holds_brackets_is_one_run() -> None:
    """MCP tool names SHOULD keep to letters, digits, ``_-.`` (2025-11-25): ``[`` is allowed, so a
    plan inferred from a harness's trace on ``a[b]`` reads back (it raised inside explore's hook)."""
    from pytest_mcpfaults.from_trace.infer import TraceRun

    run = TraceRun.of("t", ["die@tool:a[b][nth=1]", "hang@tool:a[b]"])
    assert [(step, f.trigger) for step, f in run.plan] == [
        ("tool:a[b]#1", Trigger("tool:a[b]", nth=1)),
        ("tool:a[b]#1", Trigger("tool:a[b]")),
    ]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: parse_fault("stdout_noise(lines=1000000000)"), "StdoutNoise: lines × (len(text) + 1)"),
        (lambda: StdoutNoise(lines=2, text="x" * (1 << 23)), "StdoutNoise: lines × (len(text) + 1)"),
        (lambda: parse_fault("stderr_flood(bytes=1099511627776)"), "StderrFlood: bytes"),
    ],
)
def test_what_a_stdio_child_writes_on_its_pipes_is_bounded(make: Any, message: str) -> None:
    """``stdout_noise`` is built in the sidecar's memory and ``stderr_flood`` written by the child: a
    typo'd exponent would eat the machine, where 16 MiB is 256 pipe buffers (any more only slows the run)."""
    with pytest.raises(ValueError, match="^" + re.escape(message) + " must be at most 16777216 bytes"):
        make()
    assert parse_fault("stdout_noise(lines=16384)").params()["lines"] == 16384  # 16384 × 37 bytes
    assert parse_fault("stderr_flood(bytes=16777216)").params()["bytes"] == 1 << 24
