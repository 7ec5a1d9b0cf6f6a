"""arbor.adapters.verifiers through verifiers 0.4's own Runtime and Task code paths."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import verifiers.v1 as vf
from verifiers.v1.rollout import resolve_agent_runtime
from verifiers.v1.runtimes import Runtime, register
from verifiers.v1.trace import AgentInfo, TraceTask

import arbor
from arbor.adapters.verifiers import ArborRuntime, ArborRuntimeConfig, ArborTask
from conftest import Server

TASK = "py-stats-1"


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


def config(server: Server, **kwargs: Any) -> ArborRuntimeConfig:
    return ArborRuntimeConfig(url=server.url, token=server.tokens["alice"], **kwargs)


def trace_for(task: ArborTask) -> vf.Trace:
    return vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data), agent=AgentInfo(config=vf.AgentConfig()))


def test_is_a_runtime() -> None:
    assert issubclass(ArborRuntime, Runtime)
    with pytest.raises(ValueError):
        ArborRuntime(ArborRuntimeConfig())


@run_async
async def test_runtime_protocol_on_a_snapshot(server: Server, base: arbor.Snapshot) -> None:
    runtime = ArborRuntime(config(server, snapshot=base.id))
    register(runtime)  # verifiers' at-exit backstop tracks it
    await runtime.start()
    try:
        assert runtime.info.id and runtime.info.id.startswith("sb-")
        assert await runtime.alive()
        assert await resolve_agent_runtime(runtime, None) is runtime
        result = await runtime.run(["sh", "-c", 'echo "$A-$B"; echo err >&2; exit 3'], {"B": "b"})
        assert (result.exit_code, result.stdout, result.stderr) == (3, "-b\n", "err\n")
        view = runtime.with_env({"A": "a"})
        assert (await view.run(["sh", "-c", 'echo "$A-$B"'], {"B": "b"})).stdout == "a-b\n"
        await runtime.write("out/data.bin", bytes(range(256)))
        assert await runtime.read("out/data.bin") == bytes(range(256))
        assert await runtime.read("out/data.bin", max_bytes=256) == bytes(range(256))
        with pytest.raises(vf.SandboxError):
            await runtime.read("out/data.bin", max_bytes=10)  # verifiers' cap, enforced in the box
        with pytest.raises(vf.SandboxError):
            await runtime.read("missing.txt")
        # Scripts go where they survive between commands.
        script = runtime.scripts_dir + "/probe.sh"
        await runtime.write(script, b"echo kept")
        assert (await runtime.run(["sh", script], {})).stdout == "kept\n"
        snap = await runtime.snapshot()
        kids = await runtime.fork(2)
        try:
            await kids[0].write("only-kid-0", b"x")
            assert (await kids[1].run(["ls", "only-kid-0"], {})).exit_code != 0
            assert await kids[0].read("out/data.bin") == bytes(range(256))
        finally:
            for kid in kids:
                await kid.stop()
        assert len(snap.id) == 64
    finally:
        await runtime.stop()
    assert runtime.stopped and runtime.sandbox is None
    await runtime.stop()  # idempotent


@run_async
async def test_task_episode_scored_by_verifiers(server: Server) -> None:
    async with server.async_client("alice") as client:
        task = await ArborTask.load(client, TASK)
        assert "numkit" in task.data.prompt_text
        # Gold: verifiers' Task.validate, then Task.score records the reward.
        runtime = ArborRuntime(task.runtime_config(url=server.url, token=server.tokens["alice"]))
        await runtime.start()
        try:
            assert await task.validate(runtime) is True
            trace = trace_for(task)
            await task.score(trace, runtime)
            assert trace.rewards["solved"].score == 1.0
        finally:
            await runtime.stop()
        # No-op: nothing done, reward 0.
        runtime = ArborRuntime(task.runtime_config(url=server.url, token=server.tokens["alice"]))
        await runtime.start()
        try:
            trace = trace_for(task)
            await task.score(trace, runtime)
            assert trace.rewards["solved"].score == 0.0
        finally:
            await runtime.stop()
        # Without a runtime, verifiers skips the runtime-dependent reward.
        trace = trace_for(task)
        await task.score(trace)
        assert "solved" not in trace.rewards


def test_cleanup_closes_a_sandbox_stop_never_reached(server: Server, base: arbor.Snapshot, alice: arbor.Client) -> None:
    runtime = ArborRuntime(config(server, snapshot=base.id))
    asyncio.run(runtime.start())
    sandbox_id = runtime.info.id
    assert sandbox_id in [s.id for s in alice.sandboxes()]
    runtime.cleanup()
    assert sandbox_id not in [s.id for s in alice.sandboxes()]
