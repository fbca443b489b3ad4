"""What configures the ``mcp_sidecar`` fixture and the factory: the ini defaults of a run and the
``mcp_sidecar`` markers of a test, merged, and checked at the earliest moment (configure time for the
ini keys, collection for markers).

Markers compose: every ``mcp_sidecar`` marker on a test (its own, its class's, its module's, in that
order of closeness) contributes. For each keyword the closest marker that gives it wins; ``faults`` are
combined instead, the closest marker's first (so where two faults match the same request, the closer
one fires). Ini keys set the run's defaults beneath every marker.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from pytest_mcpfaults._pytest import cassettes
from pytest_mcpfaults.options.validation import parse_seconds

PATIENCE_INI = "mcpfaults_patience"
HYGIENE_INI = "mcpfaults_session_hygiene"
#: The marker of a test that keeps its sessions on purpose (no ``DELETE`` owed).
KEEP_SESSIONS = "mcp_keep_sessions"
INTERRUPT_INI = "mcpfaults_interrupt"
#: The idle-hang verdict (a test blocked on itself after its last MCP request, no fault): its ini switch
#: and the marker of a test that waits on purpose.
IDLE_INI = "mcpfaults_idle_verdict"
ALLOW_IDLE = "mcp_allow_idle"
#: ini key -> the ``Sidecar`` keyword it defaults, and its help (patience is parsed on its own: it
#: takes 'none').
DEFAULT_INIS: dict[str, tuple[str, str]] = {
    "mcpfaults_era": (
        "era",
        "Default protocol era of every mcp_sidecar and factory sidecar: auto, stateless or session "
        "(a marker's era= wins). Default: Sidecar's own (auto).",
    ),
    "mcpfaults_reply": (
        "reply",
        "Default reply framing of every sidecar: json or sse (a marker's reply= wins). Default: json.",
    ),
    "mcpfaults_tool_sets": (
        "tool_sets",
        "Default tool sets of every sidecar, comma- or space-separated (e.g. 'basic, benchmark'; a "
        "marker's tool_sets= wins). Default: Sidecar's own (basic, benchmark).",
    ),
}


def addini(parser: pytest.Parser) -> None:
    parser.addini(
        PATIENCE_INI,
        "Seconds a request held by a hang/stall/freeze fault may wait before the sidecar aborts it and "
        "the test fails with a patience verdict ('none': hold until release or teardown). Default 5.",
        default="5",
    )
    parser.addini(
        INTERRUPT_INI,
        "Seconds after an unexpected patience violation before a test still blocked in its body is "
        "interrupted with the verdict ('off': never interrupt; the verdict then waits for the body). "
        "Default 1.",
        default="1",
    )
    parser.addini(
        HARNESS_INI,
        "Top-level packages of the harness under test, comma- or space-separated: where a verdict says "
        "where the test is blocked, only their frames are shown among installed code. Default: every "
        "package but the standard library, the MCP SDKs, pytest and its plugins, this plugin, and what "
        "they require.",
        default="",
    )
    parser.addini(
        HYGIENE_INI,
        "Session hygiene at the end of every test with a sidecar: each session the client opened was "
        "ended (a DELETE) unless the sidecar lost it, no call reused a session after its 404, and "
        "(from the test's spans, when it records them) no call failed in the client after a failed call "
        f"('off' turns it off; @pytest.mark.{KEEP_SESSIONS} excuses one test's open sessions). Default on.",
        default="on",
    )
    parser.addini(
        IDLE_INI,
        "The idle-hang verdict: a test whose thread stays blocked on one line for the patience budget "
        "after its last MCP request was answered, with nothing in flight and no fault fired, is "
        f"interrupted with a verdict ('off' turns it off; @pytest.mark.{ALLOW_IDLE} excuses one test "
        "that waits on purpose). Default on.",
        default="on",
    )
    for key, (_, help_text) in DEFAULT_INIS.items():
        parser.addini(key, help_text, default="")


HARNESS_INI = "mcpfaults_harness_packages"


def _words(raw: object) -> tuple[str, ...]:
    return tuple(part for part in re.split(r"[,\s]+", str(raw).strip()) if part)


def ini_switch(config: pytest.Config, key: str) -> bool:
    """An on/off ini key (``mcpfaults_session_hygiene``, ``mcpfaults_idle_verdict``); a usage error
    otherwise."""
    raw = str(config.getini(key)).strip().lower()
    if raw not in ("on", "off"):
        raise pytest.UsageError(f"ini option {key} must be 'on' or 'off', got {raw!r}")
    return raw == "on"


def ini_seconds(config: pytest.Config, key: str, off: str = "none", what: str = "") -> float | None:
    """A number of seconds (``mcpfaults_patience``, ``mcpfaults_interrupt``), ``None`` for ``off``; a
    usage error otherwise."""
    raw = str(config.getini(key)).strip()
    try:
        return parse_seconds(raw, off=off)
    except ValueError:
        raise pytest.UsageError(
            f"ini option {key} must be a positive number of seconds{what} or '{off}', got {raw!r}"
        ) from None


def _ini_values(config: pytest.Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in DEFAULT_INIS:
        raw = str(config.getini(key)).strip()
        if raw:
            out[key] = _words(raw) if key == "mcpfaults_tool_sets" else raw
    return out


def ini_defaults(config: pytest.Config) -> dict[str, Any]:
    """The ``Sidecar`` keywords the run's ini keys set (patience always; the others when given)."""
    given = {DEFAULT_INIS[key][0]: value for key, value in _ini_values(config).items()}
    return {"patience": ini_seconds(config, PATIENCE_INI), **given}  # 'none' holds until released


