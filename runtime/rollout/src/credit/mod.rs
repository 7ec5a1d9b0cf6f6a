//! Step-level credit from a finished rollout tree: Q̂, V̂, advantages, confidence
//! intervals, potential-based shaping and the GRPO baseline.
//!
//! (~680 lines: the estimators share one tree walk and its memo; the tests
//! are in `tests.rs`.)
//!
//! This module is pure arithmetic: it reads a [`CreditTree`] (a rollout tree reduced to
//! counts, rewards and potentials) and returns a [`Credit`] with one [`NodeCredit`] per
//! node and one [`EdgeCredit`] per edge. It does no I/O and knows nothing about
//! snapshots, environments or policies. `reference/credit-methods.md` lists the published
//! methods these estimators come from.
//!
//! # Definitions
//!
//! Let an edge `e = (s, a)` go from node `s` to child `s'`, carry the step reward `r_e`
//! and the count `n_e ≥ 1`. A count `n` stands for `n` identical sibling actions that were
//! merged into one edge, so everything below that edge is weighted `n` times. `γ` is
//! [`CreditConfig::gamma`].
//!
//! * **Return of a leaf measured from `s`.** For a leaf `ℓ` reached from `s` by the edges
//!   `e_0, …, e_{T−1}` (`T ≥ 0` steps),
//!   `G_s(ℓ) = Σ_{t<T} γ^t·r_{e_t} + γ^T·R_ℓ`, where `R_ℓ` is the leaf's
//!   [`CreditNode::terminal_reward`]. With `γ = 1` and zero step rewards this is just `R_ℓ`.
//! * **Leaf weight.** `L(ℓ) = 1` for a leaf; `L(s) = Σ_e n_e·L(s'_e)` otherwise. A leaf's
//!   weight under `s` is the product of the counts on its path, and `L(s)` is the
//!   count-weighted number of leaves ([`NodeCredit::leaves`]). An edge's weight is
//!   `L(e) = n_e·L(s')` ([`EdgeCredit::leaves`]).
//! * **Leaf mean.** `M(s) = Σ_ℓ w_s(ℓ)·G_s(ℓ) / L(s)`, the count-weighted mean return of the
//!   leaves under `s` ([`NodeCredit::leaf_mean`]); `M(ℓ) = R_ℓ` at a leaf.
//! * **Q̂(s, a)** is the step reward plus the child's value, recursively:
//!   `Q̂(e) = r_e + γ·V̂(s'_e)` ([`EdgeCredit::q`]).
//! * **V̂(s)** is the **count-weighted branch mean** of the edges of `s`:
//!   `V̂(s) = Σ_e n_e·Q̂(e) / Σ_e n_e` ([`NodeCredit::v`]), and `V̂(ℓ) = R_ℓ` at a leaf.
//!   Each edge weighs as many siblings as it stands for, whatever the size of its subtree,
//!   which is the right baseline when the siblings were sampled on-policy from `s`. When
//!   every count is the number of episodes that took the edge (a tree of on-policy
//!   episodes sampled through shared prefixes), `V̂(s)` is exactly the mean return of the
//!   episodes through `s`: an unbiased Monte-Carlo estimate of `V^π(s)`. The leaf mean
//!   below is not: it weighs a leaf by the product of the counts on its path, so the
//!   policy's most common path counts roughly `n^depth` times.
//!
//!   It differs from the leaf mean `M(s)`, which weighs each leaf by its leaf weight. The
//!   two agree when the tree below `s` is uniformly branched (every node at one depth has
//!   the same counts), for instance when all children of `s` are leaves, and in general
//!   only then.
//! * **Advantage** `A(s, a) = Q̂(s, a) − V̂(s)` ([`EdgeCredit::advantage`]). Because `V̂` is the
//!   count-weighted branch mean, `Σ_e n_e·A(e) = 0` at every node with edges (up to
//!   floating-point rounding).
//! * **Leave-one-out.** Let `K = Σ_e n_e` be the number of siblings at `s`, merged copies
//!   counted. For `K ≥ 2`,
//!   `loo(e) = Q̂(e) − (Σ_j n_j·Q̂(j) − Q̂(e)) / (K − 1)`: the other siblings' mean, where the
//!   edge itself still contributes `n_e − 1` copies. This equals `K/(K−1)·A(e)`. When
//!   `K = 1` there is no other sibling and `loo` is `None` ([`EdgeCredit::loo`]).
//! * **Step advantage** `r_e + γ·V̂(s') − V̂(s)` ([`EdgeCredit::step_advantage`]), the
//!   VinePPO/SPO-style temporal difference along a path. Since `Q̂(e) = r_e + γ·V̂(s')`, it
//!   equals `A(e)`; it is kept as its own field for consumers that read it by name.
//! * **Interval.** [`EdgeCredit::interval`] is the Wilson score interval (with
//!   `z = `[`CreditConfig::wilson_z`]) for `Q̂(e)` read as a success rate `p̂` over `L(e)`
//!   trials. It is meant for rewards in `[0, 1]`; `p̂` is `Q̂(e)` clamped to `[0, 1]`, so
//!   with other rewards it is only a rough guide. [`NodeCredit::p_var`] is `p̂(1−p̂)` with
//!   `p̂ = V̂(s)` clamped to `[0, 1]`: the classic "where to branch next" priority.
//! * **Shaping.** With [`CreditConfig::shaping`],
//!   `r'_e = r_e + γ·Φ(s') − Φ(s)` ([`EdgeCredit::shaped_reward`], Ng et al. 1999), where `Φ`
//!   is [`CreditNode::potential`]; without it `r'_e = r_e`. The shaped reward is reported
//!   beside the other estimates and does not enter `Q̂`, `V̂` or the advantages. Along a path
//!   `s_0 → … → s_T` it telescopes:
//!   `Σ_t γ^t·r'_t = Σ_t γ^t·r_t + γ^T·Φ(s_T) − Φ(s_0)` (with `γ = 1`,
//!   `Σ r' = Σ r + Φ(end) − Φ(start)`), so inserting redundant steps cannot add return.
//!   [`shaped_return`] computes that sum for one path.
//! * **GRPO** ([`grpo_advantages`]), for comparison: `A_i = (R_i − mean) / (std + ε)` with the
//!   population standard deviation, or `R_i − mean` without scaling (Dr.GRPO).
//!
//! # Well-formed trees
//!
//! Node 0 is the root and has no parent. Every other node is the child of exactly one
//! edge, and its [`CreditNode::parent`] names that edge's source. A node is either a leaf
//! (a `terminal_reward` and no edges) or a branch point (edges and no `terminal_reward`).
//! Counts are at least 1; rewards and potentials are finite. [`estimate`] checks all of
//! this and reports the first violation as a [`CreditError`] naming the node.

