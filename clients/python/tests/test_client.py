"""Every verb of server/API.md through the sync client, against a real server."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path

import pytest

import arbor
from conftest import PROJECT_FILES, Server, server_binary

TASK = "py-stats-1"


def unique(prefix: str) -> str:
    """A tag no other test uses (the session's server is shared)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_health_and_metrics(alice: arbor.Client) -> None:
    health = alice.health()
    assert health.status == "ok"
    assert "native" in health.backends
    assert health.version
    text = alice.metrics()
    assert "arbor_sandboxes_live" in text
    assert "arbor_requests_total" in text


def test_tcp_and_unix_reach_the_same_server(server: Server) -> None:
    with server.client("alice", tcp=True) as tcp, server.client("alice") as uds:
        assert tcp.health().version == uds.health().version
        tag = unique("both")
        made = tcp.import_dir(Path(__file__).parent / "data" / "tiny", tag=tag)
        assert uds.get_snapshot(tag).id == made.id


def test_import_dir_and_snapshot_fields(alice: arbor.Client, project: Path) -> None:
    tag = unique("base")
    snap = alice.import_dir(project, tag=tag)
    assert len(snap.id) == 64 and snap.short == snap.id[:12]
    assert tag in snap.tags
    assert snap.backend == "native"
    assert snap.created_at > 0
    assert snap.client is alice
    with snap.sandbox() as sb:
        for rel, text in PROJECT_FILES.items():
            assert sb.read(rel).decode() == text
        assert sb.exec("python3 -m unittest -q").exit_code == 0


def test_import_keeps_symlinks_and_modes(alice: arbor.Client, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "bin").mkdir(parents=True)
    script = root / "bin" / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    (root / "link").symlink_to("bin/run.sh")
    with alice.import_dir(root).sandbox() as sb:
        assert sb.exec("./bin/run.sh").stdout == "ran\n"
        assert sb.exec("readlink link").stdout == "bin/run.sh\n"
        kinds = {e.name: e.kind for e in sb.listdir(".")}
        assert kinds == {"bin": "dir", "link": "symlink"}


def test_snapshot_refs_tags_list_and_delete(alice: arbor.Client, base: arbor.Snapshot) -> None:
    tag = unique("t")
    tagged = alice.tag(base, tag)
    assert tag in tagged.tags and tagged.id == base.id
    assert alice.get_snapshot(tag).id == base.id
    assert alice.get_snapshot(base.id).id == base.id
    assert alice.get_snapshot(base.id[:8]).id == base.id
    assert base.id in [s.id for s in alice.snapshots()]
    with base.sandbox() as sb:
        sb.write("new.txt", "x")
        later = sb.snapshot()
    # Moving the tag.
    moved = later.tag(tag)
    assert alice.get_snapshot(tag).id == later.id == moved.id
    assert tag not in base.refresh().tags
    # The newest first (by created_at, whole seconds: the order within one second is the ids').
    listed = alice.snapshots()
    assert [s.created_at for s in listed] == sorted((s.created_at for s in listed), reverse=True)
    assert {later.id, base.id} <= {s.id for s in listed}
    later.delete()
    with pytest.raises(arbor.NotFound):
        alice.get_snapshot(later.id)
    with pytest.raises(arbor.NotFound):
        alice.get_snapshot(tag)
    assert later.id not in [s.id for s in alice.snapshots()]


def test_invalid_tag_is_bad_request(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with pytest.raises(arbor.BadRequest) as e:
        alice.tag(base, "no spaces allowed")
    assert e.value.status == 400 and e.value.code == "bad_request"
    with pytest.raises(arbor.BadRequest):
        alice.tag(base, "x" * 65)


def test_sandbox_create_list_get_close(alice: arbor.Client, base: arbor.Snapshot) -> None:
    tag = unique("open")
    base.tag(tag)
    by_tag = alice.sandbox(tag, ttl=120)
    by_obj = alice.sandbox(base)
    assert by_tag.snapshot_id == by_obj.snapshot_id == base.id
    assert by_tag.id.startswith("sb-") and by_tag.task is None
    assert by_tag.expires_at - by_tag.created_at == pytest.approx(120, abs=1)
    live = {s.id for s in alice.sandboxes()}
    assert {by_tag.id, by_obj.id} <= live
    assert alice.get_sandbox(by_tag.id).snapshot_id == base.id
    by_tag.close()
    by_tag.close()  # a second close is a no-op
    with pytest.raises(arbor.NotFound):
        alice.get_sandbox(by_tag.id)
    assert by_tag.id not in {s.id for s in alice.sandboxes()}
    with by_obj:
        pass
    with pytest.raises(arbor.NotFound):
        alice.get_sandbox(by_obj.id)
    with pytest.raises(TypeError):
        alice.sandbox()


def test_exec_exit_codes_and_streams(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        r = sb.exec("echo out; echo err >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
        assert not r.ok and r.duration_s >= 0
        assert sb.exec("true").ok
        killed = sb.exec("kill -9 $$")
        assert killed.exit_code == 128 + 9


def test_exec_timeout(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        start = time.monotonic()
        r = sb.exec("sleep 5", timeout=1)
        assert r.timed_out and r.exit_code == 124
        assert time.monotonic() - start < 4.5


def test_exec_cwd_env_stdin(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        assert sb.exec("pwd", cwd="data").stdout == "/workspace/data\n"
        assert sb.exec("pwd", cwd="/workspace/data").stdout == "/workspace/data\n"
        assert sb.exec("echo $GREETING", env={"GREETING": "hi there"}).stdout == "hi there\n"
        assert sb.exec("echo ${GREETING:-unset}").stdout == "unset\n"  # env is for that exec only
        assert sb.exec("cat", stdin="from stdin\n").stdout == "from stdin\n"
        raw = bytes(range(256))
        hexed = sb.exec(["python3", "-c", "import sys; print(sys.stdin.buffer.read().hex())"], stdin=raw)
        assert hexed.stdout.strip() == raw.hex()


def test_exec_argv_quoting(alice: arbor.Client, base: arbor.Snapshot) -> None:
    words = ["a b", "it's", '"double"', "$HOME", "`id`", "semi;colon", "back\\slash", "", "*", "new\nline"]
    with base.sandbox() as sb:
        r = sb.exec(["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *words])
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout) == words


def test_exec_stream_chunks_arrive_before_exit(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        start = time.monotonic()
        stream = sb.exec_stream("echo a; sleep 1.5; echo b; echo e >&2")
        arrivals: list[tuple[float, arbor.ExecChunk]] = []
        for chunk in stream:
            arrivals.append((time.monotonic() - start, chunk))
        total = time.monotonic() - start
        result = stream.result
        assert result.exit_code == 0
        first_at, first = arrivals[0]
        assert first == arbor.ExecChunk("stdout", "a\n")
        assert first_at < 1.0 and total >= 1.5, (first_at, total)
        assert "".join(c.data for _, c in arrivals if c.stream == "stdout") == result.stdout == "a\nb\n"
        assert "".join(c.data for _, c in arrivals if c.stream == "stderr") == result.stderr == "e\n"
        with pytest.raises(RuntimeError):
            iter(stream)
        # wait() drains a stream that was not iterated.
        assert sb.exec_stream(["sh", "-c", "exit 7"]).wait().exit_code == 7
        with pytest.raises(RuntimeError):
            _ = sb.exec_stream("true").result


def test_files(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        sb.write("notes.txt", b"hi")
        assert sb.read("notes.txt") == b"hi"
        sb.write("deep/er/file.bin", bytes(range(256)))
        assert sb.read("deep/er/file.bin") == bytes(range(256))
        sb.write("run.sh", "#!/bin/sh\necho ok\n", mode=0o755)
        assert sb.exec("./run.sh").stdout == "ok\n"
        assert sb.read("/workspace/notes.txt") == b"hi"
        entries = {e.name: e for e in sb.listdir(".")}
        assert entries["notes.txt"] == arbor.DirEntry("notes.txt", "file", 2)
        assert entries["deep"].kind == "dir"
        assert [e.name for e in sb.listdir("deep/er")] == ["file.bin"]
        assert [e.name for e in sb.listdir("")] == sorted(entries)
        sb.remove("notes.txt")
        with pytest.raises(arbor.NotFound):
            sb.read("notes.txt")
        with pytest.raises(arbor.NotFound):
            sb.read("never-was.txt")
        assert sb.exec("cat data/notes.txt").stdout == PROJECT_FILES["data/notes.txt"]


def test_upload_and_download(alice: arbor.Client, base: arbor.Snapshot, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.txt").write_text("alpha")
    (src / "b.bin").write_bytes(bytes(range(256)) * 1000)
    with base.sandbox() as sb:
        assert sb.upload(src, "incoming") == 2
        assert sb.read("incoming/pkg/a.txt") == b"alpha"
        assert sb.exec("wc -c < incoming/b.bin").stdout.strip() == "256000"
        out = tmp_path / "out"
        written = sb.download("incoming", out)
        assert sorted(p.relative_to(out).as_posix() for p in written if p.is_file()) == ["b.bin", "pkg/a.txt"]
        assert (out / "b.bin").read_bytes() == (src / "b.bin").read_bytes()
        whole = tmp_path / "whole"
        sb.download(".", whole)
        assert (whole / "calc.py").read_text() == PROJECT_FILES["calc.py"]


def test_sandbox_snapshot_diff_log_replay(alice: arbor.Client, base: arbor.Snapshot) -> None:
    tag = unique("step1")
    with base.sandbox() as sb:
        sb.exec("echo one > one.txt")
        sb.exec("rm calc.py && echo changed >> data/notes.txt")
        s1 = sb.snapshot(tag=tag)
        assert tag in s1.tags and alice.get_snapshot(tag).id == s1.id
        d = alice.diff(base, s1)
        assert "one.txt" in d.added
        assert "calc.py" in d.deleted
        assert "data/notes.txt" in d.modified
        assert s1.diff(base).added == d.deleted
        assert not alice.diff(s1, s1)
        entries = s1.log()
        assert entries[-1].id == s1.id
        assert entries[0].id == base.id  # root first
        assert all(code == 0 for e in entries for code in e.exits)
        replay = s1.replay()
        assert replay.identical and replay.divergence is None
        assert replay.actions >= 2


def test_forks_are_independent(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.fork(3) as kids:
        assert len(kids) == 3 and kids.snapshot.id == base.id
        assert len({k.id for k in kids}) == 3
        kids[0].write("mine.txt", "kid 0")
        kids[1].exec("rm calc.py")
        assert kids[0].read("mine.txt") == b"kid 0"
        for other in (kids[1], kids[2]):
            with pytest.raises(arbor.NotFound):
                other.read("mine.txt")
        assert kids[0].read("calc.py") == kids[2].read("calc.py")
        with pytest.raises(arbor.NotFound):
            kids[1].read("calc.py")
    for kid in kids:
        with pytest.raises(arbor.NotFound):
            alice.get_sandbox(kid.id)
    # By reference, and with a TTL.
    forks = alice.fork(base.id[:10], 2, ttl=60)
    assert forks.snapshot.id == base.id
    assert all(k.expires_at - k.created_at == pytest.approx(60, abs=1) for k in forks)
    forks.close()


def test_sandbox_fork_goes_on(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        sb.write("state.txt", "before fork")
        with sb.fork(2) as kids:
            assert kids.snapshot.parent is not None
            assert all(k.snapshot_id == kids.snapshot.id for k in kids)
            sb.write("state.txt", "parent moved on")
            assert [k.read("state.txt") for k in kids] == [b"before fork"] * 2
        assert sb.read("state.txt") == b"parent moved on"
        # A fork of the snapshot works after the sandbox it came from is closed.
        snap = sb.snapshot()
    with snap.fork(1) as again:
        assert again[0].read("state.txt") == b"parent moved on"


def test_refresh_counts_steps(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        assert sb.steps == 0
        sb.exec("true")
        sb.write("f", "x")
        assert sb.refresh().steps == 2


def test_tasks_and_task(alice: arbor.Client) -> None:
    tasks = {t.id: t for t in alice.tasks()}
    assert TASK in tasks
    summary = tasks[TASK]
    assert summary.backend == "native" and summary.max_steps > 0 and summary.candidates >= 6
    detail = alice.task(TASK)
    assert "numkit" in detail.instructions
    assert detail.max_steps == summary.max_steps
    assert detail.gold and all(isinstance(a, dict) for a in detail.gold)
    with pytest.raises(arbor.NotFound):
        alice.task("no-such-task")


def test_task_episode_gold_and_noop(alice: arbor.Client) -> None:
    detail = alice.task(TASK)
    with alice.sandbox(task=TASK) as sb:
        assert sb.task == TASK
        for action in detail.gold:
            r = sb.step(action)
            assert not r.done or r.step == detail.max_steps
        last = sb.step({"submit": True})
        assert last.done and last.exit_code is None
        with pytest.raises(arbor.Conflict):
            sb.step({"exec": "ls"})
        verdict = sb.verify()
        assert verdict.reward == 1.0
        assert isinstance(verdict.snapshot, arbor.Snapshot) and len(verdict.snapshot.id) == 64
    with alice.sandbox(task=TASK) as sb:
        assert sb.step('{"submit": true}').done
        assert sb.verify().reward == 0.0


def test_task_sandbox_fork_continues_the_episode(alice: arbor.Client) -> None:
    detail = alice.task(TASK)
    with alice.sandbox(task=TASK) as sb:
        first = sb.step(detail.gold[0])
        with sb.fork(2) as kids:
            assert all(k.task == TASK for k in kids)
            good, bad = kids
            for action in detail.gold[1:]:
                good.step(action)
            assert good.step({"submit": True}).done
            assert bad.step({"submit": True}).done
            assert good.verify().reward == 1.0
            assert bad.verify().reward == 0.0
        assert first.step == 1


def test_plain_sandbox_refuses_task_routes(alice: arbor.Client, base: arbor.Snapshot) -> None:
    with base.sandbox() as sb:
        with pytest.raises(arbor.Conflict):
            sb.step({"exec": "ls"})
        with pytest.raises(arbor.Conflict):
            sb.verify()


def test_rollout_stream(alice: arbor.Client) -> None:
    events = list(alice.rollout(task=TASK, budget=16, strategy="uniform:2:2", policy="gold", seed=0))
    assert isinstance(events[-1], arbor.RolloutDone)
    assert events[-1].tree
    assert any(isinstance(e, arbor.RolloutRecord) for e in events)
    assert all(isinstance(e, (arbor.RolloutProgress, arbor.RolloutRecord)) for e in events[:-1])
    with pytest.raises(arbor.BadRequest):
        list(alice.rollout(task=TASK, budget=16, policy="command:true"))
    with pytest.raises(arbor.NotFound):
        list(alice.rollout(task="no-such-task", budget=16))


def test_local_client_starts_and_stops_its_server(tmp_path: Path) -> None:
    with arbor.Client.local(home=tmp_path / "home", binary=server_binary()) as c:
        assert c.server is not None
        pid = c.server.pid
        assert c.health().status == "ok"
        with c.sandbox(c.import_dir(Path(__file__).parent / "data" / "tiny")) as sb:
            assert sb.exec("cat hello.txt").stdout == "hello\n"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_client_side_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A peer that accepts and never answers: the client's own timeout.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with arbor.Client(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3) as c:
            with pytest.raises(arbor.Timeout) as e:
                c.health()
            assert e.value.status is None and e.value.code == "timeout"
    with arbor.Client(f"unix://{tmp_path}/nobody.sock") as c:
        with pytest.raises(arbor.ArborError) as failed:
            c.health()
        assert failed.value.code == "transport" and not isinstance(failed.value, arbor.Timeout)
    monkeypatch.delenv("ARBOR_URL", raising=False)
    with pytest.raises(ValueError):
        arbor.Client()
    with pytest.raises(ValueError):
        arbor.Client("ftp://example.org")


def test_import_refuses_what_it_cannot_send(alice: arbor.Client, tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        alice.import_dir(tmp_path / "missing")
    odd = tmp_path / "odd"
    odd.mkdir()
    os.mkfifo(odd / "fifo")
    with pytest.raises(ValueError, match="fifo"):
        alice.import_dir(odd)


FETCH = (
    "import urllib.request, sys\n"
    "try:\n"
    "    r = urllib.request.urlopen(sys.argv[1], timeout=30)\n"
    "    print('status', r.status)\n"
    "except Exception as e:\n"
    "    print('refused', e)\n"
)


def test_allow_hosts_lets_exactly_those_names_out(alice: arbor.Client, base: arbor.Snapshot) -> None:
    # Without an allowlist, the proxy's port is closed and nothing is logged.
    with alice.sandbox(base) as sb:
        sb.write("fetch.py", FETCH.encode())
        r = sb.exec("python3 fetch.py https://pypi.org/simple/six/")
        assert r.stdout.startswith("refused"), r.stdout
        assert r.egress == []
    with alice.sandbox(base, allow_hosts=["pypi.org"]) as sb:
        sb.write("fetch.py", FETCH.encode())
        r = sb.exec("python3 fetch.py https://pypi.org/simple/six/")
        assert r.stdout == "status 200\n", (r.stdout, r.stderr, r.egress)
        assert [(e["host"], e["allowed"]) for e in r.egress] == [("pypi.org", True)]
        r = sb.exec("python3 fetch.py https://example.com/")
        assert r.stdout.startswith("refused") and "403" in r.stdout, r.stdout
        assert r.egress[0]["host"] == "example.com" and not r.egress[0]["allowed"]
    with pytest.raises(arbor.BadRequest) as e:
        alice.sandbox(base, allow_hosts=["10.1.2.3"])
    assert "IP literal" in str(e.value)
    with pytest.raises(TypeError):
        alice.sandbox(base, allow_hosts="pypi.org")


def test_local_descendants_finds_grandchildren_and_not_the_rest() -> None:
    import subprocess

    from arbor.local import descendants

    # A child shell whose own child sleeps: both are below us.
    child = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    try:
        below = descendants(os.getpid())
        assert child.pid in below and grandchild in below
        # Positive control of the negative: the grandchild has none, and we are not below our child.
        assert descendants(grandchild) == []
        assert os.getpid() not in descendants(child.pid)
    finally:
        os.kill(grandchild, 9)
        child.kill()
        child.wait()
