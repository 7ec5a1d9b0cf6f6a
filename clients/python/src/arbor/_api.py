"""The API without I/O: every route as a request description, and the decoding of answers.

:class:`arbor.Client` (over ``httpx.Client``) and :class:`arbor.AsyncClient` (over
``httpx.AsyncClient``) both send these :class:`Req` values and decode with these functions,
so the two differ only in how they wait.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from .errors import ArborError, ServerError
from .types import (
    ExecChunk,
    ExecResult,
    RolloutDone,
    RolloutEvent,
    RolloutProgress,
    RolloutRecord,
)

EXEC_GRACE_S: Final = 30.0
"""Seconds the client waits past an exec's own timeout before it gives up on the answer."""

DEFAULT_EXEC_TIMEOUT_S: Final = 60.0
"""The server's default exec timeout (``timeout_s``), used to size the client's wait."""


class _Default:
    """The client's configured timeout (a sentinel distinct from ``None``, "no timeout")."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default()


@dataclass(frozen=True)
class Req:
    """One request: what the clients hand to httpx.

    Attributes:
        method: The HTTP method.
        path: The path below the base URL, already quoted.
        params: Query parameters.
        json: A JSON body.
        content: A raw body (bytes, or an iterable of chunks for a streamed upload).
        content_type: The raw body's ``Content-Type``.
        read_timeout: Seconds to wait for the answer (``None``: forever; ``DEFAULT``: the
            client's timeout).
    """

    method: str
    path: str
    params: Mapping[str, str | int] | None = None
    json: Any = None
    content: bytes | Iterable[bytes] | None = None
    content_type: str | None = None
    read_timeout: float | _Default | None = field(default=DEFAULT)

    def headers(self) -> dict[str, str]:
        """The request's own headers."""
        return {"Content-Type": self.content_type} if self.content_type else {}


def seg(value: str) -> str:
    """One path segment, percent-quoted (ids, refs and tags never contain ``/``)."""
    return quote(value, safe="")


def snapshot_ref(ref: object) -> str:
    """The reference the routes take: a snapshot object's id, or a string as given."""
    ident = getattr(ref, "id", ref)
    if not isinstance(ident, str):
        raise TypeError(f"a snapshot reference is an id, prefix, tag or Snapshot, not {ref!r}")
    return ident


def exec_body(
    command: str | Sequence[str],
    *,
    timeout: float | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    stdin: str | bytes | None,
) -> dict[str, Any]:
    """The body of an exec: a string is a shell ``command``, a sequence an ``argv``."""
    body: dict[str, Any]
    if isinstance(command, str):
        body = {"command": command}
    else:
        argv = list(command)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise TypeError("an argv is a non-empty sequence of strings")
        body = {"argv": argv}
    if timeout is not None:
        body["timeout_s"] = timeout
    if cwd is not None:
        body["cwd"] = cwd
    if env is not None:
        body["env"] = dict(env)
    if isinstance(stdin, bytes):
        body["stdin_b64"] = base64.b64encode(stdin).decode("ascii")
    elif stdin is not None:
        body["stdin"] = stdin
    return body


def exec_req(sandbox_id: str, body: dict[str, Any], *, stream: bool) -> Req:
    """``POST /v1/sandboxes/{id}/exec`` (or ``/exec/stream``), waiting past its timeout."""
    wait = float(body.get("timeout_s", DEFAULT_EXEC_TIMEOUT_S)) + EXEC_GRACE_S
    suffix = "/exec/stream" if stream else "/exec"
    return Req("POST", f"/v1/sandboxes/{seg(sandbox_id)}{suffix}", json=body, read_timeout=wait)


def fork_body(n: int, ttl: float | None) -> dict[str, Any]:
    """The body of a fork."""
    body: dict[str, Any] = {"n": n}
    if ttl is not None:
        body["ttl_s"] = ttl
    return body


def create_sandbox_body(
    snapshot: object | None, task: str | None, ttl: float | None, allow_hosts: Sequence[str] = ()
) -> dict[str, Any]:
    """The body of ``POST /v1/sandboxes``: exactly one of a snapshot and a task."""
    if (snapshot is None) == (task is None):
        raise TypeError("give exactly one of a snapshot (id, prefix, tag or Snapshot) and task=")
    if isinstance(allow_hosts, str):
        raise TypeError("allow_hosts is a list of host names, not one string")
    body: dict[str, Any] = {"task": task} if task is not None else {"snapshot": snapshot_ref(snapshot)}
    if ttl is not None:
        body["ttl_s"] = ttl
    if allow_hosts:
        body["allow_hosts"] = list(allow_hosts)
    return body


def step_body(action: Mapping[str, Any] | str) -> dict[str, Any]:
    """The body of a step: the task's action JSON, as a mapping or its JSON text."""
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except ValueError as e:
            raise ValueError(f"an action is a JSON object: {e}") from None
    if not isinstance(action, Mapping):
        raise ValueError(f"an action is a JSON object, not {type(action).__name__}")
    return {"action": dict(action)}


def rollout_body(task: str, budget: int, strategy: str, policy: str, seed: int) -> dict[str, Any]:
    """The body of ``POST /v1/rollouts``."""
    return {"task": task, "budget": budget, "strategy": strategy, "policy": policy, "seed": seed}


def ndjson(line: str) -> dict[str, Any] | None:
    """One NDJSON line as an object (``None`` for a blank line)."""
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except ValueError as e:
        raise ArborError(f"a stream line is not JSON: {line[:200]!r} ({e})", code="protocol") from None
    if not isinstance(value, dict):
        raise ArborError(f"a stream line is not an object: {line[:200]!r}", code="protocol")
    return value


def stream_error(event: Mapping[str, Any]) -> ArborError:
    """The error an ``{"type": "error"}`` line carries (a fault after the 200 was sent)."""
    detail = event.get("error") or {}
    return ServerError(
        str(detail.get("message", "the stream ended with an error")),
        status=None,
        code=str(detail.get("code", "internal")),
    )


def exec_event(event: Mapping[str, Any]) -> ExecChunk | ExecResult:
    """An exec stream line: a chunk, or the final result; an error line raises."""
    kind = event.get("type")
    if kind in ("stdout", "stderr"):
        return ExecChunk(stream=kind, data=str(event.get("data", "")))
    if kind == "exit":
        return ExecResult.from_json(event["result"])
    if kind == "error":
        raise stream_error(event)
    raise ArborError(f"unknown exec stream line type {kind!r}", code="protocol")


def rollout_event(event: Mapping[str, Any]) -> RolloutEvent:
    """A rollout stream line; an error line raises."""
    kind = event.get("type")
    if kind == "progress":
        return RolloutProgress(
            actions=int(event.get("actions", 0)),
            verifier_runs=int(event.get("verifier_runs", 0)),
            forks=int(event.get("forks", 0)),
            leaves=int(event.get("leaves", 0)),
        )
    if kind == "record":
        return RolloutRecord(record=dict(event.get("record") or {}))
    if kind == "done":
        return RolloutDone(tree=dict(event.get("tree") or {}))
    if kind == "error":
        raise stream_error(event)
    raise ArborError(f"unknown rollout stream line type {kind!r}", code="protocol")


def decode_json(body: bytes) -> Any:
    """A JSON answer's value."""
    try:
        return json.loads(body)
    except ValueError as e:
        raise ArborError(f"the answer is not JSON: {body[:200]!r} ({e})", code="protocol") from None


def parse_base_url(url: str) -> tuple[str, str | None]:
    """Split a server address into httpx's base URL and a Unix socket path.

    ``unix:///path/to.sock`` (or ``unix:/path``) talks HTTP over that socket;
    ``http://`` and ``https://`` URLs are used as they are.
    """
    if url.startswith("unix:"):
        path = url[len("unix:") :]
        if path.startswith("//"):
            path = path[2:]
        if not path.startswith("/"):
            raise ValueError(f"a unix: address names an absolute socket path: {url!r}")
        return "http://arbor", path
    if url.startswith(("http://", "https://")):
        return url.rstrip("/"), None
    raise ValueError(f"a server address is http://, https:// or unix:///path, not {url!r}")


# The routes, in server/API.md's order.


def health() -> Req:
    """``GET /v1/health``."""
    return Req("GET", "/v1/health")


def metrics() -> Req:
    """``GET /v1/metrics``."""
    return Req("GET", "/v1/metrics")


def import_dir(chunks: Iterable[bytes], tag: str | None) -> Req:
    """``POST /v1/snapshots?tag=T`` with a tar stream."""
    params = {"tag": tag} if tag is not None else None
    return Req("POST", "/v1/snapshots", params=params, content=chunks, content_type="application/x-tar")


def list_snapshots() -> Req:
    """``GET /v1/snapshots``."""
    return Req("GET", "/v1/snapshots")


def get_snapshot(ref: object) -> Req:
    """``GET /v1/snapshots/{ref}``."""
    return Req("GET", f"/v1/snapshots/{seg(snapshot_ref(ref))}")


def tag(ref: object, name: str) -> Req:
    """``PUT /v1/snapshots/{ref}/tags/{tag}``."""
    return Req("PUT", f"/v1/snapshots/{seg(snapshot_ref(ref))}/tags/{seg(name)}")


def delete_snapshot(ref: object) -> Req:
    """``DELETE /v1/snapshots/{ref}``."""
    return Req("DELETE", f"/v1/snapshots/{seg(snapshot_ref(ref))}")


def fork_snapshot(ref: object, n: int, ttl: float | None) -> Req:
    """``POST /v1/snapshots/{ref}/fork``."""
    return Req("POST", f"/v1/snapshots/{seg(snapshot_ref(ref))}/fork", json=fork_body(n, ttl))


def log(ref: object) -> Req:
    """``GET /v1/snapshots/{ref}/log``."""
    return Req("GET", f"/v1/snapshots/{seg(snapshot_ref(ref))}/log")


def diff(a: object, b: object) -> Req:
    """``GET /v1/snapshots/{a}/diff?to=b``."""
    return Req("GET", f"/v1/snapshots/{seg(snapshot_ref(a))}/diff", params={"to": snapshot_ref(b)})


def replay(ref: object, strict: bool) -> Req:
    """``POST /v1/snapshots/{ref}/replay``; a replay re-runs the chain, so it waits long."""
    return Req("POST", f"/v1/snapshots/{seg(snapshot_ref(ref))}/replay", json={"strict": strict}, read_timeout=None)


def create_sandbox(
    snapshot: object | None, task: str | None, ttl: float | None, allow_hosts: Sequence[str] = ()
) -> Req:
    """``POST /v1/sandboxes``."""
    return Req("POST", "/v1/sandboxes", json=create_sandbox_body(snapshot, task, ttl, allow_hosts))


def list_sandboxes() -> Req:
    """``GET /v1/sandboxes``."""
    return Req("GET", "/v1/sandboxes")


def get_sandbox(sandbox_id: str) -> Req:
    """``GET /v1/sandboxes/{id}``."""
    return Req("GET", f"/v1/sandboxes/{seg(sandbox_id)}")


def close_sandbox(sandbox_id: str) -> Req:
    """``DELETE /v1/sandboxes/{id}``."""
    return Req("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}")


def step(sandbox_id: str, action: Mapping[str, Any] | str) -> Req:
    """``POST /v1/sandboxes/{id}/step``."""
    return Req("POST", f"/v1/sandboxes/{seg(sandbox_id)}/step", json=step_body(action))


def verify(sandbox_id: str) -> Req:
    """``POST /v1/sandboxes/{id}/verify``; the hidden checks may take minutes."""
    return Req("POST", f"/v1/sandboxes/{seg(sandbox_id)}/verify", read_timeout=None)


def read_file(sandbox_id: str, path: str) -> Req:
    """``GET /v1/sandboxes/{id}/files?path=P``."""
    return Req("GET", f"/v1/sandboxes/{seg(sandbox_id)}/files", params={"path": path})


def write_file(sandbox_id: str, path: str, data: bytes, mode: int | None) -> Req:
    """``PUT /v1/sandboxes/{id}/files?path=P&mode=M``."""
    params: dict[str, str | int] = {"path": path}
    if mode is not None:
        params["mode"] = mode
    return Req(
        "PUT",
        f"/v1/sandboxes/{seg(sandbox_id)}/files",
        params=params,
        content=data,
        content_type="application/octet-stream",
    )


def remove_file(sandbox_id: str, path: str) -> Req:
    """``DELETE /v1/sandboxes/{id}/files?path=P``."""
    return Req("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}/files", params={"path": path})


def listdir(sandbox_id: str, path: str) -> Req:
    """``GET /v1/sandboxes/{id}/dir?path=P``."""
    return Req("GET", f"/v1/sandboxes/{seg(sandbox_id)}/dir", params={"path": path})


def upload(sandbox_id: str, path: str, chunks: Iterable[bytes]) -> Req:
    """``PUT /v1/sandboxes/{id}/archive?path=DIR`` with a tar stream."""
    return Req(
        "PUT",
        f"/v1/sandboxes/{seg(sandbox_id)}/archive",
        params={"path": path},
        content=chunks,
        content_type="application/x-tar",
    )


def download(sandbox_id: str, path: str) -> Req:
    """``GET /v1/sandboxes/{id}/archive?path=DIR``."""
    return Req("GET", f"/v1/sandboxes/{seg(sandbox_id)}/archive", params={"path": path})


def snapshot_sandbox(sandbox_id: str, tag_name: str | None) -> Req:
    """``POST /v1/sandboxes/{id}/snapshot``."""
    body = {"tag": tag_name} if tag_name is not None else {}
    return Req("POST", f"/v1/sandboxes/{seg(sandbox_id)}/snapshot", json=body)


def fork_sandbox(sandbox_id: str, n: int, ttl: float | None) -> Req:
    """``POST /v1/sandboxes/{id}/fork``."""
    return Req("POST", f"/v1/sandboxes/{seg(sandbox_id)}/fork", json=fork_body(n, ttl))


def tasks() -> Req:
    """``GET /v1/tasks``."""
    return Req("GET", "/v1/tasks")


def task(task_id: str) -> Req:
    """``GET /v1/tasks/{id}``."""
    return Req("GET", f"/v1/tasks/{seg(task_id)}")


def rollout(task_id: str, budget: int, strategy: str, policy: str, seed: int) -> Req:
    """``POST /v1/rollouts`` (an NDJSON stream; its lines may be far apart)."""
    return Req("POST", "/v1/rollouts", json=rollout_body(task_id, budget, strategy, policy, seed), read_timeout=None)
