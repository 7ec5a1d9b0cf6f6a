"""arbor.adapters.harbor through Harbor 0.25's own code paths (Python >= 3.12; on the
project's 3.11 venv, tests/test_harbor.py runs this directory in .venv-harbor).

A whole Harbor ``Trial`` runs a bundled task: Harbor loads the task directory, builds the
environment and the verifier by import path, runs an agent (Harbor's ``nop``, or
:class:`GoldAgent`, which applies the task's gold actions through the environment) and
grades: nop 0, gold 1. The environment's own verbs are checked on a snapshot sandbox.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.environments.factory import EnvironmentFactory
from harbor.models.agent.context import AgentContext
from harbor.models.task.config import NetworkMode, NetworkPolicy
from harbor.models.task.task import Task
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig, TrialConfig, VerifierConfig
from harbor.models.trial.paths import TrialPaths
from harbor.trial.trial import Trial
from harbor.verifier.factory import VerifierFactory

import arbor
from arbor.adapters.harbor import ArborEnvironment, ArborVerifier
from conftest import PROJECT_FILES, Server

TASK = "py-stats-1"
ENVIRONMENT = "arbor.adapters.harbor:ArborEnvironment"
VERIFIER = "arbor.adapters.harbor:ArborVerifier"


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


class GoldAgent(BaseAgent):
    """A Harbor agent that applies an Arbor task's gold actions (``$ARBOR_GOLD``, JSON)."""

    @staticmethod
    def name() -> str:
        return "arbor-gold"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        scratch = self.logs_dir / "gold"
        scratch.mkdir(parents=True, exist_ok=True)
        for i, action in enumerate(json.loads(os.environ["ARBOR_GOLD"])):
            if "exec" in action:
                await environment.exec(action["exec"])
            else:
                local = scratch / f"{i}"
                local.write_text(action["content"])
                await environment.upload_file(local, action["write"])


def harbor_task(root: Path, detail: arbor.TaskDetail, *, network: str = "no-network", workspace: bool = False) -> Path:
    """A Harbor task directory for an Arbor task (graded by ArborVerifier; test.sh only
    satisfies Harbor's layout check)."""
    task_dir = root / detail.id
    (task_dir / "environment").mkdir(parents=True)
    (task_dir / "tests").mkdir()
    (task_dir / "instruction.md").write_text(detail.instructions)
    (task_dir / "tests" / "test.sh").write_text(
        "#!/bin/sh\necho 'graded by arbor.adapters.harbor:ArborVerifier' >&2\nexit 1\n"
    )
    (task_dir / "task.toml").write_text(f'[environment]\nnetwork_mode = "{network}"\n')
    if workspace:
        for rel, text in PROJECT_FILES.items():
            path = task_dir / "environment" / "workspace" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return task_dir


@pytest.fixture
def detail(alice: arbor.Client) -> arbor.TaskDetail:
    return alice.task(TASK)


def trial_config(server: Server, task_dir: Path, tmp_path: Path, agent: AgentConfig) -> TrialConfig:
    return TrialConfig(
        task=TaskConfig(path=task_dir),
        trials_dir=tmp_path / "trials",
        agent=agent,
        environment=EnvironmentConfig(
            import_path=ENVIRONMENT,
            kwargs={"arbor_url": server.url, "arbor_token": server.tokens["alice"], "arbor_task": TASK},
        ),
        verifier=VerifierConfig(import_path=VERIFIER),
    )