use serde::{Deserialize, Serialize};

/// A rollout tree reduced to what credit needs. Node 0 is the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditTree {
    /// The nodes, indexed by position; node 0 is the root. Edges and parents refer to
    /// nodes by index into this vector.
    pub nodes: Vec<CreditNode>,
}

/// One state of a rollout tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditNode {
    /// Index of the parent node; `None` only for the root (node 0).
    pub parent: Option<usize>,
    /// Outgoing edges, one per distinct action taken from this state. Empty exactly when
    /// the node is a leaf.
    pub edges: Vec<CreditEdge>,
    /// `Some(R)` on a leaf (a finished, verified episode); `None` on a branch point.
    pub terminal_reward: Option<f64>,
    /// `Φ(s)` for potential-based shaping (0 when unused).
    pub potential: f64,
}

/// One action from a state to a child state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditEdge {
    /// Index of the child node.
    pub child: usize,
    /// `n`: how many identical sibling actions were merged into this edge (at least 1).
    pub count: u32,
    /// `r_t`, the reward received on this step (usually 0; the leaf carries `R`).
    pub step_reward: f64,
}

/// Parameters of [`estimate`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CreditConfig {
    /// Discount factor `γ`, in `[0, 1]`.
    pub gamma: f64,
    /// `z` of the Wilson score interval (1.96 for 95%); finite and non-negative.
    pub wilson_z: f64,
    /// Whether [`EdgeCredit::shaped_reward`] adds `γ·Φ(s') − Φ(s)` to the step reward.
    pub shaping: bool,
}

