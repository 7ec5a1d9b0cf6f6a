"""Harbor integration: an Arbor sandbox as a Harbor ``BaseEnvironment``, graded by
:class:`ArborVerifier` (Harbor requires Python >= 3.12).

Harbor builds environments by import path, so no change to Harbor is needed::

    TrialEnvironmentConfig(
        import_path="arbor.adapters.harbor:ArborEnvironment",
        kwargs={"arbor_url": "unix:///run/arbor.sock", "arbor_task": "py-stats-1"},
    )
    VerifierConfig(import_path="arbor.adapters.harbor:ArborVerifier")

The sandbox comes from one of ``arbor_task`` (a task sandbox: every ``exec`` and file write
is one of the task's counted actions, graded by its hidden verifier), ``arbor_snapshot`` (a
snapshot id, prefix or tag), or else the task's ``environment/workspace/`` directory,
imported as a snapshot. Arbor builds no images: a Dockerfile is not used.

What differs from a container: commands run as the sandbox's root user in ``/workspace``
(the only persistent, writable tree; relative paths are relative to it; ``/tmp`` is fresh
per command), so Harbor's ``/logs``, ``/tests`` and ``/solution`` directories are not
available: grade with :class:`ArborVerifier` rather than a ``tests/test.sh``. The sandbox has
no network, so the task must ask for ``network_mode = "no-network"`` (a task asking for
network access is refused, as Harbor's contract requires). Beyond Harbor's interface the
environment snapshots and forks (copy-on-write) and grades (``verify``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths
from harbor.models.verifier.result import VerifierResult
from harbor.verifier.base import BaseVerifier

from ..aio import AsyncClient, AsyncSandbox, AsyncSnapshot

_ROOT_USERS = (None, "root", 0, "0")


class ArborEnvironment(BaseEnvironment):
    """A Harbor environment over one Arbor sandbox (see the module docs).

    Args:
        environment_dir, environment_name, session_id, trial_paths, task_env_config:
            As for every Harbor environment.
        arbor_url: The server (default ``$ARBOR_URL``).
        arbor_token: The bearer token (default ``$ARBOR_TOKEN``).
        arbor_task: Open a task sandbox of this task.
        arbor_snapshot: Or open a sandbox on this snapshot.
        arbor_ttl: The sandbox's TTL in seconds (default: the server's).
        network_policy: Harbor's policy (default: the task's own ``[environment]``
            policy); only ``no-network`` can be enforced.
    """

    def __init__(
        self,
        environment_dir: Path,
        environment_name: str,
        session_id: str,
        trial_paths: TrialPaths,
        task_env_config: EnvironmentConfig,
        *args: Any,
        arbor_url: str | None = None,
        arbor_token: str | None = None,
        arbor_task: str | None = None,
        arbor_snapshot: str | None = None,
        arbor_ttl: float | None = None,
        network_policy: NetworkPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        if arbor_task is not None and arbor_snapshot is not None:
            raise ValueError("give at most one of arbor_task and arbor_snapshot")
        self._url = arbor_url
        self._token = arbor_token
        self._task = arbor_task
        self._snapshot = arbor_snapshot
        self._ttl = arbor_ttl
        self._client: AsyncClient | None = None
        self._owns_client = True
        self.sandbox: AsyncSandbox | None = None
        super().__init__(
            environment_dir,
            environment_name,
            session_id,
            trial_paths,
            task_env_config,
            *args,
            network_policy=network_policy or task_env_config.resolve_baseline(),
            **kwargs,
        )

    @staticmethod
    def type() -> str:
        """The environment type."""
        return "arbor"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        """No network (and so ``no-network`` is enforced), no GPUs, no mounts."""
        return EnvironmentCapabilities(disable_internet=True)

    @property
    def workspace_dir(self) -> Path:
        """The directory imported when neither a task nor a snapshot is given."""
        return self.environment_dir / "workspace"

    def _validate_definition(self) -> None:
        if self._task is None and self._snapshot is None and not self.workspace_dir.is_dir():
            raise FileNotFoundError(
                f"{self.workspace_dir} does not exist: give arbor_task or arbor_snapshot, "
                "or put the initial files in environment/workspace/"
            )

    def _validate_network_policy_support(self) -> None:
        super()._validate_network_policy_support()
        for policy in (self._network_policy, *self._phase_network_policies):
            if policy.network_mode != NetworkMode.NO_NETWORK:
                raise ValueError(
                    f"network_mode={policy.network_mode.value!r} is not supported by the arbor "
                    "environment: its sandboxes have no network; set network_mode = 'no-network'"
                )

    @property
    def client(self) -> AsyncClient:
        """The client the environment talks through."""
        if self._client is None:
            self._client = AsyncClient(self._url, token=self._token)
        return self._client

    def _require(self) -> AsyncSandbox:
        if self.sandbox is None:
            raise RuntimeError(f"environment {self.session_id} is not started")
        return self.sandbox

    async def start(self, force_build: bool) -> None:
        """Open the sandbox (``force_build`` has no meaning: nothing is built)."""
        if self.sandbox is not None:
            return
        if self._task is not None:
            self.sandbox = await self.client.sandbox(task=self._task, ttl=self._ttl)
        else:
            ref: str | AsyncSnapshot = self._snapshot or await self.client.import_dir(self.workspace_dir)
            self.sandbox = await self.client.sandbox(ref, ttl=self._ttl)

    async def stop(self, delete: bool) -> None:
        """Close the sandbox (its snapshots stay; ``delete`` changes nothing)."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            await sandbox.close(missing_ok=True)
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a local file into the sandbox (parents created)."""
        source = Path(source_path)
        await self._require().write(target_path, source.read_bytes(), mode=source.stat().st_mode & 0o777)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy a local directory's contents into ``target_dir`` (one tar; in a task
        sandbox, one write action per file)."""
        sandbox = self._require()
        if sandbox.task is None:
            await sandbox.upload(source_dir, target_dir)
            return
        base = Path(source_dir)
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            await self.upload_file(path, f"{target_dir.rstrip('/')}/{path.relative_to(base).as_posix()}")

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a file of the sandbox to the local machine."""
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(await self._require().read(source_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a directory of the sandbox (its files) to the local machine."""
        await self._require().download(source_dir, target_dir)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run a shell command (``bash -c``) in the sandbox; output streams to Harbor's
        output callbacks when a phase has set any.

        Raises:
            ValueError: ``user`` is not root (the sandbox has one user).
        """
        effective = self._resolve_user(user)
        if effective not in _ROOT_USERS:
            raise ValueError(f"the arbor environment runs commands as root only, not {effective!r}")
        sandbox = self._require()
        merged = self._merge_env(env)
        timeout = float(timeout_sec) if timeout_sec is not None else None
        emit = self._output_callback()
        if emit is None:
            result = await sandbox.exec(command, cwd=cwd, env=merged, timeout=timeout)
        else:
            stream = sandbox.exec_stream(command, cwd=cwd, env=merged, timeout=timeout)
            async for chunk in stream:
                await emit(chunk.data, chunk.stream)
            result = stream.result
        return ExecResult(stdout=result.stdout, stderr=result.stderr, return_code=result.exit_code)

    # Beyond Harbor's interface.

    async def snapshot(self, tag: str | None = None) -> AsyncSnapshot:
        """Snapshot the sandbox (it goes on)."""
        return await self._require().snapshot(tag)

    async def fork(self, n: int, session_ids: Sequence[str] | None = None) -> list[ArborEnvironment]:
        """``n`` started environments on forks of this sandbox (a task sandbox's forks
        continue its episode), sharing this environment's client: stop them before it."""
        kids = await self._require().fork(n, ttl=self._ttl)
        names = list(session_ids or (f"{self.session_id}__fork{i}" for i in range(n)))
        envs = []
        for kid, session_id in zip(kids, names, strict=True):
            env = ArborEnvironment(
                self.environment_dir,
                self.environment_name,
                session_id,
                self.trial_paths,
                self.task_env_config,
                arbor_url=self._url,
                arbor_token=self._token,
                arbor_snapshot=kid.snapshot_id,
                arbor_ttl=self._ttl,
                network_policy=self._network_policy,
            )
            env._client, env._owns_client, env.sandbox = self.client, False, kid
            envs.append(env)
        return envs

    async def verify(self) -> float:
        """The task's hidden verifier's reward for the episode so far (task sandboxes)."""
        verdict = await self._require().verify()
        return float(verdict.reward or 0.0)


class ArborVerifier(BaseVerifier):
    """Grades an :class:`ArborEnvironment`'s task episode with the task's hidden verifier
    (outside the sandbox); the reward is ``{"reward": 1.0 or 0.0}``."""

    async def verify(self) -> VerifierResult:
        """Run the task's verifier on the episode."""
        if not isinstance(self.environment, ArborEnvironment):
            raise TypeError(f"ArborVerifier grades an ArborEnvironment, not {type(self.environment).__name__}")
        return VerifierResult(rewards={"reward": await self.environment.verify()})
