//! Branched rollouts on bundled tasks (the rollouts issue): the children of
//! every branch point start from that node's snapshot (same layer chain,
//! byte-identical workspace), replaying any root-to-leaf path reproduces its
//! leaf verdict, the budget is never exceeded, exports validate against the
//! documented schema, and records stream through a bounded channel.

use std::path::Path;
use std::sync::Arc;

use arbor_envs::TaskEnv;
use arbor_envs::rollout::Environment;
use arbor_envs::rollout::credit::CreditConfig;
use arbor_envs::rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
use arbor_envs::rollout::export::{
    AdvantageRecord, informative_pairs, pairs, records, stream_records, svg, validate_record,
};
use arbor_envs::rollout::policy::MixturePolicy;
use arbor_envs::rollout::tree::{Origin, RolloutTree};
use arbor_envs::suite::{Suite, bundled_dir};
use arbor_runtime::Runtime;
use arbor_runtime::layer::merge_layers;
use arbor_tests::runtime_with;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

fn grow(
    rt: &Runtime,
    task: &str,
    strategy: Strategy,
    budget: u64,
    seed: u64,
) -> (Arc<TaskEnv>, RolloutTree) {
    let suite = Suite::load(&bundled_dir()).unwrap();
    let env = Arc::new(TaskEnv::prepare(rt, suite.get(task).unwrap().clone()).unwrap());
    let mut cfg = DriverConfig::new(budget, strategy);
    cfg.workers = 2;
    cfg.seed = seed;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tree = tokio
        .block_on(run_tree(
            Arc::clone(&env) as Arc<dyn Environment>,
            Arc::new(MixturePolicy { p: 0.6 }),
            &cfg,
            Arc::new(Progress::default()),
        ))
        .unwrap();
    (env, tree)
}

#[test]
fn branches_start_from_the_branch_nodes_snapshot_and_paths_replay_to_their_verdicts() {
    let rt = runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    for (task, seed) in [("py-stats-1", 1), ("files-organise-1", 2)] {
        let (env, tree) = grow(
            &rt.runtime,
            task,
            Strategy::Uniform { every: 2, width: 3 },
            50,
            seed,
        );
        assert!(tree.budget.used() <= 50, "{:?}", tree.budget);
        assert_eq!(tree.stats.faults, 0, "{task}: faults");
        let branch_points: Vec<_> = tree.nodes.iter().filter(|n| n.edges.len() > 1).collect();
        assert!(!branch_points.is_empty(), "{task}: no branch point");
        let leaves: Vec<_> = tree.graded_leaves().collect();
        assert!(
            leaves
                .iter()
                .any(|l| l.leaf.as_ref().unwrap().verdict.success()),
            "{task}: no success"
        );
        assert!(
            leaves
                .iter()
                .any(|l| !l.leaf.as_ref().unwrap().verdict.success()),
            "{task}: no failure"
        );

        let store = rt.runtime.store();
        for node in &branch_points {
            let parent = rt.runtime.resolve(&node.snapshot).unwrap();
            let parent_view = merge_layers(store, &parent.manifest().layers).unwrap();
            for &e in &node.edges {
                let child = &tree.nodes[tree.edges[e].to];
                let snap = rt.runtime.resolve(&child.snapshot).unwrap();
                if child.origin == Origin::Terminal {
                    assert_eq!(child.snapshot, node.snapshot, "submit keeps the state");
                    continue;
                }
                // The child was forked from the branch node's snapshot: its
                // parent is that snapshot and its chain extends that chain.
                assert_eq!(
                    snap.manifest().parent.map(|p| p.to_string()),
                    Some(node.snapshot.clone()),
                    "{task}: edge {e}"
                );
                let chain = &snap.manifest().layers;
                assert!(
                    chain.starts_with(&parent.manifest().layers),
                    "{task}: edge {e}: chain"
                );
                // Byte-identical starting workspace: the child's view minus its
                // own last layer is the parent's view.
                let before = merge_layers(store, &chain[..parent.manifest().layers.len()]).unwrap();
                assert_eq!(before, parent_view, "{task}: edge {e}: start state");
            }
        }

        // Replaying a root-to-leaf path linearly reproduces the leaf's verdict.
        for leaf in leaves.iter().take(6) {
            let v = env.run_and_verify(&tree.actions_to(leaf.id)).unwrap();
            let recorded = &leaf.leaf.as_ref().unwrap().verdict;
            assert_eq!(v.reward, recorded.reward, "{task}: leaf {}", leaf.id);
            assert_eq!(
                v.task.checks_passed, recorded.task.checks_passed,
                "{task}: leaf {}",
                leaf.id
            );
        }

        // Credit: Σ n·A = 0 at every branch point; exports match the schema.
        let cfg = CreditConfig::default();
        let recs = records(&tree, &cfg).unwrap();
        assert!(!recs.is_empty());
        for node in &branch_points {
            let sum: f64 = recs
                .iter()
                .filter(|r| r.state == node.snapshot && r.depth == node.depth)
                .map(|r| f64::from(r.n) * r.advantage)
                .sum();
            assert!(sum.abs() < 1e-9, "{task}: Σ n·A = {sum}");
        }
        for r in &recs {
            validate_record(&serde_json::to_value(r).unwrap()).unwrap();
            assert_eq!(r.candidates.last().map(String::as_str), Some("submit"));
            if let Some(i) = r.chosen {
                assert_eq!(r.candidates[i], r.action_text);
            }
        }
        assert!(informative_pairs(&recs) > 0);
        for p in pairs(&tree, &cfg, 0.2).unwrap() {
            assert!(p.chosen_q - p.rejected_q > 0.2);
        }
        assert!(svg(&tree, &cfg).unwrap().starts_with("<svg"));
    }
}

