"""The plain records of the API (``server/API.md``, "Objects" and "Routes").

These carry data only; the objects bound to a client (``Snapshot``, ``Sandbox`` and their
async twins) live in :mod:`arbor.client` and :mod:`arbor.aio`. Every ``from_json`` keeps the
fields it knows and ignores the rest, so a newer server's extra fields do no harm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class ExecResult:
    """How a command ended.

    Attributes:
        exit_code: The shell-style code (124 timeout, 125 disk or memory limit, 128+N signal N).
        stdout: Standard output (UTF-8, invalid bytes replaced, capped by the runtime).
        stderr: Standard error (likewise).
        duration_s: Wall-clock duration.
        timed_out: Whether the timeout ended it.
        outcome: The backend's label of the outcome (``0``, ``timeout``, ``signal 9``, ...).
        killed_background: Command lines of background processes killed when it ended.
        egress: Connections through the egress proxy (sandboxes opened with ``allow_hosts``),
            each ``{"method", "host", "port", "allowed", "reason", "bytes_out", "bytes_in"}``.
    """

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    outcome: str
    killed_background: list[str] = field(default_factory=list)
    egress: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ExecResult:
        """Decode the API's ``ExecResult`` object."""
        return cls(
            exit_code=int(d["exit_code"]),
            stdout=str(d.get("stdout", "")),
            stderr=str(d.get("stderr", "")),
            duration_s=float(d.get("duration_s", 0.0)),
            timed_out=bool(d.get("timed_out", False)),
            outcome=str(d.get("outcome", "")),
            killed_background=[str(x) for x in d.get("killed_background", [])],
            egress=[dict(x) for x in d.get("egress", [])],
        )

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0


@dataclass(frozen=True)
class ExecChunk:
    """A piece of a streamed command's output, in the order the command wrote it.

    Attributes:
        stream: ``"stdout"`` or ``"stderr"``.
        data: The text (never splits a UTF-8 character).
    """

    stream: Literal["stdout", "stderr"]
    data: str


@dataclass(frozen=True)
class DirEntry:
    """One entry of a directory listing.

    Attributes:
        name: The file name.
        kind: ``file``, ``dir``, ``symlink`` or ``other``.
        size: Size in bytes (files).
    """

    name: str
    kind: str
    size: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DirEntry:
        """Decode one ``entries`` item."""
        return cls(name=str(d["name"]), kind=str(d["kind"]), size=int(d.get("size", 0)))


@dataclass(frozen=True)
class StepResult:
    """What one task action observed (``POST /v1/sandboxes/{id}/step``).

    Attributes:
        observation: The whole observation as text (what a text policy reads).
        output: The action's own output.
        exit_code: Its shell-style exit code (``None`` after a submit).
        step: Actions taken so far in the episode.
        done: Whether the episode is over (submitted, or out of steps).
    """

    observation: str
    output: str
    exit_code: int | None
    step: int
    done: bool

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StepResult:
        """Decode a step answer."""
        code = d.get("exit_code")
        return cls(
            observation=str(d.get("observation", "")),
            output=str(d.get("output", "")),
            exit_code=None if code is None else int(code),
            step=int(d.get("step", 0)),
            done=bool(d.get("done", False)),
        )


@dataclass(frozen=True)
class LogEntry:
    """One snapshot of a chain (``GET /v1/snapshots/{ref}/log``).

    Attributes:
        id: The snapshot's id.
        summary: How it was made.
        exits: The shell-style exit codes of its recorded steps.
        created_at: Creation time (epoch seconds).
    """

    id: str
    summary: str
    exits: list[int]
    created_at: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LogEntry:
        """Decode one ``entries`` item."""
        return cls(
            id=str(d["id"]),
            summary=str(d.get("summary", "")),
            exits=[int(x) for x in d.get("exits", [])],
            created_at=int(d.get("created_at", 0)),
        )


@dataclass(frozen=True)
class Diff:
    """How two states' workspaces differ (``GET /v1/snapshots/{ref}/diff``).

    Attributes:
        added: Paths only in the second state.
        modified: Paths in both that differ.
        deleted: Paths only in the first.
    """

    added: list[str]
    modified: list[str]
    deleted: list[str]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Diff:
        """Decode a diff answer."""
        return cls(
            added=[str(p) for p in d.get("added", [])],
            modified=[str(p) for p in d.get("modified", [])],
            deleted=[str(p) for p in d.get("deleted", [])],
        )

    def __bool__(self) -> bool:
        return bool(self.added or self.modified or self.deleted)


