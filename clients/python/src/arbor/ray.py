"""Arbor on Ray: one node actor per Ray node, and a fleet that grows rollout trees across them.

A Ray node offers Arbor when it is started with the custom resource ``arbor_slots``
(``ray start --resources '{"arbor_slots": 8}'``): its value is how many expansions that
node runs at once. :class:`RolloutFleet` places one :class:`ArborNode` actor on each such
node (node affinity, not a scheduler of Arbor's own); the actor runs that node's
``arbor serve`` on a Unix socket over the node's own store and speaks the HTTP API to it.

Sandboxes are handles ``(node, id)``. A tree node's state is an open task sandbox on the
Arbor node that computed it, so its expansion is a fork there (copy-on-write is local).
A snapshot that another node needs travels as a bundle (``arbor bundle export`` /
``import``) through Ray's object store (:meth:`RolloutFleet.move`).

    import ray, arbor.ray
    ray.init(address="auto")
    fleet = arbor.ray.RolloutFleet(home="/var/lib/arbor", max_inflight=64)
    for record in fleet.run(["py-stats-1", "git-ops-2"], budget=2_000, strategy="uniform:2:2"):
        trainer.feed(record)          # one advantage record per branch edge, once per tree
    print(fleet.stats)

Faults: when a node dies (its actor is gone), only the paths that lived there are lost:
the open sandboxes it held and the expansions in flight on it. Each is re-run on a live
node from its last durable state. That state is the task's start (every node's store has
the task) plus the path's action chain, which the driver holds and the node replays
(episodes are deterministic: ``arbor replay`` proves a chain). The records say so: an
edge whose target state was lost and rebuilt names the node in ``rebuilt_on``; an edge
run by an expansion that first rebuilt its source state has ``rerun`` true. A tree's records are emitted once, when all of its leaves are
graded, so a fault never duplicates or withdraws an emitted record.

Ray is imported when a fleet is made, so ``import arbor`` does not need it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .client import Client, Sandbox
from .errors import ArborError
from .local import LocalServer, find_binary

SLOTS = "arbor_slots"
"""The custom resource that marks a Ray node as an Arbor node (its value: concurrent expansions)."""

RECORD_SCHEMA = "arbor.fleet-record/1"
"""The ``schema`` of the fleet's advantage records."""

Action = dict[str, Any]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ArborError("arbor.ray needs Ray (pip install ray)", code="missing_dependency") from None
    return ray


