"""A fault kind of your own, quoted in docs/faults.md. Run with `pytest -p mcpfaults`."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
import pytest

from pytest_mcpfaults import Status, parse_fault
from pytest_mcpfaults.faults import Draw, unregister_fault_kind
from pytest_mcpfaults.matrix import catalogue
from pytest_mcpfaults.strategies import kind_order


# --8<-- [start:kind]
@dataclass(frozen=True)
class RateLimited(Status):
    """A 429 with Retry-After: the sidecar answers it as the Status it extends."""

    kind: ClassVar[str] = "rate_limited"  # the text form's name; defining the class registers it
    shrink_rank: ClassVar[int] = 95  # just after status in the order strategies shrink toward
    draws: ClassVar[Mapping[str, Draw]] = {"retry_after": (1, 5, 30)}  # shrinks toward 1
    catalogue_params: ClassVar[Mapping[str, Any] | None] = {"retry_after": 5}  # its matrix cell
    code: int = 429
    retry_after: int | None = 1


# --8<-- [end:kind]


@pytest.fixture(autouse=True)
def _forget_the_kind_afterwards() -> Iterator[None]:
    yield
    unregister_fault_kind("rate_limited")


# --8<-- [start:use]
@pytest.mark.mcp_sidecar(faults=["rate_limited(retry_after=2)@health[times=1]"])
def test_the_kind_is_everywhere_a_kind_is(mcp_sidecar):
    first = httpx.get(mcp_sidecar.health_url, timeout=5)
    assert (first.status_code, first.headers["Retry-After"]) == (429, "2")
    assert mcp_sidecar.fired == {"rate_limited": 1}
    assert str(parse_fault("rate_limited@health")) == "rate_limited@health"  # the text form
    assert kind_order().index("rate_limited") == kind_order().index("status") + 1  # strategies
    assert [str(f) for f in catalogue(kinds=["rate_limited"])] == [
        "rate_limited(retry_after=5)@tool:delete_session"  # the fault matrix
    ]


# --8<-- [end:use]
