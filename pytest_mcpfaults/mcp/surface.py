"""The MCP server surface beside tools: resources (direct and templated), prompts, completion, the
client's logging level and its resource subscriptions. Pure: no I/O, loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpfaults.mcp.uri_template import MAX_URI_CHARS, UriTemplate

INVALID_PARAMS, RESOURCE_NOT_FOUND = -32602, -32002

PromptMessages = Sequence[Mapping[str, Any]]


class SurfaceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_text(who: str, name: str, value: object, *, empty: bool = False) -> None:
    if not isinstance(value, str) or (not empty and not value):
        what = "a string" if empty else "a non-empty string"
        raise ValueError(f"{who}: {name} must be {what}, got {value!r}")


@dataclass(frozen=True)
class Resource:
    """A direct resource: ``resources/list`` lists it, ``resources/read`` of its ``uri`` answers its
    contents, ``text`` (a text resource) or ``blob`` (base64, a binary one): exactly one of them."""

    uri: str
    name: str
    text: str | None = None
    blob: str | None = None
    mime_type: str = "text/plain"
    description: str = ""
    title: str | None = None

    def __post_init__(self) -> None:
        _check_text("Resource", "uri", self.uri)
        _check_text(f"Resource {self.uri!r}", "name", self.name)
        if (self.text is None) == (self.blob is None):
            raise ValueError(
                f"Resource {self.uri!r}: give exactly one of text= (a text resource) or blob= (base64 "
                f"bytes), got text={self.text!r}, blob={self.blob!r}"
            )
        for name in ("text", "blob"):
            if getattr(self, name) is not None:
                _check_text(f"Resource {self.uri!r}", name, getattr(self, name), empty=True)

    def describe(self) -> dict[str, Any]:
        head = {"uri": self.uri, "name": self.name, "description": self.description}
        return _described(head, self.title, mimeType=self.mime_type)

    def contents(self) -> dict[str, Any]:
        body = {"text": self.text} if self.text is not None else {"blob": self.blob}
        return {"uri": self.uri, "mimeType": self.mime_type, **body}


@dataclass(frozen=True)
class ResourceTemplate:
    """A templated resource (RFC 6570 level 1: ``{name}`` matches one or more characters of a path
    segment): ``resources/read`` of a URI it matches answers the text ``read`` returns, called with
    the template's variables as keywords; ``completions``: the values ``completion/complete`` offers
    for a variable."""

    uri_template: str
    name: str
    read: Callable[..., str]
    mime_type: str = "text/plain"
    description: str = ""
    title: str | None = None
    completions: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_text("ResourceTemplate", "uri_template", self.uri_template)
        who = f"ResourceTemplate {self.uri_template!r}"
        _check_text(who, "name", self.name)
        try:
            matcher = UriTemplate(self.uri_template)
        except ValueError as exc:
            raise ValueError(f"{who}: {exc}") from None
        if not callable(self.read):
            raise ValueError(f"{who}: read must be callable, got {self.read!r}")
        object.__setattr__(self, "_matcher", matcher)  # parsed once; not a field

    def match(self, uri: str) -> dict[str, str] | None:
        """The template's variables in ``uri``, or ``None`` when it does not match."""
        matcher: UriTemplate = self.__dict__["_matcher"]
        return matcher.match(uri)

    def describe(self) -> dict[str, Any]:
        head = {"uriTemplate": self.uri_template, "name": self.name, "description": self.description}
        return _described(head, self.title, mimeType=self.mime_type)


@dataclass(frozen=True)
class PromptArgument:
    """An argument of a :class:`Prompt`; ``completions``: what ``completion/complete`` offers for it."""

    name: str
    description: str = ""
    required: bool = False
    completions: Sequence[str] = ()

    def __post_init__(self) -> None:
        _check_text("PromptArgument", "name", self.name)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "required": self.required}


