"""The rollout fleet on Ray (arbor.ray): throughput on 1 and 2 local Arbor nodes, and what a fork
costs when the state is on another node.

Each Ray node (ray.cluster_utils.Cluster on this machine) offers ``arbor_slots`` SLOTS and runs
its own ``arbor serve`` over its own store. Measured, in one run:

- fleet throughput: the same TASKS trees (``uniform:2:2``, the mixture policy, the same seeds)
  grown on 1 node, then on 2 nodes: env steps/s and forks/s over the whole run (verification
  included), REPEAT times, medians;
- a task state's fork: from an open task sandbox on its node (local copy-on-write) against a
  rebuild on the other node (a fresh task sandbox replaying the DEPTH-action chain), each
  followed by the same one action, medians over REPEAT;
- a plain snapshot (a workspace of FILES files, MB megabytes) on another node: open a sandbox
  on it and run ``true`` locally, against moving it first as a bundle through Ray's object
  store (export, import with every byte verified) into the other node's store; the first move
  carries everything, later ones (one file changed) a bundle ``--since`` the last one moved.

Both nodes share this machine's cores, so "2 nodes" measures the fleet's overhead and
placement, not more hardware. Writes target/arbor-bench/fleet.{md,json}.

Run: ``python benches/fleet.py [--arbor target/release/arbor] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from ray.cluster_utils import Cluster
from tqdm import tqdm

from arbor.ray import SLOTS, RolloutFleet

REPO = Path(__file__).resolve().parent.parent
TASKS = ["config-fix-1", "files-organise-1", "git-ops-1", "log-extract-1"]


def cluster(nodes: int, slots: int) -> Cluster:
    args: dict[str, Any] = {"num_cpus": 1, "resources": {SLOTS: slots}, "object_store_memory": 200 << 20}
    c = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False})
    for _ in range(nodes - 1):
        c.add_node(**args)
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    return c


def throughput(arbor: str, nodes: int, slots: int, repeat: int, work: Path) -> dict[str, Any]:
    c = cluster(nodes, slots)
    try:
        fleet = RolloutFleet(str(work / f"n{nodes}-{{node}}"), binary=arbor, gold_p=0.6)
        runs = []
        for r in tqdm(range(repeat), desc=f"fleet on {nodes} node(s)", unit="run"):
            list(fleet.run(TASKS, budget=10_000, strategy="uniform:2:2", seed=r))
            s = fleet.stats
            runs.append({"seconds": s["seconds"], "actions": s["actions"], "forks": s["forks"]})
        fleet.shutdown()
    finally:
        ray.shutdown()
        c.shutdown()
    return {
        "nodes": nodes,
        "slots_per_node": slots,
        "runs": runs,
        "steps_per_s": statistics.median(x["actions"] / x["seconds"] for x in runs),
        "forks_per_s": statistics.median(x["forks"] / x["seconds"] for x in runs),
        "seconds": statistics.median(x["seconds"] for x in runs),
    }


def cross_node(arbor: str, repeat: int, depth: int, files: int, mb: int, work: Path) -> dict[str, Any]:
    c = cluster(2, 2)
    try:
        fleet = RolloutFleet(str(work / "x-{node}"), binary=arbor)
        a, b = fleet.live()
        na, nb = fleet.node(a), fleet.node(b)
        task = TASKS[0]
        detail = ray.get(na.task.remote(task))
        chain = detail["gold"][:depth]
        step = [detail["gold"][depth]]
        # REPEAT open task sandboxes at DEPTH on node a (one fork of the replayed chain).
        held = ray.get(na.expand.remote(task, None, [], [(chain, False)] * repeat))["children"]
        local, remote = [], []
        for child in tqdm(held, desc="task state: local fork vs rebuild elsewhere", unit="pair"):
            local.append(ray.get(na.expand.remote(task, child["sandbox"], chain, [(step, False)]))["seconds"])
            remote.append(ray.get(nb.expand.remote(task, None, chain, [(step, False)]))["seconds"])

        project = work / "project"
        project.mkdir()
        per = mb * (1 << 20) // files
        for i in range(files):
            (project / f"f{i:05}.bin").write_bytes(os.urandom(per))
        opened, moved = [], []
        prev: str | None = None
        for r in tqdm(range(repeat), desc="snapshot: open locally vs move as a bundle", unit="pair"):
            (project / "step.txt").write_text(f"step {r}\n")
            snap = ray.get(na.import_dir.remote(str(project)))
            t = time.perf_counter()
            assert ray.get(na.exec.remote(snap, "true"))[0] == 0
            opened.append(time.perf_counter() - t)
            t = time.perf_counter()
            fleet.move(snap, a, b, since=[prev] if prev else [])
            prev = snap
            assert ray.get(nb.exec.remote(snap, "true"))[0] == 0
            moved.append(time.perf_counter() - t)
        fleet.shutdown()
    finally:
        ray.shutdown()
        c.shutdown()
    return {
        "depth": depth,
        "local_fork_s": statistics.median(local),
        "rebuild_elsewhere_s": statistics.median(remote),
        "files": files,
        "mb": mb,
        "open_local_s": statistics.median(opened),
        "first_move_s": moved[0],
        "related_move_s": statistics.median(moved[1:]) if len(moved) > 1 else None,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arbor", default=os.environ.get("ARBOR_BIN") or str(REPO / "target/release/arbor"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--files", type=int, default=500)
    p.add_argument("--mb", type=int, default=20)
    p.add_argument("--out", type=Path, default=REPO / "target/arbor-bench")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="arbor-fleet-bench-") as tmp:
        work = Path(tmp)
        rows = [throughput(args.arbor, n, args.slots, args.repeat, work) for n in (1, 2)]
        x = cross_node(args.arbor, args.repeat, args.depth, args.files, args.mb, work)
    result = {"arbor": args.arbor, "tasks": TASKS, "throughput": rows, "cross_node": x}
    (args.out / "fleet.json").write_text(json.dumps(result, indent=2))
    base = rows[0]["steps_per_s"]
    md = (
        f"Fleet: {len(TASKS)} trees of uniform:2:2 per run, {args.slots} slots per node, medians of {args.repeat} runs\n\n"
        "| nodes | env steps/s | forks/s | run (s) | steps/s vs 1 node |\n|---|---|---|---|---|\n"
    )
    for r in rows:
        md += (
            f"| {r['nodes']} | {r['steps_per_s']:.1f} | {r['forks_per_s']:.1f} | {r['seconds']:.1f} "
            f"| {r['steps_per_s'] / base:.2f}x |\n"
        )
    md += (
        f"\nA task state at depth {x['depth']}: fork where it lives {x['local_fork_s'] * 1000:.0f} ms, "
        f"rebuilt on the other node {x['rebuild_elsewhere_s'] * 1000:.0f} ms "
        f"({x['rebuild_elsewhere_s'] / x['local_fork_s']:.1f}x), each with one action.\n"
        f"A snapshot of {x['files']} files ({x['mb']} MB): open and run `true` on its node "
        f"{x['open_local_s'] * 1000:.0f} ms; moved as a bundle first, then opened on the other node: "
        f"{x['first_move_s'] * 1000:.0f} ms the first time"
    )
    if x["related_move_s"] is not None:
        md += f", {x['related_move_s'] * 1000:.0f} ms for a related one (one file changed, the bundle --since the last moved)"
    md += ".\n"
    (args.out / "fleet.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'fleet.md'}, .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