@dataclass(frozen=True)
class ReplayResult:
    """What a replay found (``POST /v1/snapshots/{ref}/replay``).

    Attributes:
        identical: Whether every replayed observation matched its record.
        actions: Actions executed.
        divergence: The first divergent step, or ``None``.
        report: The whole report.
    """

    identical: bool
    actions: int
    divergence: dict[str, Any] | None
    report: dict[str, Any]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReplayResult:
        """Decode a replay answer."""
        return cls(
            identical=bool(d["identical"]),
            actions=int(d.get("actions", 0)),
            divergence=d.get("divergence"),
            report=dict(d.get("report") or {}),
        )


@dataclass(frozen=True)
class TaskSummary:
    """A bundled task, as listed by ``GET /v1/tasks``.

    Attributes:
        id: Its id.
        family: ``coding``, ``terminal``, ``upstream`` or ``interpreter``.
        backend: ``native`` or ``wasm``.
        group: Its family of variants.
        difficulty: ``easy``, ``medium`` or ``hard``.
        split: The split it is in, if any.
        candidates: How many candidate actions it offers.
        max_steps: Actions per episode.
    """

    id: str
    family: str
    backend: str
    group: str
    difficulty: str
    split: str | None
    candidates: int
    max_steps: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskSummary:
        """Decode one ``tasks`` item."""
        return cls(
            id=str(d["id"]),
            family=str(d.get("family", "")),
            backend=str(d.get("backend", "native")),
            group=str(d.get("group", "")),
            difficulty=str(d.get("difficulty", "")),
            split=_opt_str(d.get("split")),
            candidates=int(d.get("candidates", 0)),
            max_steps=int(d.get("max_steps", 0)),
        )


@dataclass(frozen=True)
class TaskDetail:
    """One task in full (``GET /v1/tasks/{id}``).

    Attributes:
        id: Its id.
        family: Its family.
        backend: ``native`` or ``wasm``.
        group: Its group.
        difficulty: Its difficulty.
        split: Its split, if any.
        instructions: What the agent is asked to do.
        limits: Steps, per-action and total time limits (``max_steps``, ...).
        candidates: Candidate actions (task action JSON).
        gold: A known solution (task action JSON), in order.
    """

    id: str
    family: str
    backend: str
    group: str
    difficulty: str
    split: str | None
    instructions: str
    limits: dict[str, Any]
    candidates: list[dict[str, Any]]
    gold: list[dict[str, Any]]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskDetail:
        """Decode a task answer."""
        return cls(
            id=str(d["id"]),
            family=str(d.get("family", "")),
            backend=str(d.get("backend", "native")),
            group=str(d.get("group", "")),
            difficulty=str(d.get("difficulty", "")),
            split=_opt_str(d.get("split")),
            instructions=str(d.get("instructions", "")),
            limits=dict(d.get("limits") or {}),
            candidates=[dict(a) for a in d.get("candidates", [])],
            gold=[dict(a) for a in d.get("gold", [])],
        )

    @property
    def max_steps(self) -> int:
        """Actions per episode (``limits.max_steps``; 0 if the server did not say)."""
        return int(self.limits.get("max_steps", 0))


@dataclass(frozen=True)
class Health:
    """``GET /v1/health``.

    Attributes:
        status: ``ok``, or ``stopping`` during shutdown.
        version: The server's version.
        sandboxes_live: Sandboxes open now.
        backends: Backends this build serves.
    """

    status: str
    version: str
    sandboxes_live: int
    backends: list[str]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Health:
        """Decode a health answer."""
        return cls(
            status=str(d["status"]),
            version=str(d.get("version", "")),
            sandboxes_live=int(d.get("sandboxes_live", 0)),
            backends=[str(b) for b in d.get("backends", [])],
        )


@dataclass(frozen=True)
class RolloutProgress:
    """A ``progress`` line of a rollout: the tree so far."""

    actions: int
    verifier_runs: int
    forks: int
    leaves: int


@dataclass(frozen=True)
class RolloutRecord:
    """A ``record`` line of a rollout: one edge's advantage record, as the server sent it."""

    record: dict[str, Any]


@dataclass(frozen=True)
class RolloutDone:
    """The final ``done`` line of a rollout: the tree's summary."""

    tree: dict[str, Any]


RolloutEvent = RolloutProgress | RolloutRecord | RolloutDone
"""One item of :meth:`arbor.Client.rollout`'s iterator."""
