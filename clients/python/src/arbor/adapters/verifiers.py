"""verifiers v1 integration: an Arbor sandbox as a ``Runtime``, and Arbor's tasks as ``Task``\\ s.

:class:`ArborRuntime` subclasses ``verifiers.v1.runtimes.Runtime`` (``start`` / ``run`` /
``read`` / ``write`` / ``stop``), so verifiers' framework methods (``read``'s byte cap,
``stop``'s shielded teardown, ``alive``, ``with_env`` views, the at-exit cleanup) work on it.
verifiers' runtime configs are a closed union, so an Arbor runtime is built directly and
lent to a rollout (``Agent.run(task, runtime=...)``) rather than named in an agent config.
Beyond the protocol it snapshots, forks (each fork another started ``ArborRuntime``) and,
for a task sandbox, grades with the task's hidden verifier.

Paths: an Arbor sandbox's files live under ``/workspace`` (its working directory), and its
``/tmp`` is fresh for every command, so ``write``/``read`` take paths relative to
``/workspace`` or absolute inside it, and verifiers' script cache is kept in
``/workspace/.vf-scripts``. The sandbox has no network beyond its own loopback.

:class:`ArborTask` is a verifiers ``Task`` for one of the server's tasks: its prompt is the
task's instructions, its ``solved`` reward is the hidden verifier's, and ``validate`` runs
the task's gold actions and checks that they score 1.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import verifiers.v1 as vf
from pydantic import Field
from pydantic_config import BaseConfig
from verifiers.v1.runtimes import BaseRuntimeInfo, ProgramResult, Runtime

from ..aio import AsyncClient, AsyncForks, AsyncSandbox, AsyncSnapshot
from ..client import Client
from ..errors import ArborError


class ArborRuntimeConfig(BaseConfig):
    """Where an :class:`ArborRuntime`'s sandbox comes from.

    Give one of ``snapshot`` and ``task``.
    """

    type: Literal["arbor"] = "arbor"
    url: str | None = None
    """The server (default ``$ARBOR_URL``)."""
    token: str | None = None
    """The bearer token (default ``$ARBOR_TOKEN``)."""
    snapshot: str | None = None
    """Open the sandbox on this snapshot (id, prefix or tag)."""
    task: str | None = None
    """Or open a task sandbox of this task."""
    ttl_s: float | None = None
    """The sandbox's TTL (default: the server's)."""
    timeout_s: float = 600.0
    """The wall-clock limit of each ``run``."""


class ArborRuntimeInfo(ArborRuntimeConfig, BaseRuntimeInfo):
    """The runtime's config and its sandbox id (``id``)."""


