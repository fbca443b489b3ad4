"""``Journal.wait_for`` and ``Sidecar.wait_for`` time out with what the sidecar saw instead (issue 36):
the latest request and how long before the deadline, the faults that fired, the open connections and the
journal's latest lines, as a patience verdict shows them; not only "timed out after N s"."""

from __future__ import annotations

import re

import httpx
import pytest

from pytest_mcpfaults import Sidecar, SpanRecorder, StdioServer
from pytest_mcpfaults.faults import Status, Trigger


def test_a_timed_out_wait_shows_the_journal_and_the_nearest_request() -> None:
    once_503 = Status(503, when=Trigger("health", times=1))
    with Sidecar(faults=[once_503]) as sc, httpx.Client(timeout=5) as client:
        assert client.get(sc.health_url).status_code == 503
        assert client.get(sc.health_url).status_code == 200
        with pytest.raises(AssertionError) as raised:
            sc.wait_for(lambda rs: any(r.method == "DELETE" for r in rs), timeout=0.3)
    text = str(raised.value)
    assert text.startswith("timed out after 0.3 s waiting for `sc.wait_for(lambda rs: any(r.method == ")
    assert "the sidecar saw 2 request(s), the latest `GET /health` (#1)" in text
    assert "faults fired: `status` x1" in text
    assert "open connections: #0" in text  # the client's keep-alive connection
    journal_lines = text.split("the journal's latest 2:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in journal_lines] == ["#0", "#1"]
    assert "status=503" in journal_lines[0] and "fault=status@health[times=1]" in journal_lines[0]


def test_a_wait_with_nothing_seen_says_so() -> None:
    def a_delete(requests):
        return any(r.method == "DELETE" for r in requests)

    with Sidecar() as sc, pytest.raises(AssertionError) as raised:
        sc.wait_for(a_delete, timeout=0.1)
    assert str(raised.value) == (
        "timed out after 0.1 s waiting for `a_delete`: no request reached the sidecar in that time"
    )


@pytest.mark.parametrize("timeout", [float("nan"), float("inf")])
def test_a_wait_that_could_never_time_out_is_refused_naming_timeout(timeout: float) -> None:
    """NaN never passes a deadline (and inf never comes): each waited for ever on a quiet journal."""
    with Sidecar() as sc:
        for wait in (
            sc.wait_idle,
            lambda timeout: sc.wait_held(5, timeout),
            lambda timeout: sc.wait_for(bool, timeout),
        ):
            with pytest.raises(
                ValueError, match=f"timeout must be a finite number of seconds, got {timeout}"
            ):
                wait(timeout=timeout)
    with pytest.raises(
        ValueError, match=f"wait_for_span: timeout must be a finite number of seconds, got {timeout}"
    ):
        SpanRecorder().wait_for_span("Agent.Session", timeout=timeout)


def test_a_waits_nonsense_count_or_timeout_is_refused_naming_it_and_what_is_valid() -> None:
    """``wait_held(count=-1)`` (or 0) passed at once on an empty journal, ``timeout=-1`` was a timeout at
    once and a string a ``TypeError`` from inside; each is refused naming the method, the argument and
    what is valid (the stdio server's ``wait_child``/``wait_exit`` too: ``timeout=None`` waited for ever)."""
    with Sidecar() as sc, StdioServer() as server:
        for count in (-1, 0, 1.5, "2", True, None):
            with pytest.raises(
                ValueError, match=f"wait_held: count must be a positive integer, got {count!r}"
            ):
                sc.wait_held(count, timeout=0)  # type: ignore[arg-type]
        waits = {
            "wait_idle": sc.wait_idle,
            "wait_held": sc.wait_held,
            "wait_for": lambda timeout: sc.wait_for(bool, timeout),
            "wait_child": server.wait_child,
            "wait_exit": server.wait_exit,
        }
        for name, wait in waits.items():
            for timeout in (-1, -0.5, "1", True, None, float("nan")):
                valid = (
                    f"{name}: timeout must be a finite number of seconds, got {timeout!r} (valid: 0 or more)"
                )
                with pytest.raises(ValueError, match=re.escape(valid)):
                    wait(timeout=timeout)
