"""arbor.gym.TaskEnv: Gymnasium's own checker, and real episodes of a bundled task."""

from __future__ import annotations

import json
from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import arbor
from arbor.gym import TaskEnv, normalise

TASK = "py-stats-1"


@pytest.fixture
def env(alice: arbor.Client) -> Iterator[TaskEnv]:
    e = TaskEnv(TASK, client=alice, max_output=4096)
    yield e
    e.close()


def test_check_env(env: TaskEnv) -> None:
    check_env(env, skip_render_check=True)


def test_spaces_and_reset(env: TaskEnv) -> None:
    assert isinstance(env.observation_space, gymnasium.spaces.Text)
    assert isinstance(env.action_space, gymnasium.spaces.Text)
    obs, info = env.reset(seed=1)
    assert obs in env.observation_space
    assert "numkit" in obs
    assert info == {"task": TASK, "step": 0, "max_steps": env.task.max_steps}
    assert env.sandbox is not None and env.sandbox.task == TASK


def test_gold_episode_rewards_one(env: TaskEnv) -> None:
    env.reset(seed=0)
    for i, action in enumerate(env.task.gold):
        # Actions as JSON text and as dicts.
        obs, reward, terminated, truncated, info = env.step(json.dumps(action) if i % 2 else action)
        assert obs in env.observation_space
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["step"] == i + 1
    obs, reward, terminated, truncated, info = env.step('{"submit": true}')
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["verdict"]["reward"] == 1.0
    with pytest.raises(RuntimeError):
        env.step({"exec": "ls"})


def test_noop_episode_rewards_zero(env: TaskEnv) -> None:
    env.reset()
    _, reward, terminated, truncated, _ = env.step({"submit": True})
    assert (reward, terminated, truncated) == (0.0, True, False)


def test_running_out_of_steps_truncates(env: TaskEnv) -> None:
    env.reset()
    for _ in range(env.task.max_steps - 1):
        assert env.step({"exec": "true"})[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step({"exec": "true"})
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "verdict" in info


def test_invalid_actions_are_observations(env: TaskEnv) -> None:
    env.reset()
    for bad in ("not json", "[1, 2]", '{"bogus": 1}'):
        obs, reward, terminated, truncated, info = env.step(bad)
        assert obs.startswith("invalid action") and obs in env.observation_space
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["error"] and info["step"] == 0


def test_observations_are_normalised(env: TaskEnv) -> None:
    env.reset()
    obs, *_ = env.step({"exec": "printf 'caf\\303\\251 \\342\\234\\223\\n'; head -c 20000 /dev/zero | tr '\\0' x"})
    assert obs in env.observation_space
    assert len(obs) <= 4096 and "[... truncated ...]" in obs
    assert "caf\\xe9 \\u2713" in obs
    assert normalise("é" * 10, 5) == "\\xe9\\"


def test_snapshot_restore_and_fork(env: TaskEnv) -> None:
    gold = env.task.gold
    env.reset()
    env.step(gold[0])
    checkpoint = env.snapshot()
    assert isinstance(checkpoint, arbor.Snapshot)
    # Spoil this branch, then go back.
    env.step({"submit": True})
    obs, info = env.restore(checkpoint)
    assert info["step"] == 1 and obs in env.observation_space
    kids = env.fork(2)
    try:
        good, bad = kids
        for action in gold[1:]:
            good.step(action)
        assert good.step({"submit": True})[1] == 1.0
        assert bad.step({"submit": True})[1] == 0.0
        # The restored episode itself goes on too.
        for action in gold[1:]:
            env.step(action)
        assert env.step({"submit": True})[1] == 1.0
    finally:
        for kid in kids:
            kid.close()
    with pytest.raises(KeyError):
        env.restore("0" * 64)


def test_unknown_task_is_not_found(alice: arbor.Client) -> None:
    with pytest.raises(arbor.NotFound):
        TaskEnv("no-such-task", client=alice)
