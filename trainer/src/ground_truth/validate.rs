//! Live validation: grow a real tree with the rollout driver
//! ([`arbor_rollout::driver::run_tree`]) under the same Markov policy and
//! check every edge and leaf against the exploration's cache.
//!
//! For every executed edge, the child's content key and observation (its
//! [`super::explore::observation_key`], exit status and step) must equal
//! the cached transition of (parent's content key, action); every node
//! that is a decision state must be a DP state of the exploration; every
//! leaf's reward (budget-truncated leaves too: they are graded as they
//! stand) must equal the cached verdict of (content key, tainted). Any
//! difference is a mismatch, named by task, edge or node.

use std::sync::Arc;

use arbor_rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
use arbor_rollout::env::{AgentAction, Environment};
use arbor_rollout::policy::Policy;
use arbor_rollout::runtime::Runtime;
use arbor_rollout::runtime::store::object::{ExitStatus, SnapshotId};
use arbor_rollout::tree::{Origin, RolloutTree};
use serde::{Deserialize, Serialize};

use super::GroundTruthError;
use super::explore::{ByProducts, ContentKey, Exploration, content_key, observation_key};

/// What a live validation checked and found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationReport {
    /// The task.
    pub task: String,
    /// The live tree's budget.
    pub budget: u64,
    /// Its nodes.
    pub nodes: usize,
    /// Executed edges checked against cached transitions.
    pub edges: usize,
    /// Decision states looked up among the DP states.
    pub states: usize,
    /// Leaves whose reward was checked against cached verdicts.
    pub leaves: usize,
    /// Every difference, named.
    pub mismatches: Vec<String>,
}

/// Grow one live tree for `env` with `policy` (uniform branching, 2 ways
/// at every step, until `budget` is spent).
///
/// # Errors
/// The driver failed.
pub async fn grow_live(
    env: Arc<dyn Environment>,
    policy: Arc<dyn Policy>,
    budget: u64,
    seed: u64,
    workers: usize,
) -> Result<RolloutTree, GroundTruthError> {
    let task = env.id().to_owned();
    let mut cfg = DriverConfig::new(budget, Strategy::Uniform { every: 1, width: 2 });
    cfg.seed = seed;
    cfg.workers = workers.max(1);
    run_tree(env, policy, &cfg, Arc::new(Progress::default()))
        .await
        .map_err(|e| GroundTruthError::Task {
            task,
            message: format!("live tree: {e}"),
        })
}

/// Where two texts first differ, with some context from each.
fn difference(live: &str, cached: &str) -> String {
    const CONTEXT: usize = 60;
    let at = live
        .char_indices()
        .zip(cached.chars())
        .find(|((_, a), b)| a != b)
        .map_or(live.len().min(cached.len()), |((i, _), _)| i);
    let window = |s: &str| -> String {
        let mut start = at.saturating_sub(CONTEXT / 2).min(s.len());
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        s[start..].chars().take(CONTEXT).collect()
    };
    format!(
        "at byte {at}: live {:?}, cached {:?}",
        window(live),
        window(cached)
    )
}

/// Check `tree` against `ex` (see the module docs).
///
/// # Errors
/// A node's snapshot cannot be read (a mismatch is not an error here: it is
/// listed in the report).
pub fn check_tree(
    runtime: &Runtime,
    tree: &RolloutTree,
    ex: &Exploration,
    byproducts: &ByProducts,
) -> Result<ValidationReport, GroundTruthError> {
    let fail = |message: String| GroundTruthError::Task {
        task: ex.task.clone(),
        message,
    };
    let mut keys: Vec<ContentKey> = Vec::with_capacity(tree.nodes.len());
    for n in &tree.nodes {
        let id: SnapshotId = n
            .snapshot
            .parse()
            .map_err(|e| fail(format!("node {}: snapshot id {}: {e}", n.id, n.snapshot)))?;
        let snap = runtime
            .snapshot(&id)
            .map_err(|e| fail(format!("node {}: {e}", n.id)))?;
        keys.push(content_key(runtime, snap.manifest(), byproducts).map_err(&fail)?);
    }
    // Nodes are added parent first, so one pass in order sets every flag.
    let mut tainted = vec![false; tree.nodes.len()];
    for e in &tree.edges {
        tainted[e.to] =
            tainted[e.from] || matches!(e.exit, Some(ExitStatus::Timeout | ExitStatus::DiskLimit));
    }
    let mut report = ValidationReport {
        task: ex.task.clone(),
        budget: tree.budget.limit,
        nodes: tree.nodes.len(),
        ..ValidationReport::default()
    };
    for e in tree
        .edges
        .iter()
        .filter(|e| e.action != AgentAction::Submit)
    {
        report.edges += 1;
        let what = format!(
            "task {}: edge {} ({}) from node {} at step {}",
            ex.task, e.id, e.action, e.from, tree.nodes[e.from].depth
        );
        let Some(cached) = ex.transitions.get(&(keys[e.from], e.action.clone())) else {
            report.mismatches.push(format!(
                "{what}: no cached transition for this state and action"
            ));
            continue;
        };
        if cached.next != keys[e.to] {
            report.mismatches.push(format!(
                "{what}: the live child's content {} differs from the cached {}",
                keys[e.to].short(),
                cached.next.short()
            ));
        }
        let live = &tree.nodes[e.to].observation;
        let mut expected = cached.observation.clone();
        expected.step = live.step;
        let (lk, ck) = (observation_key(live), observation_key(&expected));
        if lk != ck || expected.exit != live.exit || expected.step != live.step {
            report.mismatches.push(format!(
                "{what}: the live observation differs from the cached one {}",
                difference(&lk, &ck)
            ));
        }
    }
    for n in &tree.nodes {
        if n.origin != Origin::Terminal && n.depth < ex.max_steps {
            report.states += 1;
            let key = (
                keys[n.id],
                observation_key(&n.observation),
                n.depth,
                tainted[n.id],
            );
            if ex.state_of(&key).is_none() {
                report.mismatches.push(format!(
                    "task {}: node {} (step {}) is not a state of the exploration",
                    ex.task, n.id, n.depth
                ));
            }
        }
        let Some(leaf) = &n.leaf else {
            continue;
        };
        report.leaves += 1;
        let cached = ex.verdicts.get(&(keys[n.id], tainted[n.id])).copied();
        match (leaf.verdict.reward, cached) {
            (Some(live), Some(c)) if live == c => {}
            (live, c) => report.mismatches.push(format!(
                "task {}: leaf node {} (step {}): live reward {live:?} ({}), cached {c:?}",
                ex.task,
                n.id,
                n.depth,
                leaf.verdict.summary()
            )),
        }
    }
    Ok(report)
}
