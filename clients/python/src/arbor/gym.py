"""A Gymnasium environment over one of the server's tasks.

:class:`TaskEnv` is a ``gymnasium.Env`` whose observations and actions are text
(``gymnasium.spaces.Text``). An action is the task's action JSON, as a string or a dict:
``{"exec": "ls"}``, ``{"write": "a.py", "content": "..."}``, ``{"delete": "a.py"}`` or
``{"submit": true}``. The episode ends when the task says it is done (a submit, or the
task's ``max_steps``); that step's reward is the task's hidden verifier's (1.0 or 0.0),
every other step's is 0.0. A submit ends it as *terminated*, running out of steps as
*truncated*.

Observations are normalised into the observation space: characters outside the charset
(printable ASCII) are written as Python escapes (``\\xe9``, ``\\u2713``), and text past
``max_output`` characters keeps its head and tail around a ``[... truncated ...]`` mark.
An action that is not a JSON object, or that the server refuses as a bad request, is not
sent as a step: its observation says why, with reward 0, and the episode goes on.

Beyond the Gymnasium API: :meth:`TaskEnv.snapshot` checkpoints the episode,
:meth:`TaskEnv.restore` returns to a checkpoint, and :meth:`TaskEnv.fork` makes ``n``
independent environments that continue the episode from here (copy-on-write forks).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium
from gymnasium import spaces

from ._default import default_client
from .client import Client, Sandbox, Snapshot
from .errors import BadRequest

CHARSET = string.printable
"""The characters of the observation and action spaces."""

_TRUNCATED = "\n[... truncated ...]\n"


def normalise(text: str, max_length: int) -> str:
    """``text`` inside ``Text(max_length, charset=CHARSET)``: other characters escaped,
    the middle cut (with a mark) when it is too long."""
    allowed = frozenset(CHARSET)
    if not all(ch in allowed for ch in text):
        text = "".join(ch if ch in allowed else ch.encode("unicode_escape").decode("ascii") for ch in text)
    if len(text) <= max_length:
        return text
    if max_length <= len(_TRUNCATED):
        return text[:max_length]
    keep = max_length - len(_TRUNCATED)
    head = keep - keep // 2
    return text[:head] + _TRUNCATED + text[len(text) - keep // 2 :]


def parse_action(action: str | dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(action, None)`` for a JSON object (or dict), ``(None, reason)`` otherwise."""
    if isinstance(action, dict):
        return action, None
    try:
        value = json.loads(action)
    except (TypeError, ValueError) as e:
        return None, f"not JSON ({e})"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, None


@dataclass
class _Episode:
    """Where an episode stands (what a checkpoint or a fork carries along)."""

    observation: str
    steps: int
    done: bool