impl Default for CreditConfig {
    /// `γ = 1`, `z = 1.96`, no shaping.
    fn default() -> Self {
        Self {
            gamma: 1.0,
            wilson_z: 1.96,
            shaping: false,
        }
    }
}

/// Credit for one edge `(s, a)`; see the module docs for the exact definitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeCredit {
    /// `Q̂(s, a)`: count-weighted mean return, measured from `s`, of the leaves under the edge.
    pub q: f64,
    /// `V̂(s)` of the edge's source node (the count-weighted branch mean).
    pub v: f64,
    /// `A(s, a) = Q̂(s, a) − V̂(s)`.
    pub advantage: f64,
    /// Leave-one-out advantage against the other siblings; `None` when the source node has
    /// only one sibling in all (a single edge of count 1).
    pub loo: Option<f64>,
    /// `r + γ·V̂(s') − V̂(s)`.
    pub step_advantage: f64,
    /// `r + γ·Φ(s') − Φ(s)` when shaping is on, else `r`.
    pub shaped_reward: f64,
    /// The edge's count `n`.
    pub n: u32,
    /// Count-weighted number of leaves under the edge: `n · leaves(s')`.
    pub leaves: u32,
    /// Wilson score interval for `Q̂` (clamped to `[0, 1]`) as a success rate over `leaves`.
    pub interval: (f64, f64),
}

/// Credit for one node `s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCredit {
    /// `V̂(s)`: the count-weighted branch mean `Σ nₐ·Q̂(s,a) / Σ nₐ`, or `R` at a leaf.
    pub v: f64,
    /// Count-weighted mean return of all leaves under `s`, measured from `s`, or `R` at a
    /// leaf. Equals `v` when every edge of `s` has the same leaf weight.
    pub leaf_mean: f64,
    /// Count-weighted number of leaves under `s` (1 for a leaf).
    pub leaves: u32,
    /// `p̂(1−p̂)` with `p̂ = V̂(s)` clamped to `[0, 1]`.
    pub p_var: f64,
}

/// The result of [`estimate`]: credit for every node and edge of a [`CreditTree`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credit {
    /// `nodes[i]` is the credit of `tree.nodes[i]`.
    pub nodes: Vec<NodeCredit>,
    /// `edges[i][j]` is the credit of `tree.nodes[i].edges[j]`.
    pub edges: Vec<Vec<EdgeCredit>>,
}

