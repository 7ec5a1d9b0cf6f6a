"""Load: N clients (threads) x M steps of exec, write, snapshot, fork 2, close the forks,
on a server of its own; then nothing may be left behind.

``ARBOR_LOAD_CLIENTS`` and ``ARBOR_LOAD_STEPS`` set N and M (default 8 x 10). It prints the
throughput and the p50/p99 latency of each operation. The only error allowed is
``LimitExceeded`` (retried; the server's cap, 2 sandboxes per client, is set so that some
requests meet it). Afterwards, against a baseline taken
after a warm-up: no mounts under the home (in this process's and the server's mount
namespaces), no process below the server (sandbox helpers), the server's open file
descriptors back within a small tolerance, and nothing left in ``<home>/run``.
"""

from __future__ import annotations

import functools
import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

import arbor
from arbor.local import descendants as local_descendants
from conftest import Server, StartServer

CLIENTS = int(os.environ.get("ARBOR_LOAD_CLIENTS", "8"))
STEPS = int(os.environ.get("ARBOR_LOAD_STEPS", "10"))
FD_TOLERANCE = 3

T = TypeVar("T")


def mounts_under(home: Path, pid: int | str = "self") -> list[str]:
    """The mount points below ``home`` in the mount namespace of ``pid``."""
    root = str(home.resolve())
    with open(f"/proc/{pid}/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(root)]


def descendants(pid: int) -> list[str]:
    """``pid: cmdline`` of every process below ``pid``."""
    out = []
    for p in local_descendants(pid):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append(f"{p}: {cmd}")
    return out


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def run_dirs(home: Path) -> list[str]:
    run = home / "run"
    return sorted(os.listdir(run)) if run.exists() else []


class Recorder:
    """Latencies per operation, the LimitExceeded retries, and every other error."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.limited = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def call(self, op: str, fn: Callable[[], T]) -> T:
        while True:
            start = time.perf_counter()
            try:
                value = fn()
            except arbor.LimitExceeded as e:
                with self._lock:
                    self.limited += 1
                # The cap's Retry-After is when the earliest TTL ends (up to 60 s); the
                # other clients close their forks much sooner than that.
                time.sleep(min(e.retry_after or 0.1, 0.25))
                continue
            with self._lock:
                self.latency[op].append(time.perf_counter() - start)
            return value


def client_loop(srv: Server, base: arbor.Snapshot, rec: Recorder, i: int) -> None:
    try:
        with srv.client("alice") as c:
            sb = rec.call("open", lambda: c.sandbox(base.id))
            try:
                for step in range(STEPS):
                    tag, path, text = f"{i}-{step}", f"steps/{step}.txt", f"client {i} step {step}"
                    r = rec.call("exec", functools.partial(sb.exec, f"echo {tag} >> log && tail -n 1 log"))
                    assert r.exit_code == 0 and r.stdout == f"{tag}\n", r
                    rec.call("write", functools.partial(sb.write, path, text))
                    rec.call("snapshot", sb.snapshot)
                    kids = rec.call("fork", functools.partial(sb.fork, 2))
                    assert kids[1].read(path) == text.encode()
                    rec.call("close", kids.close)
            finally:
                rec.call("close", sb.close)
    except Exception as e:  # every failure is counted, not just the first thread's
        with rec._lock:
            rec.errors.append(f"client {i}: {type(e).__name__}: {e}")


def settle(check: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.load
def test_load_and_no_leaks(start_server: StartServer, project: Path) -> None:
    # Each client holds up to 3 sandboxes; a cap of 2 per client makes some of them wait.
    srv = start_server("--max-sandboxes", str(2 * CLIENTS))
    pid, home = srv.process.pid, srv.home
    with srv.client("alice") as c:
        base = c.import_dir(project)
        with c.sandbox(base) as warm:  # a warm-up, so lazily opened files are in the baseline
            warm.fork(1).close()
    settle(lambda: not descendants(pid))
    baseline = {
        "mounts": mounts_under(home),
        "server mounts": mounts_under(home, pid),
        "fds": fd_count(pid),
        "run": run_dirs(home),
        "procs": descendants(pid),
    }

    rec = Recorder()
    threads = [threading.Thread(target=client_loop, args=(srv, base, rec, i)) for i in range(CLIENTS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start

    ops = sum(len(v) for v in rec.latency.values())
    print(
        f"\nload: {CLIENTS} clients x {STEPS} steps: {ops} requests in {elapsed:.2f}s = {ops / elapsed:.1f}/s"
        f" ({rec.limited} LimitExceeded retried)"
    )
    for op, lat in sorted(rec.latency.items()):
        p99 = statistics.quantiles(lat, n=100)[98] if len(lat) >= 2 else lat[0]
        print(f"  {op:9} n={len(lat):4}  p50 {statistics.median(lat) * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms")
    assert rec.errors == []
    assert len(rec.latency["fork"]) == CLIENTS * STEPS

    with srv.client("alice") as c:
        assert c.sandboxes() == []
        assert c.health().sandboxes_live == 0
    settle(lambda: not descendants(pid) and fd_count(pid) <= baseline["fds"] + FD_TOLERANCE)
    assert descendants(pid) == baseline["procs"] == []
    assert mounts_under(home) == baseline["mounts"]
    assert mounts_under(home, pid) == baseline["server mounts"]
    assert fd_count(pid) <= baseline["fds"] + FD_TOLERANCE, (fd_count(pid), baseline["fds"])
    assert run_dirs(home) == baseline["run"]