class ArborNode:
    """What runs on one Ray node: its ``arbor serve`` and the calls the fleet makes to it.

    Made by :class:`RolloutFleet` as a Ray actor; usable directly (tests, tools) as a plain
    object too.

    Args:
        name: The Ray node id it serves.
        slots: Concurrent expansions (the node's ``arbor_slots``).
        home: This node's store directory (made if missing).
        binary: The ``arbor`` executable.
        tasks: The task suite (default: the bundled one).
        server_args: More ``arbor serve`` flags.
    """

    def __init__(
        self,
        name: str,
        slots: int,
        home: str,
        binary: str,
        tasks: str | None = None,
        server_args: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.slots = slots
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.binary = binary
        args = ["--tasks", tasks] if tasks else []
        self.server = LocalServer(
            binary=binary, home=self.home, args=[*args, *server_args], die_with_parent=True
        ).start()
        self.client = Client(self.server.url)

    def info(self) -> dict[str, Any]:
        """Who this is: ``node``, ``slots``, ``home``, ``pid``, ``server_pid``."""
        return {
            "node": self.name,
            "slots": self.slots,
            "home": str(self.home),
            "pid": os.getpid(),
            "server_pid": self.server.pid,
        }

    def task(self, task_id: str) -> dict[str, Any]:
        """A task's ``candidates``, ``gold`` and ``max_steps``."""
        detail = self.client.task(task_id)
        return {
            "candidates": detail.candidates,
            "gold": detail.gold,
            "max_steps": int(detail.limits.get("max_steps", len(detail.gold))),
        }

    def expand(
        self,
        task: str,
        sandbox: str | None,
        chain: Sequence[Action],
        segments: Sequence[tuple[Sequence[Action], bool]],
    ) -> dict[str, Any]:
        """Fork a tree node's state into one child per segment and run each segment.

        Args:
            task: The task.
            sandbox: The open task sandbox holding the node's state on this Arbor node, or
                ``None``: rebuild it from the task's start by replaying ``chain``.
            chain: The actions from the task's start to the node.
            segments: Per child, its actions and whether it ends in a leaf (graded).

        Returns:
            ``state`` (the node's snapshot), ``children`` (per child: ``sandbox`` left open,
            or ``reward`` and ``snapshot`` of a graded leaf; ``steps``, ``done``),
            ``replayed`` (actions replayed to rebuild the state), ``seconds``.
        """
        t0 = time.perf_counter()
        replayed = 0
        if sandbox is None:
            parent = self.client.sandbox(task=task)
            try:
                for action in chain:
                    parent.step(action)
                    replayed += 1
            except BaseException:
                parent.close(missing_ok=True)
                raise
        else:
            parent = self.client.get_sandbox(sandbox)
        try:
            forks = parent.fork(len(segments))
        finally:
            parent.close(missing_ok=True)
        children: list[dict[str, Any]] = []
        try:
            for child, (actions, leaf) in zip(forks, segments, strict=True):
                children.append(self._run_segment(child, actions, leaf))
        except BaseException:
            forks.close()
            raise
        return {
            "node": self.name,
            "state": forks.snapshot.id,
            "children": children,
            "replayed": replayed,
            "seconds": time.perf_counter() - t0,
        }

    @staticmethod
    def _run_segment(child: Sandbox, actions: Sequence[Action], leaf: bool) -> dict[str, Any]:
        steps, done = 0, False
        for action in actions:
            steps += 1
            if child.step(action).done:
                done = True
                break
        if not (leaf or done):
            return {"sandbox": child.id, "steps": steps, "done": False}
        verdict = child.verify()
        child.close(missing_ok=True)
        return {"reward": verdict.reward, "snapshot": verdict.snapshot.id, "steps": steps, "done": True}

    def grade_chain(self, task: str, chain: Sequence[Action]) -> float | None:
        """Replay an action chain from the task's start in a fresh sandbox and grade it."""
        sb = self.client.sandbox(task=task)
        try:
            for action in chain:
                if sb.step(action).done:
                    break
            return sb.verify().reward
        finally:
            sb.close(missing_ok=True)

    def import_dir(self, path: str, tag: str | None = None) -> str:
        """Import a directory as a snapshot; its id."""
        return self.client.import_dir(path, tag=tag).id

    def exec(self, snapshot: str, command: str) -> tuple[int, str]:
        """Run a command in a fresh sandbox on a snapshot: ``(exit_code, stdout)``."""
        with self.client.sandbox(snapshot) as sb:
            result = sb.exec(command)
            return result.exit_code, result.stdout

    def _cli(self, *args: str, stdin: bytes | None = None) -> bytes:
        proc = subprocess.run(
            [self.binary, "--home", str(self.home), *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise ArborError(
                f"arbor {' '.join(args[:2])} on node {self.name} failed ({proc.returncode}): "
                f"{proc.stderr.decode(errors='replace').strip()}",
                code="bundle",
            )
        return proc.stdout

    def export_bundle(self, snapshots: Sequence[str], since: Sequence[str] = ()) -> bytes:
        """``arbor bundle export SNAP... --out -`` on this node's store: the bundle's bytes."""
        extra = [a for base in since for a in ("--since", base)]
        return self._cli("bundle", "export", *snapshots, "--out", "-", *extra)

    def import_bundle(self, bundle: bytes) -> str:
        """``arbor bundle import -`` on this node's store (every byte verified): its summary."""
        return self._cli("bundle", "import", "-", stdin=bundle).decode(errors="replace").strip()

    def stop(self) -> None:
        """Stop this node's server (its sandboxes close)."""
        self.client.close()
        self.server.stop()


def parse_strategy(strategy: str) -> tuple[int, int]:
    """``uniform:B:D`` (branch ``B`` ways at each of the first ``D`` steps) as ``(B, D)``."""
    parts = strategy.split(":")
    try:
        if len(parts) == 3 and parts[0] == "uniform":
            branch, depth = int(parts[1]), int(parts[2])
            if 1 <= branch <= 64 and 1 <= depth <= 16:
                return branch, depth
    except ValueError:
        pass
    raise ValueError(f"a fleet strategy is uniform:B:D with 1 <= B <= 64 and 1 <= D <= 16, not {strategy!r}")


@dataclass(eq=False)
class _Node:
    """One state in a tree (a node of the tree, not a Ray node)."""

    tree: _Tree
    path: tuple[int, ...]
    chain: list[Action]
    segment: list[Action] = field(default_factory=list)
    offered: list[Action] = field(default_factory=list)
    chosen: int | None = None
    log_prob: float = 0.0
    ends: bool = False
    holder: str | None = None
    sandbox: str | None = None
    state: str | None = None
    reward: float | None = None
    leaf: bool = False
    ran_on: str | None = None
    rerun: int = 0
    replayed_source: bool = False
    rebuilt_on: str | None = None
    children: list[_Node] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.path)

    def value(self) -> float:
        """Mean reward of the graded leaves below (a missing reward counts 0)."""
        if self.leaf:
            return float(self.reward or 0.0)
        return sum(c.value() for c in self.children) / len(self.children)

    def leaves(self) -> int:
        return 1 if self.leaf else sum(c.leaves() for c in self.children)


@dataclass(eq=False)
class _Tree:
    task: str
    seed: int
    detail: dict[str, Any]
    tree_id: str
    horizon: int
    root: _Node = field(init=False)
    open: int = 1

    def __post_init__(self) -> None:
        self.root = _Node(tree=self, path=(), chain=[])


def _key(action: Action) -> str:
    return json.dumps(action, sort_keys=True)


class RolloutFleet:
    """Branched rollout trees for many tasks across the Arbor nodes of a Ray cluster.

    Args:
        home: Each node's store: a directory on that node (``{node}`` in it is replaced by
            the Ray node id, for clusters whose nodes share a disk, as on one test machine).
        binary: The ``arbor`` executable on the nodes (default: ``$ARBOR_BIN``, else PATH).
        tasks: The task suite on the nodes (default: the bundled one).
        max_inflight: The cluster-wide cap on expansions in flight (default: the sum of the
            nodes' ``arbor_slots``).
        gold_p: The behaviour policy: the task's reference action with this probability,
            else uniform over the offered actions (the candidates and the reference one).
        server_args: More ``arbor serve`` flags for every node.
        progress: Show a progress bar (tqdm, when installed) while trees grow.
    """

    def __init__(
        self,
        home: str,
        *,
        binary: str | None = None,
        tasks: str | None = None,
        max_inflight: int | None = None,
        gold_p: float = 0.5,
        server_args: Sequence[str] = (),
        progress: bool = False,
    ) -> None:
        ray = _ray()
        if not ray.is_initialized():
            raise ArborError("ray.init() first: the fleet runs on the connected Ray cluster", code="ray")
        if not 0.0 <= gold_p <= 1.0:
            raise ValueError(f"gold_p is a probability, not {gold_p}")
        self._ray = ray
        self.gold_p = gold_p
        self.progress = progress
        self._binary = find_binary(binary)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = ray.remote(ArborNode)
        self.nodes: dict[str, Any] = {}
        self.slots: dict[str, int] = {}
        for node in ray.nodes():
            slots = int(node.get("Resources", {}).get(SLOTS, 0))
            if not node.get("Alive") or slots < 1:
                continue
            name = node["NodeID"]
            self.nodes[name] = actor.options(
                num_cpus=0,
                resources={SLOTS: 0.001},
                max_concurrency=slots + 4,
                max_restarts=0,
                max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(name, soft=False),
            ).remote(name, slots, home.replace("{node}", name[:16]), self._binary, tasks, list(server_args))
            self.slots[name] = slots
        if not self.nodes:
            raise ArborError(
                f"no live Ray node offers the {SLOTS!r} resource (ray start --resources '{{\"{SLOTS}\": N}}')",
                code="ray",
            )
        self.info = dict(zip(self.nodes, ray.get([a.info.remote() for a in self.nodes.values()]), strict=True))
        self.max_inflight = max_inflight or sum(self.slots.values())
        if self.max_inflight < 1:
            raise ValueError(f"max_inflight is at least 1, not {self.max_inflight}")
        self.dead: set[str] = set()
        self.stats: dict[str, Any] = {}
        self.trees: list[_Tree] = []
        self._details: dict[str, dict[str, Any]] = {}
        self.on_expansion: Callable[[dict[str, Any]], None] | None = None

    # Nodes.

    def live(self) -> list[str]:
        """The Arbor nodes still alive (as far as the fleet has seen)."""
        return [n for n in self.nodes if n not in self.dead]

    def node(self, name: str) -> Any:
        """The actor handle of an Arbor node."""
        return self.nodes[name]

    def move(self, snapshot: str, src: str, dst: str, since: Sequence[str] = ()) -> str:
        """Copy a snapshot's closure from one node's store to another's as a bundle through
        Ray's object store (``since``: bases the destination already has, left out).

        Returns:
            The destination's import summary.
        """
        bundle = self.nodes[src].export_bundle.remote([snapshot], list(since))
        return self._ray.get(self.nodes[dst].import_bundle.remote(bundle))

    def shutdown(self) -> None:
        """Stop every live node's server and its actor."""
        for name in self.live():
            try:
                self._ray.get(self.nodes[name].stop.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - a node that is already gone has nothing to stop
                pass
            self._ray.kill(self.nodes[name])
        self.dead.update(self.nodes)

    def __enter__(self) -> RolloutFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # Trees.

    def _detail(self, task: str) -> dict[str, Any]:
        if task not in self._details:
            self._details[task] = self._ray.get(self.nodes[self.live()[0]].task.remote(task))
        return self._details[task]

    def _choose(self, tree: _Tree, path: tuple[int, ...], depth: int) -> tuple[Action, list[Action], int, float]:
        """The behaviour policy at a state: the action, the offered set, its index, log μ."""
        gold: list[Action] = tree.detail["gold"]
        offered: list[Action] = []
        keys: list[str] = []
        for a in [*tree.detail["candidates"], *([gold[depth]] if depth < len(gold) else [])]:
            if _key(a) not in keys:
                keys.append(_key(a))
                offered.append(a)
        digest = hashlib.sha256(f"{tree.tree_id}:{path}:{depth}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        has_gold = depth < len(gold)
        action = gold[depth] if has_gold and rng.random() < self.gold_p else rng.choice(offered)
        index = keys.index(_key(action))
        p_gold = self.gold_p if has_gold and _key(action) == _key(gold[depth]) else 0.0
        mu = p_gold + (1.0 - (self.gold_p if has_gold else 0.0)) / len(offered)
        return action, offered, index, math.log(mu)

    def _plan(self, node: _Node, branch: int, depth: int) -> list[tuple[list[Action], bool]]:
        """Make ``node``'s children (their actions) and return the segments to run."""
        horizon = node.tree.horizon
        for c in range(branch):
            path = (*node.path, c)
            action, offered, index, log_mu = self._choose(node.tree, path, node.depth)
            ends = len(path) >= min(depth, horizon)
            segment = [action]
            if ends:
                segment += [self._choose(node.tree, path, d)[0] for d in range(len(path), horizon)]
            child = _Node(
                tree=node.tree,
                path=path,
                chain=[*node.chain, action],
                segment=segment,
                offered=offered,
                chosen=index,
                log_prob=log_mu,
                ends=ends,
            )
            node.children.append(child)
        return [(c.segment, c.ends) for c in node.children]

    def run(
        self,
        tasks: Sequence[str],
        budget: int,
        *,
        strategy: str = "uniform:2:2",
        seed: int = 0,
        trees_per_task: int = 1,
        export: str | os.PathLike[str] | IO[str] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Grow trees and yield their advantage records, each tree's once it is graded.

        Args:
            tasks: Task ids; each gets ``trees_per_task`` trees (seeds ``seed``, ``seed+1``...).
            budget: The global budget in actions: trees are started in order while the whole
                of the next one fits (re-run actions after a fault are counted apart).
            strategy: ``uniform:B:D``; past depth ``D`` each path runs to the task's horizon
                (its reference solution's length) and is graded.
            seed: The first tree seed.
            trees_per_task: Trees per task.
            export: Also append each record as a JSON line to this file (flushed per tree).

        Yields:
            Records (``schema`` :data:`RECORD_SCHEMA`), one per branch edge.
        """
        branch, depth = parse_strategy(strategy)
        if budget < 1:
            raise ValueError(f"the budget is at least 1 action, not {budget}")
        trees: list[_Tree] = []
        spent = 0
        skipped: list[str] = []
        for t in range(trees_per_task):
            for task in tasks:
                detail = self._detail(task)
                horizon = min(len(detail["gold"]), detail["max_steps"])
                if horizon < 1:
                    raise ArborError(f"task {task!r} has no reference solution to set a horizon", code="task")
                d = min(depth, horizon)
                cost = sum(branch**k for k in range(1, d + 1)) + branch**d * (horizon - d)
                if spent + cost > budget:
                    skipped.append(f"{task}#{seed + t}")
                    continue
                spent += cost
                tid = hashlib.sha256(f"{task}:{seed + t}:{strategy}:{self.gold_p}".encode()).hexdigest()[:16]
                trees.append(_Tree(task=task, seed=seed + t, detail=detail, tree_id=tid, horizon=horizon))
        if not trees:
            raise ArborError(f"the budget of {budget} actions does not cover one tree", code="budget")
        self.trees = trees
        self.stats = {
            "trees": len(trees),
            "skipped": skipped,
            "budget": budget,
            "planned_actions": spent,
            "actions": 0,
            "replayed_actions": 0,
            "forks": 0,
            "expansions": 0,
            "reruns": 0,
            "lost_nodes": [],
            "records": 0,
            "per_node": {n: 0 for n in self.nodes},
        }
        sink: IO[str] | None = None
        owned = False
        if export is not None:
            if hasattr(export, "write"):
                sink = export  # type: ignore[assignment]
            else:
                sink, owned = open(export, "a", encoding="utf-8"), True  # noqa: SIM115
        bar = _progress(self.progress, spent)
        t0 = time.perf_counter()
        try:
            yield from self._grow(trees, branch, depth, sink, bar)
        finally:
            self.stats["seconds"] = time.perf_counter() - t0
            if bar is not None:
                bar.close()
            if owned and sink is not None:
                sink.close()

    def _grow(self, trees: list[_Tree], branch: int, depth: int, sink: IO[str] | None, bar: Any) -> Iterator[dict[str, Any]]:
        ray = self._ray
        queue: deque[_Node] = deque(t.root for t in trees)
        inflight: dict[Any, tuple[_Node, str]] = {}
        load = {n: 0 for n in self.nodes}
        while queue or inflight:
            # Place what can run: a node's expansion goes to the node holding its state;
            # a state nobody holds (a root, or one lost with its node) to the least loaded.
            waiting: deque[_Node] = deque()
            while queue and len(inflight) < self.max_inflight:
                tnode = queue.popleft()
                target = tnode.holder
                if target is None or target in self.dead:
                    free = [n for n in self.live() if load[n] < self.slots[n]]
                    target = min(free, key=lambda n: load[n]) if free else None
                    tnode.holder, tnode.sandbox = None, None
                if target is None or load[target] >= self.slots[target]:
                    waiting.append(tnode)
                    continue
                tree = tnode.tree
                if not tnode.children:
                    segments = self._plan(tnode, branch, depth)
                else:
                    segments = [(c.segment, c.ends) for c in tnode.children]
                ref = self.nodes[target].expand.remote(tree.task, tnode.sandbox, tnode.chain, segments)
                inflight[ref] = (tnode, target)
                load[target] += 1
            queue = waiting + queue
            if not inflight:
                if not self.live():
                    raise ArborError("every Arbor node of the fleet is gone", code="ray")
                continue
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                tnode, name = inflight.pop(ref)
                load[name] -= 1
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayActorError:
                    self._lose(name, queue)
                    tnode.rerun += 1
                    self.stats["reruns"] += 1
                    tnode.holder, tnode.sandbox = None, None
                    queue.appendleft(tnode)
                    continue
                done = self._apply(tnode, res, name, queue)
                if bar is not None:
                    bar.update(sum(c["steps"] for c in res["children"]))
                if self.on_expansion is not None:
                    self.on_expansion(res)
                if done:
                    records = self._records(tnode.tree)
                    if sink is not None:
                        for r in records:
                            sink.write(json.dumps(r) + "\n")
                        sink.flush()
                    self.stats["records"] += len(records)
                    yield from records

    def _lose(self, name: str, queue: deque[_Node]) -> None:
        """A node is gone: every state it held must be rebuilt elsewhere."""
        if name in self.dead:
            return
        self.dead.add(name)
        self.stats["lost_nodes"].append(name)
        for tnode in queue:
            if tnode.holder == name:
                tnode.holder, tnode.sandbox = None, None
                tnode.rerun += 1
                self.stats["reruns"] += 1

    def _apply(self, tnode: _Node, res: dict[str, Any], name: str, queue: deque[_Node]) -> bool:
        """Record an expansion's outcome; whether it completed its tree."""
        tree = tnode.tree
        tnode.state = res["state"]
        tnode.sandbox = None
        self.stats["expansions"] += 1
        self.stats["forks"] += len(res["children"])
        self.stats["replayed_actions"] += res["replayed"]
        self.stats["per_node"][name] += 1
        tree.open -= 1
        if tnode.rerun:
            tnode.rebuilt_on = name
        for child, out in zip(tnode.children, res["children"], strict=True):
            child.ran_on = name
            child.replayed_source = tnode.rerun > 0
            self.stats["actions"] += out["steps"]
            if out["done"]:
                child.leaf = True
                child.reward = out["reward"]
                child.state = out["snapshot"]
                child.holder = name
            else:
                child.holder, child.sandbox = name, out["sandbox"]
                tree.open += 1
                queue.append(child)
        return tree.open == 0

    def _records(self, tree: _Tree) -> list[dict[str, Any]]:
        """One record per branch edge of a graded tree, parents before children."""
        records: list[dict[str, Any]] = []
        order: deque[tuple[_Node, int | None]] = deque([(tree.root, None)])
        while order:
            node, parent_edge = order.popleft()
            v = node.value()
            values = [c.value() for c in node.children]
            for i, child in enumerate(node.children):
                q = values[i]
                others = values[:i] + values[i + 1 :]
                edge = len(records)
                records.append(
                    {
                        "schema": RECORD_SCHEMA,
                        "task": tree.task,
                        "tree_id": tree.tree_id,
                        "seed": tree.seed,
                        "edge": edge,
                        "parent_edge": parent_edge,
                        "depth": node.depth,
                        "state": node.state,
                        "next_state": child.state,
                        "history": node.chain,
                        "candidates": [_key(a) for a in child.offered],
                        "chosen": child.chosen,
                        "action": child.segment[0],
                        "segment": child.segment,
                        "behaviour_log_prob": child.log_prob,
                        "q": q,
                        "v": v,
                        "advantage": q - v,
                        "loo": (q - sum(others) / len(others)) if others else None,
                        "leaves": child.leaves(),
                        "reward": child.reward if child.leaf else None,
                        "node": child.ran_on,
                        "rerun": child.replayed_source,
                        "rebuilt_on": child.rebuilt_on,
                    }
                )
                if not child.leaf:
                    order.append((child, edge))
        return records

    def leaves(self, tree: _Tree | None = None) -> Iterator[tuple[_Tree, _Node]]:
        """The graded leaves of the last run's trees (or of one)."""
        for t in [tree] if tree is not None else self.trees:
            stack = [t.root]
            while stack:
                n = stack.pop()
                if n.leaf:
                    yield t, n
                stack.extend(n.children)

    def check(self) -> list[str]:
        """Replay every graded leaf of the last run from its task's start, on a live node
        other than the one that graded it when there is one, and compare the verdicts.

        Returns:
            The mismatches, as sentences (empty: every leaf replays to its verdict).
        """
        live = self.live()
        jobs = []
        for i, (tree, leaf) in enumerate(self.leaves()):
            others = [n for n in live if n != leaf.holder] or live
            chain = [a for n in self._path(tree, leaf) for a in n.segment]
            jobs.append((tree, leaf, chain, self.nodes[others[i % len(others)]].grade_chain.remote(tree.task, chain)))
        bad = []
        for tree, leaf, chain, ref in jobs:
            got = self._ray.get(ref)
            if got != leaf.reward:
                bad.append(f"{tree.task} leaf {leaf.path}: graded {leaf.reward}, replayed {got} ({len(chain)} actions)")
        return bad

    @staticmethod
    def _path(tree: _Tree, leaf: _Node) -> list[_Node]:
        nodes, node = [], tree.root
        for i in leaf.path:
            node = node.children[i]
            nodes.append(node)
        return nodes


def _progress(show: bool, total: int) -> Any:
    if not show:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="action", desc="fleet")

