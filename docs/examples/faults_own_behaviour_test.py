"""A fault kind with behaviour of its own, quoted in docs/faults.md. Run with `pytest -p mcpfaults`."""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import httpx
import pytest

from pytest_mcpfaults.behaviour.connection import Pausing, effect_of
from pytest_mcpfaults.core.routing import answer_reply
from pytest_mcpfaults.faults import Fault, unregister_fault_kind
from pytest_mcpfaults.mcp.endpoint import Reply


# --8<-- [start:kind]
@dataclass(frozen=True)
class SlowBadGateway(Fault):
    """A gateway whose upstream does not answer in time: wait ``seconds``, then answer 502."""

    kind: ClassVar[str] = "slow_bad_gateway"
    phase: ClassVar[str] = "connection"  # where it acts first: it pauses, then answers
    seconds: float = 0.2


@effect_of.register
def _pause(fault: SlowBadGateway, fired: int = 0) -> Pausing:
    return Pausing(fault.seconds)  # the connection phase: the answer comes late


@answer_reply.register
def _bad_gateway(fault: SlowBadGateway, info, endpoint, service_url) -> Reply:
    return Reply(502, {"error": "Bad Gateway"}, sse=False)  # the answer phase: what it says


# --8<-- [end:kind]


@pytest.fixture(autouse=True)
def _forget_the_kind_afterwards() -> Iterator[None]:
    yield
    unregister_fault_kind("slow_bad_gateway")


# --8<-- [start:use]
@pytest.mark.mcp_sidecar(faults=["slow_bad_gateway(seconds=0.3)@health[times=1]"])
def test_the_gateway_answers_late_then_502(mcp_sidecar):
    started = time.monotonic()
    assert httpx.get(mcp_sidecar.health_url, timeout=5).status_code == 502
    assert time.monotonic() - started >= 0.3
    assert httpx.get(mcp_sidecar.health_url, timeout=5).status_code == 200  # times=1: once only
    assert mcp_sidecar.fired == {"slow_bad_gateway": 1}


# --8<-- [end:use]
