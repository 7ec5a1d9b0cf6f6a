"""The synchronous client, over ``httpx.Client``.

:class:`Client` talks to an ``arbor serve`` (``server/API.md``); the :class:`Snapshot` and
:class:`Sandbox` objects it returns hold a reference to it, so ``snap.fork(8)`` and
``sb.exec("make")`` work directly. :mod:`arbor.aio` is the same surface over
``httpx.AsyncClient``; both build their requests and decode their answers with
:mod:`arbor._api`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from . import _api, _tar
from ._base import DEFAULT_TIMEOUT_S, ClientConfig, translate_errors
from ._objects import SandboxFields, SnapshotFields, Verdict
from .errors import ArborError, NotFound, error_from_response
from .local import LocalServer
from .types import (
    Diff,
    DirEntry,
    ExecChunk,
    ExecResult,
    Health,
    LogEntry,
    ReplayResult,
    RolloutEvent,
    StepResult,
    TaskDetail,
    TaskSummary,
)


@dataclass(frozen=True)
class Snapshot(SnapshotFields):
    """A stored state of this client's tenant; its methods are the snapshot routes.

    Attributes:
        client: The client it came from.
    """

    client: Client = field(kw_only=True, repr=False, compare=False)

    def fork(self, n: int, *, ttl: float | None = None) -> Forks:
        """Open ``n`` sandboxes on this state (``POST /v1/snapshots/{ref}/fork``)."""
        return self.client.fork(self, n, ttl=ttl)

    def sandbox(self, *, ttl: float | None = None) -> Sandbox:
        """Open one sandbox on this state."""
        return self.client.sandbox(self, ttl=ttl)

    def tag(self, tag: str) -> Snapshot:
        """Put (or move) the tenant's tag ``tag`` on this state; returns it, re-read."""
        return self.client.tag(self, tag)

    def delete(self) -> None:
        """Unlist this state and drop the tenant's tags on it."""
        self.client.delete_snapshot(self)

    def log(self) -> list[LogEntry]:
        """This state's chain, root first."""
        return self.client.log(self)

    def diff(self, to: Snapshot | str) -> Diff:
        """How the workspace of ``to`` differs from this one's."""
        return self.client.diff(self, to)

    def replay(self, *, strict: bool = False) -> ReplayResult:
        """Re-run this state's recorded actions and compare the observations."""
        return self.client.replay(self, strict=strict)

    def refresh(self) -> Snapshot:
        """This state as the server describes it now (its tags may have moved)."""
        return self.client.get_snapshot(self.id)


class Forks(list["Sandbox"]):
    """The sandboxes a fork opened (a list), with the snapshot they were opened on.

    Attributes:
        snapshot: The state every sandbox in the list started from.
    """

    def __init__(self, sandboxes: list[Sandbox], snapshot: Snapshot) -> None:
        super().__init__(sandboxes)
        self.snapshot = snapshot

    def close(self) -> None:
        """Close every sandbox (those already gone are skipped)."""
        for sb in self:
            sb.close(missing_ok=True)

    def __enter__(self) -> Forks:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class ExecStream:
    """A command's output as it is written: iterate it for :class:`ExecChunk` items.

    The request is sent when iteration starts; the iterator yields only chunks, and when
    it is exhausted :attr:`result` holds the command's :class:`ExecResult` (its ``stdout``
    and ``stderr`` are the concatenation of the chunks, as capped by the runtime). Leaving
    the loop early, or :meth:`close`, drops the connection (the command runs on; the
    sandbox is its owner's to close). A stream is iterated once.
    """

    def __init__(self, client: Client, req: _api.Req) -> None:
        self._client = client
        self._req = req
        self._it: Generator[ExecChunk, None, None] | None = None
        self._result: ExecResult | None = None

    def __iter__(self) -> Iterator[ExecChunk]:
        if self._it is not None:
            raise RuntimeError("an ExecStream is iterated once")
        self._it = self._events()
        return self._it

    def _events(self) -> Generator[ExecChunk, None, None]:
        with self._client._stream(self._req) as resp:
            for line in resp.iter_lines():
                event = _api.ndjson(line)
                if event is None:
                    continue
                item = _api.exec_event(event)
                if isinstance(item, ExecResult):
                    self._result = item
                    return
                yield item
        raise ArborError("the exec stream ended without a result", code="protocol")

    @property
    def result(self) -> ExecResult:
        """How the command ended (available once the iteration is over)."""
        if self._result is None:
            raise RuntimeError("the stream has not ended: iterate it to the end (or call wait())")
        return self._result

    def wait(self) -> ExecResult:
        """Read the rest of the stream (its chunks are dropped) and return the result."""
        for _ in self if self._it is None else self._it:
            pass
        return self.result

    def close(self) -> None:
        """Drop the connection if the stream is still open."""
        if self._it is not None:
            self._it.close()

    def __enter__(self) -> ExecStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass(eq=False)