class TaskEnv(gymnasium.Env[str, str]):
    """One of the server's tasks as a Gymnasium environment (see the module docs).

    Args:
        task_id: The task (``GET /v1/tasks`` lists them).
        client: The client to use (default: ``$ARBOR_URL``, else a private
            :meth:`arbor.Client.local` server, closed with the environment).
        max_output: The longest observation, in characters.
        max_action: The longest action, in characters.
        ttl: Each episode sandbox's TTL in seconds (default: the server's).

    Raises:
        arbor.NotFound: the server has no task ``task_id``.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it so)

    def __init__(
        self,
        task_id: str,
        client: Client | None = None,
        *,
        max_output: int = 16384,
        max_action: int = 65536,
        ttl: float | None = None,
    ) -> None:
        self._owns_client = client is None
        self.client = default_client() if client is None else client
        try:
            self.task = self.client.task(task_id)
        except BaseException:
            self._close_client()
            raise
        self.max_output = max_output
        self.max_action = max_action
        self.observation_space = spaces.Text(max_length=max_output, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=max_action, min_length=0, charset=CHARSET)
        self._ttl = ttl
        self.sandbox: Sandbox | None = None
        self._episode = _Episode(observation="", steps=0, done=False)
        self._checkpoints: dict[str, tuple[Sandbox, _Episode]] = {}

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.task.id

    def _info(self) -> dict[str, Any]:
        return {"task": self.task.id, "step": self._episode.steps, "max_steps": self.task.max_steps}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode in a fresh task sandbox (the previous one is closed).

        The observation is the task's instructions, so a reset is deterministic.
        """
        super().reset(seed=seed)
        if self.sandbox is not None:
            self.sandbox.close(missing_ok=True)
            self.sandbox = None
        self.sandbox = self.client.sandbox(task=self.task.id, ttl=self._ttl)
        self._episode = _Episode(observation=normalise(self.task.instructions, self.max_output), steps=0, done=False)
        return self._episode.observation, self._info()

    def step(self, action: str | dict[str, Any]) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """Take one action; on the episode's last step, run the verifier for the reward.

        Raises:
            RuntimeError: before :meth:`reset`, or after the episode ended.
        """
        if self.sandbox is None:
            raise RuntimeError("call reset() before step()")
        if self._episode.done:
            raise RuntimeError("the episode is over: call reset() (or restore() a checkpoint)")
        parsed, error = parse_action(action)
        result = None
        if parsed is not None:
            try:
                result = self.sandbox.step(parsed)
            except BadRequest as e:
                error = e.message
        if parsed is None or result is None:
            text = f"invalid action: {error}. An action is a JSON object: " + (
                '{"exec": "ls"}, {"write": "a.py", "content": "..."}, {"delete": "a.py"} or {"submit": true}.'
            )
            return normalise(text, self.max_output), 0.0, False, False, {**self._info(), "error": error}
        self._episode = _Episode(
            observation=normalise(result.observation, self.max_output), steps=result.step, done=result.done
        )
        info = {**self._info(), "exit_code": result.exit_code}
        reward = 0.0
        terminated = truncated = False
        if result.done:
            verdict = self.sandbox.verify()
            reward = float(verdict.reward or 0.0)
            info["verdict"] = verdict.verdict
            info["graded_snapshot"] = verdict.snapshot.id
            terminated = parsed.get("submit") is True
            truncated = not terminated
        return self._episode.observation, reward, terminated, truncated, info

    def snapshot(self) -> Snapshot:
        """Checkpoint the episode here; :meth:`restore` returns to it.

        The checkpoint is a forked sandbox the server keeps open (it counts against
        ``--max-sandboxes``) until :meth:`close`.
        """
        sandbox = self._require_sandbox()
        forks = sandbox.fork(1)
        self._checkpoints[forks.snapshot.id] = (forks[0], _Episode(**vars(self._episode)))
        return forks.snapshot

    def restore(self, snapshot: Snapshot | str) -> tuple[str, dict[str, Any]]:
        """Continue from a checkpoint of :meth:`snapshot` (the current sandbox is closed);
        returns the observation and info there.

        Raises:
            KeyError: ``snapshot`` is not one of this environment's checkpoints.
        """
        key = snapshot.id if isinstance(snapshot, Snapshot) else snapshot
        if key not in self._checkpoints:
            raise KeyError(f"{key} is not a checkpoint of this environment (take one with snapshot())")
        parked, episode = self._checkpoints[key]
        resumed = parked.fork(1)[0]
        if self.sandbox is not None:
            self.sandbox.close(missing_ok=True)
        self.sandbox = resumed
        self._episode = _Episode(**vars(episode))
        return self._episode.observation, self._info()

    def fork(self, n: int) -> list[TaskEnv]:
        """``n`` environments that continue this episode independently (each in a forked
        sandbox; they share this environment's client, so close them before it)."""
        sandbox = self._require_sandbox()
        kids = []
        for kid in sandbox.fork(n):
            env = TaskEnv(
                self.task.id,
                self.client,
                max_output=self.max_output,
                max_action=self.max_action,
                ttl=self._ttl,
            )
            env.sandbox = kid
            env._episode = _Episode(**vars(self._episode))
            kids.append(env)
        return kids

    def _require_sandbox(self) -> Sandbox:
        if self.sandbox is None:
            raise RuntimeError("call reset() first")
        return self.sandbox

    def _close_client(self) -> None:
        if self._owns_client:
            self.client.close()
            self._owns_client = False

    def close(self) -> None:
        """Close the episode's sandbox and the checkpoints (and a client of its own)."""
        if self.sandbox is not None:
            self.sandbox.close(missing_ok=True)
            self.sandbox = None
        for parked, _ in self._checkpoints.values():
            parked.close(missing_ok=True)
        self._checkpoints.clear()
        self._close_client()
