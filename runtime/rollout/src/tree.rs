//! Rollout trees: nodes are snapshots (with the observation there), edges are
//! actions with the behaviour policy's log-prob, entropy and version, leaves
//! carry the verifier's [`Verdict`].
//!
//! Serialised as JSON with the versioned schema [`TREE_SCHEMA`]
//! (`runtime/rollout/SCHEMA.md` documents every field). A file holds a
//! [`Forest`]: one tree per task.

use serde::{Deserialize, Serialize};

use crate::credit::{CreditEdge, CreditNode, CreditTree};
use crate::env::{AgentAction, EnvObservation, Verdict};
use crate::policy::{Generation, Tokens};
use arbor_runtime::store::object::ExitStatus;

/// The schema tag of tree files.
pub const TREE_SCHEMA: &str = "arbor.rollout-forest/1";

/// Trees of one `arbor rollout` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Forest {
    /// Always [`TREE_SCHEMA`].
    pub schema: String,
    /// One tree per task.
    pub trees: Vec<RolloutTree>,
}

/// How a node came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The task's root snapshot.
    Root,
    /// An action from its parent (the first child of a path).
    Step,
    /// A terminal node after `Submit` or the step limit (same snapshot as its parent).
    Terminal,
}

/// A leaf's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Leaf {
    /// The layered verdict.
    pub verdict: Verdict,
    /// Cut off by the budget before the policy submitted or hit the step limit.
    pub truncated: bool,
}

/// A node: a snapshot of the environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Index in [`RolloutTree::nodes`].
    pub id: usize,
    /// The edge leading here (`None` at the root).
    pub parent_edge: Option<usize>,
    /// Actions from the root.
    pub depth: usize,
    /// The snapshot id (full hex).
    pub snapshot: String,
    /// What the policy saw here.
    pub observation: EnvObservation,
    /// The candidate actions offered here.
    pub candidates: Vec<AgentAction>,
    /// Outgoing edges.
    pub edges: Vec<usize>,
    /// Set on leaves.
    pub leaf: Option<Leaf>,
    /// How the node came to be.
    pub origin: Origin,
    /// A runtime fault that ended the path here (excluded from statistics).
    pub fault: Option<String>,
}

/// An edge: an action taken at its source node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Index in [`RolloutTree::edges`].
    pub id: usize,
    /// Source node.
    pub from: usize,
    /// Target node.
    pub to: usize,
    /// The action.
    pub action: AgentAction,
    /// Its index among the source node's candidates.
    pub index: Option<usize>,
    /// Behaviour log-probability (log μ(a|s)).
    pub log_prob: f64,
    /// log π(a|s) under the policy being trained, when the behaviour policy
    /// was an exploring mixture of it (see [`crate::policy::Choice`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_log_prob: Option<f64>,
    /// Behaviour entropy at the source node.
    pub entropy: f64,
    /// Version of the policy that chose it.
    pub policy_version: u64,
    /// Token ids and per-token log-probs (token-level policies).
    pub tokens: Option<Tokens>,
    /// The prompt and sampling of a token-level policy's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<Box<Generation>>,
    /// How many identical sibling samples this edge stands for.
    pub count: u32,
    /// How the action ended (`None` for `Submit`).
    pub exit: Option<ExitStatus>,
    /// Wall-clock duration of the action in microseconds.
    pub duration_us: u64,
    /// Step reward (0: the leaf carries the reward).
    pub reward: f64,
}

/// The budget: executed actions plus verifier runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The limit.
    pub limit: u64,
    /// Actions executed.
    pub actions: u64,
    /// Verifier runs.
    pub verifier_runs: u64,
}

impl Budget {
    /// Actions plus verifier runs.
    pub fn used(&self) -> u64 {
        self.actions + self.verifier_runs
    }
}

/// Timings and counters of the run that built a tree.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeStats {
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Forks (sandboxes opened from a snapshot).
    pub forks: u64,
    /// Snapshots taken.
    pub snapshots: u64,
    /// Seconds spent opening forks (summed over workers).
    pub fork_s: f64,
    /// Seconds spent taking snapshots (summed over workers).
    pub snapshot_s: f64,
    /// Seconds spent in actions (summed over workers).
    pub action_s: f64,
    /// Seconds spent verifying (summed over workers).
    pub verify_s: f64,
    /// Seconds spent waiting on the policy (summed over concurrent decisions).
    #[serde(default)]
    pub policy_s: f64,
    /// Runtime faults.
    pub faults: u64,
    /// Sibling samples merged into an existing edge.
    pub merged: u64,
}

