"""Per-tenant limits and TTLs (API.md, "Tenancy and authentication"), each on a server of
its own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import arbor
from conftest import Server, StartServer


def test_max_sandboxes_is_a_hard_cap(start_server: StartServer, project: Path) -> None:
    srv = start_server("--max-sandboxes", "2", tenants=("alice", "bob"))
    with srv.client("alice") as alice, srv.client("bob") as bob:
        base = alice.import_dir(project)
        first, second = alice.sandbox(base), alice.sandbox(base)
        with pytest.raises(arbor.LimitExceeded) as e:
            alice.sandbox(base)
        assert e.value.status == 429 and e.value.code == "limit_exceeded"
        assert e.value.retry_after is not None and e.value.retry_after > 0
        with pytest.raises(arbor.LimitExceeded):
            first.fork(1)
        with pytest.raises(arbor.LimitExceeded):
            alice.sandbox(task="py-stats-1")
        # The cap is per tenant.
        with bob.sandbox(bob.import_dir(project)):
            pass
        first.close()
        with pytest.raises(arbor.LimitExceeded):
            base.fork(2)  # the cap counts all n
        with base.fork(1) as kids:
            assert len(kids) == 1
        assert len(alice.sandboxes()) == 1
        second.close()


def test_creation_rate(start_server: StartServer, project: Path) -> None:
    srv = start_server("--creates-per-second", "1")
    with srv.client("alice") as c:
        base = c.import_dir(project)
        limited = None
        for _ in range(5):
            try:
                c.sandbox(base).close()
            except arbor.LimitExceeded as e:
                limited = e
                break
        assert limited is not None, "five creations at once passed a rate of one a second"
        assert limited.retry_after is not None and 0 < limited.retry_after <= 2
        time.sleep(limited.retry_after + 0.1)
        c.sandbox(base).close()


def _wait_expired(sb: arbor.Sandbox, within: float) -> arbor.NotFound:
    deadline = time.monotonic() + within
    while True:
        try:
            sb.exec("true")
        except arbor.NotFound as e:
            return e
        if time.monotonic() > deadline:
            pytest.fail(f"{sb.id} outlived its TTL by {within}s")
        time.sleep(0.2)


def test_default_ttl_expires_sandboxes(start_server: StartServer, project: Path) -> None:
    srv = start_server("--ttl", "1", "--max-ttl", "30")
    with srv.client("alice") as c:
        base = c.import_dir(project)
        sb = c.sandbox(base)
        assert sb.expires_at - sb.created_at == pytest.approx(1, abs=0.5)
        longer = c.sandbox(base, ttl=30)
        e = _wait_expired(sb, within=5)
        assert e.status == 404 and "expired" in e.message
        with pytest.raises(arbor.NotFound) as again:
            c.get_sandbox(sb.id)
        assert "expired" in again.value.message
        assert longer.exec("true").exit_code == 0
        assert [s.id for s in c.sandboxes()] == [longer.id]
        assert "arbor_sandboxes_expired_total" in c.metrics()
        with c.sandbox(base, ttl=3600) as capped:  # a TTL past --max-ttl is cut to it
            assert capped.expires_at - capped.created_at == pytest.approx(30, abs=1)
        longer.close()


def test_explicit_ttl(server: Server, alice: arbor.Client, base: arbor.Snapshot) -> None:
    sb = alice.sandbox(base, ttl=1)
    e = _wait_expired(sb, within=5)
    assert "expired" in e.message
    sb.close(missing_ok=True)
    with pytest.raises(arbor.NotFound):
        alice.get_sandbox(sb.id)


def test_a_client_that_disconnects_mid_exec_does_not_leak_the_sandbox(
    start_server: StartServer, project: Path
) -> None:
    from test_load import descendants

    srv = start_server("--ttl", "3", "--max-ttl", "30")
    with srv.client("alice") as c:
        base = c.import_dir(project)
        sb = c.sandbox(base)
        # Positive control for the leak check: the sandbox's helper runs below the server.
        assert descendants(srv.process.pid), "no helper below the server while a sandbox is live"
        stream = sb.exec_stream("echo started; sleep 30")
        first = next(iter(stream))
        assert first.data.strip() == "started"
        stream.close()  # the client goes away mid-exec
        # The sandbox is not closed by the disconnect: it is the client's (or its TTL's) to close.
        assert c.get_sandbox(sb.id).id == sb.id
        e = _wait_expired(sb, within=8)
        assert "expired" in e.message
    deadline = time.monotonic() + 5
    while descendants(srv.process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert descendants(srv.process.pid) == [], "processes outlived the expired sandbox"
