"""Explore: plan a fault campaign from a clean run's footprint. Pure: no I/O, no pytest. Which kinds
apply at a step comes from the kinds' own class attributes (:func:`applies_to`), never from a list here;
reduction and depth 2 are docs/explore.md's "Reduction" and "Depth 2".
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.explore import __all__ as __all__  # the package's face, listed once (run first)
from pytest_mcpfaults.faults.triggers import MCP_METHODS, parse_target
from pytest_mcpfaults.options.validation import parse_seconds

Endpoint = Literal["health", "mcp", "other"]


class RequestLike(Protocol):
    """What a footprint reads of a journal record (a sidecar's ``RequestRecord``)."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def mcp_method(self) -> str | None: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def session_id(self) -> str | None: ...


@dataclass(frozen=True)
class Step:
    """One request of a footprint, as a trigger aims at it: ``target`` and its ``nth`` occurrence.
    ``shape`` (its MCP session's labels) and ``position`` serve reduction; ``server`` is the test's
    ``server``-th server when it used several (``0``: its only one), ``transport`` that server's
    (empty: the test's): it decides the kinds that apply."""

    target: str
    nth: int
    label: str
    endpoint: Endpoint
    mcp_method: str | None = None
    answered: bool = False
    shape: tuple[str, ...] = ()
    position: int = 0
    server: int = 0
    transport: str = ""

    @property
    def id(self) -> str:
        """``tool:delete_session#1``, ``DELETE /mcp#3``; on a second server ``sidecar2/tool:echo#1``."""
        return (
            f"{SERVER_PREFIX}{self.server}/{self.target}#{self.nth}"
            if self.server
            else f"{self.target}#{self.nth}"
        )

    @property
    def klass(self) -> tuple[int, str, tuple[str, ...], int]:
        """Two steps are repeats (the harness doing the same again, for the next task) when they have
        the same label at the same position of a same-shaped session on the same server."""
        return (self.server, self.label, self.shape, self.position)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(**{**data, "shape": tuple(data.get("shape", ()))})


#: A step id's prefix naming its server when the test used several (``sidecar2/``).
SERVER_PREFIX = "sidecar"

#: ``pytest -k`` takes only word characters and ``: + - . [ ] \\ /`` in a name (``/`` and ``\\`` not
#: before pytest 8.1), and ``+``, ``[``, ``]`` mean something in explore's ids.
_ID_CHARS = re.compile(r"[^\w:.\-]")


def id_part(step_id: str) -> str:
    """A step id in characters ``pytest -k`` accepts: ``DELETE /mcp#2`` -> ``DELETE:mcp[2]``,
    ``sidecar2/tool:echo#1`` -> ``sidecar2.tool:echo[1]``. The bracketed occurrence ends the id, so
    ``-k "tool:echo[1]"`` does not select ``tool:echo[12]``."""
    head, _, nth = step_id.rpartition("#")
    server = server_of(head + "#")
    if server:
        head = f"{SERVER_PREFIX}{server}." + head.partition("/")[2]
    verb, space, path = head.partition(" ")
    if space and path.startswith("/"):  # a request named by method and path: ``DELETE /mcp``
        head = f"{verb}:{path.strip('/')}"
    return _ID_CHARS.sub("_", head.replace("/", ".")) + f"[{nth}]"


def server_of(step_id: str) -> int:
    """The server a step id names (``sidecar2/tool:echo#1``: 2; ``0``: none, the test's only one)."""
    head, slash, _ = step_id.partition("/")
    number = head[len(SERVER_PREFIX) :]
    if slash and head.startswith(SERVER_PREFIX) and number.isdigit() and " " not in head:
        return int(number)
    return 0


def _target(r: RequestLike, mcp_path: str, health_path: str | None) -> tuple[str, Endpoint]:
    if health_path is not None and r.path == health_path:
        return "health", "health"
    if r.path == mcp_path and r.mcp_method:
        if r.mcp_method == "tools/call" and r.tool:
            return f"tool:{r.tool}", "mcp"
        return (r.mcp_method if r.mcp_method in MCP_METHODS else f"method:{r.mcp_method}"), "mcp"
    return f"{r.method} {r.path}", ("mcp" if r.path == mcp_path else "other")


def footprint(
    requests: Sequence[RequestLike],
    *,
    mcp_path: str = "/mcp",
    health_path: str | None = "/health",
    server: int = 0,
    transport: str = "",
) -> tuple[Step, ...]:
    """The steps of a run on one server, in journal order. A ``POST`` that was not one JSON-RPC message
    is left out: no trigger can aim at it alone."""
    counts: dict[str, int] = {}
    sessions: dict[str | None, list[int]] = {}
    out: list[Step] = []
    for r in requests:
        if r.path == mcp_path and r.method == "POST" and not r.mcp_method:
            continue
        target, endpoint = _target(r, mcp_path, health_path)
        nth = counts[target] = counts.get(target, 0) + 1
        answered = bool(r.mcp_method) and not str(r.mcp_method).startswith("notifications/")
        label = " ".join([r.method, r.mcp_method or r.path, *([r.tool] if r.tool else [])])
        out.append(
            Step(target, nth, label, endpoint, r.mcp_method, answered, server=server, transport=transport)
        )
        if endpoint == "mcp":
            # an initialize carries no session id yet: it opens the session of the next request
            sessions.setdefault(r.session_id, []).append(len(out) - 1)
    pending: list[int] = sessions.pop(None, [])
    for idx in sessions.values():
        members = sorted(idx + [i for i in pending if i < idx[0] and out[i].mcp_method == "initialize"][-1:])
        pending = [i for i in pending if i not in members]
        shape = tuple(out[i].label for i in members)
        for pos, i in enumerate(members):
            out[i] = dataclasses.replace(out[i], shape=shape, position=pos)
    return tuple(out)


def _endpoint_of(target: str) -> Endpoint | None:
    t = parse_target(target)
    if t.kind == "any":
        return None
    if t.kind == "endpoint":
        return "health" if t.value == "health" else "mcp"
    if t.kind in ("tool", "prompt", "resource", "method"):
        return "mcp"
    return "other"


def _request(step: Step) -> Any:
    """``step``'s request as the sidecar's router sees it."""
    from pytest_mcpfaults.core.routing import RequestInfo
    from pytest_mcpfaults.mcp.jsonrpc import McpRequest

    verb, _, rest = step.label.partition(" ")
    path = "/health" if step.endpoint == "health" else ("/mcp" if step.endpoint == "mcp" else rest)
    mcp = None
    if step.mcp_method:
        tool = step.target[len("tool:") :] if step.target.startswith("tool:") else None
        message: dict[str, Any] = {"params": {"name": tool}}
        if step.answered:
            message["id"] = 0  # a notification has none
        mcp = McpRequest(message, step.mcp_method, message.get("id"), None, "session")
    return RequestInfo(verb, path, step.endpoint, mcp)


def cells(cls: type[F.Fault]) -> dict[str, Mapping[str, Any]]:
    """The cells explore plans for kind ``cls``, by name: its ``explore_cells``, else its catalogue
    cell named ``""``, else none (not explored)."""
    if cls.explore_cells:
        return dict(cls.explore_cells)
    return {} if cls.catalogue_params is None else {"": cls.catalogue_params}


def cell_name(fault: F.Fault) -> str:
    """The fault's name in ids: its kind and its ``explore_cells`` cell (``error_payload.gone``)."""
    for name, params in type(fault).explore_cells.items():
        if all(getattr(fault, k, None) == v for k, v in params.items()):
            return f"{fault.kind}.{name}"
    return fault.kind


def applies_to(cls: type[F.Fault], step: Step, transport: str = "http") -> bool:
    """Whether explore aims kind ``cls`` at ``step``, from the kind itself: its ``transports`` (the
    in-process backend takes the ``http`` kinds that need no sockets), a cell to plan, the endpoint of
    its ``default_target``, its own validation, and the router's ``routing.applies``."""
    from pytest_mcpfaults.core.routing import applies

    transport = step.transport or transport  # the step's own server's, in a test that mixes them
    if transport == INPROCESS:
        takes = "http" in cls.transports and cls.needs_sockets is None
    else:
        takes = transport in cls.transports
    if not takes or not cells(cls):
        return False
    where = _endpoint_of(cls.default_target)
    if where is not None and step.endpoint != where:
        return False
    fault = fault_at(cls, step)
    return fault is not None and bool(applies(fault, _request(step)))


def fault_at(
    cls: type[F.Fault], step: Step, patience: float | None = None, cell: str | None = None
) -> F.Fault | None:
    """Kind ``cls``'s cell ``cell`` (default: its first) aimed at exactly ``step``, a blocking kind
    holding for ``patience`` when given; ``None`` when the kind refuses it."""
    named = cells(cls)
    params = dict(named.get(cell, {}) if cell is not None else next(iter(named.values()), {}))
    if cls.blocking and patience is not None:
        params["patience"] = patience
    try:
        return cls(**params, when=F.Trigger(step.target, nth=step.nth))
    except ValueError:
        return None


def faults_at(cls: type[F.Fault], step: Step, patience: float | None = None) -> list[F.Fault]:
    """Every cell of kind ``cls`` aimed at exactly ``step``, in order."""
    out = [fault_at(cls, step, patience, name) for name in cells(cls)]
    return [f for f in out if f is not None]


def explore_kinds(kinds: Sequence[str] | None = None, exclude: Sequence[str] = ()) -> tuple[str, ...]:
    """The kinds a campaign uses (registry order): ``kinds`` (default: every kind with a cell to plan)
    minus ``exclude``."""
    valid = tuple(k for k, cls in F.fault_kinds().items() if cells(cls))
    left_out = {k: cls.not_in_catalogue for k, cls in F.fault_kinds().items() if not cells(cls)}
    chosen = F.check_kind_names("kinds", kinds, valid, left_out=left_out) if kinds is not None else valid
    dropped = set(F.check_kind_names("exclude", exclude, valid, left_out=left_out))
    return tuple(k for k in valid if k in chosen and k not in dropped)  # registry order


@dataclass(frozen=True)
class Run:
    """One run of a campaign: its faults, each with the step it aims at. The clean run has none."""

    plan: tuple[tuple[str, F.Fault], ...] = ()

    @property
    def faults(self) -> tuple[F.Fault, ...]:
        return tuple(f for _, f in self.plan)

    def faults_on(self, server: int) -> tuple[F.Fault, ...]:
        """The faults for the test's ``server``-th server (from 1; the first takes those naming none)."""
        return tuple(
            f for step, f in self.plan if server_of(step) == server or (server == 1 and not server_of(step))
        )

    @property
    def depth(self) -> int:
        return len(self.plan)

    @property
    def id(self) -> str:
        """The run's test-ID part: ``explore:clean``, ``explore:die-at-tool:delete_session[1]``, a pair
        ``explore:die-at-tool:create_session[1]+hang-at-DELETE:mcp[2]``."""
        if not self.plan:
            return "explore:clean"
        return "explore:" + "+".join(f"{cell_name(f)}-at-{id_part(step)}" for step, f in self.plan)

    def __str__(self) -> str:
        return self.id

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "plan": [{"step": s, "fault": str(f)} for s, f in self.plan]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run:
        from pytest_mcpfaults.faults.text import parse_fault

        return cls(tuple((str(p["step"]), parse_fault(str(p["fault"]))) for p in data["plan"]))


CLEAN = Run()


@dataclass(frozen=True)
class Pruned:
    """A run reduction skipped: ``why``, and the run (or step) it would repeat."""

    run: Run
    why: str
    same_as: str


@dataclass
class Campaign:
    """The planned runs, those pruned by reduction, and those over the ``max_runs`` budget."""

    runs: list[Run] = field(default_factory=list)
    pruned: list[Pruned] = field(default_factory=list)
    over_budget: list[Run] = field(default_factory=list)
    steps: tuple[Step, ...] = ()
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Options:
    """A campaign's options (``@pytest.mark.mcp_explore(**options)``, the ini ``mcpfaults_explore``)."""

    kinds: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    depth: int = 1
    max_runs: int = 1000
    reduce: bool = True
    own_asserts: Literal["behaviour", "must_hold"] = "behaviour"
    patience: float | None = None
    raises: tuple[str, ...] = ()
    checks: tuple[str, ...] | None = None
    exclude_checks: tuple[str, ...] = ()


#: Each option and what it takes (its error text names these).
OPTIONS: dict[str, str] = {
    "kinds": "fault kind names of the standard catalogue (default: all of them)",
    "exclude": "fault kind names to leave out",
    "steps": "step-id globs to explore, e.g. 'tool:delete_session#*' (default: every step)",
    "depth": "1 (one fault per run) or 2 (also a second fault at each step a first fault newly reached)",
    "max_runs": "a positive number of runs, the campaign's budget per test",
    "reduce": "true or false: prune repeated steps and pairs after identical outcomes",
    "own_asserts": "'behaviour' (the test's own failed asserts under a fault are reported, not failed) "
    "or 'must_hold'",
    "patience": "a positive number of seconds a blocking fault holds its request (default: the "
    "sidecar's patience)",
    "raises": "exception class names the harness may raise under a fault (its own failure modes, e.g. "
    "'SidecarNotReady'): such an escape is behaviour under fault, not a violation",
    "checks": "the names of the generic checks a run may fail on (default: all of them; see "
    "pytest_mcpfaults.explore.checks.CHECKS)",
    "exclude_checks": "the names of generic checks kept off, e.g. 'left_open'",
}


def _names(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v for v in value.replace(",", " ").split() if v)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, type)) for v in value):
        return tuple(v.kind if isinstance(v, type) and issubclass(v, F.Fault) else str(v) for v in value)
    raise ValueError(f"{key} must be a list of names ({OPTIONS[key]}), got {value!r}")