/// Why a [`CreditTree`] or [`CreditConfig`] was rejected by [`estimate`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CreditError {
    /// The tree has no nodes at all.
    #[error("credit tree has no nodes (node 0, the root, is missing)")]
    EmptyTree,
    /// `gamma` is not a finite number in `[0, 1]`.
    #[error("gamma must be a finite number in [0, 1], got {gamma}")]
    InvalidGamma {
        /// The rejected value.
        gamma: f64,
    },
    /// `wilson_z` is negative or not finite.
    #[error("wilson_z must be finite and non-negative, got {z}")]
    InvalidWilsonZ {
        /// The rejected value.
        z: f64,
    },
    /// A node's parent index is outside the tree.
    #[error("node {node}: parent {parent} is out of range (the tree has {len} nodes)")]
    ParentOutOfRange {
        /// The node whose parent pointer is bad.
        node: usize,
        /// The recorded parent index.
        parent: usize,
        /// Number of nodes in the tree.
        len: usize,
    },
    /// An edge points to a child index outside the tree.
    #[error("node {node}: edge {edge} points to child {child}, but the tree has {len} nodes")]
    ChildOutOfRange {
        /// The edge's source node.
        node: usize,
        /// Position of the edge in the node's edge list.
        edge: usize,
        /// The bad child index.
        child: usize,
        /// Number of nodes in the tree.
        len: usize,
    },
    /// An edge has count 0.
    #[error("node {node}: edge {edge} has count 0 (a count must be at least 1)")]
    ZeroCount {
        /// The edge's source node.
        node: usize,
        /// Position of the edge in the node's edge list.
        edge: usize,
    },
    /// A terminal reward is NaN or infinite.
    #[error("node {node}: terminal reward {value} is not finite")]
    NonFiniteReward {
        /// The leaf.
        node: usize,
        /// The rejected value.
        value: f64,
    },
    /// A step reward is NaN or infinite.
    #[error("node {node}: step reward {value} of edge {edge} is not finite")]
    NonFiniteStepReward {
        /// The edge's source node.
        node: usize,
        /// Position of the edge in the node's edge list.
        edge: usize,
        /// The rejected value.
        value: f64,
    },
    /// A potential is NaN or infinite.
    #[error("node {node}: potential {value} is not finite")]
    NonFinitePotential {
        /// The node.
        node: usize,
        /// The rejected value.
        value: f64,
    },
    /// A node has both a terminal reward and outgoing edges.
    #[error("node {node} has a terminal reward and {edges} outgoing edge(s); a leaf has no edges")]
    LeafWithEdges {
        /// The node.
        node: usize,
        /// Its number of edges.
        edges: usize,
    },
    /// A node has neither edges nor a terminal reward: a branch that never finished.
    #[error("node {node} has neither edges nor a terminal reward (an unfinished branch)")]
    UnfinishedBranch {
        /// The node.
        node: usize,
    },
    /// Following edges from a node leads back to it.
    #[error("the tree has a cycle through node {node}")]
    Cycle {
        /// A node on the cycle.
        node: usize,
    },
    /// A node is the child of more than one edge.
    #[error("node {node} is the child of more than one edge (from node {first} and node {second})")]
    MultipleParents {
        /// The node.
        node: usize,
        /// Source of the first edge found.
        first: usize,
        /// Source of the second edge found.
        second: usize,
    },
    /// The root is the child of an edge.
    #[error("node 0 (the root) is the child of node {parent}; the root must have no incoming edge")]
    RootIsChild {
        /// Source of the edge into the root.
        parent: usize,
    },
    /// A node's parent pointer disagrees with the edges.
    #[error(
        "node {node}: parent pointer says {}, but the edges say {}",
        describe_parent(*.recorded),
        describe_parent(*.actual)
    )]
    ParentMismatch {
        /// The node.
        node: usize,
        /// Its [`CreditNode::parent`].
        recorded: Option<usize>,
        /// The source of the edge into it, if any.
        actual: Option<usize>,
    },
    /// A non-root node has no parent and no edge leads to it.
    #[error("node {node} is unreachable: it has no parent and no edge leads to it")]
    Unreachable {
        /// The node.
        node: usize,
    },
    /// The count-weighted number of leaves under a node does not fit in a `u32`.
    #[error("node {node}: the count-weighted number of leaves overflows u32")]
    LeafCountOverflow {
        /// The node.
        node: usize,
    },
}

/// Formats an optional parent for [`CreditError::ParentMismatch`].
fn describe_parent(parent: Option<usize>) -> String {
    match parent {
        Some(p) => format!("node {p}"),
        None => "no parent".to_owned(),
    }
}

