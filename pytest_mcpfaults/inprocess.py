"""The same fault plans applied to ``httpx`` clients in-process, through respx: no sockets.

For the parts of a harness that call ``httpx`` directly (readiness probes, REST calls, plain JSON-RPC
to the MCP endpoint), :func:`mock_sidecar` answers like the socket :class:`~pytest_mcpfaults.Sidecar`
at a made-up base URL, with the same MCP dispatch (both eras), the same tools, the same answers to
client mistakes (the checks live in the core; its ``base_url`` is an allowed origin, as loopback
origins are over a socket) and a journal of the same :class:`~pytest_mcpfaults.RequestRecord` s.

What each fault kind does here, what is refused with :class:`UnsupportedInProcess` (never faked: the
kinds with a ``needs_sockets`` reason, patience budgets, connection records, GET event streams) and why
mcp 2.x traffic (``httpx2``) is invisible to respx: docs/fuzzing.md, "In-process". Tool handlers run in
the calling thread (sync) or on the sidecar loop (async, bounded at 60 s and by the request's read
timeout: then the client gets ``httpx.ReadTimeout``), so ``tool_timeout`` and ``idle_timeout`` are not
taken.

respx is an optional dependency (``pip install 'pytest-mcpfaults[inprocess]'``); only this module
imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import respx
from respx.models import PassThrough

from pytest_mcpfaults import faults as F
from pytest_mcpfaults.behaviour.body import halve, shape_of
from pytest_mcpfaults.core import core
from pytest_mcpfaults.core.errors import Dropped
from pytest_mcpfaults.explore.ambient import HAND
from pytest_mcpfaults.mcp.endpoint import reply_body
from pytest_mcpfaults.options.fields import build_options, with_options
from pytest_mcpfaults.transports import loop as _loop
from pytest_mcpfaults.transports.views import NoAnswerStream
from pytest_mcpfaults.verdicts.waits import JournalWaits

__all__ = [
    "SUPPORTED_KINDS",
    "InProcessSidecar",
    "UnsupportedInProcess",
    "check_plan",
    "intercepting",
    "mock_sidecar",
]

#: The built-in fault kinds the in-process backend applies (see the module docstring for how): every
#: kind without a ``needs_sockets`` reason.
SUPPORTED_KINDS: tuple[str, ...] = tuple(k for k, cls in F.fault_kinds().items() if cls.needs_sockets is None)

T = TypeVar("T")


class UnsupportedInProcess(ValueError):
    """A fault (or feature) the in-process backend cannot model honestly; use the socket Sidecar."""


def check_plan(faults: Sequence[F.Fault | str] | None, *, argname: str = "faults") -> tuple[F.Fault, ...]:
    """Normalise a plan and refuse any fault that needs real sockets, naming it and why (``argname``:
    the argument, e.g. ``faults``, or the call, ``inject()``)."""
    plan = F.as_plan(faults, argname=argname)
    where = argname if argname.endswith(")") else f"{argname}="
    try:
        F.check_transport(plan, "http", f"mock_sidecar {where}")
    except ValueError as exc:
        raise UnsupportedInProcess(str(exc)) from None
    for fault in plan:
        reason = type(fault).needs_sockets
        if reason is not None:
            raise UnsupportedInProcess(
                f"{fault.kind!r} needs real sockets ({reason}); use the socket Sidecar "
                f"(fault {str(fault)!r} in {where})"
            )
    return plan


def _reset(request: httpx.Request) -> httpx.ReadError:
    return httpx.ReadError("[Errno 104] Connection reset by peer", request=request)


@dataclasses.dataclass
class _DelayedBody(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that arrives after ``seconds``; a shorter read timeout raises ``httpx.ReadTimeout``, and the
    sidecar dying meanwhile (``died`` set) ``httpx.ReadError`` at once, as its connection is reset."""

    body: bytes
    seconds: float
    read_timeout: float | None
    request: httpx.Request
    died: threading.Event

    def _wait(self) -> float:
        return self.seconds if self.read_timeout is None else min(self.seconds, self.read_timeout)

    def _arrived(self, died: bool) -> bytes:
        if died:
            raise _reset(self.request)
        if self.read_timeout is not None and self.read_timeout < self.seconds:
            raise httpx.ReadTimeout("timed out", request=self.request)
        return self.body

    def __iter__(self) -> Iterator[bytes]:
        yield self._arrived(self.died.wait(self._wait()))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        deadline = time.monotonic() + self._wait()
        while not self.died.is_set() and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.05))  # the event is set from another thread
        yield self._arrived(self.died.is_set())