def _exception_names(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, type) and issubclass(value, BaseException):
        value = [value]
    if isinstance(value, (list, tuple)):
        value = [v.__name__ if isinstance(v, type) and issubclass(v, BaseException) else v for v in value]
    names = _names(key, value)
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise ValueError(f"{key} must be {OPTIONS[key]}, got {bad[0]!r}")
    return names


def _bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        return value.lower() in ("true", "1", "yes", "on")
    raise ValueError(f"{key} must be true or false, got {value!r}")


def _int(key: str, value: object) -> int:
    try:
        n = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        n = None
    if n is None or n < 1 or (key == "depth" and n not in (1, 2)):
        raise ValueError(f"{key} must be {OPTIONS[key]}, got {value!r}")
    return n


def _seconds(key: str, value: object) -> float | None:
    if value is None:
        return None
    try:
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            return parse_seconds(str(value), off=None)
    except ValueError:
        pass
    raise ValueError(f"{key} must be {OPTIONS[key]}, got {value!r}")


def parse_options(given: Mapping[str, object], base: Options | None = None) -> Options:
    """``base`` (default: the defaults) updated with ``given``; a ``ValueError`` naming the option,
    its bad value and what is valid."""
    out = base or Options()
    for key, value in given.items():
        if key not in OPTIONS:
            raise ValueError(f"unknown option {key!r}; valid options: {', '.join(OPTIONS)}")
        parsed: Any = value
        if key in ("kinds", "exclude"):
            parsed = _names(key, value)
            explore_kinds(**{key: parsed})  # refuses an unknown kind, naming the valid ones
        elif key in ("checks", "exclude_checks"):
            from pytest_mcpfaults.explore.checks import check_names

            parsed = check_names(key, value)
        elif key == "own_asserts" and value not in ("behaviour", "must_hold"):
            raise ValueError(f"own_asserts must be {OPTIONS[key]}, got {value!r}")
        elif key != "own_asserts":
            parse = {"steps": _names, "raises": _exception_names, "reduce": _bool, "patience": _seconds}
            parsed = parse.get(key, _int)(key, value)  # depth, max_runs: whole numbers
        out = dataclasses.replace(out, **{key: parsed})
    if not explore_kinds(out.kinds, out.exclude):  # a selection that leaves nothing is refused at once
        raise ValueError(
            f"kinds={list(out.kinds or ())!r} minus exclude={list(out.exclude)!r} leaves no kind"
        )
    return out