@run_async
async def test_trial_nop_and_gold(
    server: Server, alice: arbor.Client, detail: arbor.TaskDetail, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_dir = harbor_task(tmp_path, detail)
    before = {s.id for s in alice.sandboxes()}
    nop = await (await Trial.create(trial_config(server, task_dir, tmp_path, AgentConfig(name="nop")))).run()
    assert nop.exception_info is None, nop.exception_info
    assert nop.verifier_result.rewards == {"reward": 0.0}
    monkeypatch.setenv("ARBOR_GOLD", json.dumps(detail.gold))
    gold_agent = AgentConfig(import_path=f"{__name__}:GoldAgent")
    gold = await (await Trial.create(trial_config(server, task_dir, tmp_path, gold_agent))).run()
    assert gold.exception_info is None, gold.exception_info
    assert gold.verifier_result.rewards == {"reward": 1.0}
    assert {s.id for s in alice.sandboxes()} == before  # Harbor's stop closed them


def make_env(server: Server, task_dir: Path, tmp_path: Path, **kwargs: Any) -> ArborEnvironment:
    task = Task(task_dir)
    env = EnvironmentFactory.create_environment_from_config(
        EnvironmentConfig(
            import_path=ENVIRONMENT, kwargs={"arbor_url": server.url, "arbor_token": server.tokens["alice"], **kwargs}
        ),
        environment_dir=task.paths.environment_dir,
        environment_name=task.name,
        session_id="test__env",
        trial_paths=TrialPaths(trial_dir=tmp_path / "trial"),
        task_env_config=task.config.environment,
    )
    assert isinstance(env, ArborEnvironment) and env.type() == "arbor"
    return env


@run_async
async def test_environment_verbs_on_a_workspace(server: Server, detail: arbor.TaskDetail, tmp_path: Path) -> None:
    env = make_env(server, harbor_task(tmp_path, detail, workspace=True), tmp_path)
    await env.start(force_build=False)
    try:
        r = await env.exec("python3 -m unittest -q")
        assert r.return_code == 0
        r = await env.exec('pwd; echo "$X" >&2', cwd="data", env={"X": "y"}, timeout_sec=10)
        assert (r.stdout, r.stderr, r.return_code) == ("/workspace/data\n", "y\n", 0)
        assert (await env.exec("sleep 5", timeout_sec=1)).return_code == 124
        assert (await env.exec("true", user="root")).return_code == 0
        with pytest.raises(ValueError):
            await env.exec("true", user="agent")
        streamed: list[tuple[str, str]] = []

        async def collect(text: str, stream: str) -> None:
            streamed.append((stream, text))

        with env.scoped_output_callback(collect):
            r = await env.exec("echo out; echo err >&2")
        assert ("stdout", "out\n") in streamed and ("stderr", "err\n") in streamed and r.stdout == "out\n"
        local = tmp_path / "local"
        (local / "sub").mkdir(parents=True)
        (local / "sub" / "a.txt").write_text("a")
        (local / "b.sh").write_text("echo b")
        await env.upload_dir(local, "up")
        await env.upload_file(local / "b.sh", "single/b.sh")
        assert await env.is_file("up/sub/a.txt") and await env.is_dir("up/sub")
        assert not await env.is_file("up/missing")
        await env.download_file("up/sub/a.txt", tmp_path / "back" / "a.txt")
        assert (tmp_path / "back" / "a.txt").read_text() == "a"
        await env.download_dir("up", tmp_path / "tree")
        assert (tmp_path / "tree" / "b.sh").read_text() == "echo b"
        with pytest.raises(arbor.BadRequest):
            await env.upload_file(local / "b.sh", "/logs/agent/b.sh")  # outside /workspace
        snap = await env.snapshot()
        kids = await env.fork(2)
        try:
            await kids[0].exec("echo kid > kid.txt")
            assert (await kids[1].exec("test -e kid.txt")).return_code == 1
            assert (await kids[1].exec("cat up/sub/a.txt")).stdout == "a"
        finally:
            for kid in kids:
                await kid.stop(delete=True)
        assert len(snap.id) == 64
        assert (await env.exec("true")).return_code == 0  # the parent goes on
    finally:
        await env.stop(delete=True)


@run_async
async def test_verifier_factory_on_a_task_environment(server: Server, detail: arbor.TaskDetail, tmp_path: Path) -> None:
    task_dir = harbor_task(tmp_path, detail)
    task = Task(task_dir)
    env = make_env(server, task_dir, tmp_path, arbor_task=TASK)
    await env.start(force_build=False)
    try:
        assert env.sandbox is not None and env.sandbox.task == TASK
        verifier = VerifierFactory.create_verifier_from_config(
            VerifierConfig(import_path=VERIFIER), task=task, trial_paths=env.trial_paths, environment=env
        )
        assert isinstance(verifier, ArborVerifier)
        first, *rest = detail.gold
        await env.exec(first["exec"])
        kids = await env.fork(1)  # the fork continues the episode
        try:
            for action in rest:
                if "exec" in action:
                    await kids[0].exec(action["exec"])
                else:
                    local = tmp_path / "w"
                    local.write_text(action["content"])
                    await kids[0].upload_file(local, action["write"])
            kid_verifier = VerifierFactory.create_verifier_from_config(
                VerifierConfig(import_path=VERIFIER), task=task, trial_paths=env.trial_paths, environment=kids[0]
            )
            assert (await kid_verifier.verify()).rewards == {"reward": 1.0}
        finally:
            await kids[0].stop(delete=True)
        assert (await verifier.verify()).rewards == {"reward": 0.0}
    finally:
        await env.stop(delete=True)


def test_network_policy_and_definition(server: Server, detail: arbor.TaskDetail, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no network"):
        make_env(server, harbor_task(tmp_path / "public", detail, network="public"), tmp_path, arbor_task=TASK)
    task_dir = harbor_task(tmp_path / "ok", detail)
    with pytest.raises(ValueError, match="no network"):
        task = Task(task_dir)
        ArborEnvironment(
            task.paths.environment_dir,
            task.name,
            "s",
            TrialPaths(tmp_path / "t"),
            task.config.environment,
            arbor_url=server.url,
            arbor_task=TASK,
            network_policy=NetworkPolicy(network_mode=NetworkMode.PUBLIC),
        )
    with pytest.raises(FileNotFoundError):
        make_env(server, task_dir, tmp_path)  # no task, no snapshot, no environment/workspace/
