"""Shared by the framework modules: the cases, a session driven phase by phase, the measurements file,
and the patience verdict of a patient client run under pytester.

A framework module wraps its framework's own MCP client object in a small adapter with four coroutines
(``connect``, ``list_tools``, ``call``, ``close``) and drives it three ways:

* ``measure``: the framework as it comes (its defaults), against a sidecar that holds for ever
  (``patience=None``); every phase is bounded here at :data:`BOUND` seconds, so a phase that passes it
  is recorded as a hang and the test run goes on;
* ``verdict``: the same client with nothing caught, in a pytester run on ``mcp_sidecar`` with a patience
  of :data:`PATIENCE` seconds: the plugin turns the hang into a failed test with a ``PatienceError``;
* ``drive`` with the framework's knobs set (the recipe): it must pass under the same faults.

Each result goes to ``results/<framework>.json`` beside this file (``MCPFAULTS_FW_RESULTS`` moves it);
``table.py`` prints the docs' table from those files.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import json
import os
import platform
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pytest_mcpfaults import Fault, Hang, SessionExpired, Stall, Trigger

HERE = Path(__file__).resolve().parent
RESULTS = Path(os.environ.get("MCPFAULTS_FW_RESULTS", HERE / "results"))
BOUND = 30.0  # seconds: a phase still running after this is a hang
PATIENCE = 2.0  # seconds: the budget of the verdict runs
T = TypeVar("T")


class Adapter(Protocol):
    async def connect(self) -> None: ...
    async def list_tools(self) -> list[str]: ...
    async def call(self) -> str: ...
    async def close(self) -> None: ...


@dataclass(frozen=True)
class Case:
    """One fault scenario: ``fault`` is ``none`` (interop), ``freeze`` (the sidecar freezes after the
    call, before the client closes), ``hang_del`` (the close-time ``DELETE /mcp`` hangs), ``stall`` (the
    ``tools/call`` answer sends 20 bytes of body, then nothing) or ``expire`` (the first ``tools/call``
    gets 404 "Session not found"; a second call follows)."""

    fault: str
    era: str

    @property
    def name(self) -> str:
        return f"{self.fault}-{self.era}"

    def faults(self) -> list[Fault]:
        return {
            "none": [],
            "freeze": [],  # Sidecar.freeze() at run time
            "hang_del": [Hang(when="DELETE /mcp")],
            "stall": [Stall(after_bytes=20, when="tools/call")],
            "expire": [SessionExpired(when=Trigger("tools/call", nth=1))],
        }[self.fault]

    @property
    def held(self) -> str | None:
        """The request a patient client waits on, as the verdict names it."""
        if self.fault in ("freeze", "hang_del"):
            return "`DELETE /mcp`"
        if self.fault == "stall":
            return "`POST /mcp` (tools/call echo)"
        return None


def case(name: str) -> Case:
    fault, era = name.rsplit("-", 1)
    return Case(fault, era)


def cases(faults: str, eras: str) -> list[str]:
    return [f"{f}-{e}" for f in faults.split() for e in eras.split()]


# -- the session, phase by phase ---------------------------------------------------------------------
def _steps(client: Adapter, sidecar: Any, c: Case) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
    async def freeze_then_close() -> None:
        sidecar.freeze()
        await client.close()

    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("connect", client.connect),
        ("list", client.list_tools),
        ("call", client.call),
    ]
    if c.fault == "expire":
        steps.append(("call2", client.call))
    steps.append(("close", freeze_then_close if c.fault == "freeze" else client.close))
    return steps


async def drive(client: Adapter, sidecar: Any, c: Case) -> None:
    """The session as a harness runs it: nothing bounded, nothing caught."""
    for _, step in _steps(client, sidecar, c):
        await step()


def _leaves(e: BaseException) -> list[BaseException]:
    """An exception group's leaves (what the framework really hit), or the exception itself."""
    subs = getattr(e, "exceptions", None)
    return [y for x in subs for y in _leaves(x)] if isinstance(subs, tuple) else [e]


_PATH = re.compile(r"/(?:tmp|work|home|root|usr|opt|var)(?:/[^\s'\"(),:]*)?")


