"""An ``environment_factory`` class for TRL's ``GRPOTrainer``.

TRL makes one instance per concurrent rollout and reuses it ("construct once, reset
often"): ``reset(**row)`` gets the dataset row's fields and returns text appended to the
prompt; every public method other than ``reset`` and ``get_reward`` becomes a tool whose
schema TRL builds from the signature and the docstring's ``Args:`` section
(``transformers.utils.get_json_schema``); ``get_reward()`` scores the finished rollout.

    from arbor.adapters.trl import ArborToolEnv
    client = arbor.Client("unix:///run/arbor.sock")
    trainer = GRPOTrainer(..., environment_factory=lambda: ArborToolEnv(client=client))

The dataset's ``task`` column picks each rollout's task (or pass ``task=`` for all). Each
``reset`` opens a fresh task sandbox and closes the previous one; tool calls are the task's
counted actions; the reward is the task's hidden verifier's (1.0 or 0.0). So that no
extra public method turns into a tool, the last sandbox is closed by ``with`` (or when the
server's TTL ends).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from ..client import Client, Sandbox
from ..errors import ArborError

_MARK = "\n[... output truncated ...]"


class ArborToolEnv:
    """One rollout's Arbor task episode, with ``bash``, ``read_file`` and ``write_file`` tools.

    Args:
        task: The task of every episode (default: the dataset row's ``task`` field).
        client: The client (default: ``arbor.Client()``, the server at ``$ARBOR_URL``).
        max_output: The longest tool answer, in characters.
        ttl: Each episode sandbox's TTL in seconds (default: the server's).
    """

    def __init__(
        self, task: str | None = None, client: Client | None = None, *, max_output: int = 8000, ttl: float | None = None
    ) -> None:
        self._task = task
        self._client = Client() if client is None else client
        self._max_output = max_output
        self._ttl = ttl
        self._sandbox: Sandbox | None = None
        self._done = False
        self._reward: float | None = None

    def reset(self, task: str | None = None, **kwargs: Any) -> str:
        """Start an episode of ``task`` (the dataset row's field) or of the task given at
        construction; returns the task's instructions.

        Raises:
            ValueError: no task was named.
            arbor.NotFound: the server has no such task.
        """
        task_id = task or self._task
        if task_id is None:
            raise ValueError("ArborToolEnv needs a task: pass task= or give the dataset a `task` column")
        self._end_episode()
        instructions = self._client.task(task_id).instructions
        self._sandbox = self._client.sandbox(task=task_id, ttl=self._ttl)
        self._done = False
        self._reward = None
        return instructions

    def _cap(self, text: str) -> str:
        if len(text) <= self._max_output:
            return text
        return text[: max(0, self._max_output - len(_MARK))] + _MARK

    def _act(self, action: dict[str, Any]) -> str:
        if self._sandbox is None:
            return "error: no episode (reset() was not called)"
        if self._done:
            return "error: the episode is over; no more actions are taken"
        try:
            result = self._sandbox.step(action)
        except ArborError as e:
            return f"error: {e.message}"
        self._done = result.done
        code = "" if result.exit_code is None else f"\n[exit {result.exit_code}]"
        end = "\n[the episode is over: that was the last action]" if result.done else ""
        return self._cap(result.output) + code + end

    def bash(self, command: str) -> str:
        """Run a shell command in the task's workspace (bash, in /workspace) and return its
        output. Each call is one of the task's limited actions.

        Args:
            command: The shell command to run.

        Returns:
            The command's output, then its exit code.
        """
        return self._act({"exec": command})

    def read_file(self, path: str) -> str:
        """Read a file of the workspace (this does not use up an action).

        Args:
            path: The file's path, relative to /workspace.

        Returns:
            The file's text, or an error.
        """
        if self._sandbox is None:
            return "error: no episode (reset() was not called)"
        try:
            return self._cap(self._sandbox.read(path).decode("utf-8", "replace"))
        except ArborError as e:
            return f"error: {e.message}"

    def write_file(self, path: str, content: str) -> str:
        """Write a file of the workspace, replacing it if it exists. Each call is one of
        the task's limited actions.

        Args:
            path: The file's path, relative to /workspace.
            content: The file's whole new text.

        Returns:
            What happened.
        """
        answer = self._act({"write": path, "content": content})
        return answer if answer.startswith("error:") else f"wrote {path}\n{answer}".rstrip()

    def get_reward(self) -> float:
        """The task's hidden verifier's reward for the episode (1.0 or 0.0; computed once)."""
        if self._sandbox is None:
            return 0.0
        if self._reward is None:
            verdict = self._sandbox.verify()
            self._reward = float(verdict.reward or 0.0)
        return self._reward

    def _end_episode(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close(missing_ok=True)
            self._sandbox = None

    def __enter__(self) -> ArborToolEnv:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end_episode()