class ArborRuntime(Runtime):
    """A verifiers runtime over one Arbor sandbox.

    Args:
        config: Where the sandbox comes from.
        name: verifiers' runtime name (default: generated).
        client: An async client to use (default: one from ``config.url``/``token``,
            closed by ``stop``).
    """

    is_local = False  # the sandbox reaches no host URL (loopback-only network)
    scripts_dir: ClassVar[str] = "/workspace/.vf-scripts"

    def __init__(
        self, config: ArborRuntimeConfig, name: str | None = None, *, client: AsyncClient | None = None
    ) -> None:
        super().__init__(name)
        if (config.snapshot is None) == (config.task is None):
            raise ValueError("an ArborRuntimeConfig names exactly one of snapshot= and task=")
        self.config = config
        self.info = ArborRuntimeInfo(**config.model_dump())
        self._client = client
        self._owns_client = client is None
        self.sandbox: AsyncSandbox | None = None

    @classmethod
    def on_sandbox(cls, sandbox: AsyncSandbox, config: ArborRuntimeConfig, name: str | None = None) -> ArborRuntime:
        """A started runtime over an open sandbox (of ``sandbox.client``, which it does not
        close)."""
        runtime = cls(config, name, client=sandbox.client)
        runtime.sandbox = sandbox
        runtime.info.id = sandbox.id
        return runtime

    @property
    def client(self) -> AsyncClient:
        """The client the runtime talks through."""
        if self._client is None:
            self._client = AsyncClient(self.config.url, token=self.config.token)
        return self._client

    def _require(self) -> AsyncSandbox:
        if self.sandbox is None:
            raise vf.SandboxError(f"runtime {self.name} is not started")
        return self.sandbox

    async def start(self) -> None:
        """Open the sandbox."""
        if self.sandbox is None:
            ref = self.config.snapshot
            self.sandbox = await self.client.sandbox(ref, task=self.config.task, ttl=self.config.ttl_s)
            self.info.id = self.sandbox.id

    async def run(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        """Run ``argv`` in ``/workspace`` with the runtime's and ``env``'s variables."""
        result = await self._require().exec(argv, env=self.process_env(env), timeout=self.config.timeout_s)
        return ProgramResult(exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr)

    async def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        """The whole file through the file API; a capped read through verifiers' own
        in-sandbox path (``head -c``), so the cap holds before any transfer."""
        if max_bytes is not None:
            data: bytes = await super()._read(path, max_bytes)
            return data
        try:
            return await self._require().read(path)
        except ArborError as e:
            raise vf.SandboxError(f"read {path!r}: {e.message}") from e

    async def write(self, path: str, data: bytes) -> None:
        """Write a file (parents created)."""
        await self._require().write(path, data)

    async def remove(self, path: str) -> None:
        """Delete a file or symlink."""
        await self._require().remove(path)

    async def teardown(self) -> None:
        """Close the sandbox (and the client this runtime made)."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            await sandbox.close(missing_ok=True)
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def cleanup(self) -> None:
        """The at-exit backstop (synchronous): close a sandbox ``stop`` did not reach."""
        if self.sandbox is None:
            return
        with Client(self.client.url, token=self.config.token) as sync:
            sync.get_sandbox(self.sandbox.id).close(missing_ok=True)
        self.sandbox = None

    # Beyond verifiers' protocol.

    async def snapshot(self, tag: str | None = None) -> AsyncSnapshot:
        """Snapshot the sandbox (it goes on)."""
        return await self._require().snapshot(tag)

    async def fork(self, n: int) -> list[ArborRuntime]:
        """``n`` started runtimes on forks of this sandbox (a task sandbox's forks continue
        its episode); stop each."""
        forks: AsyncForks = await self._require().fork(n, ttl=self.config.ttl_s)
        return [ArborRuntime.on_sandbox(kid, self.config) for kid in forks]

    async def verify(self) -> float:
        """The task's hidden verifier's reward for the episode so far (task sandboxes)."""
        verdict = await self._require().verify()
        return float(verdict.reward or 0.0)


class ArborTaskData(vf.TaskData):
    """A verifiers task row for one of the server's tasks."""

    arbor_task: str
    """The Arbor task id."""
    gold: list[dict[str, Any]] = Field(default_factory=list)
    """Its known solution (task action JSON), for ``validate``."""


class ArborTask(vf.Task[ArborTaskData]):
    """One of the server's tasks as a verifiers task (score it on an :class:`ArborRuntime`
    opened with ``task=``)."""

    @classmethod
    async def load(cls, client: AsyncClient, task_id: str) -> ArborTask:
        """The task ``task_id`` of the server ``client`` talks to."""
        detail = await client.task(task_id)
        return cls(ArborTaskData(id=detail.id, arbor_task=detail.id, prompt=detail.instructions, gold=detail.gold))

    def runtime_config(self, **kwargs: Any) -> ArborRuntimeConfig:
        """The config of a runtime for this task's episode."""
        return ArborRuntimeConfig(task=self.data.arbor_task, **kwargs)

    @vf.reward
    async def solved(self, runtime: Runtime) -> float:
        """The hidden verifier's reward (1.0 or 0.0)."""
        if not isinstance(runtime, ArborRuntime):
            raise vf.TaskError(f"ArborTask is graded on an ArborRuntime, not {type(runtime).__name__}")
        return await runtime.verify()

    async def validate(self, runtime: Runtime) -> bool | None:
        """Apply the gold actions on ``runtime`` (a fresh task runtime) and check they
        score 1."""
        if not isinstance(runtime, ArborRuntime) or not self.data.gold:
            return None
        for action in self.data.gold:
            if "exec" in action:
                await runtime.run(["bash", "-c", action["exec"]], {})
            elif "write" in action:
                await runtime.write(action["write"], str(action["content"]).encode())
            elif "delete" in action:
                await runtime.remove(action["delete"])
        return await runtime.verify() == 1.0