/// Computes Q̂, V̂, advantages, leave-one-out advantages, step advantages, shaped rewards and
/// Wilson intervals for every node and edge of `tree` (definitions in the module docs).
///
/// # Errors
///
/// Returns a [`CreditError`] naming the offending node when the tree is malformed (empty,
/// an index out of range, a cycle, a node with both or neither of edges and terminal
/// reward, count 0, a non-finite reward or potential, parent pointers that disagree with
/// the edges, an unreachable node, a leaf count overflowing `u32`) or when `cfg` has a
/// `gamma` outside `[0, 1]` or a negative or non-finite `wilson_z`.
pub fn estimate(tree: &CreditTree, cfg: &CreditConfig) -> Result<Credit, CreditError> {
    validate(tree, cfg)?;
    let len = tree.nodes.len();
    let gamma = cfg.gamma;

    // Children before parents: the reverse of a preorder from the root. Validation
    // guarantees every node is reached exactly once.
    let order = preorder(tree);
    let mut leaves = vec![0_u32; len];
    let mut leaf_mean = vec![0.0_f64; len];
    let mut value = vec![0.0_f64; len];
    let mut q = vec![Vec::new(); len];
    for &s in order.iter().rev() {
        let node = &tree.nodes[s];
        if let Some(reward) = node.terminal_reward {
            leaves[s] = 1;
            leaf_mean[s] = reward;
            value[s] = reward;
            continue;
        }
        let mut count_sum = 0.0_f64;
        let mut count_q = 0.0_f64;
        let mut weight_q = 0.0_f64;
        let mut total_leaves = 0_u32;
        let mut edge_q = Vec::with_capacity(node.edges.len());
        for edge in &node.edges {
            let qe = edge.step_reward + gamma * value[edge.child];
            let edge_leaves = edge
                .count
                .checked_mul(leaves[edge.child])
                .ok_or(CreditError::LeafCountOverflow { node: s })?;
            total_leaves = total_leaves
                .checked_add(edge_leaves)
                .ok_or(CreditError::LeafCountOverflow { node: s })?;
            count_sum += f64::from(edge.count);
            count_q += f64::from(edge.count) * qe;
            weight_q += f64::from(edge_leaves) * (edge.step_reward + gamma * leaf_mean[edge.child]);
            edge_q.push(qe);
        }
        leaves[s] = total_leaves;
        value[s] = count_q / count_sum;
        leaf_mean[s] = weight_q / f64::from(total_leaves);
        q[s] = edge_q;
    }

    let nodes = (0..len)
        .map(|s| {
            let p = value[s].clamp(0.0, 1.0);
            NodeCredit {
                v: value[s],
                leaf_mean: leaf_mean[s],
                leaves: leaves[s],
                p_var: p * (1.0 - p),
            }
        })
        .collect();

    let edges = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(s, node)| {
            let v = value[s];
            let siblings: u64 = node.edges.iter().map(|e| u64::from(e.count)).sum();
            let count_q: f64 = node
                .edges
                .iter()
                .zip(&q[s])
                .map(|(e, &qe)| f64::from(e.count) * qe)
                .sum();
            node.edges
                .iter()
                .zip(&q[s])
                .map(|(edge, &qe)| {
                    let child = edge.child;
                    // Validation bounds every edge's leaves by its source's total.
                    let edge_leaves = edge.count * leaves[child];
                    let loo = (siblings >= 2).then(|| qe - (count_q - qe) / (siblings - 1) as f64);
                    let shaped = if cfg.shaping {
                        shaped_reward(
                            edge.step_reward,
                            node.potential,
                            tree.nodes[child].potential,
                            gamma,
                        )
                    } else {
                        edge.step_reward
                    };
                    let trials = f64::from(edge_leaves);
                    EdgeCredit {
                        q: qe,
                        v,
                        advantage: qe - v,
                        loo,
                        step_advantage: edge.step_reward + gamma * value[child] - v,
                        shaped_reward: shaped,
                        n: edge.count,
                        leaves: edge_leaves,
                        interval: wilson_interval(
                            qe.clamp(0.0, 1.0) * trials,
                            trials,
                            cfg.wilson_z,
                        ),
                    }
                })
                .collect()
        })
        .collect();

    Ok(Credit { nodes, edges })
}

