"""The asynchronous client, over ``httpx.AsyncClient``: the surface of :mod:`arbor.client`
with awaitable methods.

``exec_stream`` and ``rollout`` are not awaited: they return async iterators
(``async for chunk in sb.exec_stream(...)``).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
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


async def _chunks_off_thread(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A blocking chunk iterator (a tar of local files) read on a worker thread."""
    done = object()
    while True:
        chunk = await asyncio.to_thread(next, chunks, done)
        if chunk is done:
            return
        yield chunk  # type: ignore[misc]


@dataclass(frozen=True)
class AsyncSnapshot(SnapshotFields):
    """A stored state of this client's tenant (the async twin of :class:`arbor.Snapshot`).

    Attributes:
        client: The client it came from.
    """

    client: AsyncClient = field(kw_only=True, repr=False, compare=False)

    async def fork(self, n: int, *, ttl: float | None = None) -> AsyncForks:
        """Open ``n`` sandboxes on this state."""
        return await self.client.fork(self, n, ttl=ttl)

    async def sandbox(self, *, ttl: float | None = None) -> AsyncSandbox:
        """Open one sandbox on this state."""
        return await self.client.sandbox(self, ttl=ttl)

    async def tag(self, tag: str) -> AsyncSnapshot:
        """Put (or move) the tenant's tag ``tag`` on this state; returns it, re-read."""
        return await self.client.tag(self, tag)

    async def delete(self) -> None:
        """Unlist this state and drop the tenant's tags on it."""
        await self.client.delete_snapshot(self)

    async def log(self) -> list[LogEntry]:
        """This state's chain, root first."""
        return await self.client.log(self)

    async def diff(self, to: AsyncSnapshot | str) -> Diff:
        """How the workspace of ``to`` differs from this one's."""
        return await self.client.diff(self, to)

    async def replay(self, *, strict: bool = False) -> ReplayResult:
        """Re-run this state's recorded actions and compare the observations."""
        return await self.client.replay(self, strict=strict)

    async def refresh(self) -> AsyncSnapshot:
        """This state as the server describes it now."""
        return await self.client.get_snapshot(self.id)


class AsyncForks(list["AsyncSandbox"]):
    """The sandboxes a fork opened (a list), with the snapshot they were opened on.

    Attributes:
        snapshot: The state every sandbox in the list started from.
    """

    def __init__(self, sandboxes: list[AsyncSandbox], snapshot: AsyncSnapshot) -> None:
        super().__init__(sandboxes)
        self.snapshot = snapshot

    async def close(self) -> None:
        """Close every sandbox (those already gone are skipped)."""
        await asyncio.gather(*(sb.close(missing_ok=True) for sb in self))

    async def __aenter__(self) -> AsyncForks:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class AsyncExecStream:
    """A command's output as it is written: ``async for`` it for :class:`ExecChunk` items;
    when the loop is over, :attr:`result` is the :class:`ExecResult`. As
    :class:`arbor.ExecStream`, over an async connection."""

    def __init__(self, client: AsyncClient, req: _api.Req) -> None:
        self._client = client
        self._req = req
        self._it: AsyncGenerator[ExecChunk, None] | None = None
        self._result: ExecResult | None = None

    def __aiter__(self) -> AsyncIterator[ExecChunk]:
        if self._it is not None:
            raise RuntimeError("an AsyncExecStream is iterated once")
        self._it = self._events()
        return self._it

    async def _events(self) -> AsyncGenerator[ExecChunk, None]:
        async with self._client._stream(self._req) as resp:
            async for line in resp.aiter_lines():
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
            raise RuntimeError("the stream has not ended: iterate it to the end (or await wait())")
        return self._result

    async def wait(self) -> ExecResult:
        """Read the rest of the stream (its chunks are dropped) and return the result."""
        it = self.__aiter__() if self._it is None else self._it
        async for _ in it:
            pass
        return self.result

    async def aclose(self) -> None:
        """Drop the connection if the stream is still open."""
        if self._it is not None:
            await self._it.aclose()

    async def __aenter__(self) -> AsyncExecStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@dataclass(eq=False)
