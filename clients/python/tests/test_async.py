"""Every verb of server/API.md through the async client, against a real server."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

import arbor
from conftest import PROJECT_FILES, Server, server_binary

TASK = "py-stats-1"


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test in its own event loop (no pytest plugin needed)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


@run_async
async def test_server_and_snapshot_verbs(server: Server, project: Path) -> None:
    async with server.async_client("alice") as c:
        assert (await c.health()).status == "ok"
        assert "arbor_requests_total" in await c.metrics()
        tag = f"abase-{uuid.uuid4().hex[:8]}"
        snap = await c.import_dir(project, tag=tag)
        assert isinstance(snap, arbor.AsyncSnapshot) and tag in snap.tags
        assert (await c.get_snapshot(tag)).id == snap.id
        assert (await c.get_snapshot(snap.id[:6])).id == snap.id
        assert snap.id in [s.id for s in await c.snapshots()]
        other = f"atag-{uuid.uuid4().hex[:8]}"
        assert other in (await snap.tag(other)).tags
        assert other in (await c.tag(snap.id, other)).tags
        async with await snap.sandbox() as sb:
            await sb.write("added.txt", "new")
            later = await sb.snapshot()
        diff = await c.diff(snap, later)
        assert diff.added == ["added.txt"]
        assert (await later.diff(snap)).deleted == ["added.txt"]
        log = await later.log()
        assert log[0].id == snap.id and log[-1].id == later.id
        assert (await c.log(later.id))[-1].id == later.id
        replay = await later.replay()
        assert replay.identical
        assert (await c.replay(later, strict=True)).identical
        assert (await later.refresh()).id == later.id
        await later.delete()
        with pytest.raises(arbor.NotFound):
            await c.get_snapshot(later.id)
        await c.delete_snapshot(tag)
        with pytest.raises(arbor.NotFound):
            await c.get_snapshot(tag)


@run_async
async def test_sandbox_verbs(server: Server, project: Path, tmp_path: Path) -> None:
    async with server.async_client("alice") as c:
        snap = await c.import_dir(project)
        sb = await c.sandbox(snap, ttl=300)
        assert isinstance(sb, arbor.AsyncSandbox) and sb.snapshot_id == snap.id
        assert sb.id in [s.id for s in await c.sandboxes()]
        assert (await c.get_sandbox(sb.id)).id == sb.id
        r = await sb.exec("python3 -m unittest -q")
        assert r.exit_code == 0
        r = await sb.exec(
            ["sh", "-c", 'echo "$1|$X" && pwd && cat', "sh", "a b"], cwd="data", env={"X": "y"}, stdin=b"in"
        )
        assert r.stdout == "a b|y\n/workspace/data\nin"
        timed = await sb.exec("sleep 5", timeout=1)
        assert timed.timed_out and timed.exit_code == 124
        await sb.write("f.txt", b"bytes")
        assert await sb.read("f.txt") == b"bytes"
        assert "f.txt" in [e.name for e in await sb.listdir()]
        await sb.remove("f.txt")
        with pytest.raises(arbor.NotFound):
            await sb.read("f.txt")
        src = tmp_path / "up"
        src.mkdir()
        (src / "u.txt").write_text("up")
        assert await sb.upload(src, "up") == 1
        out = tmp_path / "down"
        await sb.download("up", out)
        assert (out / "u.txt").read_text() == "up"
        assert (await sb.refresh()).steps >= 5
        forks = await sb.fork(2)
        assert isinstance(forks, arbor.AsyncForks) and len(forks) == 2
        await forks[0].write("only0", "x")
        with pytest.raises(arbor.NotFound):
            await forks[1].read("only0")
        await forks.close()
        async with await c.fork(snap, 2) as kids:
            assert kids.snapshot.id == snap.id
            assert [await k.read("calc.py") for k in kids] == [PROJECT_FILES["calc.py"].encode()] * 2
        async with await snap.fork(1) as one:
            assert len(one) == 1
        await sb.close()
        await sb.close()
        with pytest.raises(arbor.NotFound):
            await c.get_sandbox(sb.id)


@run_async
async def test_exec_stream(server: Server, project: Path) -> None:
    async with server.async_client("alice") as c, await c.sandbox(await c.import_dir(project)) as sb:
        start = time.monotonic()
        stream = sb.exec_stream("echo a; sleep 1.5; echo b")
        chunks = []
        first_at = None
        async for chunk in stream:
            first_at = first_at if first_at is not None else time.monotonic() - start
            chunks.append(chunk)
        assert first_at is not None and first_at < 1.0
        assert time.monotonic() - start >= 1.5
        assert "".join(ch.data for ch in chunks if ch.stream == "stdout") == stream.result.stdout == "a\nb\n"
        assert (await sb.exec_stream(["sh", "-c", "exit 4"]).wait()).exit_code == 4


@run_async
async def test_tasks_steps_verify_rollout(server: Server) -> None:
    async with server.async_client("alice") as c:
        assert TASK in [t.id for t in await c.tasks()]
        detail = await c.task(TASK)
        async with await c.sandbox(task=TASK) as sb:
            for action in detail.gold:
                await sb.step(action)
            assert (await sb.step({"submit": True})).done
            verdict = await sb.verify()
            assert verdict.reward == 1.0 and isinstance(verdict.snapshot, arbor.AsyncSnapshot)
        events = [e async for e in c.rollout(task=TASK, budget=12, policy="gold")]
        assert isinstance(events[-1], arbor.RolloutDone)


@run_async
async def test_async_errors_are_the_same_errors(server: Server) -> None:
    async with server.async_client("bob") as c:
        with pytest.raises(arbor.NotFound):
            await c.get_snapshot("0000000000000000")
        with pytest.raises(arbor.NotFound):
            await c.task("no-such-task")
    async with arbor.AsyncClient(server.url) as anonymous:
        with pytest.raises(arbor.Unauthorized):
            await anonymous.snapshots()


@run_async
async def test_async_local(tmp_path: Path) -> None:
    async with arbor.AsyncClient.local(home=tmp_path / "home", binary=server_binary()) as c:
        assert (await c.health()).status == "ok"
        assert c.server is not None
    assert c.server is None


@run_async
async def test_concurrent_sandboxes(server: Server, project: Path) -> None:
    async with server.async_client("alice") as c:
        snap = await c.import_dir(project)
        async with await c.fork(snap, 4) as kids:
            results = await asyncio.gather(*(k.exec(f"echo {i} > me && cat me") for i, k in enumerate(kids)))
            assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