def _selected(step: Step, globs: Sequence[str]) -> bool:
    return not globs or any(fnmatch.fnmatchcase(step.id, g) for g in globs)


def plan_campaign(steps: Sequence[Step], options: Options = Options(), transport: str = "http") -> Campaign:
    """One run per (selected step, applicable kind's cell), in footprint then catalogue order."""
    kinds = explore_kinds(options.kinds, options.exclude)
    classes = [F.fault_kinds()[k] for k in kinds]
    camp = Campaign(steps=tuple(steps), kinds=kinds)
    first: dict[tuple[int, str, tuple[str, ...], int], Step] = {}
    for step in steps:
        if not _selected(step, options.steps):
            continue
        seen = first.setdefault(step.klass, step) if step.shape else step
        for cls in classes:
            if not applies_to(cls, step, transport):
                continue
            for fault in faults_at(cls, step, options.patience):
                run = Run(((step.id, fault),))
                if options.reduce and seen is not step:
                    why = f"repeats {seen.id} (the same request of a same-shaped session)"
                    camp.pruned.append(Pruned(run, why, seen.id))
                elif len(camp.runs) >= options.max_runs:
                    camp.over_budget.append(run)
                else:
                    camp.runs.append(run)
    return camp


def new_steps(clean: Sequence[Step], observed: Sequence[Step]) -> list[Step]:
    """The steps of ``observed`` that ``clean`` has not, aligned by label and session shape."""
    a = [s.klass for s in clean]
    b = [s.klass for s in observed]
    out: list[Step] = []
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("insert", "replace"):
            out.extend(observed[j1:j2])
    return out