/// One task's rollout tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutTree {
    /// The task.
    pub task: String,
    /// The behaviour policy's name.
    pub policy: String,
    /// What the policy recorded about itself (an LLM policy: server, model
    /// id and revision, system prompt, context budget, sampling defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_info: Option<serde_json::Value>,
    /// The branching strategy, as given.
    pub strategy: String,
    /// The seed.
    pub seed: u64,
    /// Budget and its use.
    pub budget: Budget,
    /// The nodes; node 0 is the root.
    pub nodes: Vec<Node>,
    /// The edges.
    pub edges: Vec<Edge>,
    /// Timings and counters.
    pub stats: TreeStats,
}

impl RolloutTree {
    /// Leaves of finished episodes with a reward: runtime faults and
    /// budget-truncated leaves are left out (an episode cut short by the
    /// budget did not fail: it did not finish), here and so in credit,
    /// success rates and exports.
    pub fn graded_leaves(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| {
            n.leaf
                .as_ref()
                .is_some_and(|l| l.verdict.reward.is_some() && !l.truncated)
        })
    }

    /// Leaves cut short by the budget (graded as they stood, but left out of
    /// credit and success rates).
    pub fn truncated_leaves(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.leaf.as_ref().is_some_and(|l| l.truncated))
            .count()
    }

    /// Successful leaves over graded leaves.
    pub fn success_rate(&self) -> Option<f64> {
        let (n, s) = self.graded_leaves().fold((0usize, 0usize), |(n, s), l| {
            (
                n + 1,
                s + usize::from(l.leaf.as_ref().is_some_and(|l| l.verdict.success())),
            )
        });
        (n > 0).then(|| s as f64 / n as f64)
    }

    /// The edges from the root to `node`, root first.
    pub fn path_to(&self, node: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut cur = node;
        while let Some(e) = self.nodes[cur].parent_edge {
            path.push(e);
            cur = self.edges[e].from;
        }
        path.reverse();
        path
    }

    /// The actions from the root to `node`, root first, without a closing
    /// `Submit`: the actions the environment ran to reach `node`.
    pub fn actions_to(&self, node: usize) -> Vec<AgentAction> {
        self.path_to(node)
            .into_iter()
            .map(|e| self.edges[e].action.clone())
            .filter(|a| *a != AgentAction::Submit)
            .collect()
    }

    /// The tree reduced for credit, without faulted or unfinished branches:
    /// `(credit tree, node map)` where `node_map[i]` is the rollout node of
    /// credit node `i`. `None` when no graded leaf is left.
    pub fn credit_tree(&self) -> Option<(CreditTree, Vec<usize>)> {
        // Which nodes have a graded leaf at or below them.
        let mut alive = vec![false; self.nodes.len()];
        for n in self.graded_leaves() {
            let mut cur = n.id;
            loop {
                if alive[cur] {
                    break;
                }
                alive[cur] = true;
                match self.nodes[cur].parent_edge {
                    Some(e) => cur = self.edges[e].from,
                    None => break,
                }
            }
        }
        if !alive.first().copied().unwrap_or(false) {
            return None;
        }
        let mut map = Vec::new();
        let mut index = vec![usize::MAX; self.nodes.len()];
        let mut stack = vec![0usize];
        while let Some(n) = stack.pop() {
            index[n] = map.len();
            map.push(n);
            for &e in self.nodes[n].edges.iter().rev() {
                if alive[self.edges[e].to] {
                    stack.push(self.edges[e].to);
                }
            }
        }
        let nodes = map
            .iter()
            .map(|&n| {
                let node = &self.nodes[n];
                CreditNode {
                    parent: node.parent_edge.map(|e| index[self.edges[e].from]),
                    edges: node
                        .edges
                        .iter()
                        .filter(|&&e| alive[self.edges[e].to])
                        .map(|&e| CreditEdge {
                            child: index[self.edges[e].to],
                            count: self.edges[e].count,
                            step_reward: self.edges[e].reward,
                        })
                        .collect(),
                    terminal_reward: node.leaf.as_ref().and_then(|l| l.verdict.reward),
                    potential: 0.0,
                }
            })
            .collect();
        Some((CreditTree { nodes }, map))
    }
}
