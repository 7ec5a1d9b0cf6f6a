"""The fields the sync and async snapshot and sandbox objects share, and their decoding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar


@dataclass(frozen=True)
class SnapshotFields:
    """A stored state (the API's ``Snapshot`` object).

    Attributes:
        id: Full id (64 hex digits).
        short: Short id (12 hex digits).
        tags: The tenant's tags on it.
        backend: ``native`` or ``wasm``.
        parent: The snapshot it was taken from, or ``None`` for a root.
        created_at: Creation time (epoch seconds).
        summary: One line on how it was made.
    """

    id: str
    short: str
    tags: tuple[str, ...]
    backend: str
    parent: str | None
    created_at: int
    summary: str

    @staticmethod
    def decode(d: dict[str, Any]) -> dict[str, Any]:
        """The constructor arguments for the API's ``Snapshot`` object ``d``."""
        parent = d.get("parent")
        return {
            "id": str(d["id"]),
            "short": str(d.get("short", str(d["id"])[:12])),
            "tags": tuple(str(t) for t in d.get("tags", [])),
            "backend": str(d.get("backend", "native")),
            "parent": None if parent is None else str(parent),
            "created_at": int(d.get("created_at", 0)),
            "summary": str(d.get("summary", "")),
        }


@dataclass(eq=False)
class SandboxFields:
    """An open sandbox (the API's ``Sandbox`` object).

    Attributes:
        id: ``sb-`` and 16 hex digits.
        snapshot_id: The id of the snapshot it was opened on (the API's ``snapshot``
            field; ``snapshot`` itself is the method that takes a new snapshot).
        backend: ``native`` or ``wasm``.
        task: The task, for a task sandbox.
        created_at: Creation time (epoch seconds).
        expires_at: When its TTL ends and the server closes it (epoch seconds).
        steps: Steps taken in it, as of the last answer that described it.
    """

    id: str
    snapshot_id: str
    backend: str
    task: str | None
    created_at: float
    expires_at: float
    steps: int

    @staticmethod
    def decode(d: dict[str, Any]) -> dict[str, Any]:
        """The constructor arguments for the API's ``Sandbox`` object ``d``."""
        task = d.get("task")
        return {
            "id": str(d["id"]),
            "snapshot_id": str(d.get("snapshot", "")),
            "backend": str(d.get("backend", "native")),
            "task": None if task is None else str(task),
            "created_at": float(d.get("created_at", 0.0)),
            "expires_at": float(d.get("expires_at", 0.0)),
            "steps": int(d.get("steps", 0)),
        }

    def _update(self, d: dict[str, Any]) -> None:
        for name, value in self.decode(d).items():
            setattr(self, name, value)


S = TypeVar("S")


@dataclass(frozen=True)
class Verdict(Generic[S]):
    """What the task's hidden verifier said (``POST /v1/sandboxes/{id}/verify``).

    Attributes:
        reward: 1.0 or 0.0; ``None`` on a runtime fault.
        verdict: The verifier's full verdict.
        snapshot: The state that was graded (a ``Snapshot`` of the same client).
    """

    reward: float | None
    verdict: dict[str, Any] = field(repr=False)
    snapshot: S