def same_outcome(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two observed runs look the same to the client: the same exception (type and step) and
    the same journal labels."""
    return a.get("error") == b.get("error") and a.get("labels") == b.get("labels")


def plan_pairs(
    first: Run,
    clean: Sequence[Step],
    observed: Sequence[Step],
    options: Options = Options(),
    transport: str = "http",
) -> list[Run]:
    """Depth 2: ``first``'s fault plus a second fault at each step its run newly reached."""
    kinds = explore_kinds(options.kinds, options.exclude)
    out: list[Run] = []
    for step in new_steps(clean, observed):
        if not _selected(step, options.steps) or any(s == step.id for s, _ in first.plan):
            continue
        for k in kinds:
            cls = F.fault_kinds()[k]
            if applies_to(cls, step, transport):
                out.extend(Run((*first.plan, (step.id, f))) for f in faults_at(cls, step, options.patience))
    return out


def _literal(fault: F.Fault) -> str:
    return repr(str(fault)).replace("'", '"') if '"' not in str(fault) else repr(str(fault))


#: The marker that plans a server's faults, by transport.
MARKERS = {"http": "mcp_sidecar", "stdio": "mcp_stdio"}
#: The in-process backend's "transport" (HTTP answered inside the process: no socket kinds).
INPROCESS = "inprocess"


#: What makes a server whose plan is given in a call, not a marker.
CALLS = ("mcp_sidecar_factory", "mock_sidecar")
#: The marker planning the faults of the server each fixture makes.
FIXTURE_MARKERS = {"mcp_sidecar": "mcp_sidecar", "mcp_stdio_server": "mcp_stdio"}
#: The transport of the servers each maker makes (the others: ``http``).
MAKER_TRANSPORTS = {"mcp_stdio_server": "stdio", "mock_sidecar": INPROCESS}


def regression_line(run: Run, transport: str = "http", makers: Sequence[str] = ()) -> str:
    """The run's plan as a line to paste above a regression test: a marker, or the call of the maker
    (``makers``: what made each server, in order) that takes faults in its call (:data:`CALLS`); with
    several servers, each one's part named (``sidecar 2: ...``), ``;``-separated."""
    groups: dict[int, list[F.Fault]] = {}
    for step, fault in run.plan:
        groups.setdefault(server_of(step), []).append(fault)
    parts = []
    for server, faults in groups.items():
        plan = f"faults=[{', '.join(_literal(f) for f in faults)}]"
        maker = makers[max(server, 1) - 1] if len(makers) >= max(server, 1) else ""
        maker = maker or ("mock_sidecar" if transport == INPROCESS else "")
        if maker in CALLS:
            text = f"{maker}({plan})"
        else:
            text = f"@pytest.mark.{FIXTURE_MARKERS.get(maker) or MARKERS[transport]}({plan})"
        parts.append(f"sidecar {server}: {text}" if server else text)
    return "; ".join(parts)