class Sandbox(SandboxFields):
    """An open sandbox of this client's tenant; its methods are the sandbox routes.

    Use it as a context manager to close it on exit.

    Attributes:
        client: The client it came from.
    """

    client: Client = field(kw_only=True, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a command; a failing, crashing or timed-out one is a result, not an error.

        Args:
            command: A shell string (run by ``bash -c``) or an argv (quoted word by word).
            timeout: Wall-clock limit in seconds (server default 60).
            cwd: Working directory, relative to ``/workspace`` or absolute inside it.
            env: Variables for this command only.
            stdin: Standard input (text, or bytes sent as base64).
        """
        body = _api.exec_body(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        return ExecResult.from_json(self.client._json(_api.exec_req(self.id, body, stream=False)))

    def exec_stream(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecStream:
        """Run a command and stream its output: ``for chunk in sb.exec_stream(...)`` yields
        :class:`ExecChunk` items; afterwards the stream's ``.result`` is the
        :class:`ExecResult`. Arguments as for :meth:`exec`."""
        body = _api.exec_body(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        return ExecStream(self.client, _api.exec_req(self.id, body, stream=True))

    def step(self, action: Mapping[str, Any] | str) -> StepResult:
        """Take one of the task's actions (task sandboxes): ``{"exec": "ls"}``,
        ``{"write": "a.py", "content": "..."}``, ``{"delete": "a.py"}``, ``{"submit": True}``,
        as a mapping or its JSON text."""
        return StepResult.from_json(self.client._json(_api.step(self.id, action)))

    def verify(self) -> Verdict[Snapshot]:
        """Grade the episode so far with the task's hidden verifier (task sandboxes)."""
        d = self.client._json(_api.verify(self.id))
        return Verdict(
            reward=d.get("reward"), verdict=dict(d.get("verdict") or {}), snapshot=self.client._snapshot(d["snapshot"])
        )

    def read(self, path: str) -> bytes:
        """A file's bytes."""
        return self.client._send(_api.read_file(self.id, path)).content

    def write(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        """Write a file (parents created); text is sent as UTF-8. ``mode``: permission bits
        (default 0o644)."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        self.client._send(_api.write_file(self.id, path, raw, mode))

    def remove(self, path: str) -> None:
        """Delete a file or symlink."""
        self.client._send(_api.remove_file(self.id, path))

    def listdir(self, path: str = ".") -> list[DirEntry]:
        """A directory's entries, sorted by name (``"."``: the workspace root)."""
        d = self.client._json(_api.listdir(self.id, path))
        return [DirEntry.from_json(e) for e in d.get("entries", [])]

    def upload(self, local_dir: str | os.PathLike[str], path: str = ".") -> int:
        """Copy a local directory's contents into ``path`` (streamed as a tar); returns the
        number of files and symlinks written."""
        d = self.client._json(_api.upload(self.id, path, _tar.tar_chunks(local_dir)))
        return int(d.get("files", 0))

    def download(self, path: str, local_dir: str | os.PathLike[str]) -> list[Path]:
        """Copy the directory ``path`` (its files; the server leaves symlinks out) into
        ``local_dir``; returns the local paths written."""
        with tempfile.SpooledTemporaryFile(max_size=8 << 20) as spool:
            with self.client._stream(_api.download(self.id, path)) as resp:
                for chunk in resp.iter_bytes():
                    spool.write(chunk)
            spool.seek(0)
            return _tar.extract(spool, local_dir)

    def snapshot(self, tag: str | None = None) -> Snapshot:
        """Snapshot the sandbox (it goes on from the new state), optionally tagging it."""
        return self.client._snapshot(self.client._json(_api.snapshot_sandbox(self.id, tag)))

    def fork(self, n: int, *, ttl: float | None = None) -> Forks:
        """Snapshot the sandbox, then open ``n`` sandboxes on that snapshot (a task
        sandbox's forks continue its episode); the sandbox itself goes on."""
        d = self.client._json(_api.fork_sandbox(self.id, n, ttl))
        return Forks([self.client._sandbox(s) for s in d["sandboxes"]], self.client._snapshot(d["snapshot"]))

    def refresh(self) -> Sandbox:
        """Re-read the sandbox's description (``steps``, ``expires_at``) in place."""
        self._update(self.client._json(_api.get_sandbox(self.id)))
        return self

    def close(self, *, missing_ok: bool = False) -> None:
        """Close the sandbox: its processes and mounts end. A second call is a no-op.

        Args:
            missing_ok: Treat a sandbox the server no longer has (expired, already
                closed) as closed instead of raising :class:`NotFound`.
        """
        if self._closed:
            return
        try:
            self.client._send(_api.close_sandbox(self.id))
        except NotFound:
            if not missing_ok:
                raise
        self._closed = True

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(missing_ok=True)


class Client:
    """A connection to an ``arbor serve``.

    Args:
        url: ``http://HOST:PORT``, ``https://...`` or ``unix:///path/to.sock`` (default
            ``$ARBOR_URL``).
        token: The bearer token of a multi-tenant server (default ``$ARBOR_TOKEN``).
        timeout: Seconds to wait for an answer (an exec waits its own timeout plus 30 s;
            verify, replay and rollout streams wait as long as they take).

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, url: str | None = None, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self._config = ClientConfig(url, token, timeout)
        transport = httpx.HTTPTransport(uds=self._config.uds) if self._config.uds else None
        self._http = httpx.Client(
            base_url=self._config.base_url,
            transport=transport,
            headers=self._config.headers,
            timeout=self._config.timeout,
        )
        self.server: LocalServer | None = None

    @classmethod
    def local(
        cls,
        home: str | os.PathLike[str] | None = None,
        *,
        binary: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> Client:
        """Start a private ``arbor serve --unix <tmp socket>`` and connect to it; closing
        the client stops the server (SIGTERM, then a wait).

        Args:
            home: The store directory (default ``$ARBOR_HOME``, else the CLI's default).
            binary: The ``arbor`` executable (default ``$ARBOR_BIN``, else ``arbor`` on PATH).
            args: More ``arbor serve`` flags.
            timeout: As for :class:`Client`.
        """
        server = LocalServer(binary=binary, home=home, args=args).start()
        try:
            client = cls(server.url, timeout=timeout)
        except BaseException:
            server.stop()
            raise
        client.server = server
        return client

    @property
    def url(self) -> str:
        """The server's address."""
        return self._config.url

    # Transport.

    def _send(self, req: _api.Req) -> httpx.Response:
        with translate_errors(req):
            resp = self._http.request(
                req.method,
                req.path,
                params=req.params,
                json=req.json,
                content=req.content,
                headers=req.headers(),
                timeout=self._config.timeout_for(req),
            )
        if resp.status_code >= 400:
            raise error_from_response(resp.status_code, resp.headers, resp.content)
        return resp

    def _json(self, req: _api.Req) -> Any:
        return _api.decode_json(self._send(req).content)

    @contextmanager
    def _stream(self, req: _api.Req) -> Iterator[httpx.Response]:
        with (
            translate_errors(req),
            self._http.stream(
                req.method,
                req.path,
                params=req.params,
                json=req.json,
                content=req.content,
                headers=req.headers(),
                timeout=self._config.timeout_for(req),
            ) as resp,
        ):
            if resp.status_code >= 400:
                resp.read()
                raise error_from_response(resp.status_code, resp.headers, resp.content)
            yield resp

    def _snapshot(self, d: dict[str, Any]) -> Snapshot:
        return Snapshot(**SnapshotFields.decode(d), client=self)

    def _sandbox(self, d: dict[str, Any]) -> Sandbox:
        return Sandbox(**SandboxFields.decode(d), client=self)

    # Server.

    def health(self) -> Health:
        """``GET /v1/health``."""
        return Health.from_json(self._json(_api.health()))

    def metrics(self) -> str:
        """The Prometheus text of ``GET /v1/metrics``."""
        return self._send(_api.metrics()).text

    # Snapshots.

    def import_dir(self, path: str | os.PathLike[str], *, tag: str | None = None) -> Snapshot:
        """Import a local directory as a snapshot (tarred here and streamed), optionally
        tagging it."""
        return self._snapshot(self._json(_api.import_dir(_tar.tar_chunks(path), tag)))

    def snapshots(self) -> list[Snapshot]:
        """The tenant's snapshots, newest first."""
        return [self._snapshot(s) for s in self._json(_api.list_snapshots())["snapshots"]]

    def get_snapshot(self, ref: Snapshot | str) -> Snapshot:
        """A snapshot by id, unique prefix (at least 4 hex digits) or tag."""
        return self._snapshot(self._json(_api.get_snapshot(ref)))

    def tag(self, ref: Snapshot | str, tag: str) -> Snapshot:
        """Create or move the tenant's tag ``tag`` onto ``ref``."""
        return self._snapshot(self._json(_api.tag(ref, tag)))

    def delete_snapshot(self, ref: Snapshot | str) -> None:
        """Unlist a snapshot and delete the tenant's tags on it (the data stays until gc)."""
        self._send(_api.delete_snapshot(ref))

    def fork(self, ref: Snapshot | str, n: int, *, ttl: float | None = None) -> Forks:
        """Open ``n`` sandboxes on a snapshot (whether or not any sandbox on it is open)."""
        snapshot = ref if isinstance(ref, Snapshot) else self.get_snapshot(ref)
        d = self._json(_api.fork_snapshot(snapshot, n, ttl))
        return Forks([self._sandbox(s) for s in d["sandboxes"]], snapshot)

    def log(self, ref: Snapshot | str) -> list[LogEntry]:
        """A snapshot's chain, root first."""
        return [LogEntry.from_json(e) for e in self._json(_api.log(ref))["entries"]]

    def diff(self, a: Snapshot | str, b: Snapshot | str) -> Diff:
        """How the workspace of ``b`` differs from ``a``'s."""
        return Diff.from_json(self._json(_api.diff(a, b)))

    def replay(self, ref: Snapshot | str, *, strict: bool = False) -> ReplayResult:
        """Re-run a snapshot's recorded actions from its root and compare the observations
        (``strict``: stop at the first divergent step)."""
        return ReplayResult.from_json(self._json(_api.replay(ref, strict)))

    # Sandboxes.

    def sandbox(
        self,
        snapshot: Snapshot | str | None = None,
        *,
        task: str | None = None,
        ttl: float | None = None,
        allow_hosts: Sequence[str] = (),
    ) -> Sandbox:
        """Open a sandbox on a snapshot (object, id, prefix or tag) or on a task's start.

        Args:
            snapshot: The state to open.
            task: Or a task id: a task sandbox, whose steps are counted and verified.
            ttl: Seconds until the server closes it (default: the server's ``--ttl``).
            allow_hosts: Host names the sandbox may reach through Arbor's egress proxy
                (``HTTP(S)_PROXY`` is set inside); without them it has loopback only.
        """
        return self._sandbox(self._json(_api.create_sandbox(snapshot, task, ttl, allow_hosts)))

    def sandboxes(self) -> list[Sandbox]:
        """The tenant's open sandboxes."""
        return [self._sandbox(s) for s in self._json(_api.list_sandboxes())["sandboxes"]]

    def get_sandbox(self, sandbox_id: str) -> Sandbox:
        """An open sandbox by id."""
        return self._sandbox(self._json(_api.get_sandbox(sandbox_id)))

    # Tasks and rollouts.

    def tasks(self) -> list[TaskSummary]:
        """The server's tasks, sorted by id."""
        return [TaskSummary.from_json(t) for t in self._json(_api.tasks())["tasks"]]

    def task(self, task_id: str) -> TaskDetail:
        """One task in full (instructions, limits, candidate and gold actions)."""
        return TaskDetail.from_json(self._json(_api.task(task_id)))

    def rollout(
        self, *, task: str, budget: int, strategy: str = "uniform:2:2", policy: str = "random", seed: int = 0
    ) -> Iterator[RolloutEvent]:
        """Grow a rollout tree on the server and iterate its stream: ``RolloutProgress``
        while the tree grows, a ``RolloutRecord`` per edge, then one ``RolloutDone``.

        Args:
            task: The task id.
            budget: Actions plus verifier runs to spend (1 to 5000).
            strategy: ``uniform:W:K``, ``entropy:...`` (as ``arbor rollout --strategy``).
            policy: ``random``, ``gold``, ``mixture`` or ``mixture:P``.
            seed: The seed.
        """
        with self._stream(_api.rollout(task, budget, strategy, policy, seed)) as resp:
            for line in resp.iter_lines():
                event = _api.ndjson(line)
                if event is not None:
                    yield _api.rollout_event(event)

    # Lifetime.

    def close(self) -> None:
        """Close the connection (and stop the server :meth:`local` started)."""
        self._http.close()
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"
