"""arbor.adapters.skyrl through skyrl_gym 0.4's registry and ``make``."""

from __future__ import annotations

import json

import pytest
import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv

import arbor
import arbor.adapters.skyrl as adapter
from conftest import Server

TASK = "py-stats-1"


def make(server: Server, **extras: object) -> adapter.ArborSkyRLEnv:
    env = skyrl_gym.make(
        "arbor",
        env_config={"url": server.url, "token": server.tokens["alice"], "max_output": 500},
        extras={"task": TASK, **extras},
    )
    assert isinstance(env, adapter.ArborSkyRLEnv) and isinstance(env, BaseTextEnv)
    return env


def turn(action: dict[str, object], thought: str = "Let me act.") -> str:
    """A model's turn: some text, then the action."""
    return f"{thought}\n<action>{json.dumps(action)}</action>"


def test_registered() -> None:
    assert "arbor" in skyrl_gym.registry
    assert skyrl_gym.spec("arbor").entry_point == "arbor.adapters.skyrl:ArborSkyRLEnv"


def test_gold_episode(server: Server, alice: arbor.Client) -> None:
    gold = alice.task(TASK).gold
    env = make(server)
    try:
        prompt, info = env.init([])
        assert "numkit" in prompt[0]["content"] and "<action>" in prompt[0]["content"]
        assert info["task"] == TASK
        for action in gold:
            out = env.step(turn(action))
            assert not out["done"] and out["reward"] == 0.0
            assert out["observations"][0]["role"] == "user"
            assert len(out["observations"][0]["content"]) <= 500 + len("\n[... truncated ...]")
        out = env.step(turn({"submit": True}))
        assert out["done"] and out["reward"] == 1.0 and out["observations"] == []
        assert out["metadata"]["verdict"]["reward"] == 1.0
        assert env.get_metrics() == {"turns": len(gold) + 1, "reward": 1.0}
    finally:
        env.close()
    env.close()  # twice is fine


def test_noop_and_invalid_turns(server: Server) -> None:
    with make(server) as env:
        given = [{"role": "user", "content": "Fix it."}]
        assert env.init(given)[0] == given
        out = env.step("I will just think about it.")
        assert not out["done"] and out["observations"][0]["content"].startswith("invalid action: no <action>")
        out = env.step("<action>{not json}</action>")
        assert "not JSON" in out["observations"][0]["content"]
        out = env.step(turn({"bogus": 1}))
        assert "invalid action" in out["observations"][0]["content"]
        out = env.step(turn({"submit": True}))
        assert out["done"] and out["reward"] == 0.0


def test_max_turns_ends_the_episode(server: Server) -> None:
    with make(server, max_turns=2) as env:
        env.init([])
        assert not env.step(turn({"exec": "ls"}))["done"]
        out = env.step(turn({"exec": "ls"}))
        assert out["done"] and out["reward"] == 0.0


def test_unknown_task(server: Server) -> None:
    with pytest.raises(arbor.NotFound):
        skyrl_gym.make(
            "arbor", env_config={"url": server.url, "token": server.tokens["alice"]}, extras={"task": "nope"}
        )
    with pytest.raises(ValueError):
        skyrl_gym.make("arbor", env_config={"url": server.url}, extras={})