class AsyncSandbox(SandboxFields):
    """An open sandbox (the async twin of :class:`arbor.Sandbox`); ``async with`` closes it.

    Attributes:
        client: The client it came from.
    """

    client: AsyncClient = field(kw_only=True, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    async def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a command (see :meth:`arbor.Sandbox.exec`)."""
        body = _api.exec_body(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        return ExecResult.from_json(await self.client._json(_api.exec_req(self.id, body, stream=False)))

    def exec_stream(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> AsyncExecStream:
        """Run a command and stream its output (not awaited: ``async for chunk in ...``;
        then ``.result``)."""
        body = _api.exec_body(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        return AsyncExecStream(self.client, _api.exec_req(self.id, body, stream=True))

    async def step(self, action: Mapping[str, Any] | str) -> StepResult:
        """Take one of the task's actions (see :meth:`arbor.Sandbox.step`)."""
        return StepResult.from_json(await self.client._json(_api.step(self.id, action)))

    async def verify(self) -> Verdict[AsyncSnapshot]:
        """Grade the episode so far with the task's hidden verifier."""
        d = await self.client._json(_api.verify(self.id))
        return Verdict(
            reward=d.get("reward"), verdict=dict(d.get("verdict") or {}), snapshot=self.client._snapshot(d["snapshot"])
        )

    async def read(self, path: str) -> bytes:
        """A file's bytes."""
        return (await self.client._send(_api.read_file(self.id, path))).content

    async def write(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        """Write a file (parents created); text is sent as UTF-8."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        await self.client._send(_api.write_file(self.id, path, raw, mode))

    async def remove(self, path: str) -> None:
        """Delete a file or symlink."""
        await self.client._send(_api.remove_file(self.id, path))

    async def listdir(self, path: str = ".") -> list[DirEntry]:
        """A directory's entries, sorted by name."""
        d = await self.client._json(_api.listdir(self.id, path))
        return [DirEntry.from_json(e) for e in d.get("entries", [])]

    async def upload(self, local_dir: str | os.PathLike[str], path: str = ".") -> int:
        """Copy a local directory's contents into ``path`` (a streamed tar)."""
        d = await self.client._json(_api.upload(self.id, path, _tar.tar_chunks(local_dir)))
        return int(d.get("files", 0))

    async def download(self, path: str, local_dir: str | os.PathLike[str]) -> list[Path]:
        """Copy the directory ``path`` into ``local_dir``; returns the local paths written."""
        with tempfile.SpooledTemporaryFile(max_size=8 << 20) as spool:
            async with self.client._stream(_api.download(self.id, path)) as resp:
                async for chunk in resp.aiter_bytes():
                    spool.write(chunk)
            spool.seek(0)
            return await asyncio.to_thread(_tar.extract, spool, local_dir)

    async def snapshot(self, tag: str | None = None) -> AsyncSnapshot:
        """Snapshot the sandbox (it goes on from the new state)."""
        return self.client._snapshot(await self.client._json(_api.snapshot_sandbox(self.id, tag)))

    async def fork(self, n: int, *, ttl: float | None = None) -> AsyncForks:
        """Snapshot the sandbox and open ``n`` sandboxes on that snapshot."""
        d = await self.client._json(_api.fork_sandbox(self.id, n, ttl))
        return AsyncForks([self.client._sandbox(s) for s in d["sandboxes"]], self.client._snapshot(d["snapshot"]))

    async def refresh(self) -> AsyncSandbox:
        """Re-read the sandbox's description in place."""
        self._update(await self.client._json(_api.get_sandbox(self.id)))
        return self

    async def close(self, *, missing_ok: bool = False) -> None:
        """Close the sandbox (see :meth:`arbor.Sandbox.close`)."""
        if self._closed:
            return
        try:
            await self.client._send(_api.close_sandbox(self.id))
        except NotFound:
            if not missing_ok:
                raise
        self._closed = True

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close(missing_ok=True)


class AsyncClient:
    """A connection to an ``arbor serve`` over ``httpx.AsyncClient`` (arguments as for
    :class:`arbor.Client`). Use ``async with``, or ``await close()``."""

    def __init__(self, url: str | None = None, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self._config = ClientConfig(url, token, timeout)
        transport = httpx.AsyncHTTPTransport(uds=self._config.uds) if self._config.uds else None
        self._http = httpx.AsyncClient(
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
    ) -> AsyncClient:
        """Start a private ``arbor serve`` (see :meth:`arbor.Client.local`; the start
        itself blocks) and connect to it; ``close()`` stops it."""
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

    @staticmethod
    def _content(req: _api.Req) -> bytes | AsyncIterator[bytes] | None:
        if req.content is None or isinstance(req.content, bytes):
            return req.content
        chunks: Iterable[bytes] = req.content
        return _chunks_off_thread(iter(chunks))

    async def _send(self, req: _api.Req) -> httpx.Response:
        with translate_errors(req):
            resp = await self._http.request(
                req.method,
                req.path,
                params=req.params,
                json=req.json,
                content=self._content(req),
                headers=req.headers(),
                timeout=self._config.timeout_for(req),
            )
        if resp.status_code >= 400:
            raise error_from_response(resp.status_code, resp.headers, resp.content)
        return resp

    async def _json(self, req: _api.Req) -> Any:
        return _api.decode_json((await self._send(req)).content)

    @asynccontextmanager
    async def _stream(self, req: _api.Req) -> AsyncIterator[httpx.Response]:
        with translate_errors(req):
            async with self._http.stream(
                req.method,
                req.path,
                params=req.params,
                json=req.json,
                content=self._content(req),
                headers=req.headers(),
                timeout=self._config.timeout_for(req),
            ) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise error_from_response(resp.status_code, resp.headers, resp.content)
                yield resp

    def _snapshot(self, d: dict[str, Any]) -> AsyncSnapshot:
        return AsyncSnapshot(**SnapshotFields.decode(d), client=self)

    def _sandbox(self, d: dict[str, Any]) -> AsyncSandbox:
        return AsyncSandbox(**SandboxFields.decode(d), client=self)

    # Server.

    async def health(self) -> Health:
        """``GET /v1/health``."""
        return Health.from_json(await self._json(_api.health()))

    async def metrics(self) -> str:
        """The Prometheus text of ``GET /v1/metrics``."""
        return (await self._send(_api.metrics())).text

    # Snapshots.

    async def import_dir(self, path: str | os.PathLike[str], *, tag: str | None = None) -> AsyncSnapshot:
        """Import a local directory as a snapshot (tarred here and streamed)."""
        return self._snapshot(await self._json(_api.import_dir(_tar.tar_chunks(path), tag)))

    async def snapshots(self) -> list[AsyncSnapshot]:
        """The tenant's snapshots, newest first."""
        return [self._snapshot(s) for s in (await self._json(_api.list_snapshots()))["snapshots"]]

    async def get_snapshot(self, ref: AsyncSnapshot | str) -> AsyncSnapshot:
        """A snapshot by id, unique prefix or tag."""
        return self._snapshot(await self._json(_api.get_snapshot(ref)))

    async def tag(self, ref: AsyncSnapshot | str, tag: str) -> AsyncSnapshot:
        """Create or move the tenant's tag ``tag`` onto ``ref``."""
        return self._snapshot(await self._json(_api.tag(ref, tag)))

    async def delete_snapshot(self, ref: AsyncSnapshot | str) -> None:
        """Unlist a snapshot and delete the tenant's tags on it."""
        await self._send(_api.delete_snapshot(ref))

    async def fork(self, ref: AsyncSnapshot | str, n: int, *, ttl: float | None = None) -> AsyncForks:
        """Open ``n`` sandboxes on a snapshot."""
        snapshot = ref if isinstance(ref, AsyncSnapshot) else await self.get_snapshot(ref)
        d = await self._json(_api.fork_snapshot(snapshot, n, ttl))
        return AsyncForks([self._sandbox(s) for s in d["sandboxes"]], snapshot)

    async def log(self, ref: AsyncSnapshot | str) -> list[LogEntry]:
        """A snapshot's chain, root first."""
        return [LogEntry.from_json(e) for e in (await self._json(_api.log(ref)))["entries"]]

    async def diff(self, a: AsyncSnapshot | str, b: AsyncSnapshot | str) -> Diff:
        """How the workspace of ``b`` differs from ``a``'s."""
        return Diff.from_json(await self._json(_api.diff(a, b)))

    async def replay(self, ref: AsyncSnapshot | str, *, strict: bool = False) -> ReplayResult:
        """Re-run a snapshot's recorded actions and compare the observations."""
        return ReplayResult.from_json(await self._json(_api.replay(ref, strict)))

    # Sandboxes.

    async def sandbox(
        self,
        snapshot: AsyncSnapshot | str | None = None,
        *,
        task: str | None = None,
        ttl: float | None = None,
        allow_hosts: Sequence[str] = (),
    ) -> AsyncSandbox:
        """Open a sandbox on a snapshot or a task (see :meth:`arbor.Client.sandbox`)."""
        return self._sandbox(await self._json(_api.create_sandbox(snapshot, task, ttl, allow_hosts)))

    async def sandboxes(self) -> list[AsyncSandbox]:
        """The tenant's open sandboxes."""
        return [self._sandbox(s) for s in (await self._json(_api.list_sandboxes()))["sandboxes"]]

    async def get_sandbox(self, sandbox_id: str) -> AsyncSandbox:
        """An open sandbox by id."""
        return self._sandbox(await self._json(_api.get_sandbox(sandbox_id)))

    # Tasks and rollouts.

    async def tasks(self) -> list[TaskSummary]:
        """The server's tasks, sorted by id."""
        return [TaskSummary.from_json(t) for t in (await self._json(_api.tasks()))["tasks"]]

    async def task(self, task_id: str) -> TaskDetail:
        """One task in full."""
        return TaskDetail.from_json(await self._json(_api.task(task_id)))

    async def rollout(
        self, *, task: str, budget: int, strategy: str = "uniform:2:2", policy: str = "random", seed: int = 0
    ) -> AsyncIterator[RolloutEvent]:
        """Grow a rollout tree and iterate its stream (not awaited: ``async for``; see
        :meth:`arbor.Client.rollout`)."""
        async with self._stream(_api.rollout(task, budget, strategy, policy, seed)) as resp:
            async for line in resp.aiter_lines():
                event = _api.ndjson(line)
                if event is not None:
                    yield _api.rollout_event(event)

    # Lifetime.

    async def close(self) -> None:
        """Close the connection (and stop the server :meth:`local` started)."""
        await self._http.aclose()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
            self.server = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"