def _is_origin(url: object) -> bool:
    if not isinstance(url, str) or "?" in url or "#" in url:
        return False
    parts = urlsplit(url)
    try:
        port_ok = parts.port != 0  # a port out of range raises
    except ValueError:
        return False
    return port_ok and parts.scheme in ("http", "https") and bool(parts.hostname) and parts.path in ("", "/")


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    return url.scheme, url.host.lower(), url.port or (443 if url.scheme == "https" else 80)


class _Router(respx.MockRouter):
    """respx's route matching and call recording replaced by one dict lookup by origin (a fuzz run keeps
    the router for thousands of requests: recorded calls would only grow). It patches at the ``httpx``
    level, so a respx mock of the user's own (httpcore level) still sees the requests passed through."""

    def __init__(self, sidecars: dict[tuple[str, str, int], InProcessSidecar]) -> None:
        super().__init__(assert_all_called=False, assert_all_mocked=True, using="httpx")
        self.sidecars = sidecars

    def handler(self, request: httpx.Request) -> httpx.Response:
        sidecar = self.sidecars.get(_origin(request.url))
        if sidecar is None:  # not an in-process sidecar's origin: to the network
            raise PassThrough(f"not an in-process sidecar: {request!r}", request=request, origin=None)  # type: ignore[arg-type]
        return sidecar.dispatch(request)

    async def async_handler(self, request: httpx.Request) -> httpx.Response:
        return self.handler(request)