def scrub(text: str) -> str:
    """No machine paths, ports or session ids in the committed measurements: a path keeps its last part."""
    text = _PATH.sub(lambda m: "<path>/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
    text = re.sub(r"\bsession [0-9a-f]{12}…", "session <id>…", text)  # a verdict's session id
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)


def _error(e: BaseException) -> str:
    return scrub("; ".join(f"{type(x).__name__}: {x}" for x in _leaves(e)))[:200]


async def _bounded(step: Callable[[], Awaitable[Any]], bound: float) -> dict[str, Any]:
    """Run ``step`` in this task (a framework's session must be entered and left in one task), cancelled
    after ``bound`` seconds."""
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(bound) as deadline:
            value = await step()
    except BaseException as e:  # what the framework raised is the measurement
        if deadline.expired():
            return {"outcome": "hang", "s": bound}
        if not isinstance(e, Exception):
            raise
        return {"outcome": "raised", "s": round(time.monotonic() - t0, 3), "error": _error(e)}
    s = round(time.monotonic() - t0, 3)
    if isinstance(value, str) and value.startswith("error"):  # an adapter's word for an error answer
        return {"outcome": "error", "s": s, "value": value[:200]}
    return {"outcome": "ok", "s": s, **({"value": str(value)[:200]} if value is not None else {})}


async def measure(client: Adapter, sidecar: Any, c: Case, bound: float = BOUND) -> dict[str, Any]:
    """Every phase bounded at ``bound`` seconds; what each did, in order, and the sidecar's journal."""
    phases: dict[str, Any] = {}
    for name, step in _steps(client, sidecar, c):
        phases[name] = await _bounded(step, bound)
        if name == "connect" and phases[name]["outcome"] != "ok":
            break
    journal = sidecar.journal.sequence()
    path = "session" if "POST initialize" in journal else "stateless" if journal else "none"
    return {"phases": phases, "summary": summary(phases), "journal": journal, "path": path}


def summary(phases: dict[str, Any]) -> str:
    """What the table shows: the phases that did not simply succeed at once (or 'ok')."""
    parts = []
    for name, p in phases.items():
        if p["outcome"] == "hang":
            parts.append(f"{name} hangs ≥ {p['s']:g} s")
        elif p["outcome"] == "raised":
            parts.append(f"{name} raises {p['error'][:90]} at {p['s']:.1f} s")
        elif p["outcome"] == "error":
            parts.append(f"{name} returns an {p['value'][:90]} at {p['s']:.1f} s")
        elif p["s"] >= 1.0:
            parts.append(f"{name} returns at {p['s']:.1f} s")
    return "; ".join(parts) or "ok"


def outcomes(result: dict[str, Any]) -> dict[str, str]:
    """``{phase: outcome}``, what the tests pin (timings are recorded, not pinned)."""
    return {name: p["outcome"] for name, p in result["phases"].items()}


async def in_thread(fn: Callable[[], T]) -> T:
    """Await a blocking call run on its own daemon thread (not the loop's executor, whose shutdown
    would wait for a call that never returns)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        if not fut.done():
            fut.set_exception(exc) if exc is not None else fut.set_result(value)

    def work() -> None:
        try:
            value, exc = fn(), None
        except BaseException as e:
            value, exc = None, e
        try:
            loop.call_soon_threadsafe(settle, value, exc)
        except RuntimeError:  # the loop is gone: nobody waits any more
            pass

    threading.Thread(target=work, daemon=True, name="fwcheck-sync-call").start()
    return await fut


# -- the patience verdict ------------------------------------------------------------------------------
_PATIENT = """
import asyncio

import pytest

import fwcheck
from {module} import {factory} as default_client

CASE = fwcheck.case({case!r})


@pytest.mark.mcp_sidecar(era=CASE.era, patience={patience!r}, faults=CASE.faults())
def test_patient_harness(mcp_sidecar):
    asyncio.run(fwcheck.drive(default_client(mcp_sidecar.mcp_url), mcp_sidecar, CASE))