/// Checks every well-formedness rule listed in the module docs.
fn validate(tree: &CreditTree, cfg: &CreditConfig) -> Result<(), CreditError> {
    if !(cfg.gamma.is_finite() && (0.0..=1.0).contains(&cfg.gamma)) {
        return Err(CreditError::InvalidGamma { gamma: cfg.gamma });
    }
    if !(cfg.wilson_z.is_finite() && cfg.wilson_z >= 0.0) {
        return Err(CreditError::InvalidWilsonZ { z: cfg.wilson_z });
    }
    let len = tree.nodes.len();
    if len == 0 {
        return Err(CreditError::EmptyTree);
    }

    // Local checks, node by node.
    for (s, node) in tree.nodes.iter().enumerate() {
        if let Some(parent) = node.parent
            && parent >= len
        {
            return Err(CreditError::ParentOutOfRange {
                node: s,
                parent,
                len,
            });
        }
        if !node.potential.is_finite() {
            return Err(CreditError::NonFinitePotential {
                node: s,
                value: node.potential,
            });
        }
        match node.terminal_reward {
            Some(value) if !value.is_finite() => {
                return Err(CreditError::NonFiniteReward { node: s, value });
            }
            Some(_) if !node.edges.is_empty() => {
                return Err(CreditError::LeafWithEdges {
                    node: s,
                    edges: node.edges.len(),
                });
            }
            None if node.edges.is_empty() => {
                return Err(CreditError::UnfinishedBranch { node: s });
            }
            _ => {}
        }
        for (i, edge) in node.edges.iter().enumerate() {
            if edge.child >= len {
                return Err(CreditError::ChildOutOfRange {
                    node: s,
                    edge: i,
                    child: edge.child,
                    len,
                });
            }
            if edge.count == 0 {
                return Err(CreditError::ZeroCount { node: s, edge: i });
            }
            if !edge.step_reward.is_finite() {
                return Err(CreditError::NonFiniteStepReward {
                    node: s,
                    edge: i,
                    value: edge.step_reward,
                });
            }
        }
    }

    // Cycles, anywhere in the graph (also among nodes unreachable from the root): an
    // iterative three-colour depth-first search over the edges.
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let mut colour = vec![WHITE; len];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..len {
        if colour[start] != WHITE {
            continue;
        }
        colour[start] = GREY;
        stack.push((start, 0));
        while let Some(&(s, next)) = stack.last() {
            if let Some(edge) = tree.nodes[s].edges.get(next) {
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                match colour[edge.child] {
                    WHITE => {
                        colour[edge.child] = GREY;
                        stack.push((edge.child, 0));
                    }
                    GREY => return Err(CreditError::Cycle { node: edge.child }),
                    _ => {}
                }
            } else {
                colour[s] = BLACK;
                stack.pop();
            }
        }
    }

    // Exactly one incoming edge per non-root node, none into the root, and parent pointers
    // that agree. Without cycles this also makes every node reachable from the root.
    let mut incoming: Vec<Option<usize>> = vec![None; len];
    for (s, node) in tree.nodes.iter().enumerate() {
        for edge in &node.edges {
            if let Some(first) = incoming[edge.child] {
                return Err(CreditError::MultipleParents {
                    node: edge.child,
                    first,
                    second: s,
                });
            }
            incoming[edge.child] = Some(s);
        }
    }
    if let Some(parent) = incoming[0] {
        return Err(CreditError::RootIsChild { parent });
    }
    for (s, node) in tree.nodes.iter().enumerate() {
        let actual = incoming[s];
        if s != 0 && actual.is_none() && node.parent.is_none() {
            return Err(CreditError::Unreachable { node: s });
        }
        if node.parent != actual {
            return Err(CreditError::ParentMismatch {
                node: s,
                recorded: node.parent,
                actual,
            });
        }
    }
    Ok(())
}

/// Nodes of a validated tree in preorder from the root (every parent before its children).
fn preorder(tree: &CreditTree) -> Vec<usize> {
    let mut order = Vec::with_capacity(tree.nodes.len());
    let mut stack = vec![0_usize];
    while let Some(s) = stack.pop() {
        order.push(s);
        stack.extend(tree.nodes[s].edges.iter().rev().map(|e| e.child));
    }
    order
}