def check_ini(config: pytest.Config) -> None:
    """Refuse a bad ini default as a usage error naming the key, before collection. The sidecar
    package is imported only when one of those keys is set."""
    ini_seconds(config, PATIENCE_INI)
    ini_switch(config, HYGIENE_INI)
    ini_switch(config, IDLE_INI)
    harness = _words(config.getini(HARNESS_INI))
    for name in harness:
        if not name.isidentifier():
            raise pytest.UsageError(
                f"ini option {HARNESS_INI} takes top-level package names (identifiers such as "
                f"'my_harness'), comma- or space-separated, got {name!r}"
            )
    from pytest_mcpfaults._pytest.blocked import set_harness_packages

    set_harness_packages(harness)
    given = _ini_values(config)
    if not given:
        return
    from pytest_mcpfaults.transports.server import Sidecar

    for key, value in given.items():
        try:
            Sidecar(**{DEFAULT_INIS[key][0]: value})  # validation only: nothing binds until start()
        except (TypeError, ValueError) as exc:
            raise pytest.UsageError(f"ini option {key} = {config.getini(key)!r}: {exc}") from None


#: The stdio server's marker (``@pytest.mark.mcp_stdio(**StdioServer kwargs)``).
STDIO_MARKER = "mcp_stdio"


def marker_kwargs(node: pytest.Item, name: str = "mcp_sidecar") -> dict[str, Any]:
    """The merged keywords of every ``name`` marker on ``node`` (see the module docstring).
    Raises ``ValueError`` for a marker with positional arguments."""
    merged: dict[str, Any] = {}
    markers = list(node.iter_markers(name))  # closest first
    for marker in markers:
        if marker.args:
            cls = "StdioServer" if name == STDIO_MARKER else "Sidecar"
            raise ValueError(
                f"{node.nodeid}: @pytest.mark.{name} takes keyword arguments only "
                f"(those of {cls}), got positional {marker.args!r}"
            )
        for key, value in marker.kwargs.items():
            merged.setdefault(key, value)
    plans = [m.kwargs["faults"] for m in markers if "faults" in m.kwargs]
    if plans:  # one that is not a list is left for the class to refuse, naming faults
        odd = [plan for plan in plans if not isinstance(plan, (list, tuple))]
        merged["faults"] = odd[0] if odd else [fault for plan in plans for fault in plan]
    return merged


def check_marker(node: pytest.Function, name: str) -> None:
    """A ``CollectError`` saying what is wrong with a test's ``name`` markers (``mcp_sidecar`` or
    ``mcp_stdio``), naming the argument."""
    try:
        kwargs = marker_kwargs(node, name)
        if name != STDIO_MARKER:
            kwargs = cassettes.resolve(kwargs, cassettes.record_mode(node.config))
    except ValueError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    if not kwargs:
        return  # no marker: the server's package is not imported
    if name == STDIO_MARKER:
        from pytest_mcpfaults.stdio.server import StdioServer as cls
    else:
        from pytest_mcpfaults.transports.server import Sidecar as cls  # type: ignore[assignment]
    valid = list(inspect.signature(cls).parameters)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise pytest.Collector.CollectError(
            f"{node.nodeid}: @pytest.mark.{name} got an unknown argument {unknown[0]!r}; "
            f"valid arguments (those of {cls.__name__}): {', '.join(valid)}"
        )
    try:
        cls(**kwargs)  # validation only: nothing binds until start()
    except (TypeError, ValueError) as exc:
        raise pytest.Collector.CollectError(f"{node.nodeid}: @pytest.mark.{name}: {exc}") from None
