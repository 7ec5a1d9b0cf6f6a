"""A SkyRL-gym environment over one of the server's tasks, registered as ``"arbor"``.

SkyRL's generator makes each environment with ``skyrl_gym.make(env_class, env_config=...,
extras=...)`` (``extras``: the dataset row), calls ``init(prompt)`` once, then
``step(llm_output)`` each turn until ``done``, then ``close()``. The model acts by writing
one task action as JSON inside ``<action>...</action>`` (the last such block of its turn):
``{"exec": "ls"}``, ``{"write": "a.py", "content": "..."}``, ``{"delete": "a.py"}`` or
``{"submit": true}``. The reward, on the last turn, is the task's hidden verifier's.

    import arbor.adapters.skyrl  # registers "arbor"
    env = skyrl_gym.make("arbor", env_config={"url": "unix:///run/arbor.sock"},
                         extras={"task": "py-stats-1"})

``env_config`` keys: ``url`` and ``token`` (default ``$ARBOR_URL``/``$ARBOR_TOKEN``),
``max_output`` (characters of an observation, default 8000), ``ttl`` (seconds).
``extras`` keys: ``task`` (or ``extra_info.task``), and optionally ``max_turns``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from ..client import Client, Sandbox
from ..errors import ArborError

ENV_ID = "arbor"
"""The id this module registers with ``skyrl_gym``."""

_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)

ACTION_FORMAT = (
    "Act by writing exactly one action as JSON inside <action></action>, e.g. "
    '<action>{"exec": "ls"}</action>, <action>{"write": "path", "content": "text"}</action>, '
    '<action>{"delete": "path"}</action>, or <action>{"submit": true}</action> when you are done.'
)


def parse_action(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The action of a model's turn (its last ``<action>`` block), or why there is none."""
    blocks = _ACTION.findall(text)
    if not blocks:
        return None, "no <action>...</action> block"
    try:
        value = json.loads(blocks[-1])
    except ValueError as e:
        return None, f"the action is not JSON ({e})"
    if not isinstance(value, dict):
        return None, "the action is not a JSON object"
    return value, None


def _get(config: Any, key: str, default: Any = None) -> Any:
    """A key of a dict or an OmegaConf ``DictConfig``."""
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


class ArborSkyRLEnv(BaseTextEnv):
    """One episode of an Arbor task as a SkyRL text environment (see the module docs).

    Args:
        env_config: ``url``, ``token``, ``max_output``, ``ttl`` (all optional).
        extras: The dataset row: ``task`` (or ``extra_info.task``), optional ``max_turns``.
        client: A client to use instead of one made from ``env_config`` (not closed here).
    """

    def __init__(
        self, env_config: Any = None, extras: dict[str, Any] | None = None, client: Client | None = None
    ) -> None:
        super().__init__()
        extras = dict(extras or {})
        task = extras.get("task") or _get(extras.get("extra_info"), "task")
        if not task:
            raise ValueError("the dataset row needs a `task` (or extra_info.task)")
        self._owns_client = client is None
        self.client = client if client is not None else Client(_get(env_config, "url"), token=_get(env_config, "token"))
        self.max_output = int(_get(env_config, "max_output", 8000))
        self._ttl = _get(env_config, "ttl")
        try:
            self.task = self.client.task(str(task))
        except BaseException:
            self._close_client()
            raise
        self.max_turns = int(extras.get("max_turns") or self.task.max_steps or 1)
        self.sandbox: Sandbox | None = None
        self.reward: float | None = None

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Open the episode's task sandbox. An empty prompt becomes the task's
        instructions (and the action format) as one user message; a given one is kept."""
        self.sandbox = self.client.sandbox(task=self.task.id, ttl=self._ttl)
        if not prompt:
            prompt = [{"role": "user", "content": f"{self.task.instructions}\n\n{ACTION_FORMAT}"}]
        return prompt, {"task": self.task.id, "sandbox": self.sandbox.id}

    def _cap(self, text: str) -> str:
        return text if len(text) <= self.max_output else text[: self.max_output] + "\n[... truncated ...]"

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Take the turn's action; on the last turn, grade the episode."""
        if self.sandbox is None:
            raise RuntimeError("init() opens the episode; call it before step()")
        self.turns += 1
        parsed, error = parse_action(action)
        observation = ""
        metadata: dict[str, Any] = {}
        done = False
        if parsed is not None:
            try:
                result = self.sandbox.step(parsed)
            except ArborError as e:
                error = e.message
            else:
                observation = result.output + ("" if result.exit_code is None else f"\n[exit {result.exit_code}]")
                metadata = {"step": result.step, "exit_code": result.exit_code}
                done = result.done
        if error is not None:
            observation = f"invalid action: {error}. {ACTION_FORMAT}"
            metadata = {"error": error}
        done = done or self.turns >= self.max_turns
        reward = 0.0
        if done:
            verdict = self.sandbox.verify()
            self.reward = reward = float(verdict.reward or 0.0)
            metadata["verdict"] = verdict.verdict
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": self._cap(observation)}],
            reward=reward,
            done=done,
            metadata=metadata,
            postprocessed_action=action,
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's turns and reward."""
        return {"turns": self.turns, "reward": self.reward or 0.0}

    def _close_client(self) -> None:
        if self._owns_client:
            self.client.close()
            self._owns_client = False

    def close(self) -> None:
        """Close the episode's sandbox (and the client made from ``env_config``)."""
        if self.sandbox is not None:
            self.sandbox.close(missing_ok=True)
            self.sandbox = None
        self._close_client()


if ENV_ID not in skyrl_gym.registry:
    skyrl_gym.register(id=ENV_ID, entry_point=f"{__name__}:ArborSkyRLEnv")