/// GRPO episode-level advantages for one group of rewards:
/// `A_i = (R_i − mean) / (std + eps)` with the population standard deviation when
/// `scale_by_std`, else `A_i = R_i − mean` (Dr.GRPO).
///
/// An empty group gives an empty vector; a group whose rewards are all equal gives zeros
/// (rather than amplified rounding noise). `eps` is expected to be non-negative; with
/// `eps = 0` the advantages of a non-constant group have population standard deviation 1.
/// A non-finite reward makes every advantage NaN.
pub fn grpo_advantages(rewards: &[f64], eps: f64, scale_by_std: bool) -> Vec<f64> {
    let Some(&first) = rewards.first() else {
        return Vec::new();
    };
    if rewards.iter().all(|&r| r == first) {
        return vec![0.0; rewards.len()];
    }
    let n = rewards.len() as f64;
    // Two-pass mean: the correction removes most of the rounding error of the first pass.
    let rough = rewards.iter().sum::<f64>() / n;
    let mean = rough + rewards.iter().map(|&r| r - rough).sum::<f64>() / n;
    let centred = rewards.iter().map(|&r| r - mean);
    if !scale_by_std {
        return centred.collect();
    }
    let std = (rewards.iter().map(|&r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    centred.map(|d| d / (std + eps)).collect()
}

/// Wilson score interval for a success rate `p̂ = successes / n` at normal quantile `z`:
/// `(p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)`.
///
/// `p̂` is clamped to `[0, 1]` first, and the result is clamped so that it always lies in
/// `[0, 1]` and contains `p̂` despite rounding. `n` need not be an integer (count-weighted
/// leaves). When `n` is not a positive finite number, or `successes` or `z` is not finite,
/// nothing is known and the result is `(0, 1)`. A negative `z` is treated as `|z|`.
pub fn wilson_interval(successes: f64, n: f64, z: f64) -> (f64, f64) {
    if !n.is_finite() || n <= 0.0 || !successes.is_finite() || !z.is_finite() {
        return (0.0, 1.0);
    }
    let p = (successes / n).clamp(0.0, 1.0);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z.abs() / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let lo = (centre - half).clamp(0.0, p);
    let hi = (centre + half).clamp(p, 1.0);
    (lo, hi)
}

/// The potential-based shaped reward of one step: `r + γ·Φ(s') − Φ(s)`.
pub fn shaped_reward(reward: f64, potential: f64, next_potential: f64, gamma: f64) -> f64 {
    reward + gamma * next_potential - potential
}

/// Discounted shaped return of one path `s_0 → … → s_T`: `Σ_t γ^t·r'_t` with
/// `r'_t = r_t + γ·Φ(s_{t+1}) − Φ(s_t)`. With `γ = 1` this is `Σ r'_t`.
///
/// `path_potentials` holds `Φ(s_0), …, Φ(s_T)` and `rewards` holds `r_0, …, r_{T−1}`. The
/// sum telescopes to `Σ_t γ^t·r_t + γ^T·Φ(s_T) − Φ(s_0)`.
///
/// # Panics
///
/// When `path_potentials.len() != rewards.len() + 1`.
pub fn shaped_return(path_potentials: &[f64], rewards: &[f64], gamma: f64) -> f64 {
    assert_eq!(
        path_potentials.len(),
        rewards.len() + 1,
        "a path of {} steps needs {} potentials, got {}",
        rewards.len(),
        rewards.len() + 1,
        path_potentials.len()
    );
    let mut discount = 1.0;
    let mut total = 0.0;
    for (t, &r) in rewards.iter().enumerate() {
        total += discount * shaped_reward(r, path_potentials[t], path_potentials[t + 1], gamma);
        discount *= gamma;
    }
    total
}

#[cfg(test)]
mod tests;
