"""The rollout fleet on a real two-node Ray cluster on this machine (ray.cluster_utils).

Each Ray node offers ``arbor_slots`` and gets its own Arbor store, so a snapshot needed on
the other node really travels as a bundle. The fault test removes the worker node (its
raylet and workers are killed) while it holds open tree states, and checks that only
those paths are re-run, that every tree's records arrive exactly once, and that every
graded leaf replays from its task's start to its verdict on the surviving node.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from arbor.errors import ArborError
from arbor.ray import RECORD_SCHEMA, SLOTS, RolloutFleet, parse_strategy
from conftest import server_binary

TASKS = ["config-fix-1", "files-organise-1", "git-ops-1"]

NODE_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "resources": {SLOTS: 2},
    "object_store_memory": 80 << 20,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, Any]]:
    """A head node and one worker node, both Arbor nodes; the driver connected."""
    c = Cluster(
        initialize_head=True,
        head_node_args={
            **NODE_ARGS,
            "include_dashboard": False,
            # A removed node is declared dead after about 2 s instead of 30.
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4},
        },
    )
    worker = c.add_node(**NODE_ARGS)
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    try:
        yield c, worker
    finally:
        ray.shutdown()
        c.shutdown()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_strategy_is_checked() -> None:
    assert parse_strategy("uniform:2:3") == (2, 3)
    for bad in ("uniform:0:2", "uniform:2", "beam:2:2", "uniform:x:2"):
        with pytest.raises(ValueError, match="uniform:B:D"):
            parse_strategy(bad)


def test_a_snapshot_moves_between_node_stores_as_a_bundle(cluster: tuple[Cluster, Any], tmp_path: Path) -> None:
    fleet = RolloutFleet(str(tmp_path / "store-{node}"), binary=server_binary())
    try:
        src, dst = fleet.live()
        assert fleet.info[src]["home"] != fleet.info[dst]["home"]
        project = tmp_path / "project"
        project.mkdir()
        (project / "hello.txt").write_text("moved across nodes\n")
        snap = ray.get(fleet.node(src).import_dir.remote(str(project)))
        assert ray.get(fleet.node(src).exec.remote(snap, "cat hello.txt")) == (0, "moved across nodes\n")
        # The other node's store does not have it: the stores are really separate.
        with pytest.raises(ray.exceptions.RayTaskError, match="not found|no snapshot|unknown"):
            ray.get(fleet.node(dst).exec.remote(snap, "cat hello.txt"))
        summary = fleet.move(snap, src, dst)
        assert summary, "the import printed no summary"
        assert ray.get(fleet.node(dst).exec.remote(snap, "cat hello.txt")) == (0, "moved across nodes\n")
        # A bundle broken in transit is refused by name and the store keeps what it had.
        bundle = ray.get(fleet.node(src).export_bundle.remote([snap]))
        with pytest.raises(ray.exceptions.RayTaskError, match="bundle"):
            ray.get(fleet.node(dst).import_bundle.remote(bundle[: len(bundle) // 2]))
        assert ray.get(fleet.node(dst).exec.remote(snap, "cat hello.txt")) == (0, "moved across nodes\n")
    finally:
        fleet.shutdown()


def test_the_fleet_loses_only_the_dead_nodes_paths(cluster: tuple[Cluster, Any], tmp_path: Path) -> None:
    c, worker = cluster
    fleet = RolloutFleet(str(tmp_path / "store-{node}"), binary=server_binary(), max_inflight=3, gold_p=0.6)
    victim = worker.node_id
    assert victim in fleet.live() and len(fleet.live()) == 2
    victim_server = fleet.info[victim]["server_pid"]
    killed: list[float] = []

    def kill_when_it_holds_states(res: dict[str, Any]) -> None:
        # Remove the worker node as soon as it holds open tree states (paths in flight).
        if not killed and res["node"] == victim and any("sandbox" in ch for ch in res["children"]):
            c.remove_node(worker, allow_graceful=False)
            killed.append(time.monotonic())

    fleet.on_expansion = kill_when_it_holds_states
    out = tmp_path / "records.jsonl"
    try:
        records = list(fleet.run(TASKS, budget=1_000, strategy="uniform:2:2", export=out))
        stats = fleet.stats
        assert killed, "the worker node never held a tree state: the fault was not exercised"
        assert stats["lost_nodes"] == [victim]
        assert stats["reruns"] >= 1 and stats["replayed_actions"] >= 1
        # The victim did real work before it died, and that work was kept.
        assert stats["per_node"][victim] >= 1
        assert any(r["node"] == victim for r in records)
        # What was re-run says so, and ran on the survivor; the states the victim held
        # when it died were rebuilt there.
        survivor = next(n for n in fleet.nodes if n != victim)
        reruns = [r for r in records if r["rerun"]]
        assert reruns and all(r["node"] == survivor for r in reruns)
        rebuilt = [r for r in records if r["rebuilt_on"] is not None]
        assert rebuilt and all(r["rebuilt_on"] == survivor and r["node"] == victim for r in rebuilt)

        # Every tree's records exactly once: B edges at the root, B*B below, no duplicates.
        assert {r["schema"] for r in records} == {RECORD_SCHEMA}
        assert len({(r["tree_id"], r["edge"]) for r in records}) == len(records)
        per_tree = Counter(r["tree_id"] for r in records)
        assert len(per_tree) == len(TASKS)
        for tree_id, n in per_tree.items():
            edges = sorted(r["edge"] for r in records if r["tree_id"] == tree_id)
            assert edges == list(range(n))
            assert sum(1 for r in records if r["tree_id"] == tree_id and r["depth"] == 0) == 2
        # The export holds the same records, once each.
        exported = [line for line in out.read_text().splitlines() if line]
        assert len(exported) == len(records)

        # Advantages are consistent with the graded leaves.
        for r in records:
            assert r["advantage"] == pytest.approx(r["q"] - r["v"])
            if r["reward"] is not None:
                assert r["q"] == r["reward"]
        roots = [r for r in records if r["depth"] == 0]
        for tree_id in per_tree:
            qs = [r["q"] for r in roots if r["tree_id"] == tree_id]
            assert sum(qs) / len(qs) == pytest.approx(roots[[x["tree_id"] for x in roots].index(tree_id)]["v"])

        # Every graded leaf replays from its task's start to its verdict on the survivor.
        assert fleet.check() == []
        # Positive control: a wrong verdict is caught.
        tree, leaf = next(fleet.leaves())
        leaf.reward = 1.0 - float(leaf.reward or 0.0)
        bad = fleet.check()
        assert len(bad) == 1 and tree.task in bad[0]

        # The dead node's server went with it (PR_SET_PDEATHSIG), sandboxes and all.
        deadline = time.monotonic() + 30
        while not _gone(victim_server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(victim_server), f"the lost node's arbor serve (pid {victim_server}) outlived it"
    finally:
        fleet.shutdown()


def test_a_fleet_needs_arbor_nodes_and_a_budget(cluster: tuple[Cluster, Any], tmp_path: Path) -> None:
    fleet = RolloutFleet(str(tmp_path / "store-{node}"), binary=server_binary())
    try:
        with pytest.raises(ArborError, match="does not cover one tree"):
            list(fleet.run(TASKS[:1], budget=3))
        # Positive control: the same task with enough budget grows its tree.
        assert len(list(fleet.run(TASKS[:1], budget=100, strategy="uniform:2:1"))) == 2
        with pytest.raises(ValueError, match="gold_p"):
            RolloutFleet(str(tmp_path / "x-{node}"), binary=server_binary(), gold_p=1.5)
    finally:
        fleet.shutdown()