@dataclass(frozen=True)
class Prompt:
    """A prompt: ``prompts/list`` lists it, ``prompts/get`` answers the messages ``messages`` returns
    when called with the client's arguments as keywords (a required one missing: -32602)."""

    name: str
    messages: Callable[..., PromptMessages]
    arguments: Sequence[PromptArgument] = ()
    description: str = ""
    title: str | None = None

    def __post_init__(self) -> None:
        _check_text("Prompt", "name", self.name)
        if not callable(self.messages):
            raise ValueError(f"Prompt {self.name!r}: messages must be callable, got {self.messages!r}")
        if not all(isinstance(a, PromptArgument) for a in self.arguments):
            raise ValueError(f"Prompt {self.name!r}: arguments must be PromptArgument instances")

    def describe(self) -> dict[str, Any]:
        head = {"name": self.name, "description": self.description}
        return _described(head, self.title, arguments=[a.describe() for a in self.arguments])


def check_surface(
    who: str, resources: object, prompts: object
) -> tuple[list[Resource | ResourceTemplate], list[Prompt]]:
    """``resources`` and ``prompts`` as lists, or ``ValueError`` naming the argument."""
    checked: list[list[Any]] = []
    for name, value, kinds, what in (
        ("resources", resources, (Resource, ResourceTemplate), "Resource or ResourceTemplate"),
        ("prompts", prompts, (Prompt,), "Prompt"),
    ):
        items = (
            list(value)
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))
            else None
        )
        bad = [i for i in items or () if not isinstance(i, kinds)]
        if items is None or bad:
            got = bad[0] if bad else value
            raise ValueError(f"{who}: {name} must be a list of pytest_mcpfaults {what} values, got {got!r}")
        checked.append(items)
    return checked[0], checked[1]


def _described(head: dict[str, Any], title: str | None, **tail: Any) -> dict[str, Any]:
    return {**head, **({"title": title} if title is not None else {}), **tail}