"""


# The inner run's own clock (a conftest beside the patient harness): how long the test went on after the
# sidecar began to hold its first request, and how long its teardown took, the plugin's verdicts
# included. Its whole time is no measure of the plugin: on a loaded machine the framework's own
# connect, before any hold, can take seconds.
_TIMING = """
import json

import pytest

SEEN = {}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item):
    sidecar = item.funcargs.get("mcp_sidecar")
    try:
        return (yield)
    finally:  # the outermost wrapper: the plugin's teardown, its verdicts included, is done
        held = [r.held.at for r in sidecar.journal.requests if r.held is not None] if sidecar else []
        SEEN["from_hold"] = round(sidecar.journal.now() - min(held), 2) if held else None


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        SEEN["teardown"] = round(report.duration, 2)
        with open("timing.json", "w") as f:
            json.dump(SEEN, f)
"""

# a harness that carries on after a failed call (as an agent loop hands a tool's error to its model):
# each phase's error is caught, so the session hygiene verdict at teardown is the test's only failure
_CARRIES_ON = _PATIENT.replace("fwcheck.drive(", "fwcheck.measure(").replace("CASE))", "CASE, bound=30.0))")
#: A lost session's line in the session hygiene verdict (docs/sessions.md).
LOST = re.compile(r"(?m)^\s*(session \S+ was lost \(.*? was answered 404\) and the client kept calling .*)$")


def verdict(
    pytester: Any, monkeypatch: Any, module: str, c: Case, factory: str = "default_client",
    patience: float = PATIENCE, carry_on: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Run the framework's default client on ``mcp_sidecar`` with the fault, nothing caught (with
    ``carry_on``, each phase's error caught and the next phase run), in its own pytest process
    (pytest-timeout 40 s as the outer bound); return how it ended."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    template = _CARRIES_ON if carry_on else _PATIENT
    source = template.format(module=module, factory=factory, case=c.name, patience=patience)
    pytester.makepyfile(test_patient=source)
    pytester.makeconftest(_TIMING)
    result = pytester.runpytest_subprocess(
        "-p", "mcpfaults", "-p", "no:cacheprovider", "--timeout=40", "--junitxml=junit.xml", timeout=120
    )  # fmt: skip
    text = result.stdout.str()
    case_el = ET.parse(pytester.path / "junit.xml").find(".//testcase")
    seconds = float(case_el.get("time", "nan")) if case_el is not None else float("nan")
    # one headline per held request: identical ones are grouped as "N. <count> times: the client ..."
    headlines = [
        h
        for count, h in re.findall(r"(?m)^\d+\. (?:(\d+) times: )?(the client .*)$", text)
        for _ in range(int(count or 1))
    ]
    timing = pytester.path / "timing.json"
    return {
        "ret": int(result.ret),
        "s": round(seconds, 2),
        **(json.loads(timing.read_text()) if timing.exists() else {"from_hold": None, "teardown": None}),
        "patience": patience,
        "patience_error": "PatienceError: " in text,
        "outcomes": {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed", "errors")},
        "hygiene_error": "SessionHygieneError: " in text,
        "lost": [scrub(line)[:220] for line in LOST.findall(text)],
        "pytest_timeout": "Timeout (>40.0s) from pytest-timeout" in text,
        "headlines": [scrub(h)[:220] for h in headlines],
        "tail": scrub(text[-1500:]),
    }


# -- the measurements file -----------------------------------------------------------------------------
_STARTED: set[str] = set()


def record(framework: str, dist: str, key: str, data: dict[str, Any]) -> None:
    """Merge ``data`` under ``cases[key]`` of ``results/<framework>.json`` with the versions and date."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{framework}.json"
    fresh = framework not in _STARTED  # a run starts its framework's file afresh: no stale cases
    _STARTED.add(framework)
    doc = json.loads(path.read_text()) if path.exists() and not fresh else {"cases": {}}
    doc.update(
        framework=framework,
        dist=dist,
        version=importlib.metadata.version(dist.split("[", 1)[0]),
        mcp=importlib.metadata.version("mcp"),
        plugin=importlib.metadata.version("pytest-mcpfaults"),
        python=platform.python_version(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    )
    doc["cases"].setdefault(key, {}).update(data)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


# -- the checks every framework module runs ------------------------------------------------------------
@dataclass
class Framework:
    """One framework's facts: how to build its default client and its bounded one (the recipe), which
    eras it speaks, and what it does on its own in each fault case (``{phase: outcome}`` for the phases
    that do not simply succeed, pinned by the tests)."""

    name: str
    dist: str
    module: str
    default_client: Callable[[str], Adapter]
    bounded_client: Callable[[Any], Adapter]
    raw: dict[str, dict[str, str]]
    paths: dict[str, str]  # sidecar era -> the era the client ends up in
    cannot_bound: dict[str, str] | None = None  # case -> why no knob bounds it (measured: still hangs)
    factory: str = "default_client"  # the module-level name of default_client, for the verdict runs
    late_verdict: dict[str, str] | None = None  # case -> why the verdict waits for pytest-timeout (measured)
    held: dict[str, str] | None = None  # case -> the held request the verdict names, when not Case.held
    # case -> what the client did with its lost session (measured): it called it again, and earns the
    # session hygiene verdict (docs/sessions.md), its default client and the recipe's alike
    keeps_lost_session: dict[str, str] | None = None

    @property
    def hangs(self) -> list[str]:
        return [name for name, phases in self.raw.items() if "hang" in phases.values()]

    @property
    def lost_sessions(self) -> list[str]:
        """The cases whose client calls its lost session again (``keeps_lost_session``)."""
        return list(self.keeps_lost_session or {})

    def _expect_lost_session(self, name: str, sidecar: Any) -> str | None:
        """For a case in ``keeps_lost_session``: the session hygiene verdict the sidecar holds for the
        test's teardown, which the test expects (its line, without the port), pinned here as
        ``pytest.raises`` pins an exception; then the sidecar is stopped, so that teardown does not
        judge again what was just checked (the verdict as a user gets it: ``check_lost_session``). For
        any other case: ``None``, and teardown judges as always."""
        if name not in (self.keeps_lost_session or {}):
            return None
        from pytest_mcpfaults.verdicts.hygiene import session_problems

        problems = session_problems(sidecar.journal.requests, sidecar.sessions)
        lost = [p for p in problems if p.kind == "used_after_lost"]
        assert lost and len(lost) == len(problems), [p.describe() for p in problems]
        sidecar.stop()
        return scrub(lost[0].describe())

    def record(self, key: str, data: dict[str, Any]) -> None:
        record(self.name, self.dist, key, data)

    def check_interop(self, era: str, factory: Any) -> None:
        sidecar = factory(era=era)
        result = asyncio.run(measure(self.default_client(sidecar.mcp_url), sidecar, case(f"none-{era}")))
        self.record(f"none-{era}", {"raw": result})
        assert outcomes(result) == dict.fromkeys(["connect", "list", "call", "close"], "ok"), result
        assert result["phases"]["call"].get("value") == "hi", result
        assert result["path"] == self.paths[era], result

    def check_on_its_own(self, name: str, factory: Any) -> None:
        c = case(name)
        sidecar = factory(era=c.era, patience=None, faults=c.faults())
        result = asyncio.run(measure(self.default_client(sidecar.mcp_url), sidecar, c))
        self.record(name, {"raw": result})
        lost = self._expect_lost_session(name, sidecar)
        if lost:
            self.record(name, {"lost_session": lost})
        expected = self.raw[name]
        got = {k: v for k, v in outcomes(result).items() if v != "ok" or k in expected}
        assert got == expected, result

    def check_verdict(self, name: str, pytester: Any, monkeypatch: Any) -> None:
        c = case(name)
        v = verdict(pytester, monkeypatch, self.module, c, self.factory)
        self.record(name, {"verdict": v})
        assert v["ret"] == 1 and v["patience_error"], v["tail"]
        held = (self.held or {}).get(name, c.held)
        assert held is not None and any(held in h for h in v["headlines"]), v["headlines"]
        late = (self.late_verdict or {}).get(name)
        if late:  # the verdict is right, but only an outer bound ends the test: pinned, not hidden
            self.record(name, {"late_verdict": late})
            assert v["pytest_timeout"], v
            return
        assert not v["pytest_timeout"], v
        # each held request waits its budget: from the first hold to the end of the test's teardown
        assert v["from_hold"] is not None and v["from_hold"] < PATIENCE * len(v["headlines"]) + 3.0, v

    def check_lost_session(self, name: str, pytester: Any, monkeypatch: Any) -> None:
        """The default client, carrying on after each failed call, in a pytest of its own on
        ``mcp_sidecar`` with the case's faults: the test's body passes, and the session hygiene
        verdict fails it at teardown, naming the lost session, its ``404`` and the call after it."""
        c = case(name)
        v = verdict(pytester, monkeypatch, self.module, c, self.factory, carry_on=True)
        self.record(name, {"verdict": v})
        assert v["outcomes"] == {"passed": 1, "errors": 1}, v["tail"]
        assert v["hygiene_error"] and not v["patience_error"], v["tail"]
        assert len(v["lost"]) == 1, v["tail"]
        assert "instead of sending a new `initialize`: `POST " in v["lost"][0], v["lost"]
        assert v["teardown"] is not None and v["teardown"] < PATIENCE, v  # the verdict comes at once

    def check_bounded(self, name: str, factory: Any) -> None:
        c = case(name)
        unbounded = (self.cannot_bound or {}).get(name)
        sidecar = factory(era=c.era, faults=c.faults(), patience=None if unbounded else PATIENCE + 3.0)
        result = asyncio.run(measure(self.bounded_client(sidecar), sidecar, c))
        self.record(name, {"bounded": result, **({"cannot_bound": unbounded} if unbounded else {})})
        if unbounded:  # measured: the knobs do not reach it
            assert "hang" in outcomes(result).values(), result
            return
        assert "hang" not in outcomes(result).values(), result
        assert all(p["s"] < 3.0 for p in result["phases"].values()), result["phases"]
        if c.held:
            sidecar.assert_client_gave_up(within=2.5)
        sidecar.assert_no_patience_violations()
        lost = self._expect_lost_session(name, sidecar)  # no knob makes it open a new session
        if lost:
            self.record(name, {"bounded_lost_session": lost})


def standard_tests(fw: Framework) -> tuple[Callable[..., None], ...]:
    """The five tests of a framework with one client, for its module to bind at top level: the interop
    check in each era, each fault on its own, the patience verdict for each hang, the recipe bounded, and
    the session hygiene verdict for each case whose client calls its lost session again.
    ``test_interop, test_on_its_own, test_patience_turns_the_hang_into_a_verdict, test_bounded_passes,
    test_calling_a_lost_session_gets_the_hygiene_verdict = fwcheck.standard_tests(FW)``."""
    import pytest

    @pytest.mark.parametrize("era", fw.paths)
    def test_interop(era: str, mcp_sidecar_factory: Any) -> None:
        fw.check_interop(era, mcp_sidecar_factory)

    @pytest.mark.parametrize("name", fw.raw)
    def test_on_its_own(name: str, mcp_sidecar_factory: Any) -> None:
        fw.check_on_its_own(name, mcp_sidecar_factory)

    @pytest.mark.parametrize("name", fw.hangs)
    def test_patience_turns_the_hang_into_a_verdict(name: str, pytester: Any, monkeypatch: Any) -> None:
        fw.check_verdict(name, pytester, monkeypatch)

    @pytest.mark.parametrize("name", fw.raw)
    def test_bounded_passes(name: str, mcp_sidecar_factory: Any) -> None:
        fw.check_bounded(name, mcp_sidecar_factory)

    @pytest.mark.parametrize("name", fw.lost_sessions)
    def test_calling_a_lost_session_gets_the_hygiene_verdict(
        name: str, pytester: Any, monkeypatch: Any
    ) -> None:
        fw.check_lost_session(name, pytester, monkeypatch)

    return (
        test_interop,
        test_on_its_own,
        test_patience_turns_the_hang_into_a_verdict,
        test_bounded_passes,
        test_calling_a_lost_session_gets_the_hygiene_verdict,
    )
