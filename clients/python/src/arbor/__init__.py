"""Arbor's Python client: copy-on-write sandboxes, snapshots and forks for LLM agents.

``arbor.Client`` (sync, over httpx) and ``arbor.AsyncClient`` (async) talk to an
``arbor serve``; ``Client.local()`` starts a private one. The HTTP contract is
``server/API.md`` of the Arbor repository.

    import arbor
    with arbor.Client.local() as c:
        base = c.import_dir("./project", tag="base")
        with c.sandbox(base) as sb:
            print(sb.exec("python3 -m unittest -q").exit_code)
            kids = sb.fork(4)
"""

from ._objects import Verdict
from .aio import AsyncClient, AsyncExecStream, AsyncForks, AsyncSandbox, AsyncSnapshot
from .client import Client, ExecStream, Forks, Sandbox, Snapshot
from .errors import (
    ArborError,
    BadRequest,
    Conflict,
    LimitExceeded,
    NotFound,
    ServerError,
    Timeout,
    Unauthorized,
)
from .local import LocalServer
from .types import (
    Diff,
    DirEntry,
    ExecChunk,
    ExecResult,
    Health,
    LogEntry,
    ReplayResult,
    RolloutDone,
    RolloutEvent,
    RolloutProgress,
    RolloutRecord,
    StepResult,
    TaskDetail,
    TaskSummary,
)

__version__ = "0.1.0"

__all__ = [
    "ArborError",
    "AsyncClient",
    "AsyncExecStream",
    "AsyncForks",
    "AsyncSandbox",
    "AsyncSnapshot",
    "BadRequest",
    "Client",
    "Conflict",
    "Diff",
    "DirEntry",
    "ExecChunk",
    "ExecResult",
    "ExecStream",
    "Forks",
    "Health",
    "LimitExceeded",
    "LocalServer",
    "LogEntry",
    "NotFound",
    "ReplayResult",
    "RolloutDone",
    "RolloutEvent",
    "RolloutProgress",
    "RolloutRecord",
    "Sandbox",
    "ServerError",
    "Snapshot",
    "StepResult",
    "TaskDetail",
    "TaskSummary",
    "Timeout",
    "Unauthorized",
    "Verdict",
]