class _Interception:
    """One respx router for every in-process sidecar, started while anyone needs it: starting respx
    patches httpx (milliseconds), registering a sidecar is a dict insert."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sidecars: dict[tuple[str, str, int], InProcessSidecar] = {}
        self.users = 0
        self.router: _Router | None = None

    def acquire(self) -> None:
        with self.lock:
            self.users += 1
            if self.router is None:
                router = _Router(self.sidecars)
                router.start()
                self.router = router

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0 and self.router is not None:
                self.router.stop()
                self.router = None


_INTERCEPTION = _Interception()


@contextlib.contextmanager
def intercepting() -> Iterator[None]:
    """Keep the respx interception installed for the whole block, so in-process sidecars created
    inside it (one per Hypothesis example, say) cost a registration instead of a respx start+stop::

        with inprocess.intercepting():
            run_the_property()       # each example: with mock_sidecar(faults=plan) as side: ...
    """
    _INTERCEPTION.acquire()
    try:
        yield
    finally:
        _INTERCEPTION.release()


class InProcessSidecar(JournalWaits):
    """An MCP sidecar answered inside the process through respx. Make one with :func:`mock_sidecar`.

    Mirrors the socket :class:`~pytest_mcpfaults.Sidecar` where that is honest (its journal has
    requests only: there are no connections, ``conn_id`` is -1; ``wait_for`` and ``cancellations`` as
    there, ``wait_held`` refused: nothing is held). httpx requests to any other origin go on as usual
    (it patches httpx one level above respx's default, so a ``respx.mock`` of your own still sees them).
    """

    @with_options("in-process")
    def __init__(self, *, base_url: str = "http://sidecar.test", **options: Any) -> None:
        if not _is_origin(base_url):
            raise ValueError(
                f"mock_sidecar: base_url must be an http(s) origin without a path, query or fragment, e.g. "
                f"'http://sidecar.test', got {base_url!r}"
            )
        opts = build_options(options, "in-process")
        check_plan(opts.faults)
        self._url = base_url.rstrip("/")
        self._origin = _origin(httpx.URL(self._url))
        self.era, self.reply = opts.era, opts.reply
        # its own origin allowed, as loopback ones are over a socket
        self.options = dataclasses.replace(opts, allowed_origins=(*opts.allowed_origins, self._url))
        self.core = core.SidecarCore(
            self.options, service_url=lambda: opts.service_url or self._url, run_async=self._on_loop
        )
        self._lock = threading.RLock()
        self._deadline: float | None = None  # the request being answered: when its read timeout ends
        self._died = threading.Event()  # set when it dies, for the answers still on their way; then new

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> InProcessSidecar:
        """Start intercepting httpx requests to ``url``; returns ``self``."""
        if self.core.state != "new":
            raise RuntimeError(f"InProcessSidecar.start(): already {self.core.state}; it starts once")
        with _INTERCEPTION.lock:
            if self._origin in _INTERCEPTION.sidecars:
                raise ValueError(f"mock_sidecar: another in-process sidecar already answers {self.url}")
            _INTERCEPTION.sidecars[self._origin] = self
        _INTERCEPTION.acquire()
        self.core.state = "running"
        return self

    def stop(self) -> None:
        """Stop intercepting, resetting the answers still on their way. Idempotent."""
        self._died.set()
        if self.core.state in ("running", "dead"):
            with _INTERCEPTION.lock:
                if _INTERCEPTION.sidecars.get(self._origin) is self:
                    del _INTERCEPTION.sidecars[self._origin]
            _INTERCEPTION.release()
        self.core.state = "stopped"

    # -- addresses and state ---------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The made-up origin it answers, e.g. ``http://sidecar.test``."""
        return self._url

    # -- runtime faults --------------------------------------------------------------------------
    def kill(self) -> None:
        """Die now: every later request raises ``httpx.ConnectError`` until :meth:`revive`. Counted as a
        ``die`` in :attr:`fired`, as on the socket sidecar."""
        with self._lock:
            self.journal.add_fired("die", what="kill()")
            self.core.lose_process(restart=False)
            self._lost()

    def _lost(self) -> None:
        """Every answer still on its way (a delayed body) is reset."""
        self._died.set()
        self._died = threading.Event()

    def revive(self) -> None:
        """Come back after :meth:`kill` or a ``die`` fault (sessions were lost with the process)."""
        with self._lock:
            if self.core.state == "dead":
                self.core.state = "running"

    def freeze(self) -> None:
        """Not available in-process: a freeze holds connections open."""
        raise UnsupportedInProcess(
            f"'freeze' needs real sockets ({F.Freeze.needs_sockets}); use the socket Sidecar"
        )

    def wait_held(self, count: int = 1, timeout: float = 5.0) -> None:
        """Not available in-process: no request is ever held (the blocking faults are refused)."""
        raise UnsupportedInProcess(
            "InProcessSidecar.wait_held(): the in-process backend holds no request (the faults that "
            "hold one keep a connection checked out and need real sockets); use the socket Sidecar"
        )

    def _checked(self, faults: Sequence[F.Fault | str], where: str) -> tuple[F.Fault, ...]:
        return check_plan(faults, argname=where.removesuffix("="))

    # -- request handling ------------------------------------------------------------------------
    async def _on_loop(self, pending: Awaitable[Any]) -> Any:
        """Await an async tool handler on the sidecar loop thread (the in-process dispatch runs on the
        caller's thread, outside any event loop), bounded at 60 s and by the request's read timeout:
        past it the handler is cancelled and the call dropped (:class:`_ClientGaveUp`)."""

        async def wait() -> Any:
            return await pending

        deadline = self._deadline
        left = 60.0 if deadline is None else min(60.0, max(0.0, deadline - time.monotonic()))
        try:
            return _loop.run(wait(), timeout=left)
        except TimeoutError:
            if left < 60.0:
                raise _ClientGaveUp from None
            raise

    def dispatch(self, request: httpx.Request) -> httpx.Response:
        """Answer one intercepted httpx request (the respx router calls this)."""
        with self._lock:
            return self._answer(request)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        if self.core.state == "dead":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        j = self.journal
        path = request.url.path
        rid = j.add_request(
            conn_id=-1,  # there is no connection
            method=request.method,
            path=path,
            user_agent=request.headers.get("User-Agent"),
            protocol_version=request.headers.get("MCP-Protocol-Version"),
        )
        status: int | None = None
        sent = 0
        transport = _Exchange()
        headers_in = request.headers
        incoming = core.Incoming(request.method, path, headers_in, headers_in.multi_items(), request.content)
        timeout = request.extensions.get("timeout", {}).get("read")
        self._deadline = None if timeout is None else time.monotonic() + timeout
        try:
            try:
                answer = _run_inline(self.core.decide(rid, incoming, transport))
                if self._deadline is not None and time.monotonic() > self._deadline:
                    raise _ClientGaveUp  # a tool ran in this thread past the read timeout: answered late
            except _ClientGaveUp:  # the client's read timeout ran out while a tool ran, as over a socket
                j.update_request(rid, client_closed=True, client_closed_at=j.now())
                raise httpx.ReadTimeout("timed out", request=request) from None
            except Dropped:  # a die: the socket sidecar resets the connection, and every other one
                self._lost()
                raise _reset(request) from None
            assert answer is not None  # no event streams in-process (get_stream=False)
            reply, fault = answer.reply, answer.fault
            body, ctype = reply_body(reply, answer.sse)
            if shape_of(fault).halves:
                body = halve(body)
            headers = list(reply.headers.items())
            if body:
                headers.append(("Content-Type", ctype))
            headers.append(("Content-Length", str(len(body))))
            status, sent = reply.status, len(body)
            stream: httpx.SyncByteStream | httpx.AsyncByteStream
            if transport.delay is not None:
                stream = _DelayedBody(body, transport.delay, timeout, request, self._died)
            else:  # the client reads it (httpx builds a response from a stream far faster than from content=)
                stream = httpx.ByteStream(body)
            return httpx.Response(reply.status, headers=headers, stream=stream)
        finally:
            j.end_request(rid, status=status, bytes_sent=sent)


class _Exchange(NoAnswerStream):
    """One in-process request's :class:`~pytest_mcpfaults.core.core.Transport`: a ``delay`` is kept
    for the body (the headers come at once, as over a socket); holds never reach it (refused by
    :func:`check_plan`)."""

    error = UnsupportedInProcess
    no_messages = (
        "needs the socket sidecar: the in-process backend answers each request in one piece, with no "
        "answer stream to send it on"
    )
    no_rounds = (
        "a tool's own requests (input rounds of the stateless era) need the socket sidecar: the "
        "in-process backend keeps no handler suspended between requests"
    )

    def __init__(self) -> None:
        self.delay: float | None = None

    async def hold(self, fault: F.Fault) -> None:  # pragma: no cover - refused at plan time
        raise UnsupportedInProcess(f"{fault.kind!r} needs real sockets")

    async def die(self, restart: bool) -> None:
        """Nothing to close: the core forgot the sessions; the request raises ``httpx.ReadError``."""

    async def pause(self, seconds: float) -> None:
        self.delay = seconds


class _ClientGaveUp(Dropped):
    """The client's read timeout ran out while its call's tool ran: the call is dropped (the client
    gets ``httpx.ReadTimeout``), as the socket sidecar drops a call whose client hung up."""


def _run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the in-process decide: its transport never blocks, and
    async tool handlers go to the sidecar loop) to its result on the calling thread."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("in-process dispatch suspended unexpectedly")  # pragma: no cover