def _param(params: Mapping[str, Any], name: str, method: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise SurfaceError(INVALID_PARAMS, f"Invalid params: {method} needs {name} (a string), got {value!r}")
    return value


def _uri(params: Mapping[str, Any], method: str) -> str:
    uri = _param(params, "uri", method)
    if len(uri) > MAX_URI_CHARS:
        raise SurfaceError(
            INVALID_PARAMS,
            f"Invalid params: {method} uri of {len(uri)} characters is over the limit of {MAX_URI_CHARS} "
            f"(MAX_URI_CHARS)",
        )
    return uri


class Surface:
    """One sidecar's resources, templates and prompts, and each client session's logging level and
    subscriptions (by transport session id; ``None``: the stateless era)."""

    def __init__(self) -> None:
        self.resources: dict[str, Resource] = {}
        self.templates: list[ResourceTemplate] = []
        self.prompts: dict[str, Prompt] = {}
        self.log_levels: dict[str, str] = {}
        self.subscriptions: dict[str | None, set[str]] = {}
        #: Told each notification a change makes: the sidecar sends it on its streams.
        self.on_change: Callable[[str, Mapping[str, Any] | None], None] = lambda method, params: None

    def is_subscribed(self, session: str | None, uri: str) -> bool:
        return uri in self.subscriptions.get(session, ())

    def add(
        self, resources: Iterable[Resource | ResourceTemplate] = (), prompts: Iterable[Prompt] = ()
    ) -> None:
        """Serve these too (replacing those of the same URI, template or name). While the sidecar runs,
        clients' open streams are told: ``notifications/resources/updated`` for a replaced resource,
        ``notifications/resources/list_changed`` for a new one or a template,
        ``notifications/prompts/list_changed`` for prompts."""
        changed: list[tuple[str, str | None]] = []
        for r in resources:
            if isinstance(r, Resource):
                changed.append(
                    ("notifications/resources/updated", r.uri)
                    if r.uri in self.resources
                    else ("notifications/resources/list_changed", None)
                )
                self.resources[r.uri] = r
            else:
                self.templates = [t for t in self.templates if t.uri_template != r.uri_template] + [r]
                changed.append(("notifications/resources/list_changed", None))
        prompts = list(prompts)
        self.prompts.update((p.name, p) for p in prompts)
        if prompts:
            changed.append(("notifications/prompts/list_changed", None))
        for method, uri in dict.fromkeys(changed):
            self.on_change(method, {"uri": uri} if uri is not None else None)

    def capabilities(self, *, list_changed: bool = False) -> dict[str, Any]:
        """The server capabilities this surface adds: those it has something to list for;
        ``list_changed``: whether the sidecar can tell a client."""
        caps: dict[str, Any] = {}
        if self.resources or self.templates:
            caps["resources"] = {"subscribe": True, "listChanged": list_changed}
        if self.prompts:
            caps["prompts"] = {"listChanged": list_changed}
        if self.prompts or self.templates:
            caps["completions"] = {}
        return caps

    def answer(self, method: str, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        return _ANSWERS[method](self, params, session)

    def _list_resources(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        return {"resources": [r.describe() for r in self.resources.values()]}

    def _list_templates(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        return {"resourceTemplates": [t.describe() for t in self.templates]}

    def _read(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        uri = _uri(params, "resources/read")
        resource = self.resources.get(uri)
        if resource is not None:
            return {"contents": [resource.contents()]}
        for template in self.templates:
            variables = template.match(uri)
            if variables is not None:
                text = template.read(**variables)
                return {"contents": [{"uri": uri, "mimeType": template.mime_type, "text": str(text)}]}
        raise SurfaceError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}")

    def _subscribe(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        self.subscriptions.setdefault(session, set()).add(_uri(params, "resources/subscribe"))
        return {}

    def _unsubscribe(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        self.subscriptions.get(session, set()).discard(_uri(params, "resources/unsubscribe"))
        return {}

    def _list_prompts(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        return {"prompts": [p.describe() for p in self.prompts.values()]}

    def _get_prompt(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        name = _param(params, "name", "prompts/get")
        prompt = self.prompts.get(name)
        if prompt is None:
            raise SurfaceError(INVALID_PARAMS, f"Unknown prompt: {name}")
        given = params.get("arguments") or {}
        if not isinstance(given, Mapping):
            raise SurfaceError(
                INVALID_PARAMS, f"Invalid params: arguments of prompt {name} must be an object"
            )
        missing = [a.name for a in prompt.arguments if a.required and a.name not in given]
        if missing:
            raise SurfaceError(
                INVALID_PARAMS, f"Invalid params: prompt {name} needs argument(s) {', '.join(missing)}"
            )
        declared = {a.name for a in prompt.arguments}
        kwargs = {k: v for k, v in given.items() if k in declared}
        result: dict[str, Any] = {"messages": [dict(m) for m in prompt.messages(**kwargs)]}
        if prompt.description:
            result["description"] = prompt.description
        return result

    def _complete(self, params: Mapping[str, Any], session: str | None) -> dict[str, Any]:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, Mapping) or not isinstance(argument, Mapping):
            raise SurfaceError(
                INVALID_PARAMS, "Invalid params: completion/complete needs ref and argument objects"
            )
        arg_name = _param(argument, "name", "completion/complete argument")
        typed = argument.get("value", "")
        offered = self._offered(ref, arg_name)
        values = [v for v in offered if isinstance(typed, str) and v.startswith(typed)]
        return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}

    def _offered(self, ref: Mapping[str, Any], arg_name: str) -> Sequence[str]:
        if ref.get("type") == "ref/prompt":
            prompt = self.prompts.get(_param(ref, "name", "completion/complete ref"))
            arg = next((a for a in prompt.arguments if a.name == arg_name), None) if prompt else None
            return arg.completions if arg is not None else ()
        if ref.get("type") == "ref/resource":
            uri = _param(ref, "uri", "completion/complete ref")
            template = next((t for t in self.templates if t.uri_template == uri), None)
            return template.completions.get(arg_name, ()) if template is not None else ()
        raise SurfaceError(
            INVALID_PARAMS,
            f"Invalid params: ref.type must be 'ref/prompt' or 'ref/resource', got {ref.get('type')!r}",
        )


_ANSWERS: dict[str, Callable[[Surface, Mapping[str, Any], str | None], dict[str, Any]]] = {
    "resources/list": Surface._list_resources,
    "resources/templates/list": Surface._list_templates,
    "resources/read": Surface._read,
    "resources/subscribe": Surface._subscribe,
    "resources/unsubscribe": Surface._unsubscribe,
    "prompts/list": Surface._list_prompts,
    "prompts/get": Surface._get_prompt,
    "completion/complete": Surface._complete,
}
#: The MCP methods a :class:`Surface` answers.
SURFACE_METHODS: tuple[str, ...] = tuple(_ANSWERS)
