"""A request record's groups (``held``, ``upstream``, ``auth``, ``cancel``): written whole or in part,
names checked at run time (no typed list of fields beside the record), nested in the control API's
journal (version 2)."""

from __future__ import annotations

import httpx
import pytest

from pytest_mcpfaults import Hang, Sidecar
from pytest_mcpfaults.core.journal import Journal
from pytest_mcpfaults.core.records import GROUPS, AuthSeen, CancelSeen, Held, UpstreamLeg
from pytest_mcpfaults.transports.control import CONTROL_PREFIX, JOURNAL_VERSION, Control


def test_the_groups_are_read_from_the_record() -> None:
    assert {"held": Held, "upstream": UpstreamLeg, "auth": AuthSeen, "cancel": CancelSeen} == GROUPS


def test_a_name_the_record_does_not_have_is_refused_at_the_write() -> None:
    j = Journal()
    rid = j.add_request(conn_id=0, method="POST", path="/mcp")
    with pytest.raises(TypeError, match=r"RequestRecord has no field\(s\) \['upstream_status'\]"):
        j.update_request(rid, upstream_status=200)  # a flat name of before the groups
    with pytest.raises(TypeError, match="unexpected keyword argument 'status'"):
        j.update_group(rid, "auth", status=200)
    with pytest.raises(TypeError, match="no group 'token'; its groups: held, upstream, auth, cancel"):
        j.update_group(rid, "token", token="t1")
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'at'"):
        j.update_group(rid, "held", outcome="released")  # a hold has a start
    assert j.request(rid).auth is None and j.request(rid).held is None  # nothing half-written


def test_a_group_is_made_by_its_first_write_and_kept_by_the_next() -> None:
    j = Journal()
    rid = j.add_request(conn_id=0, method="POST", path="/mcp")
    assert (j.request(rid).auth, j.request(rid).hold, j.request(rid).forwarded) == (None, None, False)
    j.update_group(rid, "auth", token="t1")
    rec = j.update_group(rid, "auth", error="invalid_token")
    assert rec.auth == AuthSeen(token="t1", error="invalid_token")
    j.update_request(rid, held=Held(1.0), upstream=UpstreamLeg(0.5, ended_at=0.75, status=200, bytes=9))
    rec = j.update_group(rid, "held", outcome="released", waited=0.5)
    assert (rec.hold, rec.held, rec.forwarded, rec.upstream.time) == (  # type: ignore[union-attr]
        "released",
        Held(1.0, "released", 0.5),
        True,
        0.25,
    )
    line = j.format()
    assert "upstream=200/9B/250.0ms" in line and "token=t1 auth_error=invalid_token" in line
    assert "hold=released waited=0.500s" in line


def test_the_control_journal_nests_the_groups_and_says_its_version() -> None:
    with Sidecar(faults=[Hang(when="health")]) as sc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(sc.health_url, timeout=0.2)
        sc.wait_idle()
        Control(sc, "t" * 16).mount()
        auth = {"Authorization": "Bearer " + "t" * 16}
        j = httpx.get(sc.url + CONTROL_PREFIX + "/journal", headers=auth).json()
    (r,) = j["requests"]
    assert j["version"] == JOURNAL_VERSION == 2
    assert (r["upstream"], r["auth"], r["cancel"]) == (None, None, None)
    assert set(r["held"]) == {"at", "outcome", "waited"} and r["held"]["outcome"] == "client_closed"
    assert "hold" not in r and "upstream_status" not in r  # version 1's flat names are gone


def test_a_bounded_journal_trims_each_log_whatever_was_added() -> None:
    """The limit is kept at every request or connection added, for every log: a request that finished
    after the last request came is dropped when a connection opens, and a settled server message when a
    request comes."""
    j = Journal()
    j.set_limit(1)
    first = j.add_request(conn_id=-1, method="POST", path="/mcp")
    j.add_request(conn_id=-1, method="POST", path="/mcp")  # the first is in flight: kept
    seq = j.server_messages.add_server_message(method="ping", request_id=0)
    j.server_messages.add_server_message(method="ping", request_id=0)  # the first unanswered: kept
    j.end_request(first)
    j.server_messages.update_server_message(seq, outcome="answered")
    assert (len(j), len(j.server_messages)) == (2, 2)  # settled since the last add of their log
    j.add_connection("127.0.0.1:1")
    assert (len(j), j.dropped_requests) == (1, 1)
    j.add_request(conn_id=-1, method="POST", path="/mcp")
    assert (len(j.server_messages), j.server_messages.dropped) == (1, 1)