def mock_sidecar(
    *,
    base_url: str = "http://sidecar.test",
    faults: Sequence[F.Fault | str] = (),
    **kwargs: Any,
) -> InProcessSidecar:
    """An in-process sidecar at ``base_url`` (routes ``/health`` and ``/mcp`` as the socket sidecar
    does), applying ``faults``; use it as a context manager::

        with mock_sidecar(base_url="http://sidecar.test", faults=[Status(503, when="health")]) as side:
            assert httpx.get(side.health_url).status_code == 503

    Other keyword arguments: the options of the socket sidecar it takes (the options table of
    docs/sidecar.md, its in-process column; another raises ``TypeError`` naming it). Raises
    :class:`UnsupportedInProcess` for faults that need sockets.

    In an explore run (a test that asks for the ``mcpfaults_explore`` fixture, docs/explore.md), the
    run's faults aimed at this sidecar come first in its plan, before ``faults``.
    """
    hand = HAND.get()
    if hand is not None:  # an explore run (docs/explore.md): the faults aimed at this sidecar first
        faults = [*hand.faults_for_next(), *faults]
    sidecar = InProcessSidecar(base_url=base_url, faults=faults, **kwargs)
    if hand is not None:
        hand.made(sidecar, "mock_sidecar")
    return sidecar