#[test]
fn a_broken_record_fails_the_schema() {
    let rt = runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    let (_, tree) = grow(
        &rt.runtime,
        "py-parse-1",
        Strategy::Independent { episodes: 4 },
        24,
        3,
    );
    let recs = records(&tree, &CreditConfig::default()).unwrap();
    let mut v = serde_json::to_value(&recs[0]).unwrap();
    validate_record(&v).unwrap();
    // Independent episodes carry the GRPO advantage on their first edge.
    assert!(
        recs.iter()
            .filter(|r| r.depth == 0)
            .all(|r| r.grpo.is_some())
    );
    v["n"] = serde_json::json!(0);
    assert!(validate_record(&v).unwrap_err().contains("$.n"));
    let mut v = serde_json::to_value(&recs[0]).unwrap();
    v.as_object_mut().unwrap().remove("behaviour_log_prob");
    assert!(
        validate_record(&v)
            .unwrap_err()
            .contains("behaviour_log_prob")
    );
    let mut v = serde_json::to_value(&recs[0]).unwrap();
    v["surprise"] = serde_json::json!(1);
    assert!(validate_record(&v).unwrap_err().contains("surprise"));
}

#[test]
fn records_stream_through_a_bounded_channel() {
    let rt = runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    let (_, tree) = grow(
        &rt.runtime,
        "config-fix-1",
        Strategy::Uniform { every: 2, width: 2 },
        30,
        4,
    );
    let expected = records(&tree, &CreditConfig::default()).unwrap().len();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let got = tokio.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<AdvantageRecord>(2);
        let consumer = tokio::spawn(async move {
            let mut n = 0;
            while let Some(r) = rx.recv().await {
                assert_eq!(r.schema, "arbor.advantage-record/2");
                n += 1;
            }
            n
        });
        let sent = stream_records(&tree, &CreditConfig::default(), &tx)
            .await
            .unwrap();
        drop(tx);
        (sent, consumer.await.unwrap())
    });
    assert_eq!(got, (expected, expected));
}

/// `vine:K`: one main episode, then K independent continuations from every
/// state on it; each main-path edge's advantage is V̂(s') − V̂(s), both
/// Monte-Carlo means of the episodes through those states.
#[test]
fn a_vine_rolls_out_k_continuations_from_every_state_of_its_main_path() {
    let rt = runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    let (_, tree) = grow(&rt.runtime, "py-parse-1", Strategy::Vine { k: 2 }, 400, 5);
    assert_eq!(tree.strategy, "vine:2");
    // The main path: first edges from the root, down to its leaf.
    let mut main = Vec::new();
    let mut node = 0;
    while let Some(&e) = tree.nodes[node].edges.first() {
        main.push(e);
        node = tree.edges[e].to;
    }
    assert!(
        tree.nodes[node].leaf.is_some(),
        "the main path ends in a leaf"
    );
    assert!(!main.is_empty());
    let recs = records(&tree, &CreditConfig::default()).unwrap();
    for &e in &main {
        let from = tree.edges[e].from;
        if tree.nodes[from].depth >= 8 {
            continue;
        }
        // The main edge and K = 2 continuations (budget 400 pays for all).
        assert_eq!(tree.nodes[from].edges.len(), 3, "node {from}");
        let r = recs.iter().find(|r| r.edge == e).unwrap();
        let child = recs
            .iter()
            .find(|c| c.state == r.next_state && c.depth == r.depth + 1);
        if let Some(c) = child {
            assert!((r.advantage - (c.v - r.v)).abs() < 1e-12);
        }
    }
    // Positive control: an independent group has a single edge per state
    // below the root.
    let (_, flat) = grow(
        &rt.runtime,
        "py-parse-1",
        Strategy::Independent { episodes: 3 },
        60,
        5,
    );
    assert!(flat.nodes.iter().skip(1).all(|n| n.edges.len() <= 1));
}
